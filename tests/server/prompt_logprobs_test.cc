// vLLM's prompt_logprobs for /v1/completions (per choice) and /v1/chat/completions (top level).
#include <gtest/gtest.h>

#include <limits>

#include "server/logprobs_format.h"
#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

TEST(PromptLogprobs, JsonHasVllmShape) {
  ByteTokenizer tok;
  std::vector<int32_t> prompt = {'a', 'b', 'c'};
  std::vector<std::optional<TokenLogprob>> lps = {
      std::nullopt,
      TokenLogprob{'b', -2.5f, {{'x', -0.5f}, {'b', -2.5f}, {'y', -3.0f}}},             // 'b' is second
      TokenLogprob{'c', -std::numeric_limits<float>::infinity(), {{'x', -0.1f}, {'y', -0.2f}}}};  // outside
  auto j = server::prompt_logprobs_json(tok, prompt, lps, 2);  // ordered: the key order is checked
  ASSERT_EQ(j.size(), 3u);
  EXPECT_TRUE(j[0].is_null());
  // The prompt token first (its rank from the top list), then the top 2; a repeat keeps its place.
  EXPECT_EQ(j[1].dump(), R"({"98":{"logprob":-2.5,"rank":2,"decoded_token":"b"},"120":{"logprob":-0.5,"rank":1,)"
                         R"("decoded_token":"x"}})");
  EXPECT_EQ(j[2]["99"]["logprob"], -9999.0);  // -inf clamped, as vLLM's clamp_prompt_logprobs
  EXPECT_TRUE(j[2]["99"]["rank"].is_null());  // not in the engine's top N: unknown
  EXPECT_EQ(j[2]["121"]["rank"], 2);
  lps[2]->rank = 37;  // the backend's count: the rank of a token outside the top N
  EXPECT_EQ(server::prompt_logprobs_json(tok, prompt, lps, 2)[2]["99"]["rank"], 37);
  EXPECT_EQ(server::prompt_logprobs_json(tok, prompt, {}, 2).dump(), "[null,null,null]");
}

TEST(PromptLogprobs, CompletionsReturnThemPerChoice) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", {72, 105, 33}}, {"max_tokens", 2}, {"prompt_logprobs", 3}, {"n", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const auto& c : j["choices"]) {
    json plp = c["prompt_logprobs"];
    ASSERT_EQ(plp.size(), 3u) << plp;
    EXPECT_TRUE(plp[0].is_null());
    EXPECT_EQ(plp[1], json::parse(R"({"105":{"logprob":-1.0,"rank":1,"decoded_token":"i"}})"));
    EXPECT_EQ(plp[2]["33"]["decoded_token"], "!");
    EXPECT_TRUE(c["logprobs"].is_null());  // sample logprobs were not asked for
  }
  // Echo + logprobs computes them, and vLLM returns them in this field too.
  r = post_json(cli, "/v1/completions", {{"prompt", {72, 105}}, {"max_tokens", 1}, {"echo", true}, {"logprobs", 1}});
  EXPECT_EQ(json::parse(r->body)["choices"][0]["prompt_logprobs"].size(), 2u) << r->body;
  r = post_json(cli, "/v1/completions", {{"prompt", {72, 105}}, {"max_tokens", 1}});
  EXPECT_TRUE(json::parse(r->body)["choices"][0]["prompt_logprobs"].is_null());
  // Streams cannot carry them (vLLM: a 400 unless 0).
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"prompt_logprobs", 0}, {"stream", true}});
  EXPECT_EQ(r->status, 200);
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"prompt_logprobs", 1}, {"stream", true}});
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "prompt_logprobs");
}

TEST(PromptLogprobs, ChatReturnsThemAtTheTop) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"prompt_logprobs", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  const std::string prompt = "<user>hi\n<assistant>";
  ASSERT_EQ(j["prompt_logprobs"].size(), prompt.size());
  EXPECT_TRUE(j["prompt_logprobs"][0].is_null());
  EXPECT_EQ(j["prompt_logprobs"][1][std::to_string('u')]["decoded_token"], "u");
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  r = post_json(cli, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_TRUE(json::parse(r->body)["prompt_logprobs"].is_null());
}
