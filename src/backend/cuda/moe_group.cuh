// Shared device pieces of the per-slot ("decode") MoE kernels (moe_decode.cu, moe_decode_mxfp4.cu): a
// block serves a group of <= kGroupTokens tokens and sorts the group's slots by expert in shared memory
// (Group, build_group), so each distinct expert's rows are streamed once for every slot that chose it.
#pragma once
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kDecThreads = 256, kDecWarps = kDecThreads / 32;
constexpr int kMaxTopK = 32;                        // launch_moe's limit
constexpr int kGroupTokens = 16;                    // tokens a block serves (they share weight reads)
constexpr int kMaxSlots = kGroupTokens * kMaxTopK;  // 512 slots a group

// The token group's routing, sorted by expert (ascending id, then slot). Local slot j = m * k + q
// (token t0 + m, its q-th choice).
struct Group {
  int n, nexp;                    // slots, distinct experts
  int id[kMaxSlots];              // expert of local slot j
  int order[kMaxSlots];           // sorted position p -> local slot
  int pos[kMaxSlots];             // local slot -> sorted position
  int start[kMaxSlots + 1];       // distinct expert u (ascending): positions [start[u], start[u + 1])
  int expert[kMaxSlots];          // distinct expert u's id
  int tok_order[kMaxSlots];       // token m's slots in ascending expert id: tok_order[m * k + r]
  unsigned head[kMaxSlots / 32];  // bit p: position p is its expert's first
};

// Fills g from ids [n] (this group's slots; a token's k ids are distinct). O(n) a thread (n <= 128 at
// T = 16, top-8); ends with __syncthreads(). ids through L2 (ld.cg): they were written by another grid.
__device__ void build_group(Group& g, const int* ids, int n, int k) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = threadIdx.x; j < n; j += kDecThreads) g.id[j] = __ldcg(ids + j);
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += kDecThreads) {
    const int e = g.id[j];
    int p = 0;
    for (int q = 0; q < n; ++q) {
      const int f = g.id[q];
      p += (f < e) | ((f == e) & (q < j));
    }
    g.order[p] = j;
    g.pos[j] = p;
    const int m0 = j / k * k;
    int r = 0;
    for (int q = m0; q < m0 + k; ++q) r += g.id[q] < e;
    g.tok_order[m0 + r] = j;
  }
  __syncthreads();
  for (int p0 = warp * 32; p0 < n; p0 += kDecThreads) {  // warp-uniform trip count
    const int p = p0 + lane;
    const bool h = p < n && (p == 0 || g.id[g.order[p]] != g.id[g.order[p - 1]]);
    const unsigned bits = __ballot_sync(0xffffffffu, h);
    if (lane == 0) g.head[p0 / 32] = bits;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < n; p += kDecThreads) {
    const unsigned w = g.head[p / 32];
    if (!((w >> (p % 32)) & 1u)) continue;
    int u = __popc(w & ((1u << (p % 32)) - 1u));
    for (int i = 0; i < p / 32; ++i) u += __popc(g.head[i]);
    g.expert[u] = g.id[g.order[p]];
    g.start[u] = p;
  }
  if (threadIdx.x == 0) {
    int c = 0;
    for (int i = 0; i < (n + 31) / 32; ++i) c += __popc(g.head[i]);
    g.nexp = c;
    g.start[c] = n;
    g.n = n;
  }
  __syncthreads();
}

// The 128-byte lines holding [p, p + bytes) into L2, lane-strided over a warp (none past the range).
__device__ __forceinline__ void prefetch_range_l2(const void* p, int64_t bytes, int lane) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), first = a & ~uintptr_t{127};
  for (uintptr_t line = first + static_cast<uintptr_t>(lane) * 128; line < a + bytes; line += 32 * 128)
    prefetch_l2(reinterpret_cast<const void*>(line));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// round(v + bias[i]) when bias is given (HF's bf16 linear: the rounded product plus its bias, rounded
// again), else v unchanged.
template <typename T>
__device__ __forceinline__ float add_bias(float v, const T* bias, int64_t i) {
  return bias ? to_f(from_f<T>(v + to_f(bias[i]))) : v;
}

}  // namespace
}  // namespace vireo::cuda
