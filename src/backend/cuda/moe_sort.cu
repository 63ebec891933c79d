// Grouped MoE, step 1 (moe.h): the routed slots sorted by expert, and the GEMM tile table.
//
// One block per expert e, every block reading all S = T * k ids (4 bytes each, L2-resident after the
// first block; S <= kMoeGroupedChunkTokens * k keeps a pass short):
//   1. a shared-memory histogram of all experts (integer atomics: the counts do not depend on their
//      order), from which the block derives, for its own expert,
//        first row   = slots routed to experts < e,
//        first tile  = sum over experts < e of ceil(count / kMoeTileRows);
//   2. a stable compaction of the slots with id e, in ascending slot order (slot s = t * k + j, so
//      ascending token), by block prefix sums: sorted_slot[first row + rank] = s and row_of_slot[s];
//   3. its tiles: {e, first row + i * BM, min(BM, count - i * BM)}.
// Block 0 writes the tile count. Nothing depends on which block runs first, so it is deterministic,
// and nothing goes back to the host. Experts past a few thousand would want a real multi-block scan;
// MoE models have at most a few hundred (launch_moe allows 8192).
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kSortThreads = 512, kSortWarps = kSortThreads / 32;
constexpr int kPerThread = 4;  // consecutive ids per thread and round (one 16-byte load)
constexpr int kRound = kSortThreads * kPerThread;

// Sum over the block of v (all threads must call; red: kSortWarps ints of shared scratch).
__device__ __forceinline__ int block_sum(int v, int* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  int s = 0;
  for (int w = 0; w < kSortWarps; ++w) s += red[w];
  return s;
}

// ids[s .. s + 4) (s a multiple of 4, ids 16-byte aligned); -1 past the end.
__device__ __forceinline__ void load4(const int* ids, int s, int slots, int (&v)[kPerThread]) {
  if (s + kPerThread <= slots) {
    const int4 q = *reinterpret_cast<const int4*>(ids + s);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) v[i] = s + i < slots ? ids[s + i] : -1;
  }
}

// grid: (E); dynamic shared memory: E ints (the histogram).
__global__ void __launch_bounds__(kSortThreads) moe_sort_kernel(const int* ids, int slots, int num_experts,
                                                                int* sorted_slot, int* row_of_slot, MoeTile* tiles,
                                                                int* num_tiles) {
  extern __shared__ int hist[];  // [E]
  __shared__ int red[kSortWarps];
  __shared__ int warp_count[kSortWarps];
  const int e = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  pdl_enter();  // ids come from the route kernel
  for (int i = threadIdx.x; i < num_experts; i += kSortThreads) hist[i] = 0;
  __syncthreads();
  for (int s = threadIdx.x * kPerThread; s < slots; s += kRound) {
    int v[kPerThread];
    load4(ids, s, slots, v);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      if (v[i] >= 0) atomicAdd(&hist[v[i]], 1);
  }
  __syncthreads();
  int rows_before = 0, tiles_before = 0, tiles_all = 0;
  for (int i = threadIdx.x; i < num_experts; i += kSortThreads) {
    const int c = hist[i], t = (c + kMoeTileRows - 1) / kMoeTileRows;
    if (i < e) rows_before += c, tiles_before += t;
    tiles_all += t;
  }
  rows_before = block_sum(rows_before, red);
  tiles_before = block_sum(tiles_before, red);
  tiles_all = block_sum(tiles_all, red);
  const int count = hist[e];
  if (e == 0 && threadIdx.x == 0) *num_tiles = tiles_all;
  const int my_tiles = (count + kMoeTileRows - 1) / kMoeTileRows;
  for (int i = threadIdx.x; i < my_tiles; i += kSortThreads)
    tiles[tiles_before + i] = MoeTile{e, rows_before + i * kMoeTileRows, min(kMoeTileRows, count - i * kMoeTileRows), 0};
  if (count == 0) return;
  // Stable compaction, kRound slots per round: a match's row = matches in earlier rounds + in earlier
  // warps of this round (warp_count) + in earlier lanes of this warp (scan) + earlier in this thread.
  int base = rows_before;
  for (int s0 = 0; s0 < slots; s0 += kRound) {
    const int s = s0 + threadIdx.x * kPerThread;
    int v[kPerThread];
    load4(ids, s, slots, v);
    int c = 0;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) c += v[i] == e;
    int incl = c;  // inclusive scan over the warp's lanes
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    if (lane == 31) warp_count[warp] = incl;
    __syncthreads();
    int before = 0, round = 0;
    for (int w = 0; w < kSortWarps; ++w) {
      const int wc = warp_count[w];
      before += w < warp ? wc : 0;
      round += wc;
    }
    int r = base + before + incl - c;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      if (v[i] == e) {
        sorted_slot[r] = s + i;
        row_of_slot[s + i] = r;
        ++r;
      }
    base += round;
    if (base - rows_before == count) break;  // uniform: every thread summed the same counts
    __syncthreads();                          // warp_count is rewritten next round
  }
}

}  // namespace

void launch_moe_sort(const int* ids, int64_t slots, int64_t num_experts, int* sorted_slot, int* row_of_slot,
                     MoeTile* tiles, int* num_tiles, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > 8192 || slots < 1 || slots > (int64_t{1} << 30))
    throw Error("cuda moe sort: expects 1..8192 experts and 1..2^30 slots");
  launch_pdl(moe_sort_kernel, dim3(static_cast<unsigned>(num_experts)), dim3(kSortThreads),
             static_cast<size_t>(num_experts) * sizeof(int), stream, ids, static_cast<int>(slots),
             static_cast<int>(num_experts), sorted_slot, row_of_slot, tiles, num_tiles);
  check_launch("moe sort");
}

}  // namespace vireo::cuda
