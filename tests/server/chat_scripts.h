// Scripted model outputs for the endpoints on the chat path (/v1/responses, /v1/messages): a prompt
// holding a key gets the script's text from the fake engine, one byte per token. THINK: reasoning then
// an answer; WEATHER: reasoning then two hermes tool calls; REQUIRED: tool_choice "required"'s JSON.
// with_chat_parsers() turns on the parsers that read them (qwen3 reasoning, hermes tools); refusal_param_of
// names the field a request translation refuses.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fake_engine.h"
#include "server/openai_errors.h"
#include "server/server_context.h"

namespace vireo::testing {

inline const std::string kScriptThink = "<think>Two and two.</think>\n\nThe answer is 4.";
inline const std::string kScriptTools = "<think>Need the weather.</think>\n\n<tool_call>\n"
                                        R"({"name": "get_weather", "arguments": {"city": "Paris"}})"
                                        "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
inline const std::string kScriptRequired = R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])";

// The three scripts above and `more`, with no delay between tokens.
inline FakeEngineOptions scripted_engine(std::vector<std::pair<std::string, std::string>> more = {}) {
  FakeEngineOptions e;
  e.token_delay = std::chrono::milliseconds(0);
  e.scripts = {{"THINK", kScriptThink}, {"WEATHER", kScriptTools}, {"REQUIRED", kScriptRequired}};
  for (auto& s : more) e.scripts.push_back(std::move(s));
  return e;
}

inline server::ServerOptions with_chat_parsers() {
  server::ServerOptions o;
  o.reasoning_parser = "qwen3";
  o.enable_auto_tool_choice = true;
  o.tool_call_parser = "hermes";
  return o;
}

// The param of the 400 that translate(body) throws, "<none>" for a 400 without one, "" when the body translates.
template <typename Translate>
std::string refusal_param_of(Translate translate, const server::Json& body) {
  try {
    translate(body);
  } catch (const server::ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    return e.param.value_or("<none>");
  }
  return "";
}

}  // namespace vireo::testing
