// /v1/responses: the Responses body -> chat body translation, its refusals, and the response object
// and stream events through the live server with the fake engine (scripted outputs for reasoning
// and tool calls, one byte per token).
#include <gtest/gtest.h>

#include "server/openai_errors.h"
#include "server/responses_request.h"
#include "server/responses_store.h"
#include "chat_scripts.h"
#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;
using server::Json;

namespace {

std::string refusal_param(const Json& body) {
  return refusal_param_of([](const Json& b) { return server::responses_to_chat_body(b); }, body);
}


const json kWeatherTool = {{"type", "function"}, {"name", "get_weather"}, {"description", "Weather"},
                           {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};

std::vector<NamedEvent> stream(httplib::Client& cli, json body) {
  body["stream"] = true;
  auto r = post_json(cli, "/v1/responses", body);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  auto events = parse_named_events(r->body);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].data["sequence_number"], i);
  return events;
}

// The output items the plain response and the stream's response.completed agree on, without ids.
json strip_ids(json items) {
  for (auto& it : items) {
    it.erase("id");
    it.erase("call_id");
  }
  return items;
}

}  // namespace

TEST(ResponsesRequest, StringInputAndInstructions) {
  Json chat = server::responses_to_chat_body({{"model", "m"}, {"input", "Hi"}, {"instructions", "Be brief."},
                                              {"max_output_tokens", 7}, {"temperature", 0.5}, {"store", false},
                                              {"reasoning", {{"effort", "low"}}}, {"metadata", {{"k", "v"}}}});
  EXPECT_EQ(chat["messages"], Json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["model"], "m");
  EXPECT_FALSE(chat.contains("response_format"));
  EXPECT_FALSE(chat.contains("store"));
}

TEST(ResponsesRequest, ItemListsAndToolCallRoundTrip) {
  Json input = Json::parse(R"([
    {"role": "developer", "content": "Rules."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
    {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]}
  ])");
  Json m = server::responses_to_chat_body({{"input", input}})["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], Json::parse(R"({"role":"developer","content":"Rules."})"));
  EXPECT_EQ(m[1], Json::parse(R"({"role":"user","content":"a\nb"})"));
  // The assistant's text and both calls are one turn.
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Let me look.");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][0], Json::parse(R"({"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}})"));
  EXPECT_EQ(m[2]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_EQ(m[3], Json::parse(R"({"role":"tool","tool_call_id":"call_1","content":"sunny","name":"get_weather"})"));
  EXPECT_EQ(m[4]["content"], "noon");
  EXPECT_EQ(m[4]["name"], "get_time");
}

TEST(ResponsesRequest, ToolsToolChoiceAndTextFormat) {
  Json chat = server::responses_to_chat_body(
      {{"input", "x"}, {"tools", Json::array({kWeatherTool})}, {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
       {"parallel_tool_calls", false}});
  EXPECT_EQ(json(chat["tools"]), json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])"));
  EXPECT_EQ(chat["tool_choice"], Json::parse(R"({"type":"function","function":{"name":"get_weather"}})"));
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  for (const char* mode : {"auto", "none", "required"})
    EXPECT_EQ(server::responses_to_chat_body({{"input", "x"}, {"tool_choice", mode}})["tool_choice"], mode);

  Json schema = {{"type", "object"}};
  chat = server::responses_to_chat_body(
      {{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "s"}, {"schema", schema}, {"strict", true}}}}}});
  EXPECT_EQ(chat["response_format"],
            Json({{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", schema}, {"strict", true}}}}));
  chat = server::responses_to_chat_body({{"input", "x"}, {"text", {{"format", {{"type", "json_object"}}}}}});
  EXPECT_EQ(chat["response_format"], Json({{"type", "json_object"}}));
  chat = server::responses_to_chat_body({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}, {"verbosity", "low"}}}});
  EXPECT_FALSE(chat.contains("response_format"));
  chat = server::responses_to_chat_body(
      {{"input", "x"}, {"include", Json::array({"message.output_text.logprobs"})}, {"top_logprobs", 3}});
  EXPECT_EQ(chat["logprobs"], true);
  EXPECT_EQ(chat["top_logprobs"], 3);
}

TEST(ResponsesRequest, Refusals) {
  const Json ok = {{"input", "x"}};
  EXPECT_EQ(refusal_param(ok), "");
  auto with = [&](const char* key, Json v) {
    Json b = ok;
    b[key] = std::move(v);
    return refusal_param(b);
  };
  EXPECT_EQ(refusal_param(Json::object()), "input");
  EXPECT_EQ(with("input", 5), "input");
  EXPECT_EQ(with("input", Json::array()), "input");
  EXPECT_EQ(with("input", Json::parse(R"([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])")), "input");
  EXPECT_EQ(with("input", Json::parse(R"([{"role": "tool", "content": "x"}])")), "input");
  EXPECT_EQ(with("input", Json::parse(R"([{"type": "function_call", "name": "f", "arguments": "{}"}])")), "input");
  EXPECT_EQ(with("input", Json::parse(R"([{"type": "item_reference", "id": "msg_1"}])")), "input");
  EXPECT_EQ(with("input", Json::parse(R"([{"type": "web_search_call"}])")), "input");
  EXPECT_EQ(with("instructions", 3), "instructions");
  EXPECT_EQ(with("previous_response_id", "resp_1"), "previous_response_id");
  EXPECT_EQ(with("background", true), "background");
  EXPECT_EQ(with("truncation", "auto"), "truncation");
  EXPECT_EQ(with("max_output_tokens", 0), "max_output_tokens");
  EXPECT_EQ(with("max_output_tokens", "5"), "max_output_tokens");
  EXPECT_EQ(with("tools", Json::parse(R"([{"type": "web_search_preview"}])")), "tools");
  EXPECT_EQ(with("tools", Json::parse(R"([{"type": "function"}])")), "tools");
  EXPECT_EQ(with("tools", Json::parse(R"({"type": "function", "name": "f"})")), "tools");
  EXPECT_EQ(with("tool_choice", "sometimes"), "tool_choice");
  EXPECT_EQ(with("tool_choice", Json{{"type", "web_search_preview"}}), "tool_choice");
  EXPECT_EQ(with("text", Json{{"format", {{"type", "json_schema"}, {"name", "s"}}}}), "text");
  EXPECT_EQ(with("text", Json{{"format", {{"type", "regex"}}}}), "text");
  EXPECT_EQ(with("include", Json::array({"reasoning.encrypted_content"})), "include");
  EXPECT_EQ(with("top_logprobs", 21), "top_logprobs");
  EXPECT_EQ(with("metadata", Json{{"k", 1}}), "metadata");
  EXPECT_EQ(with("reasoning", "high"), "reasoning");
  EXPECT_EQ(with("store", "yes"), "store");
}

TEST(ResponsesApi, PlainResponseShapeUsageAndIncomplete) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/responses", {{"model", "fake-model"}, {"input", "Hello"}, {"instructions", "Hi."},
                                            {"max_output_tokens", 6}, {"metadata", {{"k", "v"}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "incomplete");  // the fake engine never stops before max_output_tokens
  EXPECT_EQ(j["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(j["instructions"], "Hi.");
  EXPECT_EQ(j["max_output_tokens"], 6);
  EXPECT_EQ(j["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["tool_choice"], "auto");
  EXPECT_EQ(j["tools"], json::array());
  EXPECT_EQ(j["text"], json::parse(R"({"format": {"type": "text"}})"));
  EXPECT_EQ(j["parallel_tool_calls"], true);
  ASSERT_EQ(j["output"].size(), 1u);
  json msg = j["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "incomplete");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(msg["content"].size(), 1u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"].get<std::string>().size(), 6u);
  EXPECT_EQ(msg["content"][0]["annotations"], json::array());
  json u = j["usage"];
  // "<system>Hi.\n<user>Hello\n<assistant>": one token per byte.
  EXPECT_EQ(u["input_tokens"], 12 + 12 + 11);
  EXPECT_EQ(u["output_tokens"], 6);
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int>() + 6);
  EXPECT_EQ(u["input_tokens_details"], json({{"cached_tokens", 0}}));
  EXPECT_EQ(u["output_tokens_details"], json({{"reasoning_tokens", 0}}));

  // Bad input: the OpenAI error envelope, param named as the Responses body names it.
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"tools", {{{"type", "web_search"}}}}});
  ASSERT_EQ(r->status, 400);
  json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["type"], "BadRequestError");
  EXPECT_EQ(e["param"], "tools");
  EXPECT_EQ(e["code"], 400);
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"max_output_tokens", 1000}});
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "max_output_tokens");
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"model", "other"}});
  EXPECT_EQ(r->status, 404);
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"tools", json::array({kWeatherTool})}});  // auto needs the parser flags
  EXPECT_EQ(r->status, 400);
}

TEST(ResponsesApi, StreamEventsMatchThePlainResponse) {
  LiveServer srv;
  auto cli = srv.client();
  json body = {{"input", "Hello"}, {"max_output_tokens", 5}, {"seed", 3}};
  json plain = json::parse(post_json(cli, "/v1/responses", body)->body);
  auto events = stream(cli, body);
  std::vector<std::string> names;
  std::string deltas;
  for (const auto& e : events) {
    if (names.empty() || names.back() != e.name) names.push_back(e.name);
    if (e.name == "response.output_text.delta") deltas += e.data["delta"].get<std::string>();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                             "response.content_part.added", "response.output_text.delta",
                                             "response.output_text.done", "response.content_part.done",
                                             "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  const json& done = events[events.size() - 4].data;
  EXPECT_EQ(done["text"], deltas);
  json final = events.back().data["response"];
  EXPECT_EQ(final["status"], "incomplete");
  EXPECT_EQ(final["id"], events[0].data["response"]["id"]);
  EXPECT_EQ(final["output"][0]["content"][0]["text"], deltas);
  EXPECT_EQ(deltas, plain["output"][0]["content"][0]["text"]);
  EXPECT_EQ(strip_ids(final["output"]), strip_ids(plain["output"]));
  EXPECT_EQ(final["usage"], plain["usage"]);
  EXPECT_EQ(events[2].data["item"]["id"], final["output"][0]["id"]);

  // An engine error mid-stream ends the stream with an error event.
  events = stream(cli, {{"input", "FAIL"}, {"max_output_tokens", 5}});
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "error");
  EXPECT_EQ(events.back().data["code"], "500");
}

TEST(ResponsesApi, ReasoningAndToolCallItems) {
  LiveServer srv(with_chat_parsers(), scripted_engine({{"JSON", R"({"a": 1})"}}));
  auto cli = srv.client();
  json r = json::parse(post_json(cli, "/v1/responses", {{"input", "THINK"}})->body);
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0], json({{"type", "reasoning_text"}, {"text", "Two and two."}}));
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "\n\nThe answer is 4.");
  json s = stream(cli, {{"input", "THINK"}}).back().data["response"];
  EXPECT_EQ(strip_ids(s["output"]), strip_ids(r["output"]));

  json body = {{"input", "WEATHER"}, {"tools", json::array({kWeatherTool})}};
  r = json::parse(post_json(cli, "/v1/responses", body)->body);
  ASSERT_EQ(r["output"].size(), 3u) << r.dump();  // reasoning, two calls; the blank text between is dropped
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  json call = r["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(r["output"][2]["name"], "get_time");
  EXPECT_EQ(r["tools"], json::array({kWeatherTool}));  // echoed in the Responses shape
  auto events = stream(cli, body);
  EXPECT_EQ(strip_ids(events.back().data["response"]["output"]), strip_ids(r["output"]));
  int args_deltas = 0;
  for (const auto& e : events) args_deltas += e.name == "response.function_call_arguments.delta";
  EXPECT_EQ(args_deltas, 2);

  // tool_choice "required" works without the parser flags (structured outputs); the call's output
  // goes back in as function_call / function_call_output items.
  LiveServer plain_srv(server::ServerOptions{}, scripted_engine({{"JSON", R"({"a": 1})"}}));
  auto cli2 = plain_srv.client();
  r = json::parse(post_json(cli2, "/v1/responses", {{"input", "REQUIRED"}, {"tools", json::array({kWeatherTool})}, {"tool_choice", "required"}})->body);
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "function_call");
  EXPECT_EQ(r["tool_choice"], "required");
  json next = {{"input", {{{"role", "user"}, {"content", "REQUIRED"}}, r["output"][0],
                          {{"type", "function_call_output"}, {"call_id", r["output"][0]["call_id"]}, {"output", "sunny"}}}},
               {"tools", json::array({kWeatherTool})}, {"tool_choice", "none"}, {"max_output_tokens", 3}};
  auto again = post_json(cli2, "/v1/responses", next);
  EXPECT_EQ(again->status, 200) << again->body;

  // text.format json_object: the structured-output path (the script is the JSON).
  r = json::parse(post_json(cli2, "/v1/responses", {{"input", "JSON"}, {"text", {{"format", {{"type", "json_object"}}}}}})->body);
  EXPECT_EQ(json::parse(r["output"][0]["content"][0]["text"].get<std::string>()), json({{"a", 1}}));
  EXPECT_EQ(r["text"]["format"]["type"], "json_object");
}

TEST(ResponsesStore, KeepsWholeConversationsAndDropsTheOldestPastItsBytes) {
  server::ResponsesStore store(200);
  Json items = Json::array({{{"role", "user"}, {"content", std::string(60, 'a')}}});
  store.put("resp_1", items);
  store.put("resp_2", items);
  EXPECT_EQ(store.get("resp_1"), items);
  store.put("resp_3", items);  // over 200 bytes with three: resp_1 goes
  EXPECT_FALSE(store.get("resp_1"));
  EXPECT_TRUE(store.get("resp_2") && store.get("resp_3"));
  store.put("big", Json::array({std::string(300, 'b')}));  // larger than the store: not kept
  EXPECT_FALSE(store.get("big"));
  EXPECT_EQ(store.num_entries(), 2u);

  Json body = {{"previous_response_id", "resp_3"}, {"input", "next"}};
  EXPECT_EQ(server::continue_previous_response(store, body), "resp_3");
  EXPECT_FALSE(body.contains("previous_response_id"));
  ASSERT_EQ(body["input"].size(), 2u);
  EXPECT_EQ(body["input"][1], Json({{"type", "message"}, {"role", "user"}, {"content", "next"}}));
  body = {{"previous_response_id", "resp_1"}, {"input", "next"}};
  try {
    server::continue_previous_response(store, body);
    ADD_FAILURE() << "no 404";
  } catch (const server::ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
  server::ResponsesStore off(0);
  body = {{"previous_response_id", "resp_3"}, {"input", "next"}};
  EXPECT_THROW(server::continue_previous_response(off, body), server::ApiError);
}

// GET /v1/responses/{id} (OpenAI's responses.retrieve, vLLM's route): the stored Response object as
// it was sent, plain or streamed; 404 for unknown, unstored or unroutable ids.
TEST(ResponsesApi, RetrieveStoredResponse) {
  LiveServer srv;
  auto cli = srv.client();
  json first = json::parse(post_json(cli, "/v1/responses", {{"input", "Hello"}, {"max_output_tokens", 3}})->body);
  const std::string id = first["id"];
  auto r = cli.Get(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), first);

  auto events = stream(cli, {{"input", "Again"}, {"max_output_tokens", 2}});
  const json streamed = events.back().data["response"];
  r = cli.Get(("/v1/responses/" + streamed["id"].get<std::string>()).c_str());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body), streamed);

  json unstored = json::parse(post_json(cli, "/v1/responses", {{"input", "x"}, {"store", false}, {"max_output_tokens", 1}})->body);
  for (const std::string& bad : std::vector<std::string>{"resp_nope", unstored["id"].get<std::string>()}) {
    r = cli.Get(("/v1/responses/" + bad).c_str());
    ASSERT_EQ(r->status, 404) << bad;
    json e = json::parse(r->body);
    EXPECT_EQ(e["error"]["type"], "NotFoundError");
    EXPECT_EQ(e["error"]["param"], "response_id");
  }
  r = cli.Get("/v1/responses/a/b");
  EXPECT_EQ(r->status, 404);
  r = cli.Delete(("/v1/responses/" + id).c_str());
  EXPECT_EQ(r->status, 405);  // the path exists for GET only
}

TEST(ResponsesApi, PreviousResponseIdContinuesTheStoredConversation) {
  LiveServer srv;
  auto cli = srv.client();
  json first = json::parse(post_json(cli, "/v1/responses", {{"input", "Hello"}, {"instructions", "Hi."}, {"max_output_tokens", 4}})->body);
  const std::string id = first["id"];
  // Instructions are not carried over; the stored input and output are.
  auto r = post_json(cli, "/v1/responses", {{"input", "More"}, {"previous_response_id", id}, {"max_output_tokens", 4}});
  ASSERT_EQ(r->status, 200) << r->body;
  json second = json::parse(r->body);
  EXPECT_EQ(second["previous_response_id"], id);
  // "<user>Hello\n<assistant><4 tokens>\n<user>More\n<assistant>"
  EXPECT_EQ(second["usage"]["input_tokens"], 12 + 11 + 4 + 1 + 11 + 11);
  // A streamed continuation is stored too, and can be continued.
  auto events = stream(cli, {{"input", "Again"}, {"previous_response_id", second["id"]}, {"max_output_tokens", 2}});
  const std::string third = events.back().data["response"]["id"];
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"previous_response_id", third}, {"max_output_tokens", 1}});
  EXPECT_EQ(r->status, 200) << r->body;

  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_nope"}});
  ASSERT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "previous_response_id");
  json unstored = json::parse(post_json(cli, "/v1/responses", {{"input", "x"}, {"store", false}, {"max_output_tokens", 1}})->body);
  r = post_json(cli, "/v1/responses", {{"input", "x"}, {"previous_response_id", unstored["id"]}});
  EXPECT_EQ(r->status, 404);

  server::ServerOptions off;
  off.responses_store_bytes = 0;
  LiveServer srv_off(off);
  auto cli_off = srv_off.client();
  r = post_json(cli_off, "/v1/responses", {{"input", "x"}, {"previous_response_id", id}});
  EXPECT_EQ(r->status, 400);
}
