#include "server/chat_output_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <random>

namespace vireo::server {
namespace {

Json call_json(const ToolCall& c) {
  return {{"id", new_tool_call_id()}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

}  // namespace

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:016x}", rng(), rng());
}

Json chat_message_json(const ChatDelta& all, bool parsing_active) {
  Json content = all.content;
  if (parsing_active && (all.content.empty() || (!all.calls.empty() && blank(all.content)))) content = nullptr;
  Json reasoning = all.reasoning.empty() ? Json(nullptr) : Json(all.reasoning);
  Json calls = Json::array();
  for (const auto& c : all.calls) calls.push_back(call_json(c));
  Json message = {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}, {"reasoning", reasoning}};
  // As OpenAI and vLLM (ChatMessage's serializer): no tool_calls key without calls. An empty list
  // makes clients that test for the key take a turn without calls for a tool-call turn.
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  return message;
}

Json chat_delta_json(const ChatDelta& d, int& num_calls_sent) {
  Json delta = Json::object();
  if (!d.reasoning.empty()) {
    delta["reasoning_content"] = d.reasoning;
    delta["reasoning"] = d.reasoning;
  }
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.calls.empty()) {
    Json calls = Json::array();
    for (const auto& c : d.calls) {
      Json j = {{"index", num_calls_sent++}};
      j.update(call_json(c));
      calls.push_back(std::move(j));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

}  // namespace vireo::server
