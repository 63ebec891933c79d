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

// Rejects fields whose feature Vireo does not implement rather than silently ignoring them.
void reject_unsupported(const Json& body);

}  // namespace vireo::server
