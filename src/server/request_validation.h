// Turns a JSON body into a validated request, throwing ApiError (400 naming `param`, 404 for an
// unknown model) on the first problem. Ranges follow vLLM's SamplingParams checks.
#pragma once
#include "server/json_fields.h"
#include "server/request_types.h"

namespace vireo::server {

CompletionRequest parse_completion_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits);
ChatRequest parse_chat_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits);

// "model" absent/null = the served model; anything else must match it (404 NotFoundError).
std::string check_model_name(const Json& body, const ModelInfo& model);
// The LoRA adapter id the request's "model" names (ModelInfo::loras); 0: the base model.
int32_t lora_of(const Json& body, const ModelInfo& model);

// Token ids inside [0, vocab_size); `param` names the field in the error.
void check_token_ids(const std::vector<int32_t>& ids, int32_t vocab_size, const char* param);

// After tokenization: the prompt must leave room for at least one token, and an explicit
// max_tokens must fit (vLLM's messages, naming both numbers).
void check_context_length(int num_prompt_tokens, std::optional<int> max_tokens, int max_model_len, const char* prompt_param);

}  // namespace vireo::server
