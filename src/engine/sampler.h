// Per-request sampling on the CPU: penalties, min_tokens masking, temperature, min-p, top-k,
// top-p, then a draw from the request's own RNG (seeded) or the engine's. Logprobs are the raw
// model log-softmax, before any of that processing (vLLM's default).
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/request_output.h"
#include "engine/sampling_params.h"

namespace vireo {

struct SamplingContext {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;
  std::span<const int32_t> eos_token_ids;  // masked (with stop_token_ids) until min_tokens
  std::mt19937_64* rng = nullptr;          // the request's, else the engine's
};

// Applies penalties and the min_tokens mask in place (logits: [vocab]).
void apply_penalties(std::span<float> logits, const SamplingContext& ctx);
// Turns processed logits into the probabilities the draw uses (temperature > 0):
// temperature, min-p, top-k, top-p; entries outside the support are 0.
std::vector<float> sampling_probs(std::span<const float> logits, const SamplingParams& p);
// Lowest id among the maxima.
int32_t argmax(std::span<const float> logits);
// Full pipeline on one row: returns the token.
int32_t sample_token(std::span<const float> raw_logits, const SamplingContext& ctx);

// log_softmax of the raw logits; the chosen token's logprob and the top_n best (best first,
// ties by lower id).
TokenLogprob compute_logprobs(std::span<const float> raw_logits, int32_t token_id, int top_n);

}  // namespace vireo
