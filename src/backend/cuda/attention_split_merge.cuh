// The decode shapes' key splits merged inside the attention kernel (attention_mma.cu's decode shape and
// attention_decode_fp8.cuh): the last split block of a (seq, kv head) to finish merges the partials of all
// its splits, so decode needs no merge launch.
#pragma once
#include "backend/cuda/attention_mma_common.cuh"

namespace vireo::cuda {
namespace {

constexpr int kMaxDecodeSplits = 128;  // choose_splits' cap: the decode grid z never exceeds it

// Whether this block is the last of its (seq, kv head)'s nsplit split blocks to arrive (a.counters, one per
// blockIdx.y), after its own partials were written; that block resets the counter for the next launch
// (graph replays included). threadFenceReduction pattern: write, fence, count; the last block fences
// again before it reads the others' partials through L2. Every thread of the block calls it.
__device__ __forceinline__ bool last_split_to_arrive(const MmaArgs& a, int nsplit) {
  __shared__ unsigned s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* ctr = a.counters + blockIdx.y;
    const unsigned prev = atomicAdd(ctr, 1u);
    const bool last = prev + 1 == static_cast<unsigned>(nsplit);
    if (last) atomicExch(ctr, 0u);  // every block of this launch has counted: nobody touches it again
    s_last = last ? 1u : 0u;
  }
  __syncthreads();
  if (s_last == 0) return false;
  __threadfence();
  return true;
}

// The in-kernel split merge of one decode-shape (seq, kv head): rows (token, head-in-group) < 16,
// nsplit partials each. sm: >= (16 * kMaxDecodeSplits + 16) floats of shared memory no longer in use.
// Partials of other blocks are read with ld.global.cg (L2; never a stale L1 line).
template <typename T, int D>
__device__ __forceinline__ void merge_decode_splits(const MmaArgs& a, float* sm, int q0, int hk, int rows,
                                                    int nsplit) {
  float* wts = sm;                           // [16][kMaxDecodeSplits]
  float* inv_l = sm + 16 * kMaxDecodeSplits; // [16]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nrows = min(rows, 16);
  auto th_of = [&](int r) {
    return static_cast<int64_t>(q0 + r / a.group) * a.num_heads + hk * a.group + r % a.group;
  };
  for (int r = warp; r < nrows; r += kThreads / 32) {
    const float2* ml = a.ws_ml + th_of(r) * a.max_splits;
    float mm = -INFINITY;
    for (int z = lane; z < nsplit; z += 32) mm = fmaxf(mm, __ldcg(ml + z).x);
    for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    const float mu = mm == -INFINITY ? 0.f : mm;
    float ll = 0.f;
    for (int z = lane; z < nsplit; z += 32) {
      const float2 v = __ldcg(ml + z);
      const float f = exp2f(v.x - mu);
      wts[r * kMaxDecodeSplits + z] = f;
      ll += v.y * f;
    }
    for (int o = 16; o > 0; o >>= 1) ll += __shfl_xor_sync(0xffffffffu, ll, o);
    if (lane == 0) inv_l[r] = ll > 0.f ? 1.f / ll : 0.f;
  }
  __syncthreads();
  constexpr int kC = D / 4;  // float4 columns per row
  for (int idx = threadIdx.x; idx < nrows * kC; idx += kThreads) {
    const int r = idx / kC, col = (idx % kC) * 4;
    const int64_t th = th_of(r);
    const float* po = a.ws_o + th * a.max_splits * D + col;
    const float* w = wts + r * kMaxDecodeSplits;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int z = 0; z < nsplit; ++z) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(po + static_cast<int64_t>(z) * D));
      const float f = w[z];
      acc.x += v.x * f;
      acc.y += v.y * f;
      acc.z += v.z * f;
      acc.w += v.w * f;
    }
    const float il = inv_l[r];
    unsigned* o = reinterpret_cast<unsigned*>(static_cast<T*>(a.out) + th * D + col);
    o[0] = pack2<T>(acc.x * il, acc.y * il);
    o[1] = pack2<T>(acc.z * il, acc.w * il);
  }
}

}  // namespace
}  // namespace vireo::cuda
