// Runs the backend's sample op over a step's logits rows: one packed upload of the sampling
// rows, penalties, masks, logit-bias entries and structured-output token bitmasks, the bitmask and
// bias ops (in place on the logits) when any row has one, the sample op, one packed download of
// tokens and logprobs.
#pragma once
#include <deque>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace vireo {

// Device buffers of the sampling op, grown on demand and kept between steps.
struct SamplingWorkspace {
  Tensor in, out;  // I32; out starts with the last launched step's M tokens
  int64_t in_cap = 0, out_cap = 0;
  std::vector<int32_t> host_in;
  struct Pending {  // a launched step whose results are still on their way to the host
    int ticket = 0;
    int64_t rows = 0, num_top = 0;
    std::vector<int32_t> host;  // [tokens M][logprobs M*(1+N)][top ids M*N]
  };
  std::deque<Pending> pending;  // in launch order
  std::vector<std::vector<int32_t>> spare_host;  // result buffers of collected steps, reused
};

// logits: [M, V] on `be` (M = batch.rows.size()). Fills out (tokens, logprobs, top ids).
void sample_on_backend(Backend& be, const Tensor& logits, const SamplingBatch& batch, SampledRows& out,
                       SamplingWorkspace& ws);
// The same in two halves: launch issues the sampling and the download and returns without waiting;
// finish (in launch order) waits for that step's results.
int sample_on_backend_launch(Backend& be, const Tensor& logits, const SamplingBatch& batch, SamplingWorkspace& ws);
void sample_on_backend_finish(Backend& be, int ticket, SampledRows& out, SamplingWorkspace& ws);
void free_sampling_workspace(Backend& be, SamplingWorkspace& ws);

}  // namespace vireo
