// The per-row sampling inputs of a step (model.h SamplingBatch) from the scheduled requests, and
// the logprobs of a sampled row back in the engine's TokenLogprob form.
#pragma once
#include <cstdint>
#include <random>
#include <span>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "model/model.h"

namespace vireo {

// One SamplingRow per built.rows entry. Sampling rows draw their `uniform` from the request's
// generator (seeded requests) or `engine_rng`, in row order, and only when temperature > 0, so a
// seed gives the same tokens as the host sampler did. Prompt-logprob rows force the next prompt
// token. Penalty entries cover prompt + output ids of rows with penalties; mask entries are the
// EOS and stop-token ids while a row is below min_tokens. Bias entries are the sampling rows' logit_bias.
// Rows of requests with a grammar (Request::matcher) get a token bitmask row of ceil(logits_width / 32)
// words: the tokens the grammar allows next (only the stop tokens once it is complete).
// pending_tokens: outputs already sampled by a step still running (async scheduling), counted for min_tokens
// in the rows of requests whose token is in flight (ScheduledRequest::token_in_flight).
// defer_masks: the bitmask rows are left to SamplingBatch::fill_token_bitmask, which the sampling launch
// calls after issuing the forward (the matchers must outlive that launch: the engine's step holds them).
SamplingBatch build_sampling_batch(const SchedulerOutput& sched, const BuiltStep& built,
                                   std::span<const int32_t> eos_token_ids, std::mt19937_64& engine_rng,
                                   int pending_tokens = 0, int32_t logits_width = 0, bool defer_masks = false);

// Row r of `s` as a TokenLogprob with the request's top_n (<= s.num_top_logprobs) alternatives.
TokenLogprob sampled_logprob(const SampledRows& s, size_t r, int top_n);

}  // namespace vireo
