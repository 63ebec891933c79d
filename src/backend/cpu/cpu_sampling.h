// The CPU reference of token selection (the `sample` op, semantics in backend/op_params.h), one
// logits row at a time. The CUDA kernel (cuda/sampling.cu) is checked against these functions.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/op_params.h"

namespace vireo::cpu {

// Penalties then masks, in place (logits: [V]). pairs: [E, 2] flattened, (token id, times in the
// output) for every distinct id of prompt + output; ids outside [0, V) are ignored.
//   repetition_penalty != 1: l = l > 0 ? l / rp : l * rp        (every listed id, HF semantics)
//   count > 0:               l -= frequency * count + presence  (output ids only)
// then every id of mask_ids -> -inf.
void apply_penalties(std::span<float> logits, const SamplingRow& row, std::span<const int32_t> pairs,
                     std::span<const int32_t> mask_ids);
// The draw's distribution (temperature >= 1e-5): softmax((l - max) / T), then min-p, top-k, top-p,
// renormalised; entries outside the support are 0. Uses temperature, min_p, top_k, top_p of `row`.
std::vector<float> sampling_probs(std::span<const float> logits, const SamplingRow& row);
// Lowest id among the maxima.
int32_t argmax(std::span<const float> logits);
// Walks ids in increasing order accumulating probs: the first id where uniform < cum, else the last
// nonzero one (rounding).
int32_t draw(std::span<const float> probs, double uniform);
// The whole selection of one row: forced token, else penalties + masks, then greedy or a draw with
// row.uniform. pairs/mask_ids are this row's entries only.
int32_t select_token(std::span<const float> raw_logits, const SamplingRow& row, std::span<const int32_t> pairs,
                     std::span<const int32_t> mask_ids);

// log(sum(exp(l))) of the raw row (double sum).
float log_sum_exp(std::span<const float> logits);
// The n best raw logprobs, best first, ties by lower id: ids[i], logprobs[i] = l[ids[i]] - lse.
void top_logprobs(std::span<const float> logits, float lse, int n, int32_t* ids, float* logprobs);

// The op: rows in parallel on the pool. Validates shapes and row ranges (throws vireo::Error).
void sample(ThreadPool& pool, const SampleParams& p);
void add_logit_bias(const LogitBiasParams& p);
void apply_token_bitmask(const TokenBitmaskParams& p);

}  // namespace vireo::cpu
