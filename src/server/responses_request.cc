#include "server/responses_request.h"

#include <fmt/format.h>

#include "server/openai_errors.h"
#include "server/request_validation.h"
#include "server/responses_input.h"

namespace vireo::server {
namespace {

// Responses fields whose feature needs state this server does not keep, or is not implemented:
// refused (400) rather than ignored, as the chat endpoint does.
void refuse_unsupported(const Json& body) {
  if (has_field(body, "previous_response_id"))
    throw bad_request("previous_response_id is resolved against the stored responses first (responses_store.h)",
                      "previous_response_id");
  if (has_field(body, "conversation"))
    throw bad_request("conversation is not supported: responses are not stored; send the earlier turns in 'input'", "conversation");
  if (get_bool(body, "background").value_or(false))
    throw bad_request("background is not supported (responses are not stored)", "background");
  if (has_field(body, "prompt")) throw bad_request("prompt templates are not supported", "prompt");
  if (auto t = get_string(body, "truncation"); t && *t != "disabled")
    throw bad_request("truncation '" + *t + "' is not supported (only 'disabled')", "truncation");
  if (has_field(body, "max_tool_calls")) throw bad_request("max_tool_calls is not supported", "max_tool_calls");
  get_bool(body, "store");  // accepted and type-checked; nothing is stored (vLLM's default)
  get_string(body, "service_tier");
}

// Responses' flat function tools {type, name, description, parameters, strict} -> chat tools.
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) throw bad_request("'tools' must be a list", "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
      throw bad_request(at + " must be an object with a string 'type'", "tools");
    const std::string& type = t["type"].get_ref<const std::string&>();
    if (type != "function")
      throw bad_request(fmt::format("{}: tool type '{}' is not supported (only 'function' tools are)", at, type), "tools");
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get_ref<const std::string&>().empty())
      throw bad_request(at + ".name must be a non-empty string", "tools");
    Json f = {{"name", t["name"]}};
    if (has_field(t, "description")) {
      if (!t["description"].is_string()) throw bad_request(at + ".description must be a string", "tools");
      f["description"] = t["description"];
    }
    if (has_field(t, "parameters")) {
      if (!t["parameters"].is_object()) throw bad_request(at + ".parameters must be an object", "tools");
      f["parameters"] = t["parameters"];
    }
    if (has_field(t, "strict") && !t["strict"].is_boolean()) throw bad_request(at + ".strict must be a boolean", "tools");
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

// "auto" | "none" | "required" | {type: "function", name} -> the chat form.
Json chat_tool_choice(const Json& c) {
  if (c.is_string()) {
    if (c == "auto" || c == "none" || c == "required") return c;
    throw bad_request("tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}",
                      "tool_choice");
  }
  if (!c.is_object() || !c.contains("type") || !c["type"].is_string())
    throw bad_request("tool_choice must be a string or an object with a string 'type'", "tool_choice");
  const std::string& type = c["type"].get_ref<const std::string&>();
  if (type != "function")
    throw bad_request("tool_choice type '" + type + "' is not supported (only 'function')", "tool_choice");
  if (!c.contains("name") || !c["name"].is_string())
    throw bad_request("tool_choice of type 'function' needs a string 'name'", "tool_choice");
  return {{"type", "function"}, {"function", {{"name", c["name"]}}}};
}

// text.format -> chat's response_format (null: free text).
Json response_format(const Json& text) {
  if (!text.is_object()) throw bad_request("'text' must be an object", "text");
  if (has_field(text, "verbosity") && !text["verbosity"].is_string())
    throw bad_request("'text.verbosity' must be a string", "text");
  if (!has_field(text, "format")) return nullptr;
  const Json& f = text["format"];
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    throw bad_request("'text.format' must be an object with a string 'type'", "text");
  const std::string& type = f["type"].get_ref<const std::string&>();
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    throw bad_request("text.format type '" + type + "' is not one of 'text', 'json_object', 'json_schema'", "text");
  if (!has_field(f, "schema") || !(f["schema"].is_object() || f["schema"].is_boolean()))
    throw bad_request("text.format of type 'json_schema' needs a 'schema' object", "text");
  if (has_field(f, "name") && !f["name"].is_string()) throw bad_request("'text.format.name' must be a string", "text");
  if (has_field(f, "strict") && !f["strict"].is_boolean()) throw bad_request("'text.format.strict' must be a boolean", "text");
  Json js = {{"name", f.value("name", Json("response"))}, {"schema", f["schema"]}};
  if (has_field(f, "strict")) js["strict"] = f["strict"];
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// include: only "message.output_text.logprobs" is produced here.
bool wants_output_logprobs(const Json& body) {
  if (!has_field(body, "include")) return false;
  const Json& inc = body["include"];
  if (!inc.is_array()) throw bad_request("'include' must be a list of strings", "include");
  bool logprobs = false;
  for (const auto& v : inc) {
    if (!v.is_string()) throw bad_request("'include' must be a list of strings", "include");
    if (v != "message.output_text.logprobs")
      throw bad_request("include '" + v.get<std::string>() + "' is not supported (only 'message.output_text.logprobs')", "include");
    logprobs = true;
  }
  return logprobs;
}

// The chat parser's names for fields that the Responses body names differently.
std::optional<std::string> responses_param(const std::optional<std::string>& chat_param) {
  if (!chat_param) return chat_param;
  if (*chat_param == "messages") return "input";
  if (*chat_param == "max_completion_tokens" || *chat_param == "max_tokens") return "max_output_tokens";
  if (*chat_param == "response_format") return "text";
  return chat_param;
}

// Sampling and vLLM extra fields that mean the same on both endpoints.
constexpr const char* kPassThrough[] = {
    "model", "stream", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "ignore_eos", "min_tokens",
    "skip_special_tokens", "include_stop_str_in_output", "user", "parallel_tool_calls", "chat_template_kwargs",
    "structured_outputs", "priority", "cache_salt"};

}  // namespace

Json responses_to_chat_body(const Json& body) {
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  refuse_unsupported(body);
  Json chat = Json::object();
  for (const char* key : kPassThrough)
    if (body.contains(key)) chat[key] = body[key];
  Json instructions = nullptr;
  if (auto s = get_string(body, "instructions")) instructions = *s;
  chat["messages"] = responses_input_to_messages(body.value("input", Json()), instructions);
  if (auto m = get_int(body, "max_output_tokens")) {
    if (*m < 1) throw bad_request(fmt::format("max_output_tokens must be at least 1, got {}", *m), "max_output_tokens");
    chat["max_completion_tokens"] = *m;
  }
  if (has_field(body, "tools")) chat["tools"] = chat_tools(body["tools"]);
  if (has_field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
  if (has_field(body, "text"))
    if (Json rf = response_format(body["text"]); !rf.is_null()) chat["response_format"] = std::move(rf);
  if (has_field(body, "reasoning") && !body["reasoning"].is_object())
    throw bad_request("'reasoning' must be an object", "reasoning");  // effort / summary: accepted, not used
  if (has_field(body, "metadata")) {
    const Json& m = body["metadata"];
    if (!m.is_object()) throw bad_request("'metadata' must be an object of strings", "metadata");
    for (const auto& [k, v] : m.items())
      if (!v.is_string()) throw bad_request("metadata['" + k + "'] must be a string", "metadata");
  }
  std::optional<int64_t> top = get_int(body, "top_logprobs");
  if (top && (*top < 0 || *top > 20)) throw bad_request(fmt::format("top_logprobs must be in [0, 20], got {}", *top), "top_logprobs");
  if (wants_output_logprobs(body)) {
    chat["logprobs"] = true;
    chat["top_logprobs"] = top.value_or(0);
  }
  return chat;
}

ApiError as_responses_error(const ApiError& e) { return ApiError(e.status, e.type, e.message, responses_param(e.param)); }

ResponsesRequest parse_responses_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits) {
  ResponsesRequest r;
  try {
    Json chat = responses_to_chat_body(body);
    r.chat = parse_chat_request(chat, model, limits);
    if (auto t = get_int(body, "top_logprobs")) r.top_logprobs = static_cast<int>(*t);
  } catch (const ApiError& e) {
    throw as_responses_error(e);
  }
  r.output_logprobs = r.chat.logprobs;
  auto echo = [&](const char* key, Json& into) {
    if (has_field(body, key)) into = body[key];
  };
  echo("instructions", r.instructions);
  echo("max_output_tokens", r.max_output_tokens);
  echo("metadata", r.metadata);
  echo("reasoning", r.reasoning);
  echo("user", r.user);
  echo("temperature", r.temperature);
  echo("top_p", r.top_p);
  echo("tools", r.tools);
  echo("tool_choice", r.tool_choice);
  echo("service_tier", r.service_tier);
  if (has_field(body, "text") && has_field(body["text"], "format")) r.text = body["text"];
  if (auto p = get_bool(body, "parallel_tool_calls")) r.parallel_tool_calls = *p;
  return r;
}

}  // namespace vireo::server
