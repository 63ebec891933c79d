#include "server/responses_input.h"

#include <fmt/format.h>

#include <map>

#include "server/openai_errors.h"

namespace vireo::server {
namespace {

ApiError input_error(const std::string& message) { return bad_request(message, "input"); }

// A string, or a list of text parts (input_text / output_text / refusal) joined by newlines.
std::string content_text(const Json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw input_error(at + " must be a string or a list of content parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string pat = fmt::format("{}[{}]", at, j);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw input_error(pat + " must be an object with a string 'type'");
    const std::string& type = part["type"].get_ref<const std::string&>();
    const char* field = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "refusal")
      throw input_error(pat + ": content type '" + type + "' is not supported (text only: input_text, output_text)");
    if (!part.contains(field) || !part[field].is_string())
      throw input_error(pat + fmt::format(": a {} part needs a string '{}'", type, field));
    if (j > 0) text += "\n";
    text += part[field].get<std::string>();
  }
  return text;
}

Json message_item(const Json& item, const std::string& at) {
  auto role = item.find("role");
  if (role == item.end() || !role->is_string()) throw input_error(at + ".role must be a string");
  const std::string& r = role->get_ref<const std::string&>();
  if (r != "user" && r != "system" && r != "developer" && r != "assistant")
    throw input_error(fmt::format("{}.role '{}' is not one of user, system, developer, assistant", at, r));
  auto content = item.find("content");
  if (content == item.end() || content->is_null()) throw input_error(at + ".content is required");
  return {{"role", r}, {"content", content_text(*content, at + ".content")}};
}

std::string required_string(const Json& item, const char* key, const std::string& at) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw input_error(fmt::format("{}.{} must be a non-empty string", at, key));
  return it->get<std::string>();
}

}  // namespace

Json responses_input_to_messages(const Json& input, const Json& instructions) {
  Json messages = Json::array();
  if (!instructions.is_null()) messages.push_back({{"role", "system"}, {"content", instructions}});
  if (input.is_null()) throw input_error("'input' is required");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array()) throw input_error("'input' must be a string or a list of input items");
  if (input.empty()) throw input_error("'input' must not be empty");
  std::map<std::string, std::string> call_names;  // call_id -> function name, for tool messages
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string at = fmt::format("input[{}]", i);
    if (!item.is_object()) throw input_error(at + " must be an object");
    auto type_it = item.find("type");
    if (type_it != item.end() && !type_it->is_null() && !type_it->is_string()) throw input_error(at + ".type must be a string");
    const std::string type = type_it == item.end() || type_it->is_null() ? "message" : type_it->get<std::string>();
    if (type == "message") {
      messages.push_back(message_item(item, at));
    } else if (type == "function_call") {
      const std::string call_id = required_string(item, "call_id", at);
      const std::string name = required_string(item, "name", at);
      auto args = item.find("arguments");
      if (args == item.end() || !args->is_string()) throw input_error(at + ".arguments must be a string (JSON text)");
      call_names[call_id] = name;
      Json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *args}}}};
      if (messages.empty() || messages.back()["role"] != "assistant")
        messages.push_back({{"role", "assistant"}, {"content", ""}});
      Json& turn = messages.back();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = Json::array();
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const std::string call_id = required_string(item, "call_id", at);
      auto output = item.find("output");
      if (output == item.end() || output->is_null()) throw input_error(at + ".output is required");
      Json msg = {{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(*output, at + ".output")}};
      if (auto n = call_names.find(call_id); n != call_names.end()) msg["name"] = n->second;
      messages.push_back(std::move(msg));
    } else if (type == "reasoning") {
      continue;  // an earlier turn's reasoning (see the header)
    } else if (type == "item_reference") {
      throw input_error(at + ": item_reference needs stored responses, which this server does not keep");
    } else {
      throw input_error(fmt::format("{}.type '{}' is not supported (message, function_call, function_call_output, reasoning are)", at, type));
    }
  }
  if (messages.empty()) throw input_error("'input' holds no message");
  return messages;
}

}  // namespace vireo::server
