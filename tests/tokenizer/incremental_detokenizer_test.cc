// IncrementalDetokenizer: pieces are always valid UTF-8 and add up to decode(generated ids).
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace vireo {
namespace {

// Streams `ids` and returns the pieces (the last one is flush()'s).
std::vector<std::string> stream(const Tokenizer& tok, std::span<const int32_t> prompt, std::span<const int32_t> ids,
                                bool skip) {
  IncrementalDetokenizer d(tok, prompt, skip);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(d.add(id));
  pieces.push_back(d.flush());
  return pieces;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& p : v) s += p;
  return s;
}

void expect_valid(const std::vector<std::string>& pieces) {
  for (auto& p : pieces) EXPECT_TRUE(utf8::is_valid(p)) << "broken UTF-8 piece";
}

class Detok : public ::testing::TestWithParam<std::string> {};

TEST_P(Detok, TextSplitAcrossTokensStreamsToDecode) {
  const Tokenizer& tok = test::cached_tokenizer(GetParam());
  const std::vector<std::string> texts = {
      "Hello world, this is a test.", "你好，世界！我爱自然语言处理。", "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽",
      "मरहबा नमस्ते दुनिया مرحبا بالعالم", "  leading and trailing  ", "code:\n\tx = [i**2 for i in range(10)]\n",
      "日本語のテキスト、𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and ⓤⓝⓘ", "\xF0\x9F\x98\x80\xF0\x9F\x98\x81\xF0\x9F\x98\x82"};
  for (const auto& text : texts) {
    auto ids = tok.encode(text, false);
    for (bool skip : {false, true}) {
      auto pieces = stream(tok, {}, ids, skip);
      expect_valid(pieces);
      EXPECT_EQ(join(pieces), tok.decode(ids, skip)) << text;
    }
  }
}

TEST_P(Detok, AfterPromptEmitsTheGeneratedText) {
  const Tokenizer& tok = test::cached_tokenizer(GetParam());
  auto prompt = tok.encode("The answer is", true);
  auto gen = tok.encode(" 42, or 四十二 🎉!", false);
  auto pieces = stream(tok, prompt, gen, true);
  expect_valid(pieces);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  // The text after the prompt, in context (a Llama-style decoder keeps the space after the prompt).
  EXPECT_EQ(tok.decode(prompt, true) + join(pieces), tok.decode(all, true));
}

TEST_P(Detok, RandomIdsNeverEmitBrokenUtf8) {
  const Tokenizer& tok = test::cached_tokenizer(GetParam());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 24);
    for (auto& id : ids) id = any(rng);
    for (bool skip : {false, true}) {
      auto pieces = stream(tok, {}, ids, skip);
      expect_valid(pieces);
      // Pieces add up to decode(ids) whenever every emitted window starts on a character boundary;
      // with random ids a window may start inside a broken sequence, so only check the valid case.
      std::string full = tok.decode(ids, skip);
      if (full.find(utf8::kReplacement) == std::string::npos) EXPECT_EQ(join(pieces), full);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Six, Detok,
                         ::testing::Values("qwen3", "llama3", "deepseek_v3", "gemma3", "gptoss", "llama2"));

TEST(DetokByteFallback, HeldBackUntilTheCharacterIsComplete) {
  const Tokenizer& tok = test::cached_tokenizer("llama2");
  // "😀" is F0 9F 98 80: four <0xNN> tokens in Llama-2's vocabulary.
  std::vector<int32_t> ids;
  for (const char* b : {"<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}) {
    auto id = tok.token_to_id(b);
    ASSERT_TRUE(id.has_value()) << b;
    ids.push_back(*id);
  }
  IncrementalDetokenizer d(tok, {}, false);
  EXPECT_EQ(d.add(ids[0]), "");
  EXPECT_EQ(d.add(ids[1]), "");
  EXPECT_EQ(d.add(ids[2]), "");
  EXPECT_EQ(d.add(ids[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.flush(), "");
}

TEST(DetokByteFallback, IncompleteTailComesOutOfFlushAsDecodeGivesIt) {
  const Tokenizer& tok = test::cached_tokenizer("gemma3");
  auto hi = tok.encode("hi", false);
  std::vector<int32_t> ids = hi;
  ids.push_back(*tok.token_to_id("<0xE4>"));
  ids.push_back(*tok.token_to_id("<0xBD>"));
  auto pieces = stream(tok, {}, ids, false);
  expect_valid(pieces);
  EXPECT_EQ(join(pieces), tok.decode(ids, false));
  EXPECT_EQ(pieces.back(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // one U+FFFD per byte, as ByteFallback
}

}  // namespace
}  // namespace vireo
