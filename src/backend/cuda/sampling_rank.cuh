// The chosen tokens' ranks (SampleParams::out_ranks), after the sample kernels wrote the tokens:
// rank = #{ids v : logit[v] >= logit[token]} over the raw row, as vLLM counts it (ties share the worse
// rank). Asked for only with prompt logprobs, so one extra read of those rows is cheap next to the prefill.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda::sampling {

constexpr int kRankThreads = 256;

// grid: one block per row. logits: [M, V] T; tokens, ranks: [M].
template <typename T>
__global__ void __launch_bounds__(kRankThreads) rank_kernel(const T* logits, int vocab, const int32_t* tokens,
                                                            int32_t* ranks) {
  __shared__ int warp_counts[kRankThreads / 32];
  pdl_enter();  // the tokens come from the kernel before
  const T* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int token = tokens[blockIdx.x];
  const float x = token >= 0 && token < vocab ? to_f(row[token]) : __int_as_float(0x7f800000);
  int count = 0;
  for (int v = threadIdx.x; v < vocab; v += kRankThreads) count += to_f(row[v]) >= x ? 1 : 0;
  count = __reduce_add_sync(0xffffffffu, count);
  if (threadIdx.x % 32 == 0) warp_counts[threadIdx.x / 32] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kRankThreads / 32; ++w) total += warp_counts[w];
    ranks[blockIdx.x] = total;
  }
}

}  // namespace vireo::cuda::sampling
