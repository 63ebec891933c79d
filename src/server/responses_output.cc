#include "server/responses_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <random>

namespace vireo::server {
namespace {

// A float sampling value as the double the client would have written (0.7f -> 0.7, not 0.699999988).
double shortest(float v) { return std::stod(fmt::format("{}", v)); }

}  // namespace

std::string new_item_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}_{:016x}{:016x}", prefix, rng(), rng());
}

Json output_text_part(const std::string& text, Json logprobs) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", std::move(logprobs)}};
}

Json message_item(const std::string& id, Json content, const char* status) {
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

Json reasoning_item(const std::string& id, const std::string& text, const char* status) {
  Json content = Json::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", content},
          {"encrypted_content", nullptr}, {"status", status}};
}

Json function_call_item(const std::string& id, const std::string& call_id, const ToolCall& call, const char* status) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call_id}, {"name", call.name},
          {"arguments", call.arguments}};
}

bool blank_text(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); });
}

Json responses_output_items(const ChatDelta& parsed, const Json& logprobs, bool incomplete) {
  Json items = Json::array();
  if (!parsed.reasoning.empty()) items.push_back(reasoning_item(new_item_id("rs"), parsed.reasoning, "completed"));
  const bool has_calls = !parsed.calls.empty();
  const bool message = has_calls ? !blank_text(parsed.content) : !(parsed.content.empty() && !items.empty());
  if (message) {
    Json content = Json::array({output_text_part(parsed.content, logprobs)});
    items.push_back(message_item(new_item_id("msg"), std::move(content), "completed"));
  }
  // Cut short by max_output_tokens: the item being written then (reasoning or message) is
  // incomplete; calls are only reported once whole.
  if (incomplete && !has_calls && !items.empty()) items.back()["status"] = "incomplete";
  for (const auto& c : parsed.calls)
    items.push_back(function_call_item(new_item_id("fc"), new_item_id("call"), c, "completed"));
  return items;
}

Json responses_usage_json(int64_t input_tokens, int64_t output_tokens, int64_t cached_tokens) {
  return {{"input_tokens", input_tokens},
          {"input_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"output_tokens", output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input_tokens + output_tokens}};
}

Json response_object(const ResponsesRequest& r, const std::string& id, int64_t created_at, const std::string& status,
                     Json output, Json usage) {
  Json incomplete = nullptr;
  if (status == "incomplete") incomplete = {{"reason", "max_output_tokens"}};
  Json temperature = r.temperature.is_null() ? Json(shortest(r.chat.params.temperature)) : r.temperature;
  Json top_p = r.top_p.is_null() ? Json(shortest(r.chat.params.top_p)) : r.top_p;
  return {{"id", id},
          {"object", "response"},
          {"created_at", created_at},
          {"status", status},
          {"background", false},
          {"error", nullptr},
          {"incomplete_details", incomplete},
          {"instructions", r.instructions},
          {"max_output_tokens", r.max_output_tokens},
          {"max_tool_calls", nullptr},
          {"model", r.chat.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", r.parallel_tool_calls},
          {"previous_response_id", r.previous_response_id},
          {"reasoning", r.reasoning},
          {"service_tier", r.service_tier},
          {"temperature", temperature},
          {"text", r.text},
          {"tool_choice", r.tool_choice},
          {"tools", r.tools},
          {"top_logprobs", r.top_logprobs},
          {"top_p", top_p},
          {"truncation", "disabled"},
          {"usage", std::move(usage)},
          {"user", r.user},
          {"metadata", r.metadata.is_null() ? Json::object() : r.metadata}};
}

}  // namespace vireo::server
