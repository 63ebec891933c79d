#include "server/messages_request.h"

#include <fmt/format.h>

#include "server/messages_input.h"
#include "server/request_validation.h"

namespace vireo::server {
namespace {

// Custom tools {name, description, input_schema} -> chat function tools. Anthropic's server tools
// (a versioned type such as "web_search_20250305", "bash_20250124") run on Anthropic's side: refused.
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) throw bad_request("'tools' must be a list", "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object()) throw bad_request(at + " must be an object", "tools");
    if (has_field(t, "type") && t["type"] != "custom")
      throw bad_request(fmt::format("{}: tool type {} is not supported (only custom tools, with an input_schema)", at,
                                    t["type"].dump()), "tools");
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get_ref<const std::string&>().empty())
      throw bad_request(at + ".name must be a non-empty string", "tools");
    if (!t.contains("input_schema") || !t["input_schema"].is_object())
      throw bad_request(at + ".input_schema must be an object", "tools");
    Json schema = t["input_schema"];
    if (!schema.contains("type")) schema["type"] = "object";  // as vLLM: a schema without a type is an object's
    Json f = {{"name", t["name"]}};
    if (has_field(t, "description")) {
      if (!t["description"].is_string()) throw bad_request(at + ".description must be a string", "tools");
      f["description"] = t["description"];
    }
    f["parameters"] = std::move(schema);
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

// {type: auto | any | tool | none, name, disable_parallel_tool_use} -> chat tool_choice (and
// parallel_tool_calls).
void convert_tool_choice(const Json& c, Json& chat) {
  if (!c.is_object() || !c.contains("type") || !c["type"].is_string())
    throw bad_request("tool_choice must be an object with a string 'type' (auto, any, tool, none)", "tool_choice");
  const std::string& type = c["type"].get_ref<const std::string&>();
  if (type == "auto") chat["tool_choice"] = "auto";
  else if (type == "any") chat["tool_choice"] = "required";
  else if (type == "none") chat["tool_choice"] = "none";
  else if (type == "tool") {
    if (!c.contains("name") || !c["name"].is_string() || c["name"].get_ref<const std::string&>().empty())
      throw bad_request("tool_choice of type 'tool' needs a non-empty string 'name'", "tool_choice");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
  } else {
    throw bad_request("tool_choice type '" + type + "' is not one of auto, any, tool, none", "tool_choice");
  }
  if (auto d = get_bool(c, "disable_parallel_tool_use"); d && *d) chat["parallel_tool_calls"] = false;
}

// thinking {type: enabled (budget_tokens) | adaptive | disabled} -> the chat template's enable_thinking
// switch (Qwen3 and the templates that read it), unless chat_template_kwargs sets it already.
void convert_thinking(const Json& t, Json& chat) {
  if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
    throw bad_request("'thinking' must be an object with a string 'type' (enabled, disabled)", "thinking");
  const std::string& type = t["type"].get_ref<const std::string&>();
  if (type != "enabled" && type != "disabled" && type != "adaptive")
    throw bad_request("thinking type '" + type + "' is not one of enabled, adaptive, disabled", "thinking");
  if (auto budget = get_int(t, "budget_tokens"); budget && *budget < 1)
    throw bad_request(fmt::format("thinking.budget_tokens must be at least 1, got {}", *budget), "thinking");
  if (!chat.contains("chat_template_kwargs")) chat["chat_template_kwargs"] = Json::object();
  Json& kwargs = chat["chat_template_kwargs"];
  if (kwargs.is_object() && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = type != "disabled";
}

// output_config {format: {type: json_schema, schema}, effort} -> response_format (effort: accepted).
void convert_output_config(const Json& o, Json& chat) {
  if (!o.is_object()) throw bad_request("'output_config' must be an object", "output_config");
  if (has_field(o, "effort") && !o["effort"].is_string())
    throw bad_request("'output_config.effort' must be a string", "output_config");
  if (!has_field(o, "format")) return;
  const Json& f = o["format"];
  if (!f.is_object() || f.value("type", Json()) != "json_schema" || !has_field(f, "schema") || !f["schema"].is_object())
    throw bad_request("'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}", "output_config");
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "json_schema"}, {"schema", f["schema"]}}}};
}

// The chat parser's names for fields the Messages body names differently.
std::optional<std::string> messages_param(const std::optional<std::string>& chat_param) {
  if (!chat_param) return chat_param;
  if (*chat_param == "max_completion_tokens" || *chat_param == "max_tokens") return "max_tokens";
  if (*chat_param == "stop") return "stop_sequences";
  if (*chat_param == "response_format") return "output_config";
  return chat_param;
}

// Sampling fields that mean the same here, and vLLM's extra fields a client may add.
constexpr const char* kPassThrough[] = {
    "model", "stream", "temperature", "top_p", "top_k", "min_p", "seed", "stop_token_ids", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "ignore_eos", "min_tokens", "chat_template_kwargs",
    "structured_outputs", "priority", "cache_salt"};
constexpr const char* kCountTokensPassThrough[] = {"model", "chat_template_kwargs"};

}  // namespace

Json messages_to_chat_body(const Json& body, bool count_tokens) {
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  if (!body.contains("model") || !body["model"].is_string() || body["model"].get_ref<const std::string&>().empty())
    throw bad_request("model: a non-empty string is required", "model");
  Json chat = Json::object();
  if (count_tokens) {
    for (const char* key : kCountTokensPassThrough)
      if (body.contains(key)) chat[key] = body[key];
  } else {
    for (const char* key : kPassThrough)
      if (body.contains(key)) chat[key] = body[key];
    // max_tokens is required by the Messages API (it has no "rest of the context" default).
    if (!has_field(body, "max_tokens")) throw bad_request("max_tokens: Field required", "max_tokens");
    std::optional<int64_t> max_tokens = get_int(body, "max_tokens");
    if (*max_tokens < 1) throw bad_request(fmt::format("max_tokens must be at least 1, got {}", *max_tokens), "max_tokens");
    chat["max_completion_tokens"] = *max_tokens;
    if (has_field(body, "stop_sequences")) {
      const Json& s = body["stop_sequences"];
      if (!s.is_array()) throw bad_request("'stop_sequences' must be a list of strings", "stop_sequences");
      for (const auto& v : s)
        if (!v.is_string()) throw bad_request("'stop_sequences' must be a list of strings", "stop_sequences");
      chat["stop"] = s;
    }
    if (has_field(body, "output_config")) convert_output_config(body["output_config"], chat);
    if (has_field(body, "metadata") && !body["metadata"].is_object())
      throw bad_request("'metadata' must be an object", "metadata");
    if (has_field(body, "service_tier") && !body["service_tier"].is_string())
      throw bad_request("'service_tier' must be a string", "service_tier");
  }
  chat["messages"] = anthropic_messages_to_chat(body.value("messages", Json()), body.value("system", Json()));
  // A final assistant message is a prefill: the answer continues it (Anthropic's rule; the chat path's
  // continue_final_message). Not when it holds tool calls or reasoning: a turn that cannot be continued.
  const Json& last = chat["messages"].back();
  if (last["role"] == "assistant" && last["content"].is_string() && !last.contains("tool_calls") &&
      !last.contains("reasoning")) {
    chat["continue_final_message"] = true;
    chat["add_generation_prompt"] = false;
  }
  if (has_field(body, "tools")) {
    chat["tools"] = chat_tools(body["tools"]);
    if (chat["tools"].empty()) chat.erase("tools");
  }
  if (has_field(body, "tool_choice")) convert_tool_choice(body["tool_choice"], chat);
  else if (chat.contains("tools")) chat["tool_choice"] = "auto";  // Anthropic's default with tools
  if (has_field(body, "thinking")) convert_thinking(body["thinking"], chat);
  return chat;
}

ApiError as_messages_error(const ApiError& e) { return ApiError(e.status, e.type, e.message, messages_param(e.param)); }

MessagesRequest parse_messages_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits,
                                       bool count_tokens) {
  MessagesRequest r;
  try {
    r.chat = parse_chat_request(messages_to_chat_body(body, count_tokens), model, limits);
  } catch (const ApiError& e) {
    throw as_messages_error(e);
  }
  return r;
}

}  // namespace vireo::server
