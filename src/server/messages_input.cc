#include "server/messages_input.h"

#include <fmt/format.h>

#include <string>

#include "server/openai_errors.h"

namespace vireo::server {
namespace {

ApiError messages_error(const std::string& message) { return bad_request(message, "messages"); }

const std::string* string_field(const Json& block, const char* key) {
  auto it = block.find(key);
  return it != block.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

const std::string& required_string(const Json& block, const char* key, const std::string& at) {
  const std::string* s = string_field(block, key);
  if (!s) throw messages_error(fmt::format("{}.{} must be a string", at, key));
  return *s;
}

// An image block's source -> the URL an image_url part carries (a data: URL for base64 data).
std::string image_url(const Json& block, const std::string& at) {
  auto src = block.find("source");
  if (src == block.end() || !src->is_object()) throw messages_error(at + ".source must be an object");
  const std::string* type = string_field(*src, "type");
  if (type && *type == "url") return required_string(*src, "url", at + ".source");
  if (type && *type == "base64") {
    const std::string* media = string_field(*src, "media_type");
    return fmt::format("data:{};base64,{}", media ? *media : "image/jpeg", required_string(*src, "data", at + ".source"));
  }
  throw messages_error(at + ".source.type must be 'base64' or 'url'");
}

// The text (and images) of a tool_result's content: a string or a list of text / image blocks.
void tool_result_content(const Json& content, const std::string& at, std::string& text, Json& images) {
  if (content.is_null()) return;
  if (content.is_string()) {
    text = content.get<std::string>();
    return;
  }
  if (!content.is_array()) throw messages_error(at + " must be a string or a list of blocks");
  for (size_t k = 0; k < content.size(); ++k) {
    const Json& b = content[k];
    const std::string bat = fmt::format("{}[{}]", at, k);
    const std::string* type = b.is_object() ? string_field(b, "type") : nullptr;
    if (!type) throw messages_error(bat + " must be an object with a string 'type'");
    if (*type == "text") {
      if (!text.empty()) text += "\n";
      text += required_string(b, "text", bat);
    } else if (*type == "image") {
      images.push_back({{"type", "image_url"}, {"image_url", {{"url", image_url(b, bat)}}}});
    } else if (*type != "tool_reference") {  // Claude Code's deferred-tool references: nothing to render
      throw messages_error(fmt::format("{}: block type '{}' is not supported in a tool_result", bat, *type));
    }
  }
}

// What one message's blocks turn into.
struct Converted {
  Json parts = Json::array();       // text / image_url parts, in order
  std::string reasoning;            // thinking blocks, joined
  Json tool_calls = Json::array();  // assistant tool_use blocks
  Json tool_messages = Json::array();  // user tool_result blocks, as tool messages (and their images)
};

void convert_block(const Json& b, const std::string& role, const std::string& at, Converted& out) {
  const std::string* type = b.is_object() ? string_field(b, "type") : nullptr;
  if (!type) throw messages_error(at + " must be an object with a string 'type'");
  if (*type == "text") {
    const std::string& text = required_string(b, "text", at);
    if (!text.empty()) out.parts.push_back({{"type", "text"}, {"text", text}});
  } else if (*type == "image") {
    out.parts.push_back({{"type", "image_url"}, {"image_url", {{"url", image_url(b, at)}}}});
  } else if (*type == "thinking") {
    out.reasoning += required_string(b, "thinking", at);
  } else if (*type == "redacted_thinking") {
    // Opaque (encrypted) reasoning a client echoes back: nothing to render.
  } else if (*type == "tool_use") {
    if (role != "assistant") throw messages_error(at + ": tool_use blocks belong to assistant messages");
    const std::string& id = required_string(b, "id", at);
    const std::string& name = required_string(b, "name", at);
    auto input = b.find("input");
    if (input != b.end() && !input->is_null() && !input->is_object())
      throw messages_error(at + ".input must be an object");
    const Json args = input == b.end() || input->is_null() ? Json::object() : *input;
    out.tool_calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", dump_json(args)}}}});
  } else if (*type == "tool_result") {
    if (role != "user") throw messages_error(at + ": tool_result blocks belong to user messages");
    std::string text;
    Json images = Json::array();
    tool_result_content(b.value("content", Json()), at + ".content", text, images);
    out.tool_messages.push_back({{"role", "tool"}, {"tool_call_id", required_string(b, "tool_use_id", at)}, {"content", text}});
    if (!images.empty()) out.tool_messages.push_back({{"role", "user"}, {"content", std::move(images)}});
  } else {
    throw messages_error(fmt::format("{}: content block type '{}' is not supported (text, image, thinking, "
                                     "redacted_thinking, tool_use and tool_result are)", at, *type));
  }
}

// Chat content from parts: a string when all are text (joined by newlines, as chat flattens text
// parts), else the parts themselves (images).
Json chat_content(const Json& parts) {
  std::string text;
  for (const auto& p : parts) {
    if (p["type"] != "text") return parts;
    if (!text.empty()) text += "\n";
    text += p["text"].get<std::string>();
  }
  return text;
}

// The system prompt's text: a string, or text blocks joined as vLLM joins them (no separator).
// Claude Code's "x-anthropic-billing-header" block is left out, as vLLM does: it changes every
// request and would defeat prefix caching.
void append_system(const Json& system, const std::string& at, const char* param, std::string& out) {
  if (system.is_null()) return;
  if (system.is_string()) {
    out += system.get<std::string>();
    return;
  }
  if (!system.is_array()) throw bad_request(at + " must be a string or a list of text blocks", param);
  for (size_t i = 0; i < system.size(); ++i) {
    const Json& b = system[i];
    const std::string bat = fmt::format("{}[{}]", at, i);
    const std::string* type = b.is_object() ? string_field(b, "type") : nullptr;
    if (!type || *type != "text") throw bad_request(bat + " must be a text block", param);
    const std::string* text = string_field(b, "text");
    if (!text) throw bad_request(bat + ".text must be a string", param);
    if (text->rfind("x-anthropic-billing-header", 0) == 0) continue;
    out += *text;
  }
}

// vLLM maps the roles newer Claude Code versions send ("ctx", "msg") to user.
std::string normalized_role(const Json& msg, const std::string& at) {
  const std::string* role = string_field(msg, "role");
  if (!role) throw messages_error(at + ".role must be a string");
  if (*role == "ctx" || *role == "msg") return "user";
  if (*role != "user" && *role != "assistant" && *role != "system")
    throw messages_error(fmt::format("{}.role '{}' is not one of user, assistant", at, *role));
  return *role;
}

}  // namespace

Json anthropic_messages_to_chat(const Json& messages, const Json& system) {
  if (!messages.is_array() || messages.empty()) throw messages_error("'messages' must be a non-empty list");
  std::string system_text;
  append_system(system, "system", "system", system_text);
  for (size_t i = 0; i < messages.size(); ++i) {  // system messages inside the list join the system prompt
    const Json& m = messages[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw messages_error(at + " must be an object");
    if (normalized_role(m, at) == "system") append_system(m.value("content", Json()), at + ".content", "messages", system_text);
  }
  Json out = Json::array();
  if (!system_text.empty()) out.push_back({{"role", "system"}, {"content", system_text}});
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = fmt::format("messages[{}]", i);
    const std::string role = normalized_role(m, at);
    if (role == "system") continue;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) throw messages_error(at + ".content is required");
    if (content->is_string()) {
      out.push_back({{"role", role}, {"content", *content}});
      continue;
    }
    if (!content->is_array()) throw messages_error(at + ".content must be a string or a list of content blocks");
    Converted c;
    for (size_t j = 0; j < content->size(); ++j)
      convert_block((*content)[j], role, fmt::format("{}.content[{}]", at, j), c);
    for (auto& t : c.tool_messages) out.push_back(std::move(t));  // results answer the previous turn's calls
    if (role == "user") {
      if (!c.parts.empty()) out.push_back({{"role", "user"}, {"content", chat_content(c.parts)}});
      else if (c.tool_messages.empty()) out.push_back({{"role", "user"}, {"content", ""}});
      continue;
    }
    Json msg = {{"role", "assistant"}, {"content", c.parts.empty() ? Json("") : chat_content(c.parts)}};
    if (!c.reasoning.empty()) msg["reasoning"] = c.reasoning;
    if (!c.tool_calls.empty()) msg["tool_calls"] = std::move(c.tool_calls);
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace vireo::server
