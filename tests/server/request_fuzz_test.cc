// Randomized robustness test of request handling: valid bodies for every POST route are mutated
// (request_mutator.h: fields dropped or retyped, edge numbers, long / invalid UTF-8 / lone-surrogate
// strings, deep nesting, duplicate keys, byte damage, wrong headers, methods and paths) from a fixed
// seed, so a failure names an input that reproduces. Every answer must be a 200 or a 4xx with the
// OpenAI error envelope; 200 streams must be well-formed SSE; a held stream and periodic good
// requests must come through unchanged, and the server must stay healthy.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "request_mutator.h"
#include "server/openai_errors.h"
#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using namespace vireo::testing::fuzz;

namespace {

// VIREO_FUZZ_SEED / VIREO_FUZZ_ITERATIONS override these for longer local runs.
constexpr uint64_t kSeed = 20240611;
constexpr int kIterations = 6000;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoull(v) : fallback;
}
constexpr size_t kMaxBody = 256 * 1024;  // small, so that long-string mutations also reach the 413 path

struct Sent {
  std::string method = "POST";
  std::string path;
  std::string content_type = "application/json";
  std::string body;
  httplib::Headers headers;
};

struct Seed {
  std::string path;
  json body;
};

const json kTools = json::array(
    {{{"type", "function"},
      {"function", {{"name", "get_weather"}, {"description", "d"},
                    {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}}});
const json kUser = {{"role", "user"}, {"content", "hi"}};

std::vector<Seed> seeds(const std::string& stored_response_id) {
  const json msgs = json::array(
      {{{"role", "system"}, {"content", "sys"}},
       {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}, {{"type", "input_text"}, {"text", "there"}}}}},
       {{"role", "assistant"}, {"content", nullptr},
        {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                         {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}},
       {{"role", "user"}, {"content", "ok"}}});
  const json chat = {{"model", "fake-model"}, {"messages", msgs}, {"tools", kTools}, {"tool_choice", "auto"},
                     {"max_tokens", 8}, {"temperature", 0.5}, {"n", 2}, {"logprobs", true}, {"top_logprobs", 2},
                     {"stop", "zz"}, {"logit_bias", {{"97", 2}}}, {"seed", 1}, {"parallel_tool_calls", true},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}, {"reasoning_effort", "low"}};
  json chat_stream = chat;
  chat_stream["stream"] = true;
  chat_stream["stream_options"] = {{"include_usage", true}};
  const json flat_tool = {{"type", "function"}, {"name", "get_weather"}, {"description", "d"},
                          {"parameters", kTools[0]["function"]["parameters"]}, {"strict", false}};
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  std::vector<Seed> s = {
      {"/v1/completions",
       {{"model", "fake-model"}, {"prompt", "hello world"}, {"max_tokens", 6}, {"temperature", 0.7}, {"top_p", 0.9},
        {"top_k", 5}, {"min_p", 0.05}, {"n", 2}, {"seed", 7}, {"stop", {"zz", "\n"}}, {"stop_token_ids", {255}},
        {"logit_bias", {{"65", 1.5}, {"66", -100}}}, {"logprobs", 2}, {"presence_penalty", 0.5},
        {"frequency_penalty", -0.5}, {"repetition_penalty", 1.1}, {"user", "u1"}, {"echo", false}, {"ignore_eos", false},
        {"min_tokens", 1}, {"skip_special_tokens", true}, {"include_stop_str_in_output", false}}},
      {"/v1/completions",
       {{"prompt", {104, 105, 33}}, {"max_tokens", 5}, {"stream", true},
        {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}, {"echo", true}, {"logprobs", 1}}},
      {"/v1/completions", {{"prompt", {"ab", "cd"}}, {"max_tokens", 3}, {"n", 2}, {"best_of", 2}, {"prompt_logprobs", 1}}},
      {"/v1/completions", {{"prompt", {{1, 2, 3}, {4, 5}}}, {"max_tokens", 4}, {"response_format", {{"type", "json_object"}}}}},
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}, {"structured_outputs", {{"choice", {"yes", "no"}}}}, {"stream", true}}},
      {"/v1/completions", {{"prompt", "re"}, {"max_tokens", 0}, {"echo", true}, {"guided_regex", "[a-z]+"}}},
      {"/v1/chat/completions", chat},
      {"/v1/chat/completions", chat_stream},
      {"/v1/chat/completions",
       {{"messages", {kUser}},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}},
        {"max_completion_tokens", 10}}},
      {"/v1/chat/completions",
       {{"messages", {kUser}}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
        {"max_tokens", 10}, {"stream", true}}},
      {"/v1/chat/completions", {{"messages", {kUser}}, {"tools", kTools}, {"tool_choice", "required"}, {"max_tokens", 10}}},
      {"/v1/chat/completions",
       {{"messages", {kUser, {{"role", "assistant"}, {"content", "The"}}}}, {"continue_final_message", true},
        {"add_generation_prompt", false}, {"echo", true}, {"max_tokens", 4}, {"prompt_logprobs", 1}}},
      {"/v1/responses",
       {{"model", "fake-model"}, {"input", "hi"}, {"instructions", "be brief"}, {"max_output_tokens", 8},
        {"temperature", 0.5}, {"top_p", 0.9}, {"tools", {flat_tool}}, {"tool_choice", "auto"},
        {"include", {"message.output_text.logprobs"}}, {"top_logprobs", 2}, {"store", false}, {"metadata", {{"k", "v"}}},
        {"reasoning", {{"effort", "low"}}}, {"text", {{"format", {{"type", "text"}}}}}, {"user", "u"}}},
      {"/v1/responses",
       {{"input", {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}},
                   {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{}"}},
                   {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "sunny"}},
                   {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()}}}},
        {"max_output_tokens", 6}, {"stream", true},
        {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", schema}}}}}}},
      {"/v1/responses", {{"input", "next"}, {"previous_response_id", stored_response_id}, {"max_output_tokens", 4}}},
      {"/v1/messages",
       {{"model", "fake-model"}, {"max_tokens", 8}, {"system", {{{"type", "text"}, {"text", "sys"}}}},
        {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}},
                      {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "t"}, {"signature", "s"}},
                                                           {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"},
                                                            {"input", {{"city", "Paris"}}}}}}},
                      {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
                                                      {{"type", "text"}, {"text", "ok"}}}}}}},
        {"tools", {{{"name", "get_weather"}, {"description", "d"}, {"input_schema", kTools[0]["function"]["parameters"]}}}},
        {"tool_choice", {{"type", "auto"}}}, {"stop_sequences", {"zz"}}, {"temperature", 0.5}, {"top_p", 0.9},
        {"top_k", 4}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}, {"metadata", {{"user_id", "u"}}},
        {"stream", true}}},
      {"/v1/messages",
       {{"model", "fake-model"}, {"max_tokens", 6}, {"messages", {kUser}},
        {"tools", {{{"name", "get_weather"}, {"input_schema", kTools[0]["function"]["parameters"]}}}},
        {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}},
        {"output_config", {{"effort", "low"}}}}},
      {"/v1/messages/count_tokens", {{"model", "fake-model"}, {"system", "sys"}, {"messages", {kUser}}}},
      {"/tokenize", {{"model", "fake-model"}, {"prompt", "hello"}, {"add_special_tokens", true}, {"return_token_strs", true}}},
      {"/tokenize",
       {{"messages", {kUser}}, {"add_generation_prompt", true}, {"tools", kTools}, {"chat_template_kwargs", {{"x", 1}}}}},
      {"/detokenize", {{"model", "fake-model"}, {"tokens", {104, 105, 257}}}},
      {"/v1/embeddings", {{"model", "fake-model"}, {"input", "hello"}}},  // no such route: 404
  };
  return s;
}

// Headers, methods and paths a client gets wrong.
void mutate_request(Rng& rng, Sent& s) {
  switch (rng.below(4)) {
    case 0: {
      static const std::vector<std::string> types = {
          "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/json; charset=utf-8",
          "APPLICATION/JSON", "application/json;", "multipart/form-data; boundary=x", "*/*", "application/json, text/plain",
          "application/x-ndjson", " application/json "};
      s.content_type = rng.pick(types);
      break;
    }
    case 1: {
      static const std::vector<std::string> methods = {"GET", "PUT", "DELETE", "PATCH", "OPTIONS"};
      s.method = rng.pick(methods);
      break;
    }
    case 2: {
      static const std::vector<std::string> paths = {
          "/v1/completions/", "/v1//completions", "/V1/completions", "/v1/completions?x=1&y", "/v1/completions%00",
          "/v1/chat/completions/../completions", "/v1/responses/resp_x", "/tokenize/", "/detokenize?tokens=1",
          "/v1/chat/completions?stream=true", "/", "/v1", "/v1/models/fake-model", "/v1/messages/", "/v1/messages/x",
          "/v1/messages/count_tokens"};
      s.path = rng.pick(paths);
      break;
    }
    default: {
      static const std::vector<std::pair<std::string, std::string>> headers = {
          {"Content-Encoding", "gzip"}, {"Content-Encoding", "br"}, {"Content-Encoding", "identity"},
          {"Content-Encoding", "GZIP"}, {"Authorization", "Bearer nope"}, {"Accept", "text/event-stream"},
          {"Accept-Encoding", "gzip"}, {"Origin", "http://evil.example"}};
      s.headers.insert(rng.pick(headers));
      break;
    }
  }
}

httplib::Result send(httplib::Client& cli, const Sent& s) {
  httplib::Request req;
  req.method = s.method;
  req.path = s.path;
  req.headers = s.headers;
  if (s.method != "GET" && s.method != "OPTIONS") {
    req.body = s.body;
    req.set_header("Content-Type", s.content_type);
  }
  return cli.send(req);
}

std::string printable(const std::string& s, size_t limit = 300) {
  std::string cut = s.size() > limit ? s.substr(0, limit) + "...(" + std::to_string(s.size()) + " bytes)" : s;
  return json(cut).dump(-1, ' ', true, json::error_handler_t::replace);
}

// "" when the error body is Anthropic's envelope for this status (the /v1/messages paths), else what is wrong.
std::string check_anthropic_error_body(int status, const httplib::Response& res) {
  json body = json::parse(res.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || body.value("type", "") != "error" || !body.contains("error") ||
      !body["error"].is_object())
    return "error body is not {\"type\": \"error\", \"error\": {...}}";
  const json& e = body["error"];
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty())
    return "error.message is not a non-empty string";
  if (e.value("type", "") != server::anthropic_error_type(status)) return "error.type does not match the status";
  if (res.get_header_value("Content-Type") != "application/json") return "error Content-Type is not application/json";
  return "";
}

// "" when the error body is OpenAI's envelope for this status, else what is wrong.
std::string check_error_body(int status, const httplib::Response& res) {
  json body = json::parse(res.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("error") || !body["error"].is_object())
    return "error body is not {\"error\": {...}}";
  const json& e = body["error"];
  if (!e.contains("message") || !e["message"].is_string() || e["message"].get<std::string>().empty())
    return "error.message is not a non-empty string";
  if (!e.contains("type") || e["type"] != server::error_type_for_status(status)) return "error.type does not match the status";
  if (!e.contains("param") || !(e["param"].is_null() || e["param"].is_string())) return "error.param is not null or a string";
  if (!e.contains("code") || e["code"] != status) return "error.code is not the status";
  if (res.get_header_value("Content-Type") != "application/json") return "error Content-Type is not application/json";
  return "";
}

// chat / completions: "data: {json}" events, then "data: [DONE]"; no error event.
std::string check_sse(const std::string& body) {
  size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) return "an SSE event is not terminated by a blank line";
    std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (done) return "events after [DONE]";
    if (event.rfind("data: ", 0) != 0) return "an SSE event does not start with 'data: '";
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return "an SSE event is not a JSON object";
    if (j.contains("error")) return "the stream carries an error event";
  }
  return done ? "" : "the stream does not end with data: [DONE]";
}

// "event: <type>\ndata: {json}" events (the Responses and Messages APIs): each passed to `fn`, whose
// non-empty answer stops the walk; "" when every event is well formed and `fn` accepted it.
std::string walk_named_events(const std::string& body, const std::function<std::string(const std::string&, const json&)>& fn) {
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) return "an SSE event is not terminated by a blank line";
    std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    size_t nl = event.find('\n');
    if (event.rfind("event: ", 0) != 0 || nl == std::string::npos || event.compare(nl + 1, 6, "data: ") != 0)
      return "an event is not 'event: <type>\\ndata: <json>'";
    json j = json::parse(event.substr(nl + 7), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return "event data is not a JSON object";
    const std::string type = event.substr(7, nl - 7);
    if (j.value("type", "") != type) return "event type and data.type differ";
    if (std::string problem = fn(type, j); !problem.empty()) return problem;
  }
  return "";
}

// /v1/responses: events numbered from 0, ending in response.completed.
std::string check_responses_sse(const std::string& body) {
  int64_t seq = 0;
  std::string last;
  std::string problem = walk_named_events(body, [&](const std::string& type, const json& j) -> std::string {
    last = type;
    return j.value("sequence_number", int64_t{-1}) != seq++ ? "sequence numbers are not 0, 1, 2, ..." : "";
  });
  if (!problem.empty()) return problem;
  return last == "response.completed" ? "" : "the stream does not end with response.completed (last: " + last + ")";
}

// /v1/messages: events from message_start to message_stop.
std::string check_messages_sse(const std::string& body) {
  std::string first, last;
  std::string problem = walk_named_events(body, [&](const std::string& type, const json&) -> std::string {
    if (first.empty()) first = type;
    last = type;
    return "";
  });
  if (!problem.empty()) return problem;
  if (first != "message_start") return "the stream does not start with message_start (first: " + first + ")";
  return last == "message_stop" ? "" : "the stream does not end with message_stop (last: " + last + ")";
}

std::string check_ok_body(const Sent& s, const httplib::Response& res) {
  if (res.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0) {
    if (s.path.rfind("/v1/messages", 0) == 0) return check_messages_sse(res.body);
    return s.path.rfind("/v1/responses", 0) == 0 ? check_responses_sse(res.body) : check_sse(res.body);
  }
  json j = json::parse(res.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "200 body is not a JSON object";
  const std::string path = s.path.substr(0, s.path.find('?'));
  if ((path == "/v1/completions" || path == "/v1/chat/completions") && !(j.contains("choices") && j["choices"].is_array()))
    return "200 body has no choices";
  if (path == "/v1/responses" && j.value("object", "") != "response") return "200 body is not a response object";
  if (path == "/v1/messages" && j.value("type", "") != "message") return "200 body is not a message object";
  if (path == "/v1/messages/count_tokens" && !(j.contains("input_tokens") && j["input_tokens"].is_number_integer()))
    return "200 body has no input_tokens";
  if (path == "/tokenize" && !(j.contains("tokens") && j["tokens"].is_array())) return "200 body has no tokens";
  if (path == "/detokenize" && !(j.contains("prompt") && j["prompt"].is_string())) return "200 body has no prompt";
  return "";
}

// "" when the exchange is acceptable, else the problem.
std::string check(const Sent& s, const httplib::Result& r) {
  if (!r) return "no response: " + httplib::to_string(r.error());
  static const std::set<int> allowed = {200, 400, 404, 405, 413, 415};
  if (!allowed.count(r->status)) return "status " + std::to_string(r->status);
  if (r->status == 200) return check_ok_body(s, *r);
  if (server::is_anthropic_path(s.path.substr(0, s.path.find('?')))) return check_anthropic_error_body(r->status, *r);
  return check_error_body(r->status, *r);
}

std::string describe(const Sent& s, const httplib::Result& r, const std::string& problem) {
  std::string out = s.method + " " + s.path + " [" + s.content_type + "]";
  for (const auto& [k, v] : s.headers) out += " " + k + ": " + v;
  out += " body=" + printable(s.body) + "\n  -> " + problem;
  if (r) out += " (" + std::to_string(r->status) + " " + printable(r->body, 400) + ")";
  return out;
}

// A request whose answer is known exactly: its text proves nothing leaked in from the fuzz.
std::string check_good_completion(httplib::Client& cli) {
  auto r = post_json(cli, "/v1/completions", {{"prompt", "good"}, {"max_tokens", 8}, {"temperature", 0}});
  const std::string want = FakeEngine::expected_text(ByteTokenizer().encode("good", true), 8);
  if (!r || r->status != 200)
    return "good request failed: " + (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j["choices"][0]["text"] != want) return "good request answered " + printable(r->body);
  return "";
}

struct Fuzzer {
  LiveServer& srv;
  std::vector<Seed> seed_list;
  std::vector<std::string> failures;
  std::map<int, int> statuses;

  Sent make(Rng& rng) {
    const Seed& seed = rng.pick(seed_list);
    Sent s;
    s.path = seed.path;
    const int kind = static_cast<int>(rng.below(100));
    if (kind < 75) {
      Mutant m{seed.body, {}};
      for (int k = 0, n = 1 + static_cast<int>(rng.below(3)); k < n; ++k) mutate_tree(rng, m);
      s.body = finish_text(m);
    } else if (kind < 90) {
      s.body = mutate_text(rng, seed.body.dump());
    } else {
      s.body = seed.body.dump();
      mutate_request(rng, s);
    }
    return s;
  }

  void run(const Sent& s, httplib::Client& cli) {
    auto r = send(cli, s);
    std::string problem = check(s, r);
    std::lock_guard<std::mutex> lock(mu);
    statuses[r ? r->status : -1]++;
    if (!problem.empty()) failures.push_back(describe(s, r, problem));
  }
  std::mutex mu;
};

server::ServerOptions fuzz_options() {
  server::ServerOptions opts;
  opts.max_body_bytes = kMaxBody;
  opts.reasoning_parser = "qwen3";  // the parsers' request checks (tool_choice auto) are on the path too
  opts.enable_auto_tool_choice = true;
  opts.tool_call_parser = "hermes";
  return opts;
}

FakeEngineOptions fuzz_engine() {
  FakeEngineOptions e;
  e.token_delay = std::chrono::milliseconds(0);
  return e;
}

// A response stored up front, so previous_response_id mutations start from one that exists.
std::string store_one(httplib::Client& cli) {
  auto r = post_json(cli, "/v1/responses", {{"input", "remember"}, {"max_output_tokens", 3}});
  EXPECT_TRUE(r && r->status == 200);
  return r ? json::parse(r->body).value("id", "") : "";
}

void report(const std::vector<std::string>& failures) {
  std::string all;
  for (size_t i = 0; i < failures.size() && i < 25; ++i) all += failures[i] + "\n";
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, the first ones:\n" << all;
}

}  // namespace

TEST(RequestFuzz, EveryUnmutatedSeedSucceeds) {
  LiveServer srv(fuzz_options(), fuzz_engine());
  auto cli = srv.client();
  Fuzzer f{srv, seeds(store_one(cli)), {}, {}, {}};
  for (const auto& seed : f.seed_list) {
    SCOPED_TRACE(seed.path + " " + seed.body.dump());
    Sent s;
    s.path = seed.path;
    s.body = seed.body.dump();
    auto r = send(cli, s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, seed.path == "/v1/embeddings" ? 404 : 200) << r->body;
    EXPECT_EQ(check(s, r), "");
  }
}

TEST(RequestFuzz, MutatedRequestsGetA200OrAnOpenAIErrorAndDisturbNothing) {
  const auto start = std::chrono::steady_clock::now();
  LiveServer srv(fuzz_options(), fuzz_engine());
  auto cli = srv.client();
  Fuzzer f{srv, seeds(store_one(cli)), {}, {}, {}};

  // A stream started first and held (after 10 tokens) until the fuzzing is done: its text must come
  // out exactly as the engine produced it.
  srv.engine().set_hold(true);
  auto held = std::async(std::launch::async, [&] {
    auto c = srv.client();
    c.set_read_timeout(600, 0);  // silent while held, however long the fuzzing takes
    auto r = post_json(c, "/v1/completions", {{"prompt", "HOLD me"}, {"max_tokens", 100}, {"temperature", 0}, {"stream", true}});
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, std::string());
  });
  while (srv.engine().num_generated() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const uint64_t seed = env_or("VIREO_FUZZ_SEED", kSeed);
  const int iterations = static_cast<int>(env_or("VIREO_FUZZ_ITERATIONS", kIterations));
  // Two clients at once, each with its own generator (seed, seed + 1): the inputs are fixed, only
  // their interleaving varies, and requests in flight together must not disturb each other.
  auto fuzz = [&](uint64_t rng_seed, int count) {
    httplib::Client c("127.0.0.1", srv.port());
    c.set_read_timeout(10, 0);  // a hang is a failure, not a stuck test
    Rng rng(rng_seed);
    for (int i = 0; i < count; ++i) {
      Sent s = f.make(rng);
      f.run(s, c);
      if (i % 100 == 0)
        if (std::string problem = check_good_completion(c); !problem.empty()) {
          std::lock_guard<std::mutex> lock(f.mu);
          f.failures.push_back(problem);
        }
    }
  };
  std::thread second(fuzz, seed + 1, iterations / 2);
  fuzz(seed, iterations - iterations / 2);
  second.join();
  srv.engine().set_hold(false);

  auto [status, body] = held.get();
  EXPECT_EQ(status, 200);
  std::string text;
  bool done = false;
  for (const auto& c : parse_sse(body, &done))
    if (!c["choices"].empty()) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  EXPECT_EQ(text, FakeEngine::expected_text(ByteTokenizer().encode("HOLD me", true), 100));

  // Still healthy: /health, a good request, and no engine request left behind.
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(check_good_completion(cli), "");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((srv.engine().num_running() > 0 || srv.server().context().num_in_flight() > 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(srv.engine().num_running(), 0);
  EXPECT_EQ(srv.server().context().num_in_flight(), 0u);

  std::string summary;
  for (const auto& [st, n] : f.statuses) summary += " " + std::to_string(st) + ":" + std::to_string(n);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[fuzz] seed %llu: %d mutated requests in %.1f s; statuses:%s\n", static_cast<unsigned long long>(seed),
              iterations, secs, summary.c_str());
  // The mix must reach past validation, or the test proves little.
  EXPECT_GE(f.statuses[200], iterations / 10) << summary;
  EXPECT_GE(f.statuses[400], iterations / 3) << summary;
  report(f.failures);
}

// Inputs the fuzzing found, as fixed cases: the 20,000-deep schema text and the 100,000-deep regex
// each crashed the server (stack overflow) before their fixes; the others pin the limits' edges.
TEST(RequestFuzz, FoundCases) {
  LiveServer srv(fuzz_options(), fuzz_engine());
  auto cli = srv.client();
  auto deep_schema = [](size_t depth) {  // {"items": {"items": ... {} ...}} as JSON text
    std::string s;
    for (size_t i = 0; i < depth; ++i) s += "{\"items\":";
    return s + "{}" + std::string(depth, '}');
  };
  const std::string deep_regex = std::string(100000, '(') + "a" + std::string(100000, ')');
  struct Case {
    std::string path;
    json body;
    std::string param;
  };
  const json msgs = json::array({kUser});
  const std::vector<Case> cases = {
      // A schema given as JSON text is parsed after the body's depth check; the schema compiler
      // recursed once per level (structured_output_params.cc now checks the parsed schema's depth).
      {"/v1/completions", {{"prompt", "a"}, {"guided_json", deep_schema(20000)}}, "guided_json"},
      {"/v1/completions", {{"prompt", "a"}, {"structured_outputs", {{"json", deep_schema(20000)}}}}, "structured_outputs"},
      {"/v1/chat/completions",
       {{"messages", msgs}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", deep_schema(20000)}}}}}},
       "response_format"},
      {"/v1/completions", {{"prompt", "a"}, {"guided_json", deep_schema(129)}}, "guided_json"},  // just past the limit
      // The regex parser recursed once per group (regex_compiler.cc now caps nesting at 250).
      {"/v1/completions", {{"prompt", "a"}, {"guided_regex", deep_regex}}, "guided_regex"},
      {"/v1/completions", {{"prompt", "a"}, {"structured_outputs", {{"regex", deep_regex}}}}, "structured_outputs"},
      {"/v1/chat/completions", {{"messages", msgs}, {"guided_json", {{"type", "string"}, {"pattern", deep_regex}}}}, "guided_json"},
      {"/v1/responses",
       {{"input", "a"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "x"},
                                              {"schema", {{"type", "string"}, {"pattern", deep_regex}}}}}}}},
       "text"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path + " " + printable(c.body.dump(), 200));
    auto r = post_json(cli, c.path, c.body);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 400) << printable(r->body);
    EXPECT_EQ(check_error_body(400, *r), "");
    EXPECT_EQ(json::parse(r->body)["error"]["param"], c.param);
  }
  // What stays valid: nesting up to the limits.
  auto ok = post_json(cli, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}, {"guided_json", deep_schema(120)}});
  EXPECT_EQ(ok->status, 200) << ok->body;
  ok = post_json(cli, "/v1/completions",
                 {{"prompt", "a"}, {"max_tokens", 2}, {"guided_regex", std::string(250, '(') + "a" + std::string(250, ')')}});
  EXPECT_EQ(ok->status, 200) << printable(ok->body);
  EXPECT_EQ(check_good_completion(cli), "");
}
