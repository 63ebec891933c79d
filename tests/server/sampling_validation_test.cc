// Sampling fields arrive as JSON doubles and reach the engine as floats: values the cast would
// turn into inf are a 400 naming the field and quoting what was sent; positive values that would
// underflow to 0 where 0 is invalid are kept positive (vLLM accepts 1e-300 > 0).
#include <gtest/gtest.h>

#include <limits>

#include "engine/async_engine_impl.h"
#include "server/openai_errors.h"
#include "server/request_validation.h"
#include "server/sampling_validation.h"

using namespace vireo;
using namespace vireo::server;

namespace {

const ModelInfo kModel{"m", 100, 260};

SamplingParams parse(const Json& fields) {
  Json body = fields;
  body["prompt"] = "hi";
  return parse_sampling_params(body, kModel, ValidationLimits{});
}

// The ApiError for `fields`, or a failure when they parse.
ApiError error_for(const Json& fields) {
  try {
    parse(fields);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << fields.dump();
  return ApiError(0, "", "");
}

}  // namespace

TEST(SamplingValidation, ValuesThatOverflowAFloatAre400NamingTheField) {
  for (const char* field : {"temperature"}) {
    SCOPED_TRACE(field);
    ApiError e = error_for({{field, 1e39}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, field);
    EXPECT_NE(std::string(e.what()).find("1e+39"), std::string::npos) << e.what();
  }
  EXPECT_FLOAT_EQ(parse({{"temperature", 3e38}}).temperature, 3e38f);  // the largest floats still pass
}

TEST(SamplingValidation, TinyPositiveValuesStayPositiveWhereZeroIsInvalid) {
  const float smallest = std::numeric_limits<float>::min();
  for (double v : {1e-300, 1e-46, 1e-40}) {
    SCOPED_TRACE(v);
    EXPECT_EQ(parse({{"top_p", v}}).top_p, smallest);
    EXPECT_EQ(parse({{"repetition_penalty", v}}).repetition_penalty, smallest);
    // The engine (which checks the float) accepts them: before, it rejected 0 with param null.
    EXPECT_NO_THROW(validate_request({1}, parse({{"top_p", v}, {"repetition_penalty", v}}), 260, 100));
  }
  EXPECT_EQ(parse({{"top_p", 1e-30}}).top_p, 1e-30f);  // representable: unchanged
  // Where 0 is valid the cast is the value: greedy for temperature, off for min_p and penalties.
  EXPECT_EQ(parse({{"temperature", 1e-46}}).temperature, 0.0f);
  EXPECT_EQ(parse({{"min_p", 1e-300}}).min_p, 0.0f);
  EXPECT_EQ(parse({{"presence_penalty", 1e-300}}).presence_penalty, 0.0f);
  EXPECT_EQ(parse({{"frequency_penalty", -1e-300}}).frequency_penalty, -0.0f);
  EXPECT_EQ(parse({{"logit_bias", {{"5", 1e-300}}}}).logit_bias.at(0).second, 0.0f);
}

TEST(SamplingValidation, OutOfRangeErrorsQuoteTheValueSent) {
  struct Case {
    const char* field;
    double value;
    const char* quoted;
  };
  for (const Case& c : {Case{"top_p", -1e-300, "-1e-300"}, Case{"top_p", 1.5, "1.5"},
                        Case{"repetition_penalty", -1e-46, "-1e-46"}, Case{"repetition_penalty", 1e7, "10000000"},
                        Case{"temperature", -1e-300, "-1e-300"}, Case{"min_p", 1.0000001, "1.0000001"},
                        Case{"presence_penalty", 2.0000001, "2.0000001"}, Case{"frequency_penalty", -1e300, "-1e+300"}}) {
    SCOPED_TRACE(c.field);
    ApiError e = error_for({{c.field, c.value}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.field);
    EXPECT_NE(std::string(e.what()).find(c.quoted), std::string::npos) << e.what();
  }
}

// With --reasoning-parser the model info carries "</think>"'s id: chat grammars start after it.
TEST(SamplingValidation, ChatGrammarsWaitForTheEndOfReasoning) {
  ModelInfo info = kModel;
  info.reasoning_end_token = 42;
  const Json messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  ChatRequest r = parse_chat_request({{"messages", messages}, {"response_format", {{"type", "json_object"}}}}, info, {});
  ASSERT_NE(r.params.grammar, nullptr);
  EXPECT_EQ(r.params.grammar_start_token, 42);
  r = parse_chat_request({{"messages", messages}}, info, {});
  EXPECT_EQ(r.params.grammar, nullptr);
  EXPECT_FALSE(r.params.grammar_start_token.has_value());
  r = parse_chat_request({{"messages", messages}, {"guided_choice", {"a"}}}, kModel, {});
  EXPECT_FALSE(r.params.grammar_start_token.has_value());
}

// logit_bias keys are read as vLLM reads them, with Python's int(): what it accepts names the id, what
// it refuses (or an id outside the vocabulary) is a 400 naming logit_bias.
TEST(SamplingValidation, LogitBiasKeysAreReadAsPythonsInt) {
  for (const char* key : {"7", "007", " 7", "7\n", "+7", "0_7", "00000000000007"}) {
    SCOPED_TRACE(std::string("'") + key + "'");
    auto bias = parse({{"logit_bias", {{key, 1.5}}}}).logit_bias;
    ASSERT_EQ(bias.size(), 1u);
    EXPECT_EQ(bias[0].first, 7);
    EXPECT_FLOAT_EQ(bias[0].second, 1.5f);
  }
  EXPECT_EQ(parse({{"logit_bias", {{"1_0_0", 1}}}}).logit_bias.at(0).first, 100);
  for (const char* key : {"", " ", "+", "-", "7a", "1.5", "1e2", "0x7", "_7", "7_", "7__0", "- 7", "-1", "-0_1", "260",
                          "99999999999999999999999"}) {
    SCOPED_TRACE(std::string("'") + key + "'");
    ApiError e = error_for({{"logit_bias", {{key, 1}}}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "logit_bias");
  }
}
