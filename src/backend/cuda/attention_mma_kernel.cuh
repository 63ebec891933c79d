// The mma.sync paged-attention kernel (attention_mma.cu's two shapes: decode rows and 64-row prefill tiles,
// over a T or an FP8 cache), the merge of its key splits, and their occupancy and launch. Included by
// attention_mma.cu only (its planning picks the grid and the splits).
#pragma once
#include <type_traits>

#include "backend/cuda/attention_decode_fp8.cuh"
#include "backend/cuda/attention_fused_prologue.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/attention_split_merge.cuh"
#include "backend/cuda/attention_split_plan.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"

namespace vireo::cuda {
namespace {

// kRowWarps = 4: prefill shape (64 rows, warps own rows); 1: decode shape (16 rows, warps own keys).
// C: the cache's element type, T or KvFp8.
template <typename T, int D, int kRowWarps, typename C = T>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(MmaArgs a) {
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  using M = std::conditional_t<kFp8, __half, T>;  // the mma's inputs: FP8 codes widen exactly to f16
  constexpr bool kDecode = kRowWarps == 1;
  constexpr int kBM = 16 * kRowWarps;
  constexpr int kKeysPerWarp = kDecode ? kBN / 4 : kBN;
  constexpr int kNT = kKeysPerWarp / 8;  // score n-tiles per warp
  constexpr int kDT = D / 8;             // output n-tiles
  constexpr int kLd = D + kPad;          // smem row stride (elements)
  constexpr int kSt = mma_stages<T, C, kDecode>();  // K / V tiles in flight + 1
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);  // [kSt][kBN][kLd]
  T* vs = ks + kSt * kBN * kLd;            // [kSt][kBN][kLd]
  // FP8: the stages hold codes, [kSt][kBN][D + 16] bytes each for K and V, then the widened rows:
  // kc16 / vc16 [kBN][kLd] (a tile pair); the decode shape's warps widen K, then V, into their own rows
  // of kc16 alone.
  uint8_t* ks8 = smem_raw;
  uint8_t* vs8 = ks8 + kSt * kBN * (D + 16);
  __half* kc16 = reinterpret_cast<__half*>(vs8 + kSt * kBN * (D + 16));
  __half* vc16 = kc16 + kBN * kLd;

  // Step metadata (query_start, seq_lens, block tables) is copied before the step's first kernel, and
  // with PDL this kernel starts only after its predecessor passed its own wait: everything but the
  // predecessor's output (q, or in fused mode qkv, and this step's new keys) is readable before ours.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = q_len * a.group;
  // Row tiles in reverse: under the causal mask the last rows see the most keys, so they start first
  // and the short tiles fill in behind them (less tail).
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kBM;
  const int split_len = kDecode ? decode_split_len(kv_len, a.split_len_decode, a.splits_decode)
                                : split_len_for(kv_len, a.split_len_prefill, a.splits_prefill);
  const int nsplit = (kv_len + split_len - 1) / split_len;
  const bool active = q_len > 0 && kDecode == (rows <= 16) && row0 < rows && static_cast<int>(blockIdx.z) < nsplit;
  const int kstart = blockIdx.z * split_len;
  const int last_tok = (min(rows, row0 + kBM) - 1) / a.group;
  const int kend = min(min(kv_len, kstart + split_len), kv_len - q_len + last_tok + 1);
  const int ntiles = active && kend > kstart ? (kend - kstart + kBN - 1) / kBN : 0;
  const int new0 = kv_len - q_len;  // keys >= new0 are this step's
  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  // Bulk rows (decode, not fused): a full mbarrier per stage instead of cp.async groups.
  const bool bulk = kDecode && !kFp8 && a.bulk_kv && a.prep.qkv == nullptr;
  __shared__ uint64_t full_bar[kSt];
  if (bulk) {
    if (threadIdx.x == 0) {
      for (int st = 0; st < kSt; ++st) kv_bar_init(&full_bar[st], kThreads);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
  }
  auto load_tile = [&](int it, int stage, TileRows which) {
    if constexpr (kFp8) {
      load_kv_tile_fp8<D>(a, table, hk, kstart + it * kBN, kend, ks8, vs8, stage, which, new0);
      return;
    }
    if (bulk) bulk_kv_rows<T, D>(a, table, hk, kstart + it * kBN, kend, ks, vs, stage, &full_bar[stage], which, new0);
    else load_kv_tile<T, D>(a, table, hk, kstart + it * kBN, kend, ks, vs, stage, which, new0);
  };
  // Decode: the first tiles' earlier keys stream in while the previous kernel finishes.
  if constexpr (kDecode) {
#pragma unroll
    for (int st = 0; st < kSt - 1; ++st)
      if (st < ntiles) load_tile(st, st, TileRows::kOld);
  }

  pdl_enter();  // before the first read of q / new keys, before any return
  if (!active) return;
  const bool fused = kDecode && !kFp8 && a.prep.qkv != nullptr;  // never with an FP8 cache (launch_mma)
  if constexpr (kDecode) {
    if (fused) {
      if constexpr (!kFp8) fused_decode_prologue<T, D>(a, ks, vs, hk, q0, q_len, rows, kstart, kend, new0);
    } else {
#pragma unroll
      for (int st = 0; st < kSt - 1; ++st)
        if (st < ntiles) load_tile(st, st, TileRows::kNew);
    }
  }

  // This lane's two rows (g and g + 8 of its warp's 16).
  const int wr0 = row0 + (kDecode ? 0 : 16 * warp);
  int tok[2], head[2], pos[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = wr0 + g + 8 * i;
    const bool ok = r < rows;
    tok[i] = ok ? r / a.group : -1;
    head[i] = ok ? hk * a.group + r % a.group : 0;
    pos[i] = ok ? kv_len - q_len + tok[i] : -1;  // -1: every key masked
  }
  // Q fragments for all D/16 k-steps: a0 (row g, k 2t), a1 (row g+8), a2 (row g, k 2t+8), a3 (row g+8, +8).
  // Fused: the rows are in shared memory (fused_q_rows), row r at r * D.
  unsigned qf[D / 16][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const T* qbase = fused ? fused_q_rows<T, D>(ks) + (g + 8 * i) * D
                           : static_cast<const T*>(a.q) + (static_cast<int64_t>(q0 + tok[i]) * a.num_heads + head[i]) * D;
    const unsigned* qrow = tok[i] >= 0 ? reinterpret_cast<const unsigned*>(qbase) : nullptr;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][i] = qrow ? q_pair_as<T, M>(qrow[(kk * 16 + 2 * tq) / 2]) : 0u;
      qf[kk][i + 2] = qrow ? q_pair_as<T, M>(qrow[(kk * 16 + 8 + 2 * tq) / 2]) : 0u;
    }
  }

  float oacc[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this lane's partial row sums
  const int kw0 = kDecode ? warp * kKeysPerWarp : 0;

  // Pipeline: one commit group per tile (empty past the end) keeps the wait counts uniform. Decode
  // issued its first tiles above: they all land in the first group.
#pragma unroll
  for (int st = 0; st < kSt - 1; ++st) {
    if (!kDecode && st < ntiles) load_tile(st, st, TileRows::kAll);
    cp_async_commit();
  }
  // Rows of this warp that are all valid, and the smallest position among them: tiles wholly below
  // it and inside kend need no mask.
  const bool warp_rows_full = wr0 + 15 < rows;
  const int warp_min_pos = kv_len - q_len + wr0 / a.group;
  for (int it = 0; it < ntiles; ++it) {
    const int stage = it % kSt;
    if (bulk) kv_bar_wait(&full_bar[stage], (it / kSt) & 1);  // tile `it`'s rows landed
    else cp_async_wait<kSt - 2>();  // tile `it` landed (this thread's copies) ...
    __syncthreads();                // ... everyone's, and every warp is done with tile it - 1
    if (it + kSt - 1 < ntiles) load_tile(it + kSt - 1, (it + kSt - 1) % kSt, TileRows::kAll);
    cp_async_commit();
    const M* kt;
    const M* vt;
    const uint8_t* v8 = vs8 + stage * kBN * (D + 16);
    if constexpr (kFp8) {  // widen the landed codes; the top-of-loop barrier freed the f16 rows
      const uint8_t* k8 = ks8 + stage * kBN * (D + 16);
      if constexpr (kDecode) {  // this warp's 16 keys, the only ones it reads: K now, V after the scores
        widen_code_rows<D, kKeysPerWarp, 32>(k8, kc16, kw0, lane);
        __syncwarp();
        vt = kc16;
      } else {
        widen_code_rows<D, kBN, kThreads>(k8, kc16, 0, threadIdx.x);
        widen_code_rows<D, kBN, kThreads>(v8, vc16, 0, threadIdx.x);
        __syncthreads();
        vt = vc16;
      }
      kt = kc16;
    } else {
      kt = ks + stage * kBN * kLd;
      vt = vs + stage * kBN * kLd;
    }
    // S = Q K^T for this warp's keys; mask; online softmax; O += P V.
    float sacc[kNT][4];
    qk_scores<M, D, kNT>(sacc, qf, kt, kw0, lane);
    const int kbase = kstart + it * kBN + kw0;
    const bool full = warp_rows_full && kbase + kKeysPerWarp - 1 <= warp_min_pos && kbase + kKeysPerWarp <= kend;
    float mx[2] = {-INFINITY, -INFINITY};
    if (full) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], sacc[nt][e]);
    } else {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kbase + nt * 8 + 2 * tq + (e & 1);
          const int ri = e / 2;
          const float v = (key < kend && key <= pos[ri]) ? sacc[nt][e] : -INFINITY;
          sacc[nt][e] = v;
          mx[ri] = fmaxf(mx[ri], v);
        }
      }
    }
    online_softmax_step<kNT, kDT>(sacc, oacc, m, l, mx, a.scale_log2);
    if constexpr (kFp8 && kDecode) {  // the warp's K rows are read: its V rows take their place
      __syncwarp();
      widen_code_rows<D, kKeysPerWarp, 32>(v8, kc16, kw0, lane);
      __syncwarp();
    }
    pv_accumulate<M, D, kNT>(oacc, sacc, vt, kw0, lane);
    if constexpr (kFp8 && kDecode) __syncwarp();  // V read before the next tile's K overwrites it
  }
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
  }
  const int split = blockIdx.z;
  const bool direct = nsplit == 1;

  if constexpr (kDecode) {
    cp_async_wait<0>();
    __syncthreads();  // the tile buffers become the merge buffers
    // Merge the 4 warps' partial softmaxes over their key quarters through shared memory.
    float* sm_o = reinterpret_cast<float*>(smem_raw);  // [4][16][D]
    float* sm_m = sm_o + 4 * 16 * D;                   // [4][16]
    float* sm_l = sm_m + 4 * 16;                       // [4][16]
    store_warp_partial<D>(sm_o, sm_m, sm_l, oacc, m, l, warp, g, tq);
    __syncthreads();
    for (int idx = threadIdx.x; idx < 16 * D; idx += kThreads) {
      const int r = idx / D, col = idx % D;
      const int rr = row0 + r;
      if (rr >= rows) continue;
      float mm, ll;
      const float oo = merge_warp_partials<D>(sm_o, sm_m, sm_l, r, col, mm, ll);
      const int64_t th = static_cast<int64_t>(q0 + rr / a.group) * a.num_heads + hk * a.group + rr % a.group;
      if (direct) {
        static_cast<T*>(a.out)[th * D + col] = from_f<T>(ll > 0.f ? oo / ll : 0.f);
      } else {
        a.ws_o[(th * a.max_splits + split) * D + col] = oo;
        if (col == 0) a.ws_ml[th * a.max_splits + split] = make_float2(mm, ll);
      }
    }
    if (direct || a.counters == nullptr) return;
    // Split merge in the kernel: the last of this (seq, kv head)'s nsplit blocks to arrive merges all
    // partials (threadFenceReduction pattern: write, fence, count; the last block fences, then reads
    // through L2) and resets the counter for the next launch (graph replays included).
    if (!last_split_to_arrive(a, nsplit)) return;
    merge_decode_splits<T, D>(a, reinterpret_cast<float*>(smem_raw), q0, hk, rows, nsplit);
  } else {
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      if (tok[ri] < 0) continue;
      const int64_t th = static_cast<int64_t>(q0 + tok[ri]) * a.num_heads + head[ri];
      store_rows_out<T, D>(a, oacc, ri, th, m[ri], l[ri], split, direct, tq);
    }
  }
}

// Merges the key splits of every (token, head) whose sequence was split: one block of head_dim
// threads per (token, head); the split weights are computed once into shared memory. Splits are
// planned only when the grid is small (decode, or few prefill rows), so this grid stays small too.
template <typename T>
__global__ void attention_merge_kernel(MmaArgs a, int head_dim) {
  extern __shared__ float wts[];  // [max_splits]
  __shared__ float inv_l;
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int q_len = a.query_start[lo + 1] - a.query_start[lo], kv_len = a.seq_lens[lo];
  if (q_len <= 0 || t >= a.query_start[lo + 1]) return;
  const bool decode = q_len * a.group <= 16;
  if (decode && a.counters != nullptr) return;  // merged inside the decode-shape kernel
  const int split_len = decode ? decode_split_len(kv_len, a.split_len_decode, a.splits_decode)
                               : split_len_for(kv_len, a.split_len_prefill, a.splits_prefill);
  const int nsplit = (kv_len + split_len - 1) / split_len;
  if (nsplit <= 1) return;
  const int64_t th = t * a.num_heads + h;
  const float2* ml = a.ws_ml + th * a.max_splits;
  if (threadIdx.x < 32) {
    float mm = -INFINITY;
    for (int z = threadIdx.x; z < nsplit; z += 32) mm = fmaxf(mm, ml[z].x);
    for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    const float mu = mm == -INFINITY ? 0.f : mm;
    float ll = 0.f;
    for (int z = threadIdx.x; z < nsplit; z += 32) {
      const float2 v = ml[z];
      const float f = exp2f(v.x - mu);
      wts[z] = f;
      ll += v.y * f;
    }
    for (int o = 16; o > 0; o >>= 1) ll += __shfl_xor_sync(0xffffffffu, ll, o);
    if (threadIdx.x == 0) inv_l = ll > 0.f ? 1.f / ll : 0.f;
  }
  __syncthreads();
  const float* po = a.ws_o + th * a.max_splits * head_dim + threadIdx.x;
  float oo = 0.f;
#pragma unroll 8
  for (int z = 0; z < nsplit; ++z) oo += po[z * head_dim] * wts[z];
  static_cast<T*>(a.out)[th * head_dim + threadIdx.x] = from_f<T>(oo * inv_l);
}

// Blocks of one kernel shape resident per SM (registers and shared memory decide), once per shape.
template <typename T, int D, int kRowWarps, typename C = T>
int blocks_per_sm() {
  static const int n = [] {
    constexpr size_t smem = mma_tile_smem_bytes<T, D, C, kRowWarps == 1>();
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_mma_kernel<T, D, kRowWarps, C>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int b = 0;
    VIREO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, attention_mma_kernel<T, D, kRowWarps, C>,
                                                                   kThreads, smem));
    return b < 1 ? 1 : b;
  }();
  return n;
}

template <typename T, int D, int kRowWarps, typename C = T>
void launch_shape(const MmaArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = mma_tile_smem_bytes<T, D, C, kRowWarps == 1>();
  static_assert(smem >= (4 * 16 * D + 2 * 4 * 16) * sizeof(float), "decode merge must fit in the tile buffers");
  static_assert(smem >= (16 * kMaxDecodeSplits + 16) * sizeof(float), "split merge must fit in the tile buffers");
  blocks_per_sm<T, D, kRowWarps, C>();  // sets the shared-memory attribute
  launch_pdl(attention_mma_kernel<T, D, kRowWarps, C>, grid, dim3(kThreads), smem, stream, a);
  check_launch("paged_attention");
}

}  // namespace
}  // namespace vireo::cuda
