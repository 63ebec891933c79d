// Pure functions: auth, metrics rendering, SSE framing, logprob formatting, validation.
#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/auth.h"
#include "server/logprobs_format.h"
#include "server/metrics_renderer.h"
#include "server/openai_errors.h"
#include "server/request_validation.h"
#include "server/sse_writer.h"

using namespace vireo;
using namespace vireo::server;

TEST(Auth, BearerMatchesOnlyExactKey) {
  EXPECT_TRUE(bearer_matches("Bearer sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-124", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-1234", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-12", "sk-123"));
  EXPECT_FALSE(bearer_matches("sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("", "sk-123"));
  EXPECT_FALSE(bearer_matches("bearer sk-123", "sk-123"));
  EXPECT_TRUE(route_needs_auth("/v1/models"));
  EXPECT_FALSE(route_needs_auth("/health"));
  EXPECT_FALSE(route_needs_auth("/v1x"));
}

TEST(Metrics, RendersVllmNamesAndCumulativeBuckets) {
  EngineStats s;
  s.num_requests_running = 3;
  s.kv_cache_usage = 0.25;
  s.num_preemptions_total = 7;
  s.prompt_tokens_total = 11;
  s.time_to_first_token_seconds = Histogram({0.1, 1.0});
  s.time_to_first_token_seconds.observe(0.05);
  s.time_to_first_token_seconds.observe(0.5);
  s.time_to_first_token_seconds.observe(5.0);
  std::string m = render_metrics(s, {{"stop", 2}}, "my\"model");
  const std::string l = "model_name=\"my\\\"model\"";
  EXPECT_NE(m.find("vllm:num_requests_running{" + l + "} 3.0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("vllm:kv_cache_usage_perc{" + l + "} 0.25\n"), std::string::npos);
  EXPECT_NE(m.find("# TYPE vllm:num_preemptions counter\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:num_preemptions_total{" + l + "} 7.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:prompt_tokens_total{" + l + "} 11.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:request_success_total{finished_reason=\"stop\"," + l + "} 2.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:request_success_total{finished_reason=\"length\"," + l + "} 0.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"0.1\"} 1.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"1.0\"} 2.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"+Inf\"} 3.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:time_to_first_token_seconds_count{" + l + "} 3.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:time_to_first_token_seconds_sum{" + l + "} 5.55\n"), std::string::npos);
  EXPECT_NE(m.find("# TYPE vllm:e2e_request_latency_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(m.find("vllm:spec_decode"), std::string::npos);  // drafts off: no counters

  s.spec_enabled = true;
  s.spec_num_drafts = 4;
  s.spec_num_draft_tokens = 12;
  s.spec_num_accepted_tokens = 5;
  s.spec_accepted_per_pos = {3, 2, 0};
  m = render_metrics(s, {}, "m");
  EXPECT_NE(m.find("vllm:spec_decode_num_drafts_total{model_name=\"m\"} 4.0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 12.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 5.0\n"), std::string::npos);
  EXPECT_NE(m.find("vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} 2.0\n"),
            std::string::npos);
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_event(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  std::string sink;
  int calls = 0;
  SseWriter w([&](const char* d, size_t n) {
    ++calls;
    sink.append(d, n);
    return calls < 2;
  });
  EXPECT_TRUE(w.send(Json{{"x", "é"}}));
  EXPECT_FALSE(w.done());
  EXPECT_FALSE(w.send(Json{{"y", 1}}));  // no further writes after a failure
  EXPECT_EQ(calls, 2);
}

TEST(Errors, Envelope) {
  Json j = error_json(bad_request("bad top_p", "top_p"));
  EXPECT_EQ(j["error"]["message"], "bad top_p");
  EXPECT_EQ(j["error"]["type"], "BadRequestError");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_TRUE(error_json(not_found("x"))["error"]["param"].is_null());
}

TEST(Logprobs, CompletionFormatOffsetsAndTop) {
  vireo::testing::ByteTokenizer tok;
  CompletionLogprobs lp(tok, 1, 3);
  lp.add('h', nullptr);
  TokenLogprob e{'i', -0.5f, {{'o', -0.1f}, {'i', -0.5f}}};
  lp.add('i', &e);
  TokenLogprob inf{'!', -std::numeric_limits<float>::infinity(), {}};
  lp.add('!', &inf);
  Json j = lp.take();
  EXPECT_EQ(j["tokens"], Json({"h", "i", "!"}));
  EXPECT_EQ(j["text_offset"], Json({3, 4, 5}));
  EXPECT_TRUE(j["token_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(j["token_logprobs"][1].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(j["token_logprobs"][2].get<double>(), -9999.0);
  EXPECT_EQ(j["top_logprobs"][1].size(), 2u);  // sampled + top-1
  EXPECT_NEAR(j["top_logprobs"][1]["o"].get<double>(), -0.1, 1e-6);
  EXPECT_TRUE(lp.take()["tokens"].empty());
  Json c = chat_logprob_entry(tok, e, 2);
  EXPECT_EQ(c["token"], "i");
  EXPECT_EQ(c["bytes"], Json({105}));
  EXPECT_EQ(c["top_logprobs"].size(), 2u);
  EXPECT_EQ(c["top_logprobs"][0]["token"], "o");
  EXPECT_EQ(utf8_length("héllo"), 5u);
}

TEST(Validation, CompletionDefaultsAndGenerationConfig) {
  ModelInfo m{"m", 100, 260, 0.7f, std::nullopt, std::nullopt, std::nullopt, 20};
  ValidationLimits lim;
  auto r = parse_completion_request(Json{{"prompt", "hi"}}, m, lim);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.7f);
  EXPECT_EQ(r.params.top_k, 20);
  r = parse_completion_request(Json{{"prompt", {{1, 2}, {3}}}, {"temperature", 0}, {"n", 2}, {"stop", "x"}}, m, lim);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].token_ids, std::vector<int32_t>({3}));
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(r.params.stop, std::vector<std::string>({"x"}));
  EXPECT_THROW(check_context_length(99, 2, 100, "prompt"), ApiError);
  EXPECT_THROW(check_context_length(100, std::nullopt, 100, "prompt"), ApiError);
  EXPECT_NO_THROW(check_context_length(98, 2, 100, "prompt"));
  try {
    check_context_length(90, 20, 100, "prompt");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("100"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("90"), std::string::npos);
    EXPECT_EQ(e.param, "max_tokens");
  }
}

TEST(Validation, ChatFlattensTextParts) {
  ModelInfo m{"m", 100, 260};
  auto r = parse_chat_request(
      Json{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}},
           {"logprobs", true}, {"top_logprobs", 3}, {"max_completion_tokens", 5}},
      m, {});
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.max_tokens, 5);
}

// vLLM's text-like content parts: bare strings, input_text / output_text, refusal, thinking; a part
// without its text is skipped; other types stay a 400.
TEST(Validation, ChatTakesVllmTextLikeParts) {
  ModelInfo m{"m", 100, 260};
  Json parts = Json::array({"plain", {{"type", "input_text"}, {"text", "in"}}, {{"type", "output_text"}, {"text", "out"}},
                            {{"type", "refusal"}, {"refusal", "no"}}, {{"type", "thinking"}, {"thinking", "hm"}},
                            {{"type", "text"}}, {{"type", "text"}, {"text", nullptr}}});
  auto r = parse_chat_request(Json{{"messages", {{{"role", "assistant"}, {"content", parts}}}}}, m, {});
  EXPECT_EQ(r.messages[0]["content"], "plain\nin\nout\nno\nhm");
  EXPECT_THROW(parse_chat_request(Json{{"messages", {{{"role", "user"}, {"content", {{{"type", "input_image"}}}}}}}}, m, {}),
               server::ApiError);
}
