#include "server/messages_output.h"

#include "server/responses_output.h"

namespace vireo::server {

std::string messages_stop_reason(const ChoiceState& c, bool has_calls) {
  if (has_calls) return "tool_use";
  if (c.finish_reason == "length") return "max_tokens";
  if (c.stop_string) return "stop_sequence";
  return "end_turn";
}

Json messages_stop_sequence(const ChoiceState& c) { return c.stop_string ? Json(*c.stop_string) : Json(nullptr); }

Json thinking_block(const std::string& thinking, const std::string& signature) {
  return {{"type", "thinking"}, {"thinking", thinking}, {"signature", signature}};
}

Json text_block(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

Json tool_input(const std::string& arguments) {
  Json parsed = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) return parsed;
  return {{"arguments", parsed.is_discarded() ? Json(arguments) : parsed}};
}

Json tool_use_block(const std::string& id, const ToolCall& call) {
  return {{"type", "tool_use"}, {"id", id}, {"name", call.name}, {"input", tool_input(call.arguments)}};
}

Json messages_content_blocks(const ChatDelta& parsed) {
  Json blocks = Json::array();
  if (!parsed.reasoning.empty()) blocks.push_back(thinking_block(parsed.reasoning, new_signature()));
  const bool has_calls = !parsed.calls.empty();
  if (!parsed.content.empty() && !(has_calls && blank_text(parsed.content))) blocks.push_back(text_block(parsed.content));
  for (const auto& call : parsed.calls) blocks.push_back(tool_use_block(new_tool_use_id(), call));
  return blocks;
}

Json messages_usage_json(int64_t input_tokens, int64_t output_tokens) {
  return {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
}

Json message_object(const std::string& id, const std::string& model, Json content, Json stop_reason, Json stop_sequence,
                    Json usage) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"content", std::move(content)},
          {"model", model},
          {"stop_reason", std::move(stop_reason)},
          {"stop_sequence", std::move(stop_sequence)},
          {"usage", std::move(usage)}};
}

std::string new_message_id() { return new_item_id("msg"); }
std::string new_tool_use_id() { return new_item_id("toolu"); }
std::string new_signature() { return new_item_id("sig"); }

}  // namespace vireo::server
