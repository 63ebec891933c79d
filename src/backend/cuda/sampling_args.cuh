// The sample kernels' arguments (sampling.cu), shared by the slow and fast path headers.
#pragma once
#include <cstdint>

#include "backend/op_params.h"

namespace vireo::cuda::sampling {

struct Args {
  const void* logits;          // [M, V] T
  int vocab;
  bool aligned;                // logits rows 16-byte aligned
  const SamplingRow* rows;     // [M]
  const int32_t* pairs;        // [E, 2] (id, output count) or null
  int num_pairs;
  const int32_t* masks;        // [E2] or null
  int num_masks;
  float* scratch;              // [M, V] fp32 penalised copies, or null when no row can have penalties
  int num_top;                 // N
  int32_t* out_tokens;         // [M]
  float* out_logprobs;         // [M, 1 + N]
  int32_t* out_top_ids;        // [M, N] or null
  // Fast-path partials, [M, C] (top lists [M, C, kMaxTop], the first K or kMaxTop used); pmax null:
  // every row takes the slow path.
  int chunk;                   // ids per chunk: kChunkStep * iters
  int num_chunks;              // C = ceil(V / chunk)
  float* pmax;                 // chunk max of the raw logits
  float* psum;                 // sum exp(l - chunk max)
  float* ptsum;                // draw rows: sum exp((l - chunk max) / T)
  float* ptop_v;               // chunk top-K values, best first ([M, C, kMaxTop]: stride kMaxTop)
  int32_t* ptop_i;             // their ids (INT_MAX: none)
};

}  // namespace vireo::cuda::sampling
