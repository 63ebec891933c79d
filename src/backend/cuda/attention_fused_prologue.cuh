// Fused mode of the decode-shape attention kernel (attention_mma.cu): qkv_prepare's work for the
// block's own rows, so a decode step needs no separate qkv_prepare launch (one dependent kernel fewer
// per layer, and the K/V tiles stream while the previous GEMV finishes).
#pragma once
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/qkv_head.cuh"

namespace vireo::cuda {
namespace {

// The fused prologue's shared memory is the last pipeline stage (kStages - 1), which the pipeline first
// fills inside its loop, after a barrier: q rows [16][D] in its K tile, the warps' RoPE rows in its V tile.
template <typename T, int D>
__device__ __forceinline__ T* fused_q_rows(T* ks) {
  return ks + (kStages - 1) * kBN * (D + kPad);
}

// qkv_prepare's work for one decode-shape block of (seq, kv head hk), after the PDL wait, a warp per item:
//   - q rows r < rows ((token r / G, head hk * G + r % G)): prepared (norm, RoPE) into qs (row r at r * D);
//   - the new tokens whose key (new0 + j) lies in [kstart, kend): k prepared and v copied into the
//     cache at the token's slot (skipped when < 0) and, for the first `pre_tiles` tiles (already in
//     flight without their new rows: TileRows::kOld; tile t in stage t), into the tile row itself.
//     Later tiles gather the new rows from the cache: the caller fences before that gather.
// rope: >= 4 * kMaxHeadDim floats of shared memory (each warp's RoPE partner row). Returns how many
// new tokens the block wrote. Used by the split kernel (fused mode) and the cluster decode kernel.
// kFast: prepare_head's fast form (the caller checked qkv_fast_form).
template <typename T, int D, bool kFast = false>
__device__ __forceinline__ int prepare_decode_items(const MmaArgs& a, T* qs, float* rope, T* ks, T* vs, int pre_tiles, int hk, int q0,
                                    int q_len, int rows, int kstart, int kend, int new0) {
  constexpr int kLd = D + kPad;
  const QkvArgs& p = a.prep;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* rope_row = rope + warp * kMaxHeadDim;
  const int h = a.num_heads, hkv = a.num_kv_heads;
  const int64_t width = static_cast<int64_t>(h + 2 * hkv) * D;
  const T* qkv = static_cast<const T*>(p.qkv);
  const bool pairs = p.vec;
  const int j0 = max(0, kstart - new0), j1 = min(q_len, kend - new0);
  const int num_new = max(0, j1 - j0);
  const int items = rows + 2 * num_new;  // q rows, then (k, v) per new token
  for (int it = warp; it < items; it += kThreads / 32) {
    if (it < rows) {
      const int tok = q_len == 1 ? 0 : it / a.group;  // decode: one token, no division
      const int64_t t = q0 + tok;
      const int head = hk * a.group + it - tok * a.group;
      float x[D / 32];  // the head dim is known: half the generic path's code at D 128
      prepare_head<T, D / 32, kFast>(p, qkv + t * width + static_cast<int64_t>(head) * D, p.positions[t], true,
                                     pairs, rope_row, x);
      store_head<T>(qs + it * D, D, kFast || pairs, x);
      continue;
    }
    const int j = j0 + (it - rows) / 2;
    const bool is_k = (it - rows) % 2 == 0;
    const int64_t t = q0 + j;
    const int slot = p.slots[t];
    const int rel = new0 + j - kstart, tile = rel / kBN;
    T* srow = tile < pre_tiles ? (is_k ? ks : vs) + (tile * kBN + rel % kBN) * kLd : nullptr;  // stage == tile
    T* grow = slot >= 0 ? static_cast<T*>(const_cast<void*>(is_k ? a.k_cache : a.v_cache)) + static_cast<int64_t>(slot) * hkv * D +
                              static_cast<int64_t>(hk) * D
                        : nullptr;
    if (is_k) {
      float x[D / 32];  // the head dim is known: half the generic path's code at D 128
      prepare_head<T, D / 32, kFast>(p, qkv + t * width + static_cast<int64_t>(h + hk) * D, p.positions[t],
                                     false, pairs, rope_row, x);
      if (grow) store_head<T>(grow, D, kFast || pairs, x);
      if (srow) store_head<T>(srow, D, kFast || pairs, x);
    } else {
      const T* src = qkv + t * width + static_cast<int64_t>(h + hkv + hk) * D;
      T v[D / 32];  // every load before any store (see qkv_prepare_heads_kernel): one round trip, not D / 32
#pragma unroll
      for (int j = 0; j < D / 32; ++j) v[j] = src[lane + 32 * j];
#pragma unroll
      for (int j = 0; j < D / 32; ++j) {
        if (grow) grow[lane + 32 * j] = v[j];
        if (srow) srow[lane + 32 * j] = v[j];
      }
    }
  }
  return num_new;
}

// The split kernel's fused prologue (kStages - 1 tiles in flight before the wait; q rows and RoPE rows in
// the last stage, see fused_q_rows). Ends with a barrier.
template <typename T, int D>
__device__ void fused_decode_prologue(const MmaArgs& a, T* ks, T* vs, int hk, int q0, int q_len, int rows,
                                      int kstart, int kend, int new0) {
  constexpr int kLd = D + kPad;
  float* rope = reinterpret_cast<float*>(vs + (kStages - 1) * kBN * kLd);
  const int num_new = prepare_decode_items<T, D>(a, fused_q_rows<T, D>(ks), rope, ks, vs, kStages - 1, hk, q0, q_len,
                                                 rows, kstart, kend, new0);
  if (num_new > 0) __threadfence();  // cache rows a later tile of this block gathers (cp.async reads L2)
  __syncthreads();
}

}  // namespace
}  // namespace vireo::cuda
