// Test helper: one request's sampling on the host, in the request's terms (prompt/output/EOS ids,
// SamplingParams), over the CPU reference of the sample op (backend/cpu/cpu_sampling.h). The engine
// itself samples through Model::forward_sample; sampler_test.cc checks the reference's semantics
// (penalties, min_tokens masking, temperature, min-p, top-k, top-p, seeded draws, raw logprobs) here.
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
