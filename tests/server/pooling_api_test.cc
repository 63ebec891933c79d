// The pooling server's routes (--runner pooling): /v1/embeddings shapes (float and base64, batch order,
// usage) and every bad input a 400 with the error envelope and the right param, never a crash; /score and
// /rerank from the embeddings; generation routes refused. With the FakeEngine's deterministic embeddings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "server_fixture.h"

namespace vireo::testing {
namespace {

using json = nlohmann::json;

FakeEngineOptions pooling_engine() {
  FakeEngineOptions o;
  o.pooling = true;
  return o;
}

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size() + 0 && i < s.size(); i += 4) {
    const int a = val(s[i]), b = val(s[i + 1]), c = val(s[i + 2]), d = val(s[i + 3]);
    bytes += static_cast<char>((a << 2) | (b >> 4));
    if (c >= 0) bytes += static_cast<char>(((b & 15) << 4) | (c >> 2));
    if (d >= 0) bytes += static_cast<char>(((c & 3) << 6) | d);
  }
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(PoolingApi, EmbeddingsInEveryInputShape) {
  LiveServer srv({}, pooling_engine());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/embeddings", {{"input", {"ab", "c", "ab"}}, {"model", "fake-model"}});
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["object"], "list");
  EXPECT_EQ(b["model"], "fake-model");
  ASSERT_EQ(b["data"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b["data"][i]["index"], i);
    EXPECT_EQ(b["data"][i]["object"], "embedding");
    EXPECT_EQ(b["data"][i]["embedding"].size(), 8u);
  }
  EXPECT_EQ(b["data"][0]["embedding"], b["data"][2]["embedding"]);
  EXPECT_NE(b["data"][0]["embedding"], b["data"][1]["embedding"]);
  EXPECT_EQ(b["usage"]["prompt_tokens"], 8);  // <bos> + bytes, each input
  EXPECT_EQ(b["usage"]["total_tokens"], 8);
  const json floats = b["data"][1]["embedding"];
  r = post_json(cli, "/v1/embeddings", {{"input", "c"}, {"encoding_format", "base64"}});
  ASSERT_EQ(r->status, 200) << r->body;
  const auto v = from_base64(json::parse(r->body)["data"][0]["embedding"].get<std::string>());
  ASSERT_EQ(v.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(v[i], floats[i].get<float>());
  // Token ids, one list or several; dimensions equal to the width; add_special_tokens false.
  r = post_json(cli, "/v1/embeddings", {{"input", {257, 99}}, {"dimensions", 8}});
  EXPECT_EQ(r->status, 200) << r->body;
  r = post_json(cli, "/v1/embeddings", {{"input", {{257, 99}, {5}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["data"].size(), 2u);
  r = post_json(cli, "/v1/embeddings", {{"input", "c"}, {"add_special_tokens", false}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], 1);
  r = post_json(cli, "/pooling", {{"input", "c"}});  // vLLM's pooling API: the same vector under "data"
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["data"][0]["object"], "pooling");
  EXPECT_EQ(json::parse(r->body)["data"][0]["data"], floats);
  r = post_json(cli, "/v1/embeddings", {{"input", "abcdef"}, {"truncate_prompt_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], 2);
}

TEST(PoolingApi, MatryoshkaDimensions) {
  FakeEngineOptions o = pooling_engine();
  o.matryoshka = true;
  o.matryoshka_dims = {4, 2, 8};
  LiveServer srv({}, o);
  auto cli = srv.client();
  auto full = json::parse(post_json(cli, "/v1/embeddings", {{"input", "abc"}})->body)["data"][0]["embedding"];
  auto r = post_json(cli, "/v1/embeddings", {{"input", "abc"}, {"dimensions", 4}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json e = json::parse(r->body)["data"][0]["embedding"];
  ASSERT_EQ(e.size(), 4u);
  double n = 0, nf = 0;
  for (int i = 0; i < 4; ++i) n += e[i].get<double>() * e[i].get<double>(), nf += full[i].get<double>() * full[i].get<double>();
  EXPECT_NEAR(n, 1.0, 1e-6);  // renormalised
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(e[i].get<double>(), full[i].get<double>() / std::sqrt(nf), 1e-6);
  for (int bad : {3, 0, -1, 9}) {
    r = post_json(cli, "/v1/embeddings", {{"input", "abc"}, {"dimensions", bad}});
    EXPECT_EQ(r->status, 400) << bad << " " << r->body;
  }
}

TEST(PoolingApi, ChatMessagesAsInput) {
  LiveServer srv({}, pooling_engine());
  auto cli = srv.client();
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  auto r = post_json(cli, "/v1/embeddings", {{"messages", msgs}});
  ASSERT_EQ(r->status, 200) << r->body;
  const int plain = json::parse(r->body)["usage"]["prompt_tokens"];
  r = post_json(cli, "/v1/embeddings", {{"messages", msgs}, {"add_generation_prompt", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_GT(json::parse(r->body)["usage"]["prompt_tokens"].get<int>(), plain);  // + the assistant header
  r = post_json(cli, "/v1/embeddings", {{"messages", msgs}, {"input", "x"}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/embeddings", {{"messages", {{{"role", 3}}}}});
  EXPECT_EQ(r->status, 400) << r->body;
}

TEST(PoolingApi, BadInputsAreErrorsWithTheirParam) {
  LiveServer srv({}, pooling_engine());
  auto cli = srv.client();
  const std::string big(300, 'x');  // over max_model_len 256
  const std::vector<std::pair<json, std::string>> cases = {
      {json::object(), "input"},
      {{{"input", nullptr}}, "input"},
      {{{"input", 5}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", {json::array()}}}, "input"},
      {{{"input", ""}, {"add_special_tokens", false}}, "input"},  // no tokens at all
      {{{"input", {1, "a"}}}, "input"},
      {{{"input", {-1}}}, "input"},
      {{{"input", {100000}}}, "input"},
      {{{"input", {{1}, 2}}}, "input"},
      {{{"input", {{1.5}}}}, "input"},
      {{{"input", {{{"a", 1}}}}}, "input"},
      {{{"input", big}}, "input"},
      {{{"input", "a"}, {"encoding_format", "int8"}}, "encoding_format"},
      {{{"input", "a"}, {"encoding_format", 3}}, "encoding_format"},
      {{{"input", "a"}, {"dimensions", 4}}, "dimensions"},
      {{{"input", "a"}, {"dimensions", "8"}}, "dimensions"},
      {{{"input", "a"}, {"truncate_prompt_tokens", 0}}, "truncate_prompt_tokens"},
      {{{"input", "a"}, {"add_special_tokens", "yes"}}, "add_special_tokens"},
      {{{"input", "a"}, {"user", 5}}, "user"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body.dump());
    auto r = post_json(cli, "/v1/embeddings", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["type"], "BadRequestError");
    EXPECT_EQ(e["code"], 400);
    if (param != "*") EXPECT_EQ(e["param"], param) << r->body;
  }
  auto r = post_json(cli, "/v1/embeddings", {{"input", "a"}, {"model", "other"}});
  EXPECT_EQ(r->status, 404) << r->body;
  r = cli.Post("/v1/embeddings", "[1,", "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/embeddings", {{"input", "FAIL"}});  // the engine fails the request
  EXPECT_GE(r->status, 400) << r->body;
  EXPECT_TRUE(json::parse(r->body).contains("error"));
  // Generation routes are refused; the server still answers.
  r = post_json(cli, "/v1/completions", {{"prompt", "a"}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a"}}}}});
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(post_json(cli, "/v1/embeddings", {{"input", "ok"}})->status, 200);
}

TEST(PoolingApi, ScoreAndRerank) {
  LiveServer srv({}, pooling_engine());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/score", {{"text_1", "ab"}, {"text_2", {"ab", "zz"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  json d = json::parse(r->body)["data"];
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0]["score"].get<double>(), 1.0, 1e-6);
  EXPECT_LT(d[1]["score"].get<double>(), 1.0);
  r = post_json(cli, "/rerank", {{"query", "ab"}, {"documents", {"zz", {{"text", "ab"}}, "ac"}}, {"top_n", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  json res = json::parse(r->body)["results"];
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0]["index"], 1);
  EXPECT_EQ(res[0]["document"]["text"], "ab");
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/score", {{"text_1", "a"}}},
           {"/score", {{"text_1", {"a", "b"}}, {"text_2", {"a"}}}},
           {"/score", {{"text_1", 1}, {"text_2", "a"}}},
           {"/score", {{"text_1", "a"}, {"text_2", json::array()}}},
           {"/v1/rerank", {{"query", "a"}}},
           {"/v1/rerank", {{"query", "a"}, {"documents", {1}}}},
           {"/v1/rerank", {{"query", 3}, {"documents", {"a"}}}},
           {"/v2/rerank", {{"query", "a"}, {"documents", {"b"}}, {"top_n", -1}}}}) {
    SCOPED_TRACE(path + " " + body.dump());
    r = post_json(cli, path, body);
    EXPECT_EQ(r->status, 400) << r->body;
  }
}

// SageMaker's /invocations on a pooling server: the body's fields pick embeddings, rerank or score.
TEST(PoolingApi, InvocationsRouteByTheBodysShape) {
  LiveServer srv({}, pooling_engine());
  auto cli = srv.client();
  auto r = post_json(cli, "/invocations", {{"input", {"ab", "c"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["data"].size(), 2u);
  EXPECT_EQ(json::parse(r->body)["data"][0]["object"], "embedding");
  r = post_json(cli, "/invocations", {{"query", "ab"}, {"documents", {"zz", "ab"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["results"][0]["index"], 1);
  r = post_json(cli, "/invocations", {{"text_1", "ab"}, {"text_2", {"ab"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["data"].size(), 1u);
  r = post_json(cli, "/invocations", {{"prompt", "ab"}});  // a completion: not served by a pooling model
  EXPECT_EQ(r->status, 400) << r->body;
}

TEST(PoolingApi, ClassifierServesClassifyScoreAndRerank) {
  FakeEngineOptions o = pooling_engine();
  o.labels = {"no", "yes", "maybe"};
  {
    LiveServer srv({}, o);
    auto cli = srv.client();
    auto r = post_json(cli, "/classify", {{"input", {"a", "z"}}});  // last ids 97 and 122
    ASSERT_EQ(r->status, 200) << r->body;
    const json d = json::parse(r->body)["data"];
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0]["num_classes"], 3);
    EXPECT_EQ(d[0]["label"], "no");  // logits -0.3, -0.6, -0.9
    EXPECT_EQ(d[1]["label"], "maybe");  // 2.2, 4.4, 6.6
    double sum = 0;
    for (const auto& p : d[1]["probs"]) sum += p.get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-9);
    EXPECT_EQ(post_json(cli, "/v1/embeddings", {{"input", "a"}})->status, 400);  // a classifier
    EXPECT_EQ(post_json(cli, "/score", {{"text_1", "a"}, {"text_2", "b"}})->status, 400);  // three labels
    EXPECT_EQ(post_json(cli, "/classify", {{"input", json::array()}})->status, 400);
  }
  o.labels = {"relevant"};  // a cross-encoder reranker
  LiveServer srv({}, o);
  auto cli = srv.client();
  auto r = post_json(cli, "/rerank", {{"query", "q"}, {"documents", {"a", "z", "m"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json res = json::parse(r->body)["results"];
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0]["index"], 1);  // the pair ends in 'z': the largest logit
  EXPECT_NEAR(res[0]["relevance_score"].get<double>(), 1.0 / (1.0 + std::exp(-0.1 * 22)), 1e-6);
  r = post_json(cli, "/score", {{"text_1", "q"}, {"text_2", {"a"}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NEAR(json::parse(r->body)["data"][0]["score"].get<double>(), 1.0 / (1.0 + std::exp(0.3)), 1e-6);
  r = post_json(cli, "/classify", {{"input", "a"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["data"][0]["probs"].size(), 1u);
}

TEST(PoolingApi, PoolingRoutesAre404OnAGenerateServer) {
  LiveServer srv;
  auto cli = srv.client();
  for (const char* path : {"/v1/embeddings", "/pooling", "/classify", "/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"})
    EXPECT_EQ(post_json(cli, path, {{"input", "a"}})->status, 404) << path;
}

}  // namespace
}  // namespace vireo::testing
