// Our encode/decode against transformers 5 (tools/reference/make_tokenizer_fixtures.py) over the
// corpus of tools/reference/tokenizer_corpus.py, for six real tokenizers.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace vireo {
namespace {

std::string show_ids(const std::vector<int32_t>& v) { return nlohmann::json(v).dump(); }

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, MatchesTransformers) {
  const std::string name = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(name);

  std::vector<std::string> corpus;
  {
    std::ifstream f(test::source_path("tests/fixtures/tokenizer/corpus.jsonl"));
    ASSERT_TRUE(f) << "corpus missing";
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) corpus.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  std::ifstream f(test::source_path("tests/fixtures/tokenizer/" + name + ".jsonl"));
  ASSERT_TRUE(f) << "fixture missing for " << name;
  std::string line;
  std::getline(f, line);  // header
  int n_strings = 0, bad_plain = 0, bad_special = 0, bad_decode = 0, bad_decode_skip = 0;
  int n_random = 0, bad_random = 0;
  int shown = 0;
  auto show = [&](const std::string& msg) {
    if (shown++ < 12) ADD_FAILURE() << name << ": " << msg;
  };
  while (std::getline(f, line)) {
    auto r = nlohmann::json::parse(line);
    std::string d = r.at("d").get<std::string>();
    std::string s = r.contains("s") ? r.at("s").get<std::string>() : d;
    if (r.contains("t")) {
      ++n_strings;
      const std::string& text = corpus.at(r.at("t").get<size_t>());
      auto a = r.at("a").get<std::vector<int32_t>>();
      auto b = r.contains("b") ? r.at("b").get<std::vector<int32_t>>() : a;
      auto ours_a = tok.encode(text, false);
      auto ours_b = tok.encode(text, true);
      if (ours_a != a) {
        ++bad_plain;
        show("encode " + nlohmann::json(text).dump() + "\n  want " + show_ids(a) + "\n  got  " + show_ids(ours_a));
      }
      if (ours_b != b) {
        ++bad_special;
        show("encode+special " + nlohmann::json(text).dump() + "\n  want " + show_ids(b) + "\n  got  " +
             show_ids(ours_b));
      }
      std::string od = tok.decode(b, false), os = tok.decode(b, true);
      if (od != d) {
        ++bad_decode;
        show("decode " + show_ids(b) + "\n  want " + nlohmann::json(d).dump() + "\n  got  " + nlohmann::json(od).dump());
      }
      if (os != s) {
        ++bad_decode_skip;
        show("decode skip " + show_ids(b) + "\n  want " + nlohmann::json(s).dump() + "\n  got  " +
             nlohmann::json(os).dump());
      }
    } else {
      ++n_random;
      auto ids = r.at("r").get<std::vector<int32_t>>();
      std::string od = tok.decode(ids, false), os = tok.decode(ids, true);
      if (od != d || os != s) {
        ++bad_random;
        show("random decode " + show_ids(ids) + "\n  want " + nlohmann::json(d).dump() + " / " +
             nlohmann::json(s).dump() + "\n  got  " + nlohmann::json(od).dump() + " / " + nlohmann::json(os).dump());
      }
    }
  }
  std::printf("[%s] strings %d: encode %d/%d, encode+special %d/%d, decode %d/%d, decode skip %d/%d; "
              "random-id decodes %d/%d\n",
              name.c_str(), n_strings, n_strings - bad_plain, n_strings, n_strings - bad_special, n_strings,
              n_strings - bad_decode, n_strings, n_strings - bad_decode_skip, n_strings, n_random - bad_random,
              n_random);
  EXPECT_GE(n_strings, 2000);
  EXPECT_EQ(bad_plain, 0) << name << " encode mismatches";
  EXPECT_EQ(bad_special, 0) << name << " encode(add_special_tokens) mismatches";
  EXPECT_EQ(bad_decode, 0) << name << " decode mismatches";
  EXPECT_EQ(bad_decode_skip, 0) << name << " decode(skip_special_tokens) mismatches";
  EXPECT_EQ(bad_random, 0) << name << " random-id decode mismatches";
}

TEST_P(TokenizerFixture, MetadataMatchesTransformers) {
  const std::string name = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(name);
  std::ifstream f(test::source_path("tests/fixtures/tokenizer/tokenizer_meta.json"));
  ASSERT_TRUE(f);
  auto meta = nlohmann::json::parse(f).at("tokenizers_meta").at(name);
  EXPECT_EQ(tok.vocab_size(), meta.at("len").get<int32_t>());
  auto opt_id = [](const nlohmann::json& j) { return j.is_null() ? std::nullopt : std::optional<int32_t>(j.get<int32_t>()); };
  auto opt_str = [](const nlohmann::json& j) {
    return j.is_null() ? std::nullopt : std::optional<std::string>(j.get<std::string>());
  };
  EXPECT_EQ(tok.bos_token_id(), opt_id(meta.at("bos_token_id")));
  EXPECT_EQ(tok.eos_token_id(), opt_id(meta.at("eos_token_id")));
  EXPECT_EQ(tok.bos_token(), opt_str(meta.at("bos_token")));
  EXPECT_EQ(tok.eos_token(), opt_str(meta.at("eos_token")));
  for (const auto& id : meta.at("all_special_ids")) EXPECT_TRUE(tok.is_special(id.get<int32_t>())) << id;
}

INSTANTIATE_TEST_SUITE_P(Six, TokenizerFixture,
                         ::testing::Values("qwen3", "llama3", "deepseek_v3", "gemma3", "gptoss", "llama2"));

}  // namespace
}  // namespace vireo
