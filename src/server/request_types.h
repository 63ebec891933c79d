// Parsed, validated OpenAI requests (after JSON checks, before tokenization).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace vireo::server {

// Caps on what one request may ask for; each violation is a 400 naming the field.
struct ValidationLimits {
  int max_n = 128;
  int max_logprobs = 20;             // vLLM's default max_logprobs
  int max_stop_strings = 64;
  size_t max_stop_string_bytes = 1024;
  int max_stop_token_ids = 1024;
  int max_logit_bias = 1024;  // logit_bias entries per request
  int max_batch_prompts = 1024;      // completions: prompts in one request
  int max_choices = 1024;            // prompts * n
  int max_messages = 4096;
  // vLLM's chat flags, applied as a chat request is parsed: --default-chat-template-kwargs (under the
  // request's own chat_template_kwargs), --exclude-tools-when-tool-choice-none (the template sees no tools
  // when tool_choice is "none") and --trust-request-chat-template (a request may bring its own template;
  // without it such a request gets 400, as in vLLM).
  nlohmann::ordered_json default_chat_template_kwargs = nlohmann::ordered_json::object();
  bool exclude_tools_when_tool_choice_none = false;
  bool trust_request_chat_template = false;
};

// What validation needs to know about the served model.
struct ModelInfo {
  std::string served_model_name;  // the first served name: what responses carry
  int max_model_len = 0;
  int32_t vocab_size = 0;
  // generation_config.json defaults (vLLM --generation-config auto); used when a request omits them.
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  // The end-of-reasoning token when the server has --reasoning-parser ("</think>" as one token):
  // chat structured outputs start after it, as vLLM's do.
  std::optional<int32_t> reasoning_end_token;
  // --reasoning-parser openai_gptoss: chat outputs keep their special tokens (<|channel|>, <|message|>, ...),
  // which the harmony parser reads and strips.
  bool chat_keeps_special_tokens = false;
  std::vector<std::string> served_model_aliases;  // the other served names requests may use
  // The engine runs --scheduling-policy priority: requests may set a non-zero "priority".
  bool priority_scheduling = false;
  // LoRA adapters served beside the base model (--lora-modules, /v1/load_lora_adapter): a request whose
  // "model" names one runs with it and its responses carry that name.
  struct Lora {
    std::string name, path;
    int32_t id = 0;
  };
  std::vector<Lora> loras;
  // --runner pooling: only /v1/embeddings (and /tokenize, /detokenize) serve; generation routes answer 400.
  bool pooling = false;
  std::vector<std::string> labels;  // a sequence classifier's (pooling): /classify, and with one label /score
};

struct PromptInput {
  std::optional<std::string> text;  // set for text prompts; token_ids filled by tokenization
  std::vector<int32_t> token_ids;
};

struct CompletionRequest {
  std::string model;
  std::vector<PromptInput> prompts;
  SamplingParams params;            // params.n = choices per prompt; params.max_tokens is final, unless:
  // an explicit "max_tokens": null (vLLM: None) generates up to the context's end, per prompt.
  bool max_tokens_to_context = false;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool continuous_usage = false;    // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;
  // echo with max_tokens 0 (vLLM; lm-eval-harness scores prompts this way): one token is generated
  // and dropped, the choice is the prompt alone (text and logprobs).
  bool echo_only = false;
  bool tokens_as_ids = false;  // return_tokens_as_token_ids (vLLM): logprob tokens as "token_id:<id>"
  bool tokens_details = false;  // usage.prompt_tokens_details.cached_tokens (--enable-prompt-tokens-details)
  std::optional<int> truncate_prompt_tokens;  // keep the last N prompt tokens (prompt_truncation.h)
  bool add_special_tokens = true;  // vLLM's: text prompts are tokenized with BOS etc. unless false
};

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;          // content flattened to strings
  nlohmann::ordered_json tools;             // null or a non-empty list
  std::string tool_choice = "none";         // "none" | "auto" | "required" | "named" (tool_choice.h)
  std::string tool_choice_function;         // "named": the function's name
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::string chat_template;  // the request's own template (--trust-request-chat-template), "" = the server's
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the prompt ends inside the final (assistant) message
  bool add_special_tokens = false;  // vLLM: the template already placed them
  SamplingParams params;
  std::optional<int> max_tokens;    // explicit max_completion_tokens / max_tokens; else the rest of the context
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool tokens_as_ids = false;  // return_tokens_as_token_ids (vLLM): logprob tokens as "token_id:<id>"
  bool tokens_details = false;  // usage.prompt_tokens_details.cached_tokens (--enable-prompt-tokens-details)
  std::optional<int> truncate_prompt_tokens;  // keep the last N prompt tokens (prompt_truncation.h)
  // echo (vLLM): the last message's content, put before each choice's content when that message is
  // the one being answered or continued (the assistant's, or any without a generation prompt).
  std::string echo_text;
};

}  // namespace vireo::server
