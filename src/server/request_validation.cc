#include "server/request_validation.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/openai_errors.h"
#include "server/prompt_truncation.h"
#include "server/sampling_validation.h"
#include "server/tool_choice.h"

namespace vireo::server {
namespace {

std::vector<int32_t> to_token_ids(const Json& list, const ModelInfo& model) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (const auto& e : list) {
    if (!is_integral(e)) throw bad_request("'prompt' token ids must be integers", "prompt");
    int64_t id = as_int64(e);
    if (id < 0 || id >= model.vocab_size)
      throw bad_request(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, model.vocab_size), "prompt");
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) throw bad_request("The prompt must not be empty", "prompt");
  return ids;
}

std::vector<PromptInput> parse_prompt(const Json& body, const ModelInfo& model, const ValidationLimits& limits) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw bad_request("'prompt' is required", "prompt");
  const Json& p = *it;
  const char* shape = "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists";
  std::vector<PromptInput> out;
  if (p.is_string()) {
    if (p.get_ref<const std::string&>().empty()) throw bad_request("The prompt must not be empty", "prompt");
    out.push_back({p.get<std::string>(), {}});
    return out;
  }
  if (!p.is_array()) throw bad_request(shape, "prompt");
  if (p.empty()) throw bad_request("The prompt must not be empty", "prompt");
  if (p[0].is_number()) {
    out.push_back({std::nullopt, to_token_ids(p, model)});
    return out;
  }
  if (static_cast<int>(p.size()) > limits.max_batch_prompts)
    throw bad_request(fmt::format("at most {} prompts are allowed in one request, got {}", limits.max_batch_prompts, p.size()), "prompt");
  bool strings = p[0].is_string();
  for (const auto& e : p) {
    if (strings) {
      if (!e.is_string()) throw bad_request(shape, "prompt");
      if (e.get_ref<const std::string&>().empty()) throw bad_request("The prompt must not be empty", "prompt");
      out.push_back({e.get<std::string>(), {}});
    } else {
      if (!e.is_array()) throw bad_request(shape, "prompt");
      out.push_back({std::nullopt, to_token_ids(e, model)});
    }
  }
  return out;
}

Json flatten_content(const Json& content, size_t index) {
  if (content.is_null() || content.is_string()) return content;
  std::string where = fmt::format("messages[{}].content", index);
  if (!content.is_array()) throw bad_request(where + " must be a string or a list of content parts", "messages");
  std::string text;
  bool first = true;
  auto add = [&](const std::string& piece) {
    if (!first) text += "\n";  // vLLM's "string" content format joins text parts with newlines
    text += piece;
    first = false;
  };
  for (const auto& part : content) {
    if (part.is_string()) {  // vLLM takes bare strings as text parts
      add(part.get<std::string>());
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw bad_request(where + ": each content part must be an object with a string 'type'", "messages");
    const std::string& type = part["type"].get_ref<const std::string&>();
    // vLLM's text-like parts and the field holding their text (Responses-style input_text /
    // output_text, an assistant turn's refusal, thinking).
    const char* field = type == "text" || type == "input_text" || type == "output_text" ? "text"
                        : type == "refusal"                                            ? "refusal"
                        : type == "thinking"                                           ? "thinking"
                                                                                       : nullptr;
    if (!field)
      throw bad_request(where + ": content part type '" + type + "' is not supported (text only)", "messages");
    auto value = part.find(field);
    if (value == part.end() || value->is_null()) continue;  // vLLM skips a part without its text
    if (!value->is_string())
      throw bad_request(where + ": a " + type + " part needs a string '" + field + "'", "messages");
    add(value->get<std::string>());
  }
  return text;
}

// What vLLM's chat_utils does to an assistant turn before the template sees it: tool-call arguments
// (JSON text in the OpenAI format) become objects, as templates expect (Llama 3 writes them with tojson,
// Qwen3-Coder iterates their items; empty or null: {}); an empty tool_calls list is dropped; reasoning and
// reasoning_content both carry the turn's reasoning, whichever the client sent.
void normalize_assistant_turn(Json& msg, size_t index) {
  if (auto calls = msg.find("tool_calls"); calls != msg.end() && calls->is_array() && calls->empty()) {
    msg.erase(calls);
  } else if (calls != msg.end() && calls->is_array()) {
    for (size_t k = 0; k < calls->size(); ++k) {
      Json& call = (*calls)[k];
      const std::string where = fmt::format("messages[{}].tool_calls[{}]", index, k);
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        throw bad_request(where + " must be an object with a 'function' object", "messages");
      Json& fn = call["function"];
      Json& args = fn["arguments"];  // created as null when missing
      if (args.is_null() || (args.is_string() && args.get_ref<const std::string&>().empty())) {
        args = Json::object();
      } else if (args.is_string()) {
        Json parsed = Json::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_discarded()) throw bad_request(where + ".function.arguments is not valid JSON", "messages");
        if (json_depth(parsed, kMaxJsonDepth) > kMaxJsonDepth)  // as the body: templates convert it recursively
          throw bad_request(where + ".function.arguments is nested too deeply", "messages");
        args = std::move(parsed);
      }
    }
  }
  auto text_of = [&](const char* key) -> const Json* {
    auto it = msg.find(key);
    return it != msg.end() && it->is_string() ? &*it : nullptr;
  };
  if (const Json* reasoning = text_of("reasoning"); reasoning && !text_of("reasoning_content"))
    msg["reasoning_content"] = *reasoning;
  else if (const Json* content = text_of("reasoning_content"); content && !text_of("reasoning"))
    msg["reasoning"] = *content;
}

Json parse_messages(const Json& body, const ValidationLimits& limits) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) throw bad_request("'messages' is required", "messages");
  if (!it->is_array()) throw bad_request("'messages' must be a list of message objects", "messages");
  if (it->empty()) throw bad_request("'messages' must not be empty", "messages");
  if (static_cast<int>(it->size()) > limits.max_messages)
    throw bad_request(fmt::format("at most {} messages are allowed", limits.max_messages), "messages");
  Json out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    if (!m.is_object()) throw bad_request(fmt::format("messages[{}] must be an object", i), "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw bad_request(fmt::format("messages[{}].role must be a string", i), "messages");
    // Any role reaches the template, as vLLM's CustomChatCompletionMessageParam allows (Llama 3's
    // "ipython" tool results, the legacy "function"); the template decides what it renders or refuses.
    const std::string& r = role->get_ref<const std::string&>();
    if (r.empty()) throw bad_request(fmt::format("messages[{}].role must not be empty", i), "messages");
    Json msg = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") throw bad_request(fmt::format("messages[{}].content is required", i), "messages");
      msg["content"] = "";  // templates expect a string; tool-call-only assistant turns have none
    } else {
      msg["content"] = flatten_content(*content, i);
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].is_array())
      throw bad_request(fmt::format("messages[{}].tool_calls must be a list", i), "messages");
    if (r == "assistant") normalize_assistant_turn(msg, i);
    out.push_back(std::move(msg));
  }
  return out;
}

// reasoning_effort (OpenAI's, vLLM's values) reaches the template as a variable, and turns thinking off
// ("none") or on for templates that read enable_thinking (Qwen3), unless chat_template_kwargs says.
void apply_reasoning_effort(const Json& body, Json& kwargs) {
  auto effort = get_string(body, "reasoning_effort");
  if (!effort) return;
  static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
  if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts))
    throw bad_request("reasoning_effort must be one of none, minimal, low, medium, high, xhigh, max; got '" + *effort + "'",
                      "reasoning_effort");
  if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
  if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = *effort != "none";
}

}  // namespace

std::string check_model_name(const Json& body, const ModelInfo& model) {
  // As vLLM: an absent, null or empty model means the served one; responses name the first
  // served name whichever one the request used.
  auto name = get_string(body, "model");
  if (name && !name->empty() && *name != model.served_model_name &&
      std::find(model.served_model_aliases.begin(), model.served_model_aliases.end(), *name) == model.served_model_aliases.end()) {
    if (lora_of(body, model) != 0) return *name;  // a LoRA adapter: responses carry its name (as vLLM)
    throw ApiError(404, "NotFoundError", "The model `" + *name + "` does not exist.", "model");
  }
  return model.served_model_name;
}

int32_t lora_of(const Json& body, const ModelInfo& model) {
  auto name = get_string(body, "model");
  if (!name) return 0;
  for (const auto& l : model.loras)
    if (l.name == *name) return l.id;
  return 0;
}

void check_token_ids(const std::vector<int32_t>& ids, int32_t vocab_size, const char* param) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size)
      throw bad_request(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, vocab_size), param);
}

void check_context_length(int num_prompt_tokens, std::optional<int> max_tokens, int max_model_len, const char* prompt_param) {
  if (num_prompt_tokens >= max_model_len)
    throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, your request has {} input "
                                  "tokens. Please reduce the length of the input messages.",
                                  max_model_len, num_prompt_tokens),
                      prompt_param);
  if (max_tokens && static_cast<int64_t>(num_prompt_tokens) + *max_tokens > max_model_len)
    throw bad_request(fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This model's maximum context length is {} tokens and "
                                  "your request has {} input tokens ({} > {} - {}).",
                                  *max_tokens, max_model_len, num_prompt_tokens, *max_tokens, max_model_len, num_prompt_tokens),
                      "max_tokens");
}

CompletionRequest parse_completion_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits) {
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  CompletionRequest r;
  r.model = check_model_name(body, model);
  if (model.pooling) throw bad_request("The model does not support Completions API (it runs --runner pooling: /v1/embeddings)");
  reject_unsupported(body);
  // vLLM's prompt_embeds needs --enable-prompt-embeds, which Vireo does not have: refused rather than
  // dropped (the completion would be of `prompt` alone, or "'prompt' is required" without it).
  if (auto it = body.find("prompt_embeds"); it != body.end() && !it->is_null())
    throw bad_request("prompt_embeds is not supported (vLLM's --enable-prompt-embeds)", "prompt_embeds");
  r.params = parse_sampling_params(body, model, limits);
  r.params.lora_id = lora_of(body, model);
  r.prompts = parse_prompt(body, model, limits);
  if (static_cast<int64_t>(r.prompts.size()) * r.params.n > limits.max_choices)
    throw bad_request(fmt::format("at most {} choices (prompts x n) are allowed", limits.max_choices), "n");
  int64_t max_tokens = get_int(body, "max_tokens").value_or(16);  // OpenAI's completions default
  if (auto it = body.find("max_tokens"); it != body.end() && it->is_null()) {
    r.max_tokens_to_context = true;  // set per prompt once its length is known
    max_tokens = 1;
  }
  if (auto echo = get_bool(body, "echo")) r.echo = *echo;
  if (max_tokens == 0 && r.echo) {
    r.echo_only = true;  // vLLM generates one token and returns the prompt alone
    max_tokens = 1;
  }
  if (max_tokens < 1) throw bad_request(fmt::format("max_tokens must be at least 1, got {}", max_tokens), "max_tokens");
  if (max_tokens > (1 << 30)) throw bad_request(fmt::format("max_tokens is too large: {}", max_tokens), "max_tokens");
  r.params.max_tokens = static_cast<int>(max_tokens);
  if (r.params.min_tokens > r.params.max_tokens && !r.max_tokens_to_context)
    throw bad_request(fmt::format("min_tokens ({}) must be less than or equal to max_tokens ({})", r.params.min_tokens, r.params.max_tokens), "min_tokens");
  if (auto lp = get_int(body, "logprobs")) {
    if (*lp < 0) throw bad_request(fmt::format("logprobs must be non-negative, got {}", *lp), "logprobs");
    if (*lp > limits.max_logprobs)
      throw bad_request(fmt::format("Requested sample logprobs of {}, which is greater than max allowed: {}", *lp, limits.max_logprobs), "logprobs");
    r.params.logprobs = static_cast<int>(*lp);
  }
  if (auto v = get_bool(body, "return_tokens_as_token_ids")) r.tokens_as_ids = *v;
  if (auto v = get_bool(body, "add_special_tokens")) r.add_special_tokens = *v;
  r.truncate_prompt_tokens = parse_truncate_prompt_tokens(body, model.max_model_len);
  StreamFlags f = parse_stream_flags(body);
  r.stream = f.stream;
  r.include_usage = f.include_usage;
  r.continuous_usage = f.continuous_usage;
  // As vLLM: an explicit prompt_logprobs, else logprobs under echo (the echoed prompt's entries).
  // A stream sends them only under echo + logprobs (prompt_logprobs 0 is allowed there, as in vLLM).
  r.params.prompt_logprobs = parse_prompt_logprobs(body, r.stream, limits);
  if (!r.params.prompt_logprobs && r.echo) r.params.prompt_logprobs = r.params.logprobs;
  if (r.stream && !(r.echo && r.params.logprobs)) r.params.prompt_logprobs.reset();
  return r;
}

ChatRequest parse_chat_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits) {
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  ChatRequest r;
  r.model = check_model_name(body, model);
  if (model.pooling) throw bad_request("The model does not support Chat Completions API (it runs --runner pooling: /v1/embeddings)");
  reject_unsupported(body);
  r.messages = parse_messages(body, limits);
  r.params = parse_sampling_params(body, model, limits);
  r.params.lora_id = lora_of(body, model);
  if (model.chat_keeps_special_tokens) r.params.skip_special_tokens = false;  // the harmony parser reads them
  std::optional<int64_t> max_tokens = get_int(body, "max_completion_tokens");
  const char* max_param = "max_completion_tokens";
  if (!max_tokens) {
    max_tokens = get_int(body, "max_tokens");
    max_param = "max_tokens";
  }
  if (max_tokens) {
    if (*max_tokens < 1) throw bad_request(fmt::format("{} must be at least 1, got {}", max_param, *max_tokens), max_param);
    if (*max_tokens > (1 << 30)) throw bad_request(fmt::format("{} is too large: {}", max_param, *max_tokens), max_param);
    r.max_tokens = static_cast<int>(*max_tokens);
    if (r.params.min_tokens > *r.max_tokens)
      throw bad_request(fmt::format("min_tokens ({}) must be less than or equal to max_tokens ({})", r.params.min_tokens, *r.max_tokens), "min_tokens");
  }
  if (static_cast<int64_t>(r.params.n) > limits.max_choices)
    throw bad_request(fmt::format("at most {} choices are allowed", limits.max_choices), "n");
  if (auto lp = get_bool(body, "logprobs")) r.logprobs = *lp;
  if (auto top = get_int(body, "top_logprobs")) {
    if (*top < 0) throw bad_request(fmt::format("top_logprobs must be non-negative, got {}", *top), "top_logprobs");
    if (*top > limits.max_logprobs)
      throw bad_request(fmt::format("top_logprobs must be at most {}, got {}", limits.max_logprobs, *top), "top_logprobs");
    // vLLM: only a positive top_logprobs needs logprobs (0 is the field's default).
    if (*top > 0 && !r.logprobs) throw bad_request("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    r.top_logprobs = static_cast<int>(*top);
  }
  if (r.logprobs) r.params.logprobs = r.top_logprobs;
  if (auto v = get_bool(body, "return_tokens_as_token_ids")) r.tokens_as_ids = *v;
  r.truncate_prompt_tokens = parse_truncate_prompt_tokens(body, model.max_model_len);
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) throw bad_request("'tools' must be a list", "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      // As vLLM's request model: {"type": "function", "function": {"name": str, ...}}.
      const Json& t = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw bad_request(where + " must be an object", "tools");
      if (t.contains("type") && t["type"] != "function") throw bad_request(where + ".type must be 'function'", "tools");
      if (!t.contains("function") || !t["function"].is_object())
        throw bad_request(where + ".function must be an object", "tools");
      const Json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || f["name"].get_ref<const std::string&>().empty())
        throw bad_request(where + ".function.name must be a non-empty string", "tools");
      if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
        throw bad_request(where + ".function.parameters must be an object", "tools");
    }
    if (!tools->empty()) r.tools = *tools;
  }
  const ToolChoice tool_choice = parse_tool_choice(body);
  r.tool_choice = tool_choice.mode;
  r.tool_choice_function = tool_choice.function;
  if (limits.exclude_tools_when_tool_choice_none && r.tool_choice == "none") r.tools = nullptr;
  if (auto g = tool_choice_grammar(tool_choice, r.tools)) {
    if (r.params.grammar)
      throw bad_request("tool_choice \"required\" or a named function cannot be combined with another structured "
                        "outputs constraint (response_format, structured_outputs, guided_*)",
                        "tool_choice");
    r.params.grammar = std::move(g);
  }
  if (r.params.grammar) r.params.grammar_start_token = model.reasoning_end_token;
  // Type-checked here too: parse_tool_choice reads it only when tool_choice is given (false limits
  // "required" to one call); the calls an "auto" answer makes are not limited (vLLM).
  get_bool(body, "parallel_tool_calls");
  // OpenAI's deprecated function calling: vLLM's request model lacks these fields and drops them with
  // a warning, so the model never sees the functions; here, as for every unsupported feature, a 400.
  if (auto f = body.find("functions"); f != body.end() && !f->is_null() && !(f->is_array() && f->empty()))
    throw bad_request("functions (legacy function calling) is not supported; use tools", "functions");
  if (auto fc = body.find("function_call");
      fc != body.end() && !fc->is_null() && !(fc->is_string() && (*fc == "none" || *fc == "auto")))
    throw bad_request("function_call (legacy function calling) is not supported; use tool_choice", "function_call");
  auto kwargs = body.find("chat_template_kwargs");
  if (kwargs != body.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.chat_template_kwargs = *kwargs;
  }
  apply_reasoning_effort(body, r.chat_template_kwargs);
  // vLLM's documents (RAG templates): a list of string-valued objects, passed to the template as
  // `documents` unless chat_template_kwargs sets it (vLLM updates its template arguments with those).
  if (auto d = body.find("documents"); d != body.end() && !d->is_null()) {
    bool ok = d->is_array();
    if (ok)
      for (const auto& doc : *d) {
        ok = ok && doc.is_object();
        if (ok)
          for (const auto& v : doc) ok = ok && v.is_string();
      }
    if (!ok) throw bad_request("'documents' must be a list of objects of strings", "documents");
    if (!r.chat_template_kwargs.contains("documents")) r.chat_template_kwargs["documents"] = *d;
  }
  for (const auto& [key, value] : limits.default_chat_template_kwargs.items())  // the request's own keys win
    if (!r.chat_template_kwargs.contains(key)) r.chat_template_kwargs[key] = value;
  if (auto t = get_string(body, "chat_template")) {
    if (!limits.trust_request_chat_template)
      throw bad_request("Chat template is passed with request, but --trust-request-chat-template is not set. "
                        "Refused request with untrusted chat template.",
                        "chat_template");
    r.chat_template = *t;
  }
  auto add_generation_prompt = get_bool(body, "add_generation_prompt");
  if (auto v = get_bool(body, "continue_final_message")) r.continue_final_message = *v;
  if (r.continue_final_message) {
    // vLLM rejects an explicit add_generation_prompt: true; an absent one (default true) is taken as
    // false here, where transformers would reject it too.
    if (add_generation_prompt.value_or(false))
      throw bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "continue_final_message");
    const std::string& role = r.messages.back()["role"].get_ref<const std::string&>();
    if (role != "assistant")
      throw bad_request("Cannot set `continue_final_message` to True when the last message is not from the assistant (it is '" +
                            role + "').", "continue_final_message");
    r.add_generation_prompt = false;
  } else if (add_generation_prompt) {
    r.add_generation_prompt = *add_generation_prompt;
  }
  if (auto v = get_bool(body, "add_special_tokens")) r.add_special_tokens = *v;
  if (auto v = get_bool(body, "echo"); v && *v) {
    // vLLM echoes the last message when its role is the response's: "assistant" under a generation
    // prompt, else the last message's own role.
    const Json& last = r.messages.back();
    if (!r.add_generation_prompt || last["role"] == "assistant") r.echo_text = last["content"].get<std::string>();
  }
  StreamFlags f = parse_stream_flags(body);
  r.stream = f.stream;
  r.include_usage = f.include_usage;
  r.continuous_usage = f.continuous_usage;
  r.params.prompt_logprobs = parse_prompt_logprobs(body, r.stream, limits);
  if (r.stream) r.params.prompt_logprobs.reset();  // 0 with stream: accepted, nothing to send (vLLM)
  return r;
}

}  // namespace vireo::server
