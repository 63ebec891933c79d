// Masks on the real Qwen3 vocabulary (151k tokens): the trie walk with its caches gives exactly the
// tokens a direct check of every id accepts, in a handful of JSON states; the time per mask is
// printed (not asserted: figures go to the README).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "qwen3_vocab.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema_compiler.h"
#include "structured/structured_output.h"
#include "structured/tokenizer_vocab.h"
#include "tokenizer/tokenizer.h"

namespace vireo::structured {
namespace {

using Js = nlohmann::ordered_json;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The mask against is_allowed() for every id; returns the mask time in ms (first, then cached).
void check_state(GrammarMatcher& m, const std::string& what, int32_t words_per_row) {
  std::vector<uint32_t> mask(words_per_row, 0xFFFFFFFFu);
  auto t0 = std::chrono::steady_clock::now();
  m.fill_next_token_bitmask(mask);
  const double first = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  m.fill_next_token_bitmask(mask);
  const double again = ms_since(t0);
  int allowed = 0, wrong = 0;
  for (int32_t id = 0; id < words_per_row * 32; ++id) {
    const bool bit = (mask[id >> 5] >> (id & 31)) & 1;
    allowed += bit;
    if (bit != m.is_allowed(id) && ++wrong <= 5) ADD_FAILURE() << what << ": token " << id << " mask " << bit;
  }
  std::printf("  %-40s %6d allowed  mask %7.2f ms (repeat %5.3f ms)\n", what.c_str(), allowed, first, again);
}

TEST(TokenMask, EqualsBruteForceOnQwen3) {
  const Qwen3& q = qwen3();
  ASSERT_GT(q.vocab->vocab_size(), 150000);
  const int32_t words = (151936 + 31) / 32;  // the model's logits width, larger than the tokenizer's
  auto t0 = std::chrono::steady_clock::now();
  VocabIndex rebuilt(token_byte_strings(*q.tok));
  std::printf("  vocab index: %d tokens, %d trie nodes, built in %.1f ms\n", rebuilt.vocab_size(), rebuilt.num_nodes(), ms_since(t0));

  auto schema = std::make_shared<const Grammar>(compile_json_schema(Js::parse(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},
      "kind":{"enum":["cat","dog"]},"score":{"type":"number"}},"required":["name","age"]})")));
  GrammarMatcher m(schema, q.vocab, {q.eos});
  const std::pair<const char*, const char*> steps[] = {
      {"", "start"}, {"{", "after {"}, {"\"name\": \"", "string start"}, {"Al", "in string"},
      {"ice", "in string again"}, {"\\", "after backslash"}, {"u00e9\", ", "after name"},
      {"\"age\": ", "integer start"}, {"4", "in integer"}, {"2", "in integer again"}, {", \"tags\": [", "array start"},
      {"\"x\"", "after array item"}, {"], \"kind\": \"", "enum string"}, {"dog\", \"score\": -0.5e", "exponent"},
      {"+10", "number end"}, {"}", "complete"}};
  for (const auto& [text, what] : steps) {
    ASSERT_TRUE(m.accept_bytes(text)) << what;
    check_state(m, what, words);
  }
  EXPECT_TRUE(m.is_terminated());

  auto any = compile_structured_output({StructuredOutputSpec::Kind::kJsonObject, {}, {}});
  GrammarMatcher j(any, q.vocab, {q.eos});
  for (const auto& [text, what] : std::vector<std::pair<const char*, const char*>>{
           {"{\"a\": [", "json_object array value"}, {"1, {\"b\": \"", "json_object nested string"},
           {"x\"}", "json_object after nested"}, {"]}", "json_object complete"}}) {
    ASSERT_TRUE(j.accept_bytes(text)) << what;
    check_state(j, what, words);
  }

  // Bounded strings unroll one rule per character: each position is classified afresh.
  auto bounded = std::make_shared<const Grammar>(compile_json_schema(Js::parse(R"({"type":"string","maxLength":40})")));
  GrammarMatcher b(bounded, q.vocab, {q.eos});
  for (const auto& [text, what] : std::vector<std::pair<const char*, const char*>>{
           {"\"", "maxLength 40, 0 written"}, {"abc", "maxLength 40, 3 written"}, {"defghijklmnopqrstuvwxyzABCDEFGHIJ", "maxLength 40, 36 written"}}) {
    ASSERT_TRUE(b.accept_bytes(text)) << what;
    check_state(b, what, words);
  }
}

// Along random walks (allowed tokens only), every mask equals the brute-force check.
TEST(TokenMask, EqualsBruteForceAlongRandomWalks) {
  const Qwen3& q = qwen3();
  const int32_t words = (q.vocab->vocab_size() + 31) / 32;
  const char* schemas[] = {
      R"({"type":"string","minLength":3,"maxLength":5})",
      R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":4},"e":{"enum":["ab","abc",1]},
          "x":{"anyOf":[{"type":"array","items":{"type":"integer"},"maxItems":2},{"type":"object","additionalProperties":{"type":"null"}}]}},
          "required":["s","e","x"]})",
      R"({"type":"array","prefixItems":[{"type":"number"},{"type":"boolean"}],"minItems":2,"items":{"type":"string","maxLength":1}})"};
  std::vector<std::pair<std::string, std::shared_ptr<const Grammar>>> grammars;
  for (const char* text : schemas) grammars.emplace_back(text, std::make_shared<const Grammar>(compile_json_schema(Js::parse(text))));
  for (const char* re : {"[a-z]{2,5}(-[0-9]+)*\\.?", "(\\w+ ?){1,3}|\"[^\"]*\""})
    grammars.emplace_back(re, compile_structured_output({StructuredOutputSpec::Kind::kRegex, {}, {}, re}));
  std::mt19937 rng(7);
  for (const auto& [text, g] : grammars) {
    GrammarMatcher m(g, q.vocab, {q.eos});
    std::vector<uint32_t> mask(words);
    for (int step = 0; step < 12 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask);
      std::vector<int32_t> allowed;
      int wrong = 0;
      for (int32_t id = 0; id < words * 32; ++id) {
        const bool bit = (mask[id >> 5] >> (id & 31)) & 1;
        if (bit) allowed.push_back(id);
        if (bit != m.is_allowed(id) && ++wrong <= 3) ADD_FAILURE() << text << " step " << step << ": token " << id;
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer short tokens half the time, so walks reach the structure's later states.
      int32_t pick = allowed[rng() % allowed.size()];
      if (rng() % 2)
        for (int k = 0; k < 8; ++k) {
          const int32_t c = allowed[rng() % allowed.size()];
          if (c != q.eos && q.vocab->token_bytes(c).size() < q.vocab->token_bytes(pick).size()) pick = c;
        }
      if (pick == q.eos) break;
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
}

// SentencePiece (Llama-2): a word piece keeps its leading space, a byte-fallback piece is its byte.
TEST(TokenMask, SentencePieceTokenBytes) {
  auto tok = Tokenizer::from_dir(std::string(VIREO_SOURCE_DIR) + "/models/llama2");
  const std::vector<std::string> bytes = token_byte_strings(*tok);
  EXPECT_EQ(bytes.at(tok->token_to_id("<0xE2>").value()), "\xE2");
  EXPECT_EQ(bytes.at(tok->token_to_id("<0x0A>").value()), "\n");
  EXPECT_EQ(bytes.at(tok->token_to_id("\xE2\x96\x81the").value()), " the");
  EXPECT_EQ(bytes.at(tok->token_to_id("the").value()), "the");
  EXPECT_EQ(bytes.at(tok->bos_token_id().value()), "");  // special
}

TEST(TokenMask, AcceptTokenFollowsTheMask) {
  const Qwen3& q = qwen3();
  auto g = compile_structured_output({StructuredOutputSpec::Kind::kChoice, {}, {"positive", "negative"}});
  GrammarMatcher m(g, q.vocab, {q.eos});
  const std::vector<int32_t> ids = q.tok->encode("positive", false);
  EXPECT_FALSE(m.accept_token(q.eos));
  for (int32_t id : ids) ASSERT_TRUE(m.accept_token(id));
  EXPECT_TRUE(m.is_terminated());
  std::vector<uint32_t> mask((q.vocab->vocab_size() + 31) / 32);
  m.fill_next_token_bitmask(mask);
  EXPECT_TRUE(m.is_allowed(q.eos));
  EXPECT_TRUE(m.accept_token(q.eos));
}

}  // namespace
}  // namespace vireo::structured
