// Random walks on the real Qwen3 vocabulary: sample allowed tokens until the grammar ends; every
// finished output parses and validates against its schema (schema_validator.h).
#include <gtest/gtest.h>

#include <random>

#include "qwen3_vocab.h"
#include "schema_validator.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema_compiler.h"
#include "structured/structured_output.h"
#include "structured/tokenizer_vocab.h"
#include "tokenizer/tokenizer.h"

namespace vireo::structured {
namespace {

using Js = nlohmann::ordered_json;

// One walk; returns the output, or nullopt when it ran out of steps. Half the time the walk picks,
// of a few allowed tokens, the one with most closing characters, so that walks end.
std::optional<std::string> walk(const std::shared_ptr<const Grammar>& g, std::mt19937& rng, int max_steps) {
  const Qwen3& v = qwen3();
  GrammarMatcher m(g, v.vocab, {v.eos});
  std::vector<uint32_t> mask((v.vocab->vocab_size() + 31) / 32);
  std::string out;
  std::vector<int32_t> allowed;
  for (int step = 0; step < max_steps; ++step) {
    if (m.is_terminated()) return out;
    m.fill_next_token_bitmask(mask);
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(bits)));
    EXPECT_FALSE(allowed.empty()) << "no token allowed after: " << out;
    if (allowed.empty()) return std::nullopt;
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.can_terminate() && rng() % 2 == 0) pick = v.eos;
    if (rng() % 2 == 0) {
      int best = -1;
      for (int k = 0; k < 16; ++k) {
        const int32_t c = allowed[rng() % allowed.size()];
        if (c == v.eos) continue;
        int score = 0;
        for (char ch : v.vocab->token_bytes(c)) score += ch == '"' || ch == '}' || ch == ']';
        if (score > best) best = score, pick = c;
      }
    }
    EXPECT_TRUE(m.accept_token(pick)) << "token " << pick << " was in the mask";
    if (pick != v.eos) out += v.vocab->token_bytes(pick);
  }
  return m.is_terminated() ? std::optional(out) : std::nullopt;
}

void run_walks(const char* schema_text, int num_walks, bool json_object = false) {
  const Js schema = json_object ? Js{{"type", "object"}} : Js::parse(schema_text);
  auto g = json_object ? compile_structured_output({StructuredOutputSpec::Kind::kJsonObject, {}, {}})
                       : std::make_shared<const Grammar>(compile_json_schema(schema));
  std::mt19937 rng(1234);
  int finished = 0;
  for (int i = 0; i < num_walks; ++i) {
    auto out = walk(g, rng, 400);
    if (!out) continue;
    ++finished;
    Js value;
    try {
      value = Js::parse(*out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "does not parse: " << *out << " (" << e.what() << ")";
      continue;
    }
    EXPECT_TRUE(testing::validate(value, schema, schema)) << "schema " << schema.dump() << "\noutput " << *out;
  }
  EXPECT_GE(finished, num_walks / 2) << schema.dump();
}

TEST(RandomWalk, JsonObject) { run_walks(nullptr, 12, true); }

TEST(RandomWalk, FlatObject) {
  run_walks(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},
               "ok":{"type":"boolean"},"score":{"type":["number","null"]}},"required":["name","age"]})", 12);
}

TEST(RandomWalk, NestedArraysEnumsAnyOf) {
  run_walks(R"({"type":"object","properties":{
      "items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},
               "color":{"enum":["red","green","blue"]}},"required":["id","color"]},"minItems":1,"maxItems":3},
      "pair":{"type":"array","prefixItems":[{"type":"string","minLength":1,"maxLength":4},{"const":42}],"items":false,"minItems":2},
      "either":{"anyOf":[{"type":"string","maxLength":5},{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}]}},
      "required":["items","pair","either"]})", 10);
}

TEST(RandomWalk, RefsAndAdditionalProperties) {
  run_walks(R"({"$defs":{"leaf":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"maximum":5}},"required":["v"]}},
               "type":"object","properties":{"a":{"$ref":"#/$defs/leaf"},"b":{"type":"array","items":{"$ref":"#/$defs/leaf"},"maxItems":2}},
               "required":["a"],"additionalProperties":{"type":"boolean"}})", 10);
}

}  // namespace
}  // namespace vireo::structured
