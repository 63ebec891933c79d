// Grammars whose expansion used to blow up (nullable repetitions nested: exponentially many paths to
// the same stack top) or overflow the matcher's depth limit at request time: they now run quickly,
// or are refused when compiled (a 400), never freeze the engine thread or fail mid-request.
#include <gtest/gtest.h>

#include <chrono>

#include "core/error.h"
#include "structured/grammar_matcher.h"
#include "structured/grammar_stack.h"
#include "structured/json_schema_compiler.h"
#include "structured/structured_output.h"

namespace vireo::structured {
namespace {

std::shared_ptr<const Grammar> regex(const std::string& pattern) {
  return compile_structured_output({StructuredOutputSpec::Kind::kRegex, {}, {}, pattern});
}

// `levels` nested repetitions of a nullable group: ((((a){0,3}){0,3}){0,3}){0,3} for 4.
std::string nested_repeat(int levels) {
  std::string p = "a";
  for (int i = 0; i < levels; ++i) p = "(" + p + "){0,3}";
  return p;
}

// The mask against is_allowed() for every token.
void expect_mask_matches(GrammarMatcher& m, const VocabIndex& vocab, const std::string& what) {
  std::vector<uint32_t> mask((vocab.vocab_size() + 31) / 32 + 1);
  m.fill_next_token_bitmask(mask);
  for (int32_t id = 0; id < vocab.vocab_size(); ++id)
    EXPECT_EQ((mask[id >> 5] >> (id & 31)) & 1, m.is_allowed(id) ? 1u : 0u) << what << ": token " << id;
}

TEST(ExpansionLimits, NestedNullableRepetitionsArePolynomial) {
  // Tokens: a, aa, aaa, aaaa, b, ab, and a stop token (id 6, no bytes).
  auto vocab = std::make_shared<const VocabIndex>(std::vector<std::string>{"a", "aa", "aaa", "aaaa", "b", "ab", ""});
  for (int levels : {4, 6}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = regex(nested_repeat(levels));
    GrammarMatcher m(g, vocab, {6});
    expect_mask_matches(m, *vocab, "start");
    EXPECT_TRUE(m.is_allowed(3));   // "aaaa"
    EXPECT_FALSE(m.is_allowed(4));  // "b"
    EXPECT_TRUE(m.is_allowed(6));   // the empty text matches
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(m.accept_token(0)) << levels << " levels, a #" << i;
      expect_mask_matches(m, *vocab, std::to_string(i + 1) + " a");
    }
    EXPECT_TRUE(m.can_terminate());
    EXPECT_TRUE(m.accept_token(6));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 1.0) << levels << " levels took " << s << " s";  // was over 60 s at 4 levels
  }
  // 3^6 = 729 a's at most at 6 levels; one more is refused.
  GrammarMatcher m(regex(nested_repeat(6)), vocab, {6});
  EXPECT_TRUE(m.accept_bytes(std::string(729, 'a')));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.accept_bytes("a"));
}

TEST(ExpansionLimits, LongRefChainIsRefusedAtCompileTime) {
  nlohmann::ordered_json s = {{"$ref", "#/$defs/d0"}};
  for (int i = 0; i < 1500; ++i) s["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  s["$defs"]["d1500"] = {{"type", "integer"}};
  EXPECT_THROW(compile_structured_output({StructuredOutputSpec::Kind::kJsonSchema, s, {}, {}}), Error);
  // The same chain under a property (reached only after some output) is refused too.
  nlohmann::ordered_json inner = {{"type", "object"}, {"properties", {{"x", {{"$ref", "#/$defs/d0"}}}}}, {"$defs", s["$defs"]}};
  EXPECT_THROW(compile_structured_output({StructuredOutputSpec::Kind::kJsonSchema, inner, {}, {}}), Error);
  // A short chain still works.
  nlohmann::ordered_json ok = {{"$ref", "#/$defs/d0"}};
  for (int i = 0; i < 50; ++i) ok["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  ok["$defs"]["d50"] = {{"type", "integer"}};
  GrammarMatcher m(compile_structured_output({StructuredOutputSpec::Kind::kJsonSchema, ok, {}, {}}),
                   std::make_shared<const VocabIndex>(std::vector<std::string>{}), {});
  EXPECT_TRUE(m.accept_bytes("42"));
  EXPECT_TRUE(m.can_terminate());
}

TEST(ExpansionLimits, DeeplyNestedAlternationIsRefusedAtCompileTime) {
  std::string p = "a";
  for (int i = 0; i < 400; ++i) p = "(" + p + "|b)?";
  EXPECT_THROW(regex(p), Error);
  // Inside a schema pattern, after the object's opening bytes.
  nlohmann::ordered_json s = {{"type", "object"}, {"properties", {{"x", {{"type", "string"}, {"pattern", "^" + p + "$"}}}}}};
  EXPECT_THROW(compile_structured_output({StructuredOutputSpec::Kind::kJsonSchema, s, {}, {}}), Error);
}

TEST(ExpansionLimits, TooAmbiguousExpansionFailsTheRequestNotTheEngine) {
  // Each level's tops multiply by 3 (distinct stacks, so hash-consing cannot merge them): 3^12 tops
  // after the first byte is past the per-call cap, and the start state is refused at compile time.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(regex(nested_repeat(12)), Error);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
}

}  // namespace
}  // namespace vireo::structured
