// What the engine streams back for a request: a delta per step in which it made progress.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vireo {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;                             // raw model log-softmax (vLLM's default)
  std::vector<std::pair<int32_t, float>> top;       // top-N (id, logprob), best first
  int32_t rank = 0;  // vLLM's rank of token_id in its raw row (ids at least as likely, >= 1); 0: not counted
};

struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> token_ids;                   // new tokens since the previous output
  std::string text;                                 // new text (stop strings held back / cut)
  std::vector<TokenLogprob> logprobs;               // one per new token, if requested
  // Only in the first output, if prompt_logprobs was requested: one per prompt token
  // (the first is nullopt: nothing predicts it).
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  bool finished = false;
  std::string finish_reason;                        // "stop" | "length" | "abort" | "error"
  std::optional<std::string> stop_string;           // the stop string that matched
  std::optional<int32_t> stop_token_id;             // the stop token (not EOS) that matched
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;                        // cumulative
  int num_cached_tokens = 0;                        // prompt tokens served from the prefix cache
  std::string error;                                // finish_reason == "error"
  bool error_from_request = false;                  // the request's own input caused it (a server answers 400)
  std::vector<float> embedding;                     // pooling runner: the prompt's embedding (final output)
};

}  // namespace vireo
