// Several matchers of one grammar filling masks on several threads at once (as sampling_batch.cc's
// fill_bitmasks does), sharing the grammar's classifications while they are being made: every mask
// equals the one a single matcher of a freshly compiled grammar makes. A small synthetic vocabulary
// (no tokenizer), so the test also runs in a -fsanitize=thread build of src/structured alone
// (src/structured/README.md says how).
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <random>
#include <thread>

#include "structured/classification_cache.h"
#include "structured/grammar_matcher.h"
#include "structured/structured_output.h"

namespace vireo::structured {
namespace {

using Kind = StructuredOutputSpec::Kind;

// Every printable ASCII byte, pairs of JSON-ish characters, some longer pieces and UTF-8 characters.
std::shared_ptr<const VocabIndex> synthetic_vocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0x20; b < 0x7f; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    const std::string pair_chars = "abcxyz019{}[]\":, -.\\";
    for (char a : pair_chars)
      for (char b : pair_chars) t.push_back(std::string{a, b});
    for (const char* s : {"\": ", "\", \"", "{\"", "\"}", "true", "false", "null", "name", "abc", "xyz", "12", "123",
                          "\n", "\t", "  ", "\xC3\xA9", "\xE4\xBD\xA0", "\xE4", "\xBD\xA0", "\"name\": \"", "-1", "0."})
      t.push_back(s);
    t.push_back("");  // a special token: id eos below
    return std::make_shared<const VocabIndex>(std::move(t));
  }();
  return v;
}

int32_t eos() { return synthetic_vocab()->vocab_size() - 1; }

// The masks along a walk picked by `seed`.
std::vector<std::vector<uint32_t>> walk_masks(GrammarMatcher& m, uint32_t seed, int steps) {
  const auto& vocab = *synthetic_vocab();
  std::mt19937 rng(seed);
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint32_t> mask((vocab.vocab_size() + 31) / 32);
  for (int step = 0; step < steps && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask);
    out.push_back(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab.vocab_size(); ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    if (allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    if (pick == eos() || !m.accept_token(pick)) break;
  }
  return out;
}

TEST(SharedClassifications, ConcurrentMatchersOfOneGrammar) {
  const std::vector<StructuredOutputSpec> specs = {
      {Kind::kJsonSchema, nlohmann::ordered_json::parse(R"({"type":"object","properties":{
          "name":{"type":"string","minLength":1,"maxLength":12},"kind":{"enum":["abc","xyz","a"]},
          "n":{"type":"integer","minimum":-20,"maximum":300},"list":{"type":"array","items":{"type":"string"},"maxItems":3},
          "any":{}},"required":["name","kind","n","list"]})"), {}, {}},
      {Kind::kJsonObject, {}, {}, {}},
      {Kind::kRegex, {}, {}, "([a-c]+|x[0-9]{2,4})(, [a-z]*)*"},
      {Kind::kChoice, {}, {"abc", "abcxyz", "xyz", "name"}, {}},
  };
  constexpr int kThreads = 6, kSeeds = 3, kSteps = 40;
  for (const StructuredOutputSpec& spec : specs) {
    std::vector<std::vector<std::vector<uint32_t>>> expect;
    for (int s = 0; s < kSeeds; ++s) {
      GrammarMatcher fresh(compile_structured_output(spec), synthetic_vocab(), {eos()});
      expect.push_back(walk_masks(fresh, 100 + s, kSteps));
    }
    auto shared = compile_structured_output(spec);
    std::atomic<int> wrong{0};
    for (int round = 0; round < 2; ++round) {  // cold, then warm
      std::latch start(kThreads);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          GrammarMatcher m(shared, synthetic_vocab(), {eos()});
          start.arrive_and_wait();  // threads of the same seed reach the same positions together
          if (walk_masks(m, 100 + t % kSeeds, kSteps) != expect[t % kSeeds]) ++wrong;
        });
      for (auto& th : threads) th.join();
    }
    EXPECT_EQ(wrong.load(), 0) << spec.regex << spec.schema.dump();
    if (spec.kind != Kind::kJsonObject) EXPECT_GT(shared->classifications->bytes(), 0u);  // else all prelude
  }
}

}  // namespace
}  // namespace vireo::structured
