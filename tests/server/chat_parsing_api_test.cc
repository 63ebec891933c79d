// /v1/chat/completions with --reasoning-parser / --enable-auto-tool-choice --tool-call-parser,
// through the live server and the fake engine's scripted outputs (one byte per token, so every
// tag is split across many deltas).
#include <gtest/gtest.h>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

namespace {

const std::string kThink = "<think>Two and two.</think>\n\nThe answer is 4.";
const std::string kWeatherCall = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
const std::string kTools = "<think>Need the weather.</think>\n\n<tool_call>\n" + kWeatherCall +
                           "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
const std::string kBroken = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {oops}\n</tool_call>";

const std::string kCoder = "<think>Weather.</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                           "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
const std::string kRequired = R"([{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}])";
const std::string kNamed = R"({"city": "Paris"})";

FakeEngineOptions scripted() {
  FakeEngineOptions e;
  e.token_delay = std::chrono::milliseconds(0);
  e.scripts = {{"THINK", kThink}, {"WEATHER", kTools}, {"BROKEN", kBroken}, {"REQUIRED", kRequired}, {"NAMED", kNamed},
               {"CODER", kCoder}};
  return e;
}

server::ServerOptions with_parsers(bool tools = true) {
  server::ServerOptions o;
  o.reasoning_parser = "qwen3";
  if (tools) {
    o.enable_auto_tool_choice = true;
    o.tool_call_parser = "hermes";
  }
  return o;
}

const json kToolDefs = json::array({{{"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});

json chat(const std::string& user, json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", 200}};
  body.update(extra);
  return body;
}

// A stream's deltas folded together, per choice.
struct Streamed {
  std::string reasoning, reasoning_alias, content, finish;
  json calls = json::array();
  int num_chunks = 0;
};

std::vector<Streamed> run_stream(httplib::Client& cli, json body, int n = 1) {
  body["stream"] = true;
  auto r = post_json(cli, "/v1/chat/completions", body);
  EXPECT_EQ(r->status, 200) << r->body;
  bool done = false;
  auto chunks = parse_sse(r->body, &done);
  EXPECT_TRUE(done);
  std::vector<Streamed> out(n);
  for (const auto& c : chunks) {
    for (const auto& ch : c["choices"]) {
      Streamed& s = out[ch["index"].get<int>()];
      const json& d = ch["delta"];
      ++s.num_chunks;
      if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("reasoning")) s.reasoning_alias += d["reasoning"].get<std::string>();
      if (d.contains("content")) s.content += d["content"].get<std::string>();
      for (const auto& call : d.value("tool_calls", json::array())) s.calls.push_back(call);
      if (!ch["finish_reason"].is_null()) s.finish = ch["finish_reason"];
      for (const char* key : {"reasoning_content", "content"}) {
        std::string text = d.value(key, "");
        EXPECT_EQ(text.find("think>"), std::string::npos) << text;
      }
    }
  }
  return out;
}

}  // namespace

TEST(ChatParsing, ReasoningSplitNonStreamingAndStreaming) {
  LiveServer srv(with_parsers(false), scripted());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", chat("THINK"));
  ASSERT_EQ(r->status, 200) << r->body;
  json m = json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "Two and two.");
  EXPECT_EQ(m["reasoning"], "Two and two.");
  EXPECT_EQ(m["content"], "\n\nThe answer is 4.");
  EXPECT_FALSE(m.contains("tool_calls"));  // no calls: no key (OpenAI, vLLM)
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop");

  auto s = run_stream(cli, chat("THINK"))[0];
  EXPECT_EQ(s.reasoning, "Two and two.");
  EXPECT_EQ(s.reasoning_alias, "Two and two.");
  EXPECT_EQ(s.content, "\n\nThe answer is 4.");
  EXPECT_EQ(s.finish, "stop");

  // Plain output (no <think>) is all content; a reasoning parser alone leaves tools unparsed.
  r = post_json(cli, "/v1/chat/completions", chat("hello", {{"max_tokens", 3}}));
  m = json::parse(r->body)["choices"][0]["message"];
  EXPECT_TRUE(m["reasoning_content"].is_null());
  EXPECT_EQ(m["content"].get<std::string>().size(), 3u);
}

TEST(ChatParsing, ToolCallsNonStreaming) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", chat("WEATHER", {{"tools", kToolDefs}}));
  ASSERT_EQ(r->status, 200) << r->body;
  json ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  EXPECT_EQ(ch["message"]["reasoning_content"], "Need the weather.");
  EXPECT_TRUE(ch["message"]["content"].is_null());  // only newlines around the blocks
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 2u);
  json call = ch["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(ch["message"]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_NE(ch["message"]["tool_calls"][1]["id"], call["id"]);
}

// --tool-call-parser qwen3_coder (Qwen3.5 / 3.6): the request's tool schemas reach the parser, which types
// each parameter by them (days: integer), whole and streamed.
TEST(ChatParsing, Qwen3CoderCallsTypedByTheRequestsSchema) {
  server::ServerOptions o = with_parsers();
  o.tool_call_parser = "qwen3_coder";
  LiveServer srv(o, scripted());
  auto cli = srv.client();
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"},
                                                 {"parameters", {{"type", "object"},
                                                                 {"properties", {{"city", {{"type", "string"}}},
                                                                                 {"days", {{"type", "integer"}}}}}}}}}}});
  auto r = post_json(cli, "/v1/chat/completions", chat("CODER", {{"tools", tools}}));
  ASSERT_EQ(r->status, 200) << r->body;
  json ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  EXPECT_EQ(ch["message"]["reasoning_content"], "Weather.");
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r->body;
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}, {"days", 3}}));
  auto s = run_stream(cli, chat("CODER", {{"tools", tools}}));
  EXPECT_EQ(s[0].finish, "tool_calls");
  ASSERT_EQ(s[0].calls.size(), 1u);
  EXPECT_EQ(json::parse(s[0].calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}, {"days", 3}}));
}

TEST(ChatParsing, ToolCallsStreamOneDeltaPerCall) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  auto streams = run_stream(cli, chat("WEATHER", {{"tools", kToolDefs}, {"n", 2}}), 2);
  for (const auto& s : streams) {
    EXPECT_EQ(s.finish, "tool_calls");
    EXPECT_EQ(s.reasoning, "Need the weather.");
    EXPECT_EQ(s.content, "\n\n\n");
    ASSERT_EQ(s.calls.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(s.calls[i]["index"], i);
      EXPECT_EQ(s.calls[i]["type"], "function");
      EXPECT_EQ(s.calls[i]["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
    }
    EXPECT_EQ(s.calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(s.calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
    EXPECT_EQ(s.calls[1]["function"]["arguments"], "{}");
  }
}

TEST(ChatParsing, MalformedToolJsonFallsBackToContent) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", chat("BROKEN", {{"tools", kToolDefs}}));
  ASSERT_EQ(r->status, 200) << r->body;
  json ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["message"]["content"], kBroken);
  EXPECT_FALSE(ch["message"].contains("tool_calls"));
  EXPECT_EQ(ch["finish_reason"], "stop");
  auto s = run_stream(cli, chat("BROKEN", {{"tools", kToolDefs}}))[0];
  EXPECT_EQ(s.content, kBroken);
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.finish, "stop");
}

TEST(ChatParsing, ToolChoiceNoneOrNoToolsLeavesTheTextAlone) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  std::string content = kTools.substr(kTools.find("</think>") + 8);
  for (json extra : {json{{"tools", kToolDefs}, {"tool_choice", "none"}}, json::object()}) {
    auto r = post_json(cli, "/v1/chat/completions", chat("WEATHER", extra));
    ASSERT_EQ(r->status, 200) << r->body;
    json ch = json::parse(r->body)["choices"][0];
    EXPECT_EQ(ch["message"]["content"], content);
    EXPECT_FALSE(ch["message"].contains("tool_calls"));
    EXPECT_EQ(ch["finish_reason"], "stop");
  }
}

TEST(ChatParsing, ToolChoiceErrors) {
  LiveServer plain({}, scripted());
  auto cli = plain.client();
  auto expect_400 = [&](httplib::Client& c, json body, const std::string& words) {
    auto r = post_json(c, "/v1/chat/completions", body);
    ASSERT_EQ(r->status, 400) << body.dump();
    json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["type"], "BadRequestError");
    EXPECT_EQ(e["param"], "tool_choice");
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << e["message"];
  };
  // Without --enable-auto-tool-choice: tools (tool_choice defaults to "auto") are refused, as vLLM.
  expect_400(cli, chat("x", {{"tools", kToolDefs}}), "--enable-auto-tool-choice and --tool-call-parser");
  expect_400(cli, chat("x", {{"tools", kToolDefs}, {"tool_choice", "auto"}}), "--enable-auto-tool-choice");
  auto ok = post_json(cli, "/v1/chat/completions", chat("x", {{"tools", kToolDefs}, {"tool_choice", "none"}, {"max_tokens", 2}}));
  EXPECT_EQ(ok->status, 200) << ok->body;
  LiveServer srv(with_parsers(), scripted());
  auto c2 = srv.client();
  expect_400(c2, chat("x", {{"tools", kToolDefs}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}),
             "has not been passed");
  expect_400(c2, chat("x", {{"tools", kToolDefs}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}),
             "cannot be combined");
  expect_400(c2, chat("x", {{"tools", kToolDefs}, {"tool_choice", 1}}), "Invalid value");
  expect_400(c2, chat("x", {{"tool_choice", "auto"}}), "`tools` must be set");
  EXPECT_EQ(srv.engine().num_added(), 0u);  // refused before any engine work
}

// parallel_tool_calls is accepted and does not limit the calls (vLLM); OpenAI's legacy functions /
// function_call are refused rather than silently dropped (vLLM drops them with a warning).
TEST(ChatParsing, ParallelToolCallsAcceptedLegacyFunctionsRefused) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", chat("WEATHER", {{"tools", kToolDefs}, {"parallel_tool_calls", false}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["tool_calls"].size(), 2u);
  for (json extra : {json{{"functions", json::array()}}, json{{"function_call", "none"}}, json{{"function_call", "auto"}}}) {
    extra["max_tokens"] = 1;
    r = post_json(cli, "/v1/chat/completions", chat("x", extra));
    EXPECT_EQ(r->status, 200) << extra << r->body;
  }
  json fn = json::array({{{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}});
  for (auto [key, value] : {std::pair<std::string, json>{"functions", fn}, {"function_call", {{"name", "get_weather"}}},
                            {"parallel_tool_calls", "yes"}}) {
    r = post_json(cli, "/v1/chat/completions", chat("x", {{key, value}}));
    EXPECT_EQ(r->status, 400) << key;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], key) << r->body;
  }
}

TEST(ChatParsing, CompletionsAreNotParsed) {
  LiveServer srv(with_parsers(), scripted());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", "WEATHER"}, {"max_tokens", 200}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], kTools);
}

// tool_choice "required" / named: the (grammar-constrained) output is read as JSON, as vLLM does;
// here the fake engine plays the constrained model's output.
TEST(ChatParsing, RequiredAndNamedToolChoice) {
  LiveServer srv(with_parsers(false), scripted());
  auto cli = srv.client();
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"},
                                      {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}},
                                  {{"type", "function"}, {"function", {{"name", "get_time"}}}}});
  const json named_choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  auto r = post_json(cli, "/v1/chat/completions", chat("REQUIRED", {{"tools", tools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r->status, 200) << r->body;
  json ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(ch["message"]["tool_calls"][1]["function"]["arguments"], "{}");
  r = post_json(cli, "/v1/chat/completions", chat("NAMED", {{"tools", tools}, {"tool_choice", named_choice}}));
  ASSERT_EQ(r->status, 200) << r->body;
  ch = json::parse(r->body)["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "stop");
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["arguments"], kNamed);
  EXPECT_TRUE(ch["message"]["content"].is_null());

  auto s = run_stream(cli, chat("REQUIRED", {{"tools", tools}, {"tool_choice", "required"}}));
  EXPECT_EQ(s[0].finish, "tool_calls");
  ASSERT_EQ(s[0].calls.size(), 2u);
  EXPECT_EQ(s[0].calls[1]["index"], 1);
  EXPECT_EQ(s[0].calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(s[0].content, "");
  s = run_stream(cli, chat("NAMED", {{"tools", tools}, {"tool_choice", named_choice}}));
  EXPECT_EQ(s[0].finish, "stop");
  ASSERT_EQ(s[0].calls.size(), 1u);
  EXPECT_EQ(s[0].calls[0]["function"]["arguments"], kNamed);
}
