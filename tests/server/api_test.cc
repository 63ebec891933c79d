// Endpoint behaviour against a live in-process server with the FakeEngine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::vector<int32_t> ids(const std::string& s, bool special = true) { return ByteTokenizer().encode(s, special); }

bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

// A raw client socket, to hang up mid-request.
int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

void raw_post(int fd, const std::string& path, const json& body) {
  std::string b = body.dump();
  std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(b.size()) + "\r\n\r\n" + b;
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
}

}  // namespace

TEST(Api, HealthIs503UntilTheEngineIsSet) {
  LiveServer srv({}, {}, /*load_engine=*/false);
  auto cli = srv.client();
  EXPECT_EQ(cli.Get("/health")->status, 503);
  auto r = post_json(cli, "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "ServiceUnavailableError");
  EXPECT_EQ(cli.Get("/metrics")->status, 200);
  auto load = cli.Get("/load");  // vLLM's server-load route: answers while loading too
  ASSERT_EQ(load->status, 200);
  EXPECT_EQ(json::parse(load->body)["server_load"], 0);
  srv.load();
  EXPECT_EQ(cli.Get("/health")->status, 200);
  EXPECT_EQ(cli.Get("/version")->status, 200);
  EXPECT_EQ(json::parse(cli.Get("/load")->body)["server_load"], 0);  // idle
}

TEST(Api, ModelsList) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = cli.Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "fake-model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
}

TEST(Api, CompletionTextUsageAndIds) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"model", "fake-model"}, {"prompt", "abc"}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["choices"][0]["text"], FakeEngine::expected_text(ids("abc"), 5));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);  // <bos> + 3 bytes
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"], 9);
}

TEST(Api, BatchPromptsTimesNWithSeedsPerChoice) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions",
                     {{"prompt", {{65, 66}, {67}}}, {"max_tokens", 4}, {"n", 2}, {"seed", 10}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 4u);
  std::vector<std::vector<int32_t>> prompts = {{65, 66}, {67}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], FakeEngine::expected_text(prompts[i / 2], 4, 10 + i % 2)) << i;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
}

// Seeds span 64 bits as in vLLM (torch's manual_seed): 2^64 - 1 is accepted, and -1 is the same seed.
TEST(Api, SeedsSpanSixtyFourBits) {
  LiveServer srv;
  auto cli = srv.client();
  for (const json& seed : {json(18446744073709551615ull), json(-1)}) {
    auto r = post_json(cli, "/v1/completions", {{"prompt", {65, 66}}, {"max_tokens", 4}, {"seed", seed}});
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"],
              FakeEngine::expected_text({65, 66}, 4, 18446744073709551615ull)) << seed.dump();
  }
}

TEST(Api, StopStringAndStopTokenReasons) {
  LiveServer srv;
  auto cli = srv.client();
  std::string full = FakeEngine::expected_text(ids("abc"), 10);
  std::string stop(1, full[3]);
  auto r = post_json(cli, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 10}, {"stop", stop}});
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], full.substr(0, 3));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], stop);
  r = post_json(cli, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 10}, {"stop_token_ids", {static_cast<int>(full[2])}}});
  j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], static_cast<int>(full[2]));
}

TEST(Api, EchoWithLogprobs) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", {72, 105}}, {"max_tokens", 2}, {"echo", true}, {"logprobs", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  std::string gen = FakeEngine::expected_text({72, 105}, 2);
  EXPECT_EQ(j["choices"][0]["text"], "Hi" + gen);
  json lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["tokens"][0], "H");
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].get<double>(), -1.0);
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][2].get<double>(), -0.25);
  EXPECT_EQ(lp["top_logprobs"][2].size(), 3u);  // sampled + 2
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][2]["A"].get<double>(), -0.5);
}

TEST(Api, StreamingCompletionWithUsage) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions",
                     {{"prompt", "xy"}, {"max_tokens", 6}, {"stream", true}, {"n", 2}, {"logprobs", 0},
                      {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  bool done = false;
  auto chunks = parse_sse(r->body, &done);
  EXPECT_TRUE(done);
  std::string text[2];
  int finishes = 0;
  int offsets[2] = {0, 0};
  for (const auto& c : chunks) {
    EXPECT_EQ(c["object"], "text_completion");
    for (const auto& ch : c["choices"]) {
      int i = ch["index"];
      text[i] += ch["text"].get<std::string>();
      for (const auto& off : ch["logprobs"]["text_offset"]) EXPECT_EQ(off.get<int>(), offsets[i]++);
      if (!ch["finish_reason"].is_null()) ++finishes;
    }
  }
  EXPECT_EQ(text[0], FakeEngine::expected_text(ids("xy"), 6));
  EXPECT_EQ(text[1], text[0]);
  EXPECT_EQ(finishes, 2);
  EXPECT_TRUE(chunks.back()["choices"].empty());
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 12);
  EXPECT_EQ(chunks.back()["usage"]["prompt_tokens"], 3);
}

TEST(Api, ChatNonStreamingAndStreaming) {
  LiveServer srv;
  auto cli = srv.client();
  json msgs = {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}};
  // The fake template renders "<system>s\n<user>hi\n<assistant>"; no <bos> is added again.
  std::vector<int32_t> prompt = ids("<system>s\n<user>hi\n<assistant>", false);
  auto r = post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 4}, {"logprobs", true}, {"top_logprobs", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], FakeEngine::expected_text(prompt, 4));
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(prompt.size()));
  ASSERT_EQ(j["choices"][0]["logprobs"]["content"].size(), 4u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 1u);

  r = post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_completion_tokens", 3}, {"stream", true},
                                              {"stream_options", {{"include_usage", true}}}});
  bool done = false;
  auto chunks = parse_sse(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 1; i < chunks.size(); ++i) {
    if (chunks[i]["choices"].empty()) continue;
    const auto& d = chunks[i]["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!chunks[i]["choices"][0]["finish_reason"].is_null()) finish = chunks[i]["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, FakeEngine::expected_text(prompt, 3));
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 3);

  // Default max_tokens for chat: the rest of the context.
  r = post_json(cli, "/v1/chat/completions", {{"messages", msgs}});
  j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 256 - static_cast<int>(prompt.size()));
}

TEST(Api, TokenizeDetokenize) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/tokenize", {{"prompt", "hi"}});
  json j = json::parse(r->body);
  EXPECT_EQ(j["tokens"], json({257, 104, 105}));
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["max_model_len"], 256);
  r = post_json(cli, "/tokenize", {{"prompt", "hi"}, {"add_special_tokens", false}});
  EXPECT_EQ(json::parse(r->body)["count"], 2);
  r = post_json(cli, "/tokenize", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(json::parse(r->body)["count"], static_cast<int>(std::string("<user>x\n<assistant>").size()));
  r = post_json(cli, "/detokenize", {{"tokens", {104, 105}}});
  EXPECT_EQ(json::parse(r->body)["prompt"], "hi");
}

TEST(Api, ApiKeyGuardsV1Routes) {
  server::ServerOptions opts;
  opts.api_key = "sk-test";
  LiveServer srv(opts);
  auto cli = srv.client();
  auto r = cli.Get("/v1/models");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "AuthenticationError");
  httplib::Headers bad = {{"Authorization", "Bearer sk-wrong"}};
  EXPECT_EQ(cli.Get("/v1/models", bad)->status, 401);
  httplib::Headers good = {{"Authorization", "Bearer sk-test"}};
  EXPECT_EQ(cli.Get("/v1/models", good)->status, 200);
  EXPECT_EQ(cli.Post("/v1/completions", good, json({{"prompt", "a"}, {"max_tokens", 1}}).dump(), "application/json")->status, 200);
  EXPECT_EQ(cli.Get("/health")->status, 200);
  EXPECT_EQ(cli.Get("/metrics")->status, 200);
  // The key is checked before routing, as vLLM's middleware: unknown /v1 paths and methods are 401s.
  EXPECT_EQ(cli.Get("/v1/nope")->status, 401);
  EXPECT_EQ(cli.Delete("/v1/models")->status, 401);
  EXPECT_EQ(cli.Get("/v1/nope", good)->status, 404);
  EXPECT_EQ(cli.Delete("/v1/models", good)->status, 405);
  EXPECT_EQ(cli.Get("/nope")->status, 404);  // outside /v1: no key needed to be told
}

TEST(Api, MetricsCountFinishReasons) {
  LiveServer srv;
  auto cli = srv.client();
  post_json(cli, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}});
  post_json(cli, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}, {"n", 2}});
  auto r = cli.Get("/metrics");
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("vllm:request_success_total{finished_reason=\"length\",model_name=\"fake-model\"} 3.0"), std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("vllm:generation_tokens_total{model_name=\"fake-model\"} 6.0"), std::string::npos);
  // The running gauge is updated by the engine loop after the last output is handed over, so it may
  // trail the HTTP response by a moment: poll it (the counters above are final once responses are).
  const std::string idle = "vllm:num_requests_running{model_name=\"fake-model\"} 0.0";
  for (int i = 0; i < 200 && r->body.find(idle) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = cli.Get("/metrics");
    ASSERT_EQ(r->status, 200);
  }
  EXPECT_NE(r->body.find(idle), std::string::npos) << r->body;
}

TEST(Api, EngineErrorStreamsAnErrorEvent) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", "FAIL"}, {"max_tokens", 3}, {"stream", true}});
  ASSERT_EQ(r->status, 200);
  bool done = false;
  auto chunks = parse_sse(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["error"]["type"], "InternalServerError");
}

TEST(Api, StreamingClientDisconnectAbortsTheEngineRequest) {
  FakeEngineOptions eopts;
  eopts.token_delay = 10ms;
  LiveServer srv({}, eopts);
  int fd = raw_connect(srv.port());
  ASSERT_GE(fd, 0);
  raw_post(fd, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 200}, {"stream", true}});
  char buf[256];
  ASSERT_GT(read(fd, buf, sizeof buf), 0);  // the stream has started
  close(fd);
  EXPECT_TRUE(wait_for([&] { return srv.engine().num_aborted() == 1 && srv.engine().num_running() == 0; }));
  EXPECT_TRUE(wait_for([&] { return srv.server().context().num_in_flight() == 0; }));
  auto m = srv.client().Get("/metrics")->body;
  EXPECT_NE(m.find("vllm:request_success_total{finished_reason=\"abort\",model_name=\"fake-model\"} 1.0"), std::string::npos) << m;
}

TEST(Api, NonStreamingClientDisconnectAbortsTheEngineRequest) {
  FakeEngineOptions eopts;
  eopts.token_delay = 10ms;
  LiveServer srv({}, eopts);
  int fd = raw_connect(srv.port());
  ASSERT_GE(fd, 0);
  raw_post(fd, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 200}, {"n", 3}});
  ASSERT_TRUE(wait_for([&] { return srv.engine().num_running() == 3; }));
  close(fd);
  EXPECT_TRUE(wait_for([&] { return srv.engine().num_aborted() == 3 && srv.engine().num_running() == 0; }, 1500ms));
}

TEST(Api, ShutdownDrainsThenAbortsWithAnErrorEvent) {
  server::ServerOptions opts;
  opts.shutdown_timeout_s = 0.3;
  FakeEngineOptions eopts;
  eopts.token_delay = 10ms;
  LiveServer srv(opts, eopts);
  auto long_stream = std::async(std::launch::async, [&] {
    auto cli = srv.client();
    auto r = post_json(cli, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 200}, {"stream", true}});
    return r ? r->body : std::string("no response: ") + httplib::to_string(r.error());
  });
  auto short_req = std::async(std::launch::async, [&] {
    auto cli = srv.client();
    auto r = post_json(cli, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 5}});
    return r ? r->status : -1;
  });
  ASSERT_TRUE(wait_for([&] { return srv.engine().num_running() == 2; }));
  std::thread stopper([&] { srv.server().shutdown(); });
  ASSERT_TRUE(wait_for([&] { return srv.server().context().draining.load(); }));
  auto c2 = srv.client();
  auto refused = post_json(c2, "/v1/completions", {{"prompt", "a"}});
  if (refused) EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(short_req.get(), 200);  // drained: finished within the timeout
  bool done = false;
  auto chunks = parse_sse(long_stream.get(), &done);
  stopper.join();
  EXPECT_TRUE(done);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["error"]["code"], 503);
  EXPECT_GT(chunks.size(), 2u);
}

TEST(Api, RetrieveModel) {
  // GET /v1/models/{model} (the OpenAI SDKs' models.retrieve) was a 404 for every name.
  server::ServerOptions opts;
  opts.served_model_name = "Qwen/Qwen3-8B";
  opts.served_model_aliases = {"alias"};
  LiveServer srv(opts);
  auto cli = srv.client();
  json list = json::parse(cli.Get("/v1/models")->body);
  for (const std::string path : {"/v1/models/Qwen%2FQwen3-8B", "/v1/models/Qwen/Qwen3-8B", "/v1/models/alias"}) {
    auto r = cli.Get(path.c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << path << " " << r->body;
    json card = json::parse(r->body);
    EXPECT_EQ(card["object"], "model");
    EXPECT_EQ(card["id"], path == "/v1/models/alias" ? list["data"][1]["id"] : list["data"][0]["id"]);
    EXPECT_EQ(card["max_model_len"], list["data"][0]["max_model_len"]);
  }
  auto r = cli.Get("/v1/models/gpt-4o");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  json err = json::parse(r->body)["error"];
  EXPECT_EQ(err["type"], "NotFoundError");
  EXPECT_EQ(err["param"], "model");
  EXPECT_EQ(err["message"], "The model `gpt-4o` does not exist.");
}

// vLLM streams a chunk for every output that carries tokens, even when their text is held back (here the
// fake engine holds the first 3 tokens' text, as a detokenizer holds part of a UTF-8 character): clients
// time the first token and the gaps between tokens by chunks (vllm bench serve's TTFT / ITL).
TEST(Api, StreamsAChunkPerTokenEvenWhenItsTextIsHeldBack) {
  LiveServer srv;
  auto cli = srv.client();
  const json base = {{"prompt", "QUIET please"}, {"max_tokens", 5}};
  auto whole = post_json(cli, "/v1/completions", base);
  ASSERT_EQ(whole->status, 200);
  json body = base;
  body["stream"] = true;
  auto r = post_json(cli, "/v1/completions", body);
  bool done = false;
  auto chunks = parse_sse(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 5u);
  std::string text;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const std::string t = chunks[i]["choices"][0]["text"];
    if (i < 3) EXPECT_EQ(t, "") << i;
    text += t;
  }
  EXPECT_EQ(text, json::parse(whole->body)["choices"][0]["text"]);

  // Chat: the role chunk, then one chunk per token, content "" for the held ones.
  r = post_json(cli, "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "QUIET please"}}}}, {"max_tokens", 5}, {"stream", true}});
  chunks = parse_sse(r->body, &done);
  ASSERT_EQ(chunks.size(), 6u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(chunks[i]["choices"][0]["delta"]["content"], "") << i;
  EXPECT_NE(chunks[4]["choices"][0]["delta"]["content"], "");
}

// vLLM sends a chat stream's role chunk with the engine's first output, so the time to the first chunk is
// the time to the first token; before, it went out as soon as the stream opened.
TEST(Api, ChatRoleChunkWaitsForTheFirstToken) {
  FakeEngineOptions eo;
  eo.token_delay = 300ms;
  LiveServer srv({}, eo);
  const int fd = raw_connect(srv.port());
  ASSERT_GE(fd, 0);
  const auto t0 = std::chrono::steady_clock::now();
  raw_post(fd, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"stream", true}});
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  const auto first = std::chrono::steady_clock::now() - t0;
  close(fd);
  EXPECT_GE(first, 250ms);
  EXPECT_NE(got.find("\"role\":\"assistant\""), std::string::npos);
}
