// /v1/messages (Anthropic's Messages API): the body -> chat body translation and its refusals, and the
// message object, stream events and error envelope through the live server with the fake engine
// (scripted outputs for thinking and tool use, one byte per token).
#include <gtest/gtest.h>

#include "server/messages_request.h"
#include "server/openai_errors.h"
#include "chat_scripts.h"
#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;
using server::Json;

namespace {

std::string refusal_param(const Json& body) {
  return refusal_param_of([](const Json& b) { return server::messages_to_chat_body(b); }, body);
}


const json kWeatherTool = {{"name", "get_weather"}, {"description", "Weather"},
                           {"input_schema", {{"properties", {{"city", {{"type", "string"}}}}}}}};

json message_body(json messages, int max_tokens = 8) {
  return {{"model", "fake-model"}, {"max_tokens", max_tokens}, {"messages", std::move(messages)}};
}

std::vector<NamedEvent> stream(httplib::Client& cli, json body) {
  body["stream"] = true;
  auto r = post_json(cli, "/v1/messages", body);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos);
  return parse_named_events(r->body);
}

// The message a stream's events build, as the Anthropic SDKs accumulate it.
json accumulate(const std::vector<NamedEvent>& events) {
  json msg;
  std::string partial_json;
  for (const auto& e : events) {
    if (e.name == "message_start") msg = e.data["message"];
    if (e.name == "content_block_start") {
      EXPECT_EQ(e.data["index"], msg["content"].size());
      msg["content"].push_back(e.data["content_block"]);
    }
    if (e.name == "content_block_delta") {
      json& block = msg["content"][e.data["index"].get<size_t>()];
      const json& d = e.data["delta"];
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "thinking_delta")
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "signature_delta") block["signature"] = d["signature"];
      if (d["type"] == "input_json_delta") partial_json += d["partial_json"].get<std::string>();
    }
    if (e.name == "content_block_stop" && !partial_json.empty()) {
      msg["content"][e.data["index"].get<size_t>()]["input"] = json::parse(partial_json);
      partial_json.clear();
    }
    if (e.name == "message_delta") {
      msg["stop_reason"] = e.data["delta"]["stop_reason"];
      msg["stop_sequence"] = e.data["delta"]["stop_sequence"];
      msg["usage"] = e.data["usage"];
    }
  }
  return msg;
}

// Content blocks without the per-response ids and signatures.
json strip_ids(json content) {
  for (auto& b : content) {
    b.erase("id");
    b.erase("signature");
  }
  return content;
}

}  // namespace

TEST(MessagesRequest, ContentBlocksBecomeChatMessages) {
  const json system = json::array({{{"type", "text"}, {"text", "x-anthropic-billing-header: cch=1;"}},
                                   {{"type", "text"}, {"text", "You are terse."}},
                                   {{"type", "text"}, {"text", " Answer in French."}}});
  const json messages = json::array({
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Weather?"}}, {{"type", "text"}, {"text", "In Paris."}}}}},
      {{"role", "assistant"},
       {"content", {{{"type", "thinking"}, {"thinking", "Call it."}, {"signature", "s"}},
                    {{"type", "text"}, {"text", "Checking."}},
                    {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
                    {{"type", "text"}, {"text", "Thanks."}}}}},
      {{"role", "assistant"}, {"content", {{{"type", "redacted_thinking"}, {"data", "opaque"}}}}},
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_2"},
                     {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}},
  });
  Json chat = server::messages_to_chat_body({{"model", "m"}, {"max_tokens", 7}, {"system", system}, {"messages", messages},
                                             {"stop_sequences", {"END"}}, {"temperature", 0.5}, {"top_k", 4}});
  const json want = json::array({
      {{"role", "system"}, {"content", "You are terse. Answer in French."}},  // vLLM joins system blocks as they are
      {{"role", "user"}, {"content", "Weather?\nIn Paris."}},
      {{"role", "assistant"}, {"content", "Checking."}, {"reasoning", "Call it."},
       {"tool_calls", {{{"id", "toolu_1"}, {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "sunny"}},
      {{"role", "user"}, {"content", "Thanks."}},
      {{"role", "assistant"}, {"content", ""}},
      {{"role", "tool"}, {"tool_call_id", "toolu_2"}, {"content", "a\nb"}},
  });
  EXPECT_EQ(json::parse(chat["messages"].dump()), want);
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  EXPECT_EQ(chat["stop"], json({"END"}));
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_k"], 4);
  EXPECT_FALSE(chat.contains("tools"));

  // Images become image_url parts (only vision models take them); system messages in the list join the system prompt.
  chat = server::messages_to_chat_body(message_body(json::array({
      {{"role", "system"}, {"content", "Sys."}},
      {{"role", "user"}, {"content", {{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}},
                                      {{"type", "text"}, {"text", "What is it?"}}}}}})));
  EXPECT_EQ(json::parse(chat["messages"].dump()),
            json::parse(R"([{"role": "system", "content": "Sys."}, {"role": "user", "content": [
              {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, {"type": "text", "text": "What is it?"}]}])"));
}

TEST(MessagesRequest, FinalAssistantTextIsAPrefill) {
  Json chat = server::messages_to_chat_body(message_body(json::array(
      {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "The answer is"}}}}}})));
  EXPECT_EQ(chat["continue_final_message"], true);
  EXPECT_EQ(chat["add_generation_prompt"], false);
  chat = server::messages_to_chat_body(message_body(json::array(
      {{{"role", "user"}, {"content", "hi"}},
       {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", json::object()}}}}}})));
  EXPECT_FALSE(chat.contains("continue_final_message"));
  chat = server::messages_to_chat_body(message_body(json::array({{{"role", "user"}, {"content", "hi"}}})));
  EXPECT_FALSE(chat.contains("continue_final_message"));

  // The prompt ends inside the assistant's text; the response holds only what follows it.
  LiveServer srv;
  auto cli = srv.client();
  json count = {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "The answer is"}}}}};
  auto r = post_json(cli, "/v1/messages/count_tokens", count);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["input_tokens"], std::string("<user>hi\n<assistant>The answer is").size());
  count["max_tokens"] = 4;
  json m = json::parse(post_json(cli, "/v1/messages", count)->body);
  EXPECT_EQ(m["content"][0]["text"].get<std::string>().size(), 4u);
}

TEST(MessagesRequest, ToolsToolChoiceThinkingAndOutputConfig) {
  json body = message_body(json::array({{{"role", "user"}, {"content", "Hi"}}}));
  body["tools"] = json::array({kWeatherTool});
  Json chat = server::messages_to_chat_body(body);
  EXPECT_EQ(chat["tool_choice"], "auto");  // Anthropic's default when tools are given
  EXPECT_EQ(json::parse(chat["tools"].dump()),
            json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                          "parameters": {"properties": {"city": {"type": "string"}}, "type": "object"}}}])"));
  body["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(server::messages_to_chat_body(body)["tool_choice"], "required");
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_EQ(server::messages_to_chat_body(body)["tool_choice"], "none");
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}};
  chat = server::messages_to_chat_body(body);
  EXPECT_EQ(json::parse(chat["tool_choice"].dump()), json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(chat["parallel_tool_calls"], false);

  body = message_body(json::array({{{"role", "user"}, {"content", "Hi"}}}));
  body["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(server::messages_to_chat_body(body)["chat_template_kwargs"]["enable_thinking"], false);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  EXPECT_EQ(server::messages_to_chat_body(body)["chat_template_kwargs"]["enable_thinking"], true);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};  // the explicit kwarg wins
  EXPECT_EQ(server::messages_to_chat_body(body)["chat_template_kwargs"]["enable_thinking"], false);

  body = message_body(json::array({{{"role", "user"}, {"content", "Hi"}}}));
  body["output_config"] = {{"format", {{"type", "json_schema"}, {"schema", {{"type", "object"}}}}}, {"effort", "low"}};
  chat = server::messages_to_chat_body(body);
  EXPECT_EQ(chat["response_format"]["type"], "json_schema");
  EXPECT_EQ(chat["response_format"]["json_schema"]["schema"], Json({{"type", "object"}}));

  // count_tokens' form: no max_tokens, sampling fields ignored.
  chat = server::messages_to_chat_body({{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"temperature", 9}},
                                       /*count_tokens=*/true);
  EXPECT_FALSE(chat.contains("max_completion_tokens"));
  EXPECT_FALSE(chat.contains("temperature"));
}

TEST(MessagesRequest, Refusals) {
  const json hi = json::array({{{"role", "user"}, {"content", "Hi"}}});
  auto with = [&](const char* key, json value) {
    json b = message_body(hi);
    b[key] = std::move(value);
    return b;
  };
  EXPECT_EQ(refusal_param(message_body(hi)), "");
  EXPECT_EQ(refusal_param({{"model", "m"}, {"messages", hi}}), "max_tokens");
  EXPECT_EQ(refusal_param(with("max_tokens", 0)), "max_tokens");
  EXPECT_EQ(refusal_param(with("max_tokens", "8")), "max_tokens");
  EXPECT_EQ(refusal_param({{"max_tokens", 8}, {"messages", hi}}), "model");
  EXPECT_EQ(refusal_param(message_body(json::array())), "messages");
  EXPECT_EQ(refusal_param(message_body("Hi")), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "tool"}, {"content", "x"}}})), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}}})), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}, {"content", {{{"type", "document"}}}}}})), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}, {"content", {{{"type", "text"}}}}}})), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}, {"content", {{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}}}}}})),
            "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}, {"content", {{{"type", "tool_result"}}}}}})), "messages");
  EXPECT_EQ(refusal_param(message_body({{{"role", "user"}, {"content", {{{"type", "image"}, {"source", {{"type", "file"}}}}}}}})),
            "messages");
  EXPECT_EQ(refusal_param(with("system", 5)), "system");
  EXPECT_EQ(refusal_param(with("system", json::array({{{"type", "image"}}}))), "system");
  EXPECT_EQ(refusal_param(with("stop_sequences", "END")), "stop_sequences");
  EXPECT_EQ(refusal_param(with("stop_sequences", json::array({1}))), "stop_sequences");
  EXPECT_EQ(refusal_param(with("tools", json::array({{{"name", "f"}}}))), "tools");
  EXPECT_EQ(refusal_param(with("tools", json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}}))), "tools");
  EXPECT_EQ(refusal_param(with("tool_choice", "auto")), "tool_choice");
  EXPECT_EQ(refusal_param(with("tool_choice", {{"type", "tool"}})), "tool_choice");
  EXPECT_EQ(refusal_param(with("tool_choice", {{"type", "some"}})), "tool_choice");
  EXPECT_EQ(refusal_param(with("thinking", {{"type", "on"}})), "thinking");
  EXPECT_EQ(refusal_param(with("output_config", {{"format", {{"type", "json_object"}}}})), "output_config");
  EXPECT_EQ(refusal_param(with("metadata", "x")), "metadata");
}

TEST(MessagesApi, PlainMessageShapeUsageAndErrors) {
  LiveServer srv(server::ServerOptions{}, scripted_engine({{"STOPPING", "abc.def"}}));
  auto cli = srv.client();
  json body = message_body({{{"role", "user"}, {"content", "Hello"}}}, 6);
  body["system"] = "Hi.";
  auto r = post_json(cli, "/v1/messages", body);
  ASSERT_EQ(r->status, 200) << r->body;
  json m = json::parse(r->body);
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "fake-model");
  EXPECT_EQ(m["stop_reason"], "max_tokens");  // the fake engine never stops before max_tokens
  EXPECT_EQ(m["stop_sequence"], nullptr);
  ASSERT_EQ(m["content"].size(), 1u);
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["content"][0]["text"].get<std::string>().size(), 6u);
  // "<system>Hi.\n<user>Hello\n<assistant>": one token per byte.
  EXPECT_EQ(m["usage"], json({{"input_tokens", 12 + 12 + 11}, {"output_tokens", 6}}));
  json count = body;
  count.erase("max_tokens");
  r = post_json(cli, "/v1/messages/count_tokens", count);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["input_tokens"], 35);

  // A stop sequence: stop_reason stop_sequence, the sequence named, left out of the text.
  body = message_body({{{"role", "user"}, {"content", "STOPPING"}}}, 20);
  body["stop_sequences"] = {"."};
  m = json::parse(post_json(cli, "/v1/messages", body)->body);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], ".");
  EXPECT_EQ(m["content"][0]["text"], "abc");
  body.erase("stop_sequences");
  EXPECT_EQ(json::parse(post_json(cli, "/v1/messages", body)->body)["stop_reason"], "end_turn");

  // Anthropic's error envelope, here and on the pre-routing paths (415, 404 model, 413).
  auto error_of = [](const httplib::Result& res) { return json::parse(res->body); };
  r = post_json(cli, "/v1/messages", {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r), json({{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "max_tokens: Field required"}}}}));
  r = post_json(cli, "/v1/messages", message_body({{{"role", "user"}, {"content", "x"}}}, 100000));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(error_of(r)["error"]["type"], "invalid_request_error");
  json other = message_body({{{"role", "user"}, {"content", "x"}}});
  other["model"] = "claude-sonnet-4-5";
  r = post_json(cli, "/v1/messages", other);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(error_of(r)["error"]["type"], "not_found_error");
  r = cli.Post("/v1/messages", "{}", "text/plain");
  EXPECT_EQ(r->status, 415);
  EXPECT_EQ(error_of(r)["type"], "error");
  r = cli.Get("/v1/messages");
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(error_of(r)["error"]["type"], "invalid_request_error");
  // The OpenAI endpoints keep OpenAI's envelope.
  r = post_json(cli, "/v1/chat/completions", {{"messages", "x"}});
  EXPECT_EQ(error_of(r)["error"]["type"], "BadRequestError");
}

TEST(MessagesApi, StreamEventsBuildThePlainMessage) {
  LiveServer srv;
  auto cli = srv.client();
  json body = message_body({{{"role", "user"}, {"content", "Hello"}}}, 5);
  body["temperature"] = 0;
  json plain = json::parse(post_json(cli, "/v1/messages", body)->body);
  auto events = stream(cli, body);
  std::vector<std::string> names;
  for (const auto& e : events)
    if (names.empty() || names.back() != e.name) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}));
  const json& start = events[0].data["message"];
  EXPECT_EQ(start["content"], json::array());
  EXPECT_EQ(start["stop_reason"], nullptr);
  EXPECT_EQ(start["usage"]["input_tokens"], plain["usage"]["input_tokens"]);
  json built = accumulate(events);
  EXPECT_EQ(built["content"], plain["content"]);
  EXPECT_EQ(built["stop_reason"], "max_tokens");
  EXPECT_EQ(built["usage"]["output_tokens"], 5);

  // An engine error mid-stream ends the stream with Anthropic's error event.
  events = stream(cli, message_body({{{"role", "user"}, {"content", "FAIL"}}}, 5));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "error");
  EXPECT_EQ(events.back().data["error"]["type"], "api_error");
}

TEST(MessagesApi, ThinkingAndToolUseBlocks) {
  LiveServer srv(with_chat_parsers(), scripted_engine({{"STOPPING", "abc.def"}}));
  auto cli = srv.client();
  json m = json::parse(post_json(cli, "/v1/messages", message_body({{{"role", "user"}, {"content", "THINK"}}}, 100))->body);
  ASSERT_EQ(m["content"].size(), 2u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Two and two.");
  EXPECT_TRUE(m["content"][0]["signature"].is_string());
  EXPECT_EQ(m["content"][1], json({{"type", "text"}, {"text", "\n\nThe answer is 4."}}));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  json built = accumulate(stream(cli, message_body({{{"role", "user"}, {"content", "THINK"}}}, 100)));
  EXPECT_EQ(strip_ids(built["content"]), strip_ids(m["content"]));

  json body = message_body({{{"role", "user"}, {"content", "WEATHER"}}}, 200);
  body["tools"] = json::array({kWeatherTool});
  m = json::parse(post_json(cli, "/v1/messages", body)->body);
  ASSERT_EQ(m["content"].size(), 3u) << m.dump();  // thinking, two calls; the blank text between is dropped
  EXPECT_EQ(m["stop_reason"], "tool_use");
  json use = m["content"][1];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(m["content"][2]["input"], json::object());
  auto events = stream(cli, body);
  built = accumulate(events);
  EXPECT_EQ(strip_ids(built["content"]), strip_ids(m["content"]));
  EXPECT_EQ(built["stop_reason"], "tool_use");

  // tool_choice any works without the parser flags (structured outputs); the result goes back as a
  // tool_result block.
  LiveServer plain_srv(server::ServerOptions{}, scripted_engine({{"STOPPING", "abc.def"}}));
  auto cli2 = plain_srv.client();
  body = message_body({{{"role", "user"}, {"content", "REQUIRED"}}}, 200);
  body["tools"] = json::array({kWeatherTool});
  body["tool_choice"] = {{"type", "any"}};
  m = json::parse(post_json(cli2, "/v1/messages", body)->body);
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "tool_use");
  EXPECT_EQ(m["content"][0]["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  body["messages"].push_back({{"role", "assistant"}, {"content", m["content"]}});
  body["messages"].push_back({{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", m["content"][0]["id"]},
                                                             {"content", "sunny"}}}}});
  body["tool_choice"] = {{"type", "none"}};
  body["max_tokens"] = 3;
  auto again = post_json(cli2, "/v1/messages", body);
  EXPECT_EQ(again->status, 200) << again->body;
}

TEST(MessagesApi, ApiKeyFromXApiKeyOrBearer) {
  server::ServerOptions o;
  o.api_key = "sk-test";
  LiveServer srv(o);
  auto cli = srv.client();
  const json body = message_body({{{"role", "user"}, {"content", "Hi"}}}, 2);
  auto r = post_json(cli, "/v1/messages", body);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  r = cli.Post("/v1/messages", {{"x-api-key", "sk-test"}}, body.dump(), "application/json");
  EXPECT_EQ(r->status, 200) << r->body;
  r = cli.Post("/v1/messages", {{"x-api-key", "sk-wrong"}}, body.dump(), "application/json");
  EXPECT_EQ(r->status, 401);
  r = cli.Post("/v1/messages", {{"Authorization", "Bearer sk-test"}}, body.dump(), "application/json");
  EXPECT_EQ(r->status, 200);
}
