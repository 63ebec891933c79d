// Runs the backend's sample op over a step's logits rows: one packed upload of the sampling
// rows, penalties, masks and logit-bias entries, the bias op (in place on the logits) when any row has
// one, the sample op, one packed download of tokens and logprobs.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace vireo {

// Device buffers of the sampling op, grown on demand and kept between steps.
struct SamplingWorkspace {
  Tensor in, out;  // I32
  int64_t in_cap = 0, out_cap = 0;
  std::vector<int32_t> host_in, host_out;
};

// logits: [M, V] on `be` (M = batch.rows.size()). Fills out (tokens, logprobs, top ids).
void sample_on_backend(Backend& be, const Tensor& logits, const SamplingBatch& batch, SampledRows& out,
                       SamplingWorkspace& ws);
void free_sampling_workspace(Backend& be, SamplingWorkspace& ws);

}  // namespace vireo
