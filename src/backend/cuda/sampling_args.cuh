// The sample kernels' arguments (sampling.cu), shared by the slow and fast path headers.
#pragma once
#include <cstdint>
#include <vector_types.h>

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
  int32_t* out_tokens_mirror;  // [M] the same tokens, or null (SampleParams::out_tokens_mirror)
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
  // stats_sample_kernel (sampling_stats.cuh): the logits' RangeStats [M, C] (C = num_chunks), or null.
  const float4* range_stats;
  // Mid path (sampling_mid.cuh): rows with penalties/masks or threshold searches, over all chunks.
  // plan null: off (those rows take the slow path).
  struct MidPlan* plan;                // [M] the threshold plan of rows with top-k/top-p (hist_kernel)
  uint32_t* pen_bits;                  // [M, bit_words] ids whose work value is in scratch, or null
  int bit_words;                       // ceil(V / 32)
  float* pwmax;                        // [M, C] chunk max of the work row (penalties and masks applied)
  int32_t* pwarg;                      // [M, C] its lowest id
  unsigned long long* pmass;           // [M, C] fixed-point mass of the chunk's surely kept ids
  unsigned int* hist_count;            // [M, kHistBins] domain ids per bin of e
  unsigned long long* hist_mass;       // [M, kHistBins] their fixed-point mass
  unsigned int* arrivals;              // [M] hist_kernel blocks done (zeroed by chunk_kernel)
  unsigned int* cand_count;            // [M] candidates found (zeroed by chunk_kernel)
  uint2* cand;                         // [M, kCandCap] (bits of e, id) of the boundary bins' ids
};

}  // namespace vireo::cuda::sampling
