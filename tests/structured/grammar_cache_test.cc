// The compiled-grammar cache (grammar_cache.h) and the classifications a grammar's matchers share
// (classification_cache.h): a repeated spec gets the same grammar, the budget evicts least recently
// used grammars, and masks made from a warm shared cache equal those of a fresh grammar along random
// walks on the Qwen3 vocabulary. Also prints the mask time of a first and a repeated request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>

#include "qwen3_vocab.h"
#include "structured/classification_cache.h"
#include "structured/grammar_cache.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema_compiler.h"

namespace vireo::structured {
namespace {

using Js = nlohmann::ordered_json;
using Kind = StructuredOutputSpec::Kind;

StructuredOutputSpec schema(const char* text) { return {Kind::kJsonSchema, Js::parse(text), {}, {}}; }
StructuredOutputSpec regex(const char* re) { return {Kind::kRegex, {}, {}, re}; }
StructuredOutputSpec choice(std::vector<std::string> c) { return {Kind::kChoice, {}, std::move(c), {}}; }

// An online store's response format: enums, bounded strings, integer ranges, an array, a pattern.
const char* kProductSchema = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":40},
    "category":{"enum":["electronics","clothing","food","toys"]},
    "price_cents":{"type":"integer","minimum":0,"maximum":9999},
    "rating":{"type":"integer","minimum":1,"maximum":5},
    "in_stock":{"type":"boolean"},
    "tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5},
    "sku":{"type":"string","pattern":"[A-Z]{3}-[0-9]{4}"}},
  "required":["name","category","price_cents","rating","in_stock","tags","sku"]})";

TEST(GrammarCache, SameSpecSameGrammar) {
  GrammarCache cache(size_t{64} << 20);
  auto a = cache.get(schema(R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}})"));
  auto b = cache.get(schema(R"({ "type": "object", "properties": { "x": {"type": "integer"}, "y": {"type": "string"} } })"));
  EXPECT_EQ(a, b);  // whitespace of the schema's text does not matter
  // Key order does: properties are generated in schema order.
  auto c = cache.get(schema(R"({"type":"object","properties":{"y":{"type":"string"},"x":{"type":"integer"}}})"));
  EXPECT_NE(a, c);
  EXPECT_EQ(cache.get(regex("[a-z]+")), cache.get(regex("[a-z]+")));
  EXPECT_NE(cache.get(regex("[a-z]+")), cache.get(regex("[a-z]*")));
  EXPECT_EQ(cache.get(choice({"yes", "no"})), cache.get(choice({"yes", "no"})));
  EXPECT_NE(cache.get(choice({"yes", "no"})), cache.get(choice({"yesno"})));
  EXPECT_NE(cache.get(choice({"a", "bc"})), cache.get(choice({"ab", "c"})));
  EXPECT_EQ(cache.get({Kind::kJsonObject, {}, {}, {}}), cache.get({Kind::kJsonObject, {}, {}, {}}));
  EXPECT_NE(grammar_cache_key(regex("x")), grammar_cache_key(choice({"x"})));
  const GrammarCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 9u);
  EXPECT_EQ(s.hits, 6u);
  EXPECT_EQ(s.misses, 9u);
  EXPECT_THROW(cache.get(schema(R"({"type":"object","not":{}})")), SchemaError);
  EXPECT_EQ(cache.stats().entries, 9u);  // failures are not kept
}

TEST(GrammarCache, BudgetEvictsLeastRecentlyUsed) {
  const StructuredOutputSpec a = regex("a[0-9]{1,3}"), b = regex("b[0-9]{1,3}"), c = regex("c[0-9]{1,3}");
  GrammarCache probe(size_t{1} << 20);
  probe.get(a);
  const size_t entry = probe.stats().bytes;
  GrammarCache cache(entry * 2 + entry / 2);  // room for two
  auto ga = cache.get(a);
  auto gb = cache.get(b);
  EXPECT_EQ(cache.get(a), ga);  // a is now the most recently used
  cache.get(c);                 // evicts b
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(cache.get(a), ga);
  EXPECT_NE(cache.get(b), gb);  // compiled again
  EXPECT_LE(cache.stats().bytes, entry * 2 + entry / 2);
  // No budget: nothing kept.
  GrammarCache none(0);
  EXPECT_NE(none.get(a), none.get(a));
  EXPECT_EQ(none.stats().entries, 0u);
}

TEST(GrammarCache, ClassificationsCountAgainstTheBudget) {
  const Qwen3& q = qwen3();
  GrammarCache probe(size_t{1} << 20);
  probe.get(schema(R"({"type":"string","maxLength":40})"));
  const size_t entry = probe.stats().bytes;
  GrammarCache cache(entry * 3);
  auto g = cache.get(schema(R"({"type":"string","maxLength":40})"));
  GrammarMatcher m(g, q.vocab, {q.eos});
  std::vector<uint32_t> mask((q.vocab->vocab_size() + 31) / 32);
  for (const char* text : {"\"", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}) {
    ASSERT_TRUE(m.accept_bytes(text));
    m.fill_next_token_bitmask(mask);
  }
  EXPECT_GT(g->classifications->bytes(), entry * 3);  // dense classifications of bounded-string positions
  EXPECT_GT(cache.stats().bytes, entry * 3);
  cache.get(regex("x"));  // adding counts them: the string grammar goes
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_NE(cache.get(schema(R"({"type":"string","maxLength":40})")), g);
}

TEST(ClassificationCache, ClearsWhenFull) {
  ClassificationCache c(1000);
  auto big = std::make_shared<const TokenClassification>(TokenClassification{std::vector<int32_t>(200, 1), {}, {}});
  EXPECT_EQ(c.insert("a", big), big);
  auto other = std::make_shared<const TokenClassification>(TokenClassification{std::vector<int32_t>(200, 2), {}, {}});
  EXPECT_EQ(c.insert("a", other), big);  // the first one stays
  c.insert("b", other);                  // over 1000 bytes: "a" is dropped
  EXPECT_EQ(c.find("a"), nullptr);
  EXPECT_EQ(c.find("b"), other);
  EXPECT_LE(c.bytes(), 1000u);
}

// Walks `g` along allowed tokens picked by `seed`, filling `m`'s masks; returns each step's mask.
std::vector<std::vector<uint32_t>> walk_masks(GrammarMatcher& m, uint32_t seed, int steps) {
  const Qwen3& q = qwen3();
  std::mt19937 rng(seed);
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint32_t> mask((q.vocab->vocab_size() + 31) / 32);
  for (int step = 0; step < steps && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask);
    out.push_back(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < q.vocab->vocab_size(); ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    if (allowed.empty()) break;
    // Prefer short tokens half the time, so walks reach the structure's later states.
    int32_t pick = allowed[rng() % allowed.size()];
    if (rng() % 2)
      for (int k = 0; k < 8; ++k) {
        const int32_t c = allowed[rng() % allowed.size()];
        if (c != q.eos && q.vocab->token_bytes(c).size() < q.vocab->token_bytes(pick).size()) pick = c;
      }
    if (pick == q.eos || !m.accept_token(pick)) break;
  }
  return out;
}

TEST(GrammarCache, WarmSharedMasksEqualFreshOnes) {
  const Qwen3& q = qwen3();
  const std::vector<StructuredOutputSpec> specs = {
      schema(kProductSchema),
      schema(R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":4},"e":{"enum":["ab","abc",1]},
          "x":{"anyOf":[{"type":"array","items":{"type":"integer"},"maxItems":2},{"type":"object","additionalProperties":{"type":"null"}}]}},
          "required":["s","e","x"]})"),
      schema(R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"integer","minimum":-5,"maximum":50}}}})"),
      {Kind::kJsonObject, {}, {}, {}},
      regex("[a-z]{2,5}(-[0-9]+)*\\.?"),
      regex("(\\w+ ?){1,3}|\"[^\"]*\""),
      regex(".*"),
      choice({"positive", "negative", "neutral", "pos"}),
  };
  GrammarCache cache(size_t{256} << 20);
  for (const StructuredOutputSpec& spec : specs) {
    const std::string what = grammar_cache_key(spec).substr(0, 60);
    // Earlier requests warm the shared classifications, one along the same walk as the check below.
    for (uint32_t seed : {11u, 12u, 13u}) {
      GrammarMatcher warm(cache.get(spec), q.vocab, {q.eos});
      walk_masks(warm, seed, 24);
    }
    auto shared = cache.get(spec);
    if (spec.kind != Kind::kJsonObject) ASSERT_GT(shared->classifications->bytes(), 0u) << what;  // else all prelude
    for (uint32_t seed : {13u, 14u}) {
      GrammarMatcher fresh(compile_structured_output(spec), q.vocab, {q.eos});
      GrammarMatcher warm(shared, q.vocab, {q.eos});
      const auto expect = walk_masks(fresh, seed, 24);
      const auto got = walk_masks(warm, seed, 24);
      ASSERT_EQ(expect.size(), got.size()) << what;
      for (size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(expect[i], got[i]) << what << " step " << i;
    }
  }
}

// CPU time of this thread, not wall time: the 2-core CI machine is shared, and a preemption in the
// middle of a mask (~8 ms) would dwarf a repeated request's whole mask time.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// One request: the output's tokens through a matcher, a mask before each; returns the total mask time.
double request_mask_ms(const std::shared_ptr<const Grammar>& g, const std::string& output) {
  const Qwen3& q = qwen3();
  GrammarMatcher m(g, q.vocab, {q.eos});
  std::vector<uint32_t> mask((q.vocab->vocab_size() + 31) / 32);
  double total = 0;
  for (int32_t id : q.tok->encode(output, false)) {
    const double t0 = thread_cpu_ms();
    m.fill_next_token_bitmask(mask);
    total += thread_cpu_ms() - t0;
    EXPECT_TRUE((mask[id >> 5] >> (id & 31)) & 1) << output;
    EXPECT_TRUE(m.accept_token(id)) << output;
  }
  EXPECT_TRUE(m.can_terminate());
  return total;
}

// The figures of src/structured/README.md ("Repeated constraints"): a server that has served JSON
// before (vocabulary caches warm), then three requests with the same new schema; medians of 3 trials,
// each with an empty grammar cache.
TEST(GrammarCache, FirstAndRepeatedRequestMaskTime) {
  const Qwen3& q = qwen3();
  warm_up_json_masks(q.vocab);
  const std::string out1 = R"({"name": "USB-C charging cable, 2 m", "category": "electronics", "price_cents": 1299, )"
                           R"("rating": 4, "in_stock": true, "tags": ["cable", "usb-c"], "sku": "CBL-0042"})";
  const std::string out2 = R"({"name": "Wool socks", "category": "clothing", "price_cents": 850, "rating": 5, )"
                           R"("in_stock": false, "tags": ["winter", "wool", "socks"], "sku": "SCK-1187"})";
  // Another schema's request first, so the prelude's shared classifications are warm as in a running server.
  request_mask_ms(compile_structured_output(schema(R"({"type":"object","properties":{"a":{"type":"integer"},
      "b":{"type":"array","items":{"type":"string"}},"c":{"type":"boolean"}}})")), R"({"a": 1, "b": ["x"], "c": true})");
  std::vector<double> compile, lookup, first, second, third;
  size_t shared_bytes = 0;
  for (int trial = 0; trial < 3; ++trial) {
    GrammarCache cache(size_t{64} << 20);
    double t0 = thread_cpu_ms();
    auto g1 = cache.get(schema(kProductSchema));
    compile.push_back(thread_cpu_ms() - t0);
    first.push_back(request_mask_ms(g1, out1));
    t0 = thread_cpu_ms();
    auto g2 = cache.get(schema(kProductSchema));
    lookup.push_back(thread_cpu_ms() - t0);
    EXPECT_EQ(g1, g2);
    second.push_back(request_mask_ms(g2, out2));
    third.push_back(request_mask_ms(cache.get(schema(kProductSchema)), out1));
    shared_bytes = g1->classifications->bytes();
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("  product schema, %zu + %zu tokens: grammar compiled in %.2f ms, then %.3f ms from the cache\n",
              q.tok->encode(out1, false).size(), q.tok->encode(out2, false).size(), median(compile), median(lookup));
  std::printf("  total mask time (thread CPU): first request %.1f ms, second (other values) %.1f ms, "
              "third (the first's output) %.1f ms; shared classifications %.2f MB\n",
              median(first), median(second), median(third), shared_bytes / 1e6);
}

}  // namespace
}  // namespace vireo::structured
