// The sampling fields shared by /v1/completions and /v1/chat/completions, checked as vLLM's
// SamplingParams._verify_args does. max_tokens / logprobs are endpoint-specific and set by the caller.
#pragma once
#include "server/json_fields.h"
#include "server/request_types.h"

namespace vireo::server {

SamplingParams parse_sampling_params(const Json& body, const ModelInfo& model, const ValidationLimits& limits);

// Streaming options: stream_options only with stream=true (vLLM).
struct StreamFlags {
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;
};
StreamFlags parse_stream_flags(const Json& body);

// vLLM's prompt_logprobs: top-N logprobs per prompt token (0: the prompt token's own only), at most
// max_logprobs; -1 (the whole vocabulary) is over that cap; not with stream (vLLM: only 0 is).
std::optional<int> parse_prompt_logprobs(const Json& body, bool stream, const ValidationLimits& limits);

// Rejects fields whose feature Vireo does not implement rather than silently ignoring them
// (structured-output fields are checked by parse_sampling_params: structured_output_params.h).
void reject_unsupported(const Json& body);

}  // namespace vireo::server
