// Paged attention on the tensor cores (mma.sync m16n8k16, bf16/f16 in, fp32 accumulate) for head
// dims 64 and 128. Query rows are packed GQA-style: the rows of a block are (token, head-in-group)
// pairs of one sequence and one KV head, so each K/V tile is read once per KV head and serves all G
// query heads of the group. Two shapes of one kernel:
//   decode  (q_len * G <= 16): 16 rows; the 4 warps split each 64-key tile (16 keys each) and merge
//           at the end; blocks also split the sequence (flash-decoding) so one long sequence fills
//           the chip: each sequence is spread over all launched splits (>= 64 keys each), and the
//           last split block of a (seq, kv head) to finish merges the splits (arrival counter), so
//           decode needs no merge launch (the merge kernel remains for prefill splits and the
//           fallback when no counters are available).
//   prefill (q_len * G > 16):  64 rows (16 per warp) that share each 64-key tile; causal; optional
//           key splits for long chunked-prefill contexts.
// K/V tiles are gathered page by page with cp.async into padded shared memory, three stages deep.
// An FP8 cache (--kv-cache-dtype fp8): decode rows run attention_decode_fp8.cuh (codes straight into
// the mma fragments); prefill rows run the model-dtype kernels on widened pages (kv_fp8_gather.h).
// This kernel with C = KvFp8 remains for A/B runs: its decode shape (VIREO_FP8_DECODE=0) lands codes
// the same way as T rows and each warp widens its own keys' K, then V, to f16 rows in shared memory;
// VIREO_FP8_KV_MODE=3 widens the prefill shape's tiles in the kernel too.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/attention_split_plan.h"
#include "backend/cuda/attention_split_merge.cuh"
#include "backend/cuda/attention_decode_fp8.cuh"
#include "backend/cuda/attention_fused_prologue.cuh"
#include "backend/cuda/attention_prefill_wide.cuh"
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/attention_wgmma_ws.cuh"
#include "backend/cuda/attention_decode_cluster.h"
#include "backend/cuda/attention_sinks.h"
#include "backend/cuda/kv_fp8_gather.h"

namespace vireo::cuda {
namespace {

static_assert(kSplitPlanTileKeys == kBN, "the split planner counts tiles of kBN keys");

// VIREO_FP8_KV_MODE=3 (A/B runs of an FP8 cache): prefill rows widen every tile inside the mma.sync
// prefill shape instead of running the model-dtype kernels on widened pages (kv_fp8_gather.h).
bool fp8_prefill_in_kernel() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_FP8_KV_MODE");
    return v != nullptr && v[0] == '3';
  }();
  return on;
}

// VIREO_ATTN_OVERLAP: an FP8-cache step's prefill rows on the caller's side lane beside its decode rows.
// 1 (default): prefill issued first; 2: decode first; 0: both in turn on the one stream.
int attention_overlap_mode() {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_ATTN_OVERLAP");
    return v == nullptr || v[0] < '0' || v[0] > '2' ? 1 : v[0] - '0';
  }();
  return mode;
}

// VIREO_ATTN_PREFILL_SM_PCT: the share of the SMs the prefill rows' persistent grid takes beside the decode
// rows (launch_mma's overlap); 1-100 fixed (100: the whole chip, as before session 46), unset or 0: by the
// step's work (prefill_sm_share).
int attention_prefill_sm_pct_env() {
  static const int pct = [] {
    const char* v = std::getenv("VIREO_ATTN_PREFILL_SM_PCT");
    const int x = v ? std::atoi(v) : 0;
    return x >= 1 && x <= 100 ? x : 0;
  }();
  return pct;
}

// The prefill rows' share of the SMs (percent) in a step of decode rows over an FP8 cache beside prompts:
// their estimated time alone over both parts' (decode K / V bytes at ~2.6 TB/s, causal prefill FLOPs at ~200
// TFLOP/s: what each reaches alone on an H100 at these sizes), plus 25 points, within [30, 90] (the whole
// chip where the decode rows are under a tenth of the work: 90% would cost the prefill rows more). The margin
// is there because the decode rows are bound by HBM bandwidth, which fewer SMs still nearly saturate, while
// the prefill rows' time grows with 1 / SMs. Session 46, H100, the mixed-step bench (us, whole chip / best
// share): 228 decode rows + a 1k and a 796-token prompt 277.2 / 263.6 at 50% (this rule: ~54%); 240 decode
// rows + 7 x 1k prompts 490.9 / 474.9 at 80% (this rule: ~85%; 50% took 623.7).
int prefill_sm_share(const AttentionParams& p, int64_t num_tokens) {
  if (const int pct = attention_prefill_sm_pct_env(); pct > 0) return pct;
  if (p.num_prefill_seqs < 0) return 100;  // the prefill sequences were not listed: no estimate
  const double n_dec = std::max(0, p.num_seqs - p.num_prefill_seqs);
  const double prompt_tokens = std::max<double>(0, static_cast<double>(num_tokens) - n_dec);
  const double kv = p.max_seq_len > 0 ? p.max_seq_len : static_cast<double>(p.max_blocks_per_seq) * p.block_size;
  const double dec_s = n_dec * kv * p.num_kv_heads * p.head_dim * 2.0 / 2.6e12;
  const double pre_s = 4.0 * p.num_heads * p.head_dim * prompt_tokens * (kv / 2) / 2.0e14;
  // No decode rows, or too few to pay for the prefill rows' lost SMs: the whole chip (as before session 46).
  if (n_dec == 0 || pre_s + dec_s <= 0 || pre_s > 9 * dec_s) return 100;
  return std::clamp(static_cast<int>(100.0 * pre_s / (pre_s + dec_s)) + 25, 30, 90);
}

bool window_wide_enabled() {  // read per launch: tests switch it; VIREO_WINDOW_WIDE=0 is the plain kernel
  const char* v = std::getenv("VIREO_WINDOW_WIDE");
  return !(v && v[0] == '0');
}

// The fused prepare_attention is opt-in (VIREO_FUSED_ATTENTION=1): on the H200 it is bitwise equal
// to the two ops but measured slower in the decode chain (0.6B layer 30.9 vs 30.1 us, 8B 135.2 vs
// 132.3 us, tests/cuda_bench H_DecodeLayerChainInGraph; 0.6B decode 980 vs 1013 tok/s): the prologue
// (q/k norm + RoPE, a block barrier) sits on every block's critical path after the wait, where the
// separate qkv_prepare costs one short kernel boundary. VIREO_NO_FUSED_ATTENTION=1 still forces it off.
bool fused_prepare_disabled() {
  static const bool off = [] {
    const char* on = std::getenv("VIREO_FUSED_ATTENTION");
    const char* no = std::getenv("VIREO_NO_FUSED_ATTENTION");
    return !(on != nullptr && on[0] == '1') || (no != nullptr && no[0] == '1');
  }();
  return off;
}

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

template <typename T, int D>
int wide_blocks_per_sm() {
  static const int n = [] {
    constexpr size_t smem = wide_smem_bytes<T, D>();
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_wide_kernel<T, D>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int b = 0;
    VIREO_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, attention_prefill_wide_kernel<T, D>, kThreads, smem));
    return b < 1 ? 1 : b;
  }();
  return n;
}

// Arrival counters of the in-kernel decode split merge, one buffer per (device, stream), zeroed once
// (stream-ordered) when first handed out and left zero by every launch (the merging block resets its
// counter). Launches on one stream are ordered (with PDL each kernel waits for its predecessor before
// touching memory, so transitively for the previous attention launch); launches on different streams
// never share counters. Buffers are never freed (32 KiB per stream ever used; a graph keeps the pointer).
constexpr int kCountersPerStream = 8192;

// The counters for (current device, stream), or nullptr: more than kCountersPerStream (seq, kv head)
// pairs, or the stream is capturing a graph and has no counters yet (they cannot be zeroed eagerly
// then); the merge kernel merges the decode splits instead.
unsigned* split_counters(cudaStream_t stream, int64_t pairs) {
  if (pairs > kCountersPerStream) return nullptr;
  int dev = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  struct Entry {
    int dev;
    cudaStream_t stream;
    unsigned* ctr;
  };
  static std::mutex mu;
  static std::vector<Entry> entries;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : entries)
    if (e.dev == dev && e.stream == stream) return e.ctr;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  VIREO_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
  if (cap != cudaStreamCaptureStatusNone) return nullptr;
  void* p = nullptr;
  VIREO_CUDA_CHECK(cudaMalloc(&p, kCountersPerStream * sizeof(unsigned)));
  VIREO_CUDA_CHECK(cudaMemsetAsync(p, 0, kCountersPerStream * sizeof(unsigned), stream));
  entries.push_back({dev, stream, static_cast<unsigned*>(p)});
  return static_cast<unsigned*>(p);
}

// VIREO_PREFILL_SEQ_LIST=0: the prefill grid of a mixed step over every sequence, not just the
// listed prefill sequences (AttentionParams::prefill_seqs), for same-call A/B runs.
bool prefill_list_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_PREFILL_SEQ_LIST");
    return !(v && v[0] == '0');
  }();
  return on;
}

// VIREO_ATTN_LEGACY_SPLITS=1: decode key splits by waves alone (choose_splits), for same-call A/B runs.
bool legacy_decode_splits() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_ATTN_LEGACY_SPLITS");
    return v && v[0] == '1';
  }();
  return on;
}

// The decode shape's K / V rows by cp.async.bulk (bulk_kv_rows) at head dim 128, cp.async at 64. H200,
// test_cuda_bench B_DecodeAttention*: 256 x 1k H16/8 350 -> 301 us (76 -> 88% of HBM), 128 x 1k H32/8
// 75 -> 85%, 32 x 4k 82 -> 89%; at D 64 (128-byte rows, twice the requests per byte) 91 -> 77%.
// VIREO_DECODE_BULK=0 / 1: cp.async / bulk rows at every head dim (A/B runs).
bool decode_bulk_for(int head_dim) {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_DECODE_BULK");
    return v == nullptr ? -1 : v[0] == '1' ? 1 : 0;
  }();
  return mode < 0 ? head_dim == 128 : mode == 1;
}

// Which shapes a launch_typed call runs: both (each kernel skips the other's sequences), or one.
enum class Shapes { kBoth, kDecodeOnly, kPrefillOnly };

// C: the cache's element type (T, or KvFp8: the mma.sync kernel's two shapes, no wgmma / wide prefill).
template <typename T, int D, typename C = T>
void launch_typed(const AttentionParams& p, MmaArgs a, const WorkspaceFn& workspace, const DeviceInfo& dev,
                  const AttentionTuning& tuning, cudaStream_t stream, Shapes shapes = Shapes::kBoth) {
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  // wgmma prefill (attention_wgmma_ws.cuh; VIREO_ATTN_WS=0: attention_wgmma.cuh): the default
  // (VIREO_ATTN_WGMMA=0: mma.sync); 128 rows a block like the wide shape.
  const bool wgmma = !kFp8 && prefill_wgmma_wanted(tuning.prefill_wgmma);
  const bool wide = !kFp8 && (wgmma || tuning.prefill_m_tiles == 2);
  const int prefill_rows = wide ? 128 : 64;
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * D);
  const int g = a.group;
  const int max_q = p.max_query_len > 0 ? p.max_query_len : static_cast<int>(num_tokens);
  const int max_kv = p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
  // The prefill sequences, when the host listed them (the warp-specialised kernel's grid then runs
  // over just those: a serving step's decode sequences would otherwise be ~99% of its work items).
  const bool listed = prefill_list_enabled() && p.num_prefill_seqs >= 0 && wgmma && ws_config().on;
  const bool any_prefill = static_cast<int64_t>(max_q) * g > 16 && !(listed && p.num_prefill_seqs == 0) &&
                           shapes != Shapes::kDecodeOnly;
  const bool any_decode = !(p.num_seqs == 1 && any_prefill) && shapes != Shapes::kPrefillOnly;
  auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  const int64_t sh = int64_t{p.num_seqs} * p.num_kv_heads;
  const int64_t sh_pre = listed ? int64_t{p.num_prefill_seqs} * p.num_kv_heads : sh;
  int dec_splits = 1, pre_splits = 1;
  const int row_tiles = static_cast<int>(ceil_div(int64_t{max_q} * g, prefill_rows));
  // Decode rows beside prefill rows: the prefill tiles fill the chip already unless they are few.
  // An FP8 cache's decode rows: attention_decode_fp8.cuh (VIREO_FP8_DECODE=0: the widening decode shape).
  const bool fp8_decode = kFp8 && fp8_decode_mode() != 0;
  const int64_t dec_slots =
      int64_t{dev.num_sms} * (fp8_decode ? decode_fp8_blocks_per_sm<T, D>() : blocks_per_sm<T, D, 1, C>());
  // >= 256 keys a split, unless even 256-key splits leave resident slots idle (few (seq, kv head)
  // pairs, short contexts: batch-1 decode): then down to one 64-key tile a split.
  const int dec_min_keys = sh * ceil_div(max_kv, 256) < dec_slots ? kBN : 256;
  if (any_decode && (!any_prefill || int64_t{row_tiles} * sh_pre < dec_slots))
    dec_splits = legacy_decode_splits() ? choose_splits(sh, dec_slots, max_kv, dec_min_keys, kMaxDecodeSplits)
                                        : choose_decode_splits(sh, dec_slots, max_kv, dec_min_keys, kMaxDecodeSplits);
  const int64_t per_split_bytes = num_tokens * p.num_heads * (int64_t{D} * 4 + 8);
  if (any_prefill) {
    // The warp-specialised wgmma kernel (attention_wgmma_ws.cuh) runs one block an SM.
    const int per_sm = wgmma ? (ws_config().on ? 1 : wgmma_blocks_per_sm<T, D>())
                             : wide ? wide_blocks_per_sm<T, D>() : blocks_per_sm<T, D, 4, C>();
    // wgmma: one block per SM; a grid that fills the chip is not split (the waves model ignores that
    // causal row tiles differ in length; splits there only add partial traffic and the merge).
    if (!wgmma || int64_t{row_tiles} * sh_pre < int64_t{dev.num_sms} * per_sm)
      pre_splits = choose_splits(int64_t{row_tiles} * sh_pre, int64_t{dev.num_sms} * per_sm, max_kv, 512, 128);
    while (pre_splits > 1 && per_split_bytes * pre_splits > (int64_t{512} << 20)) --pre_splits;
  }
  const int dec_len = static_cast<int>(ceil_div(ceil_div(max_kv, dec_splits), kBN) * kBN);
  const int pre_len = static_cast<int>(ceil_div(ceil_div(max_kv, pre_splits), kBN) * kBN);
  dec_splits = static_cast<int>(ceil_div(max_kv, dec_len));
  pre_splits = static_cast<int>(ceil_div(max_kv, pre_len));
  a.splits_decode = dec_splits;
  a.splits_prefill = pre_splits;
  a.max_splits = std::max(dec_splits, pre_splits);
  // Decode: the minimum split length; the kernel spreads each sequence over all dec_splits splits
  // (decode_split_len), which gives dec_len at max_kv.
  a.split_len_decode = kBN;
  a.split_len_prefill = pre_len;
  if (a.max_splits > 1) {
    char* ws = static_cast<char*>(workspace(per_split_bytes * a.max_splits));
    a.ws_o = reinterpret_cast<float*>(ws);
    a.ws_ml = reinterpret_cast<float2*>(ws + num_tokens * p.num_heads * int64_t{a.max_splits} * D * 4);
  }
  if (dec_splits > 1) a.counters = split_counters(stream, sh);
  a.bulk_kv = !kFp8 && decode_bulk_for(D);
  if (any_decode) {
    const dim3 grid(1, static_cast<unsigned>(sh), dec_splits);
    if (fp8_decode) launch_decode_fp8<T, D>(a, grid, stream);
    else launch_shape<T, D, 1, C>(a, grid, stream);
  }
  if (any_prefill) {
    const dim3 grid(row_tiles, static_cast<unsigned>(sh), pre_splits);
    if constexpr (kFp8) {
      launch_shape<T, D, 4, C>(a, grid, stream);
    } else if (wgmma && ws_config().on) {
      MmaArgs pa = a;
      if (listed) pa.prefill_seqs = p.prefill_seqs.ptr<int>();
      launch_prefill_ws<T, D>(pa, dim3(row_tiles, static_cast<unsigned>(sh_pre), pre_splits), dev.num_sms,
                              p.k_cache.numel() / (int64_t{p.num_kv_heads} * D), stream);
    } else if (wgmma) {
      launch_prefill_wgmma<T, D>(a, grid, stream);
    } else if (wide) {
      wide_blocks_per_sm<T, D>();  // sets the shared-memory attribute
      launch_pdl(attention_prefill_wide_kernel<T, D>, grid, dim3(kThreads), wide_smem_bytes<T, D>(), stream, a);
      check_launch("paged_attention prefill");
    } else {
      launch_shape<T, D, 4>(a, grid, stream);
    }
  }
  if (pre_splits > 1 || (dec_splits > 1 && a.counters == nullptr)) {
    launch_pdl(attention_merge_kernel<T>, dim3(static_cast<unsigned>(num_tokens), p.num_heads), dim3(D),
               a.max_splits * sizeof(float), stream, a, D);
    check_launch("paged_attention merge");
  }
}

void check_attention(const AttentionParams& p) {
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 || p.head_dim <= 0)
    throw Error("paged_attention: bad num_heads/num_kv_heads/head_dim");
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  if (p.q.numel() != num_tokens * p.num_heads * p.head_dim || p.out.numel() != p.q.numel())
    throw Error("paged_attention: q and out must be [T, H, D]");
  if ((p.k_cache.dtype != p.q.dtype && p.k_cache.dtype != DType::kF8E4M3) || p.v_cache.dtype != p.k_cache.dtype ||
      p.out.dtype != p.q.dtype)
    throw Error("paged_attention: q, caches and out must share one dtype (or the caches both be F8_E4M3)");
  if (p.query_start.dtype != DType::kI32 || p.seq_lens.dtype != DType::kI32 || p.block_tables.dtype != DType::kI32)
    throw Error("paged_attention: query_start, seq_lens, block_tables must be I32");
  checked_sinks(p, "paged_attention");
}

// The tensor-core kernels; prep: fused mode (decode-shape steps only, see MmaArgs::prep) or nullptr.
void launch_mma(const AttentionParams& p, const QkvArgs* prep, const WorkspaceFn& workspace, const DeviceInfo& dev,
                cudaStream_t stream, const AttentionTuning& tuning, const SideLane* side) {
  MmaArgs a = make_mma_args(p);
  if (prep) a.prep = *prep;
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    auto run_on = [&](auto ctag, const AttentionParams& q, const MmaArgs& qa, Shapes shapes, const WorkspaceFn& ws,
                      cudaStream_t st, const DeviceInfo& d) {
      using C = decltype(ctag);
      if (q.head_dim == 64) launch_typed<T, 64, C>(q, qa, ws, d, tuning, st, shapes);
      else launch_typed<T, 128, C>(q, qa, ws, d, tuning, st, shapes);
    };
    auto run = [&](auto ctag, const AttentionParams& q, const MmaArgs& qa, Shapes shapes) {
      run_on(ctag, q, qa, shapes, workspace, stream, dev);
    };
    if (p.k_cache.dtype != DType::kF8E4M3) {
      run(T{}, p, a, Shapes::kBoth);
      return;
    }
    // FP8 cache: decode rows read the codes (mma.sync, widened in shared memory); prefill rows run the
    // model-dtype kernels over a widened copy of their pages (kv_fp8_gather.h), unless VIREO_FP8_KV_MODE
    // asks the mma.sync kernel to widen them too (A/B runs).
    const int g = p.num_heads / p.num_kv_heads;
    const bool prefill = (p.max_query_len <= 0 || int64_t{p.max_query_len} * g > 16) && p.num_prefill_seqs != 0;
    if (!prefill || fp8_prefill_in_kernel()) {
      run(KvFp8{}, p, a, Shapes::kBoth);
      return;
    }
    // Labels for the op timer, on the main stream only (side-stream work has no place in its timeline).
    auto mark = [&](const char* label, cudaStream_t st) {
      if (side != nullptr && side->mark && st == stream) side->mark(label);
    };
    // The prefill rows over a widened copy of their pages; the copy may be made on another stream first.
    auto widened = [&](cudaStream_t st) {
      const KvFp8Widened w = widen_fp8_prefill_pages(p, st);
      mark("attention: FP8 prefill pages widened", st);
      AttentionParams wp = p;
      wp.k_cache = w.k_cache;
      wp.v_cache = w.v_cache;
      wp.block_tables = w.block_tables;
      return wp;
    };
    auto prefill_on = [&](const AttentionParams& wp, const WorkspaceFn& ws, cudaStream_t st, const DeviceInfo& d) {
      run_on(T{}, wp, make_mma_args(wp), Shapes::kPrefillOnly, ws, st, d);
    };
    auto prefill_rows = [&](const WorkspaceFn& ws, cudaStream_t st) { prefill_on(widened(st), ws, st, dev); };
    const int overlap = side != nullptr && side->stream != nullptr ? attention_overlap_mode() : 0;
    if (overlap == 0) {
      run(KvFp8{}, p, a, Shapes::kDecodeOnly);
      mark("attention: FP8 decode rows", stream);
      prefill_rows(workspace, stream);
      return;
    }
    if (const int pct = prefill_sm_share(p, p.q.numel() / (int64_t{p.num_heads} * p.head_dim)); pct < 100) {
      // The persistent prefill kernel on pct% of the SMs, the decode rows on the rest at the same time:
      // the prefill blocks (one an SM, all its shared memory) are launched first, on the side lane's
      // higher stream priority, and the decode rows' small blocks fill the SMs they leave, where a
      // full-chip prefill grid left the decode rows nothing until it drained (or, issued second, waited
      // for the decode blocks to drain from whole SMs). The pages are widened first, so both kernels
      // become ready together.
      const AttentionParams wp = widened(stream);
      DeviceInfo pdev = dev;
      pdev.num_sms = std::max(1, dev.num_sms * pct / 100);
      VIREO_CUDA_CHECK(cudaEventRecord(side->fork, stream));
      VIREO_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0));
      prefill_on(wp, side->workspace, side->stream, pdev);
      run(KvFp8{}, p, a, Shapes::kDecodeOnly);
      VIREO_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
      VIREO_CUDA_CHECK(cudaStreamWaitEvent(stream, side->join, 0));
      return;
    }
    // The prefill rows (bound by FLOPs) on the side stream beside the decode rows (bound by HBM bandwidth):
    // each kernel alone leaves the other's resource mostly idle. Mode 1 issues the prefill rows first (their
    // blocks run longest: the decode blocks fill the SMs around them), 2 the decode rows first.
    VIREO_CUDA_CHECK(cudaEventRecord(side->fork, stream));
    VIREO_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0));
    if (overlap == 1) prefill_rows(side->workspace, side->stream);
    run(KvFp8{}, p, a, Shapes::kDecodeOnly);
    if (overlap != 1) prefill_rows(side->workspace, side->stream);
    VIREO_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
    VIREO_CUDA_CHECK(cudaStreamWaitEvent(stream, side->join, 0));
  };
  if (p.q.dtype == DType::kBF16) typed(__nv_bfloat16{});
  else typed(__half{});
}

}  // namespace

void launch_paged_attention(const AttentionParams& p, const WorkspaceFn& workspace, const DeviceInfo& dev,
                            cudaStream_t stream, const AttentionTuning& tuning, const SideLane* side) {
  check_attention(p);
  if (p.q.numel() == 0 || p.num_seqs == 0) return;
  if (p.k_cache.dtype == DType::kF8E4M3) {
    // FP8 cache: the mma.sync kernels (decode and prefill shapes) where they apply, else the plain kernel.
    if (p.window > 0 || p.softcap > 0.f || !p.sinks.empty() || !mma_supported(p)) launch_paged_attention_simple(p, stream);
    else launch_mma(p, nullptr, workspace, dev, stream, tuning, side);
    return;
  }
  if (p.window > 0 || p.softcap > 0.f || !p.sinks.empty()) {
    // Sliding-window, soft-capped (Gemma 2) and attention-sink (GPT-OSS) layers: the CUDA-core
    // flash-decoding kernel with each row's keys starting at its window (bf16/f16, head dims 64-256;
    // split over the window; sinks join its final combine), else the plain kernel (one warp per
    // (token, head): Gemma 3 1B 65.8 vs 603.7 decode tok/s, session 29). The tensor-core and cluster
    // kernels below take none of these. VIREO_WINDOW_WIDE=0: the plain kernel.
    if (window_wide_enabled() && decode_wide_supported(p)) launch_paged_attention_decode_wide(p, workspace, dev, stream);
    else launch_paged_attention_simple(p, stream);
    return;
  }
  if (!mma_supported(p)) {
    // Head dims 192 / 256 (bf16/f16): the CUDA-core flash-decoding kernel; F32 and other dims: simple.
    if (decode_wide_supported(p)) launch_paged_attention_decode_wide(p, workspace, dev, stream);
    else launch_paged_attention_simple(p, stream);
    return;
  }
  if (const int cluster = decode_cluster_size(p, dev, tuning.decode_cluster); cluster > 0) {
    launch_decode_cluster(p, nullptr, cluster, stream);
    return;
  }
  launch_mma(p, nullptr, workspace, dev, stream, tuning, side);
}

namespace {
// Whether qkv_prepare's work can run inside the decode attention kernel: decode-shape rows (the host
// hint max_query_len * G <= 16 the decode / prefill choice trusts as well), a tensor-core shape, a
// per-head norm, and both ops naming the same cache and shapes. Windows, soft-caps and sinks go to
// kernels without the fused prologue (launch_paged_attention): the two ops then.
bool prepare_fusable(const QkvPrepareParams& qp, const AttentionParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  return p.window == 0 && p.softcap == 0.f && p.sinks.empty() && mma_supported(p) && p.max_query_len > 0 &&
         p.k_cache.dtype == p.q.dtype &&  // an FP8 cache: the two ops (the prologues write 2-byte caches)
         int64_t{p.max_query_len} * group <= 16 &&
         qp.qk_norm != QkNorm::kFullWidth && qp.qkv.dtype == p.q.dtype && qp.k_cache.data == p.k_cache.data &&
         qp.v_cache.data == p.v_cache.data && qp.num_heads == p.num_heads && qp.num_kv_heads == p.num_kv_heads &&
         qp.head_dim == p.head_dim && qp.positions.numel() * p.num_heads * p.head_dim == p.q.numel();
}
}  // namespace

// Decode-shape steps with few (sequence, KV head) pairs: the cluster kernel with the preparation fused
// where that is faster or asked for (attention_decode_cluster.cu; VIREO_DECODE_CLUSTER=0 turns it off). Otherwise fused into the split
// decode kernel when VIREO_FUSED_ATTENTION=1 / tuning.fuse_prepare = 1 and the step is decode-shaped;
// otherwise the two ops in turn. Fused, q_out is not written.
void launch_prepare_attention(const QkvPrepareParams& qp, const AttentionParams& p, const WorkspaceFn& workspace,
                              const DeviceInfo& dev, cudaStream_t stream, const AttentionTuning& tuning,
                              const SideLane* side) {
  if (tuning.decode_cluster != 0 && tuning.fuse_prepare != 0 && p.num_heads > 0 && p.num_kv_heads > 0 &&
      p.num_heads % p.num_kv_heads == 0 && prepare_fusable(qp, p)) {
    if (const int cluster = decode_cluster_size(p, dev, tuning.decode_cluster);
        cluster > 0 && (tuning.fuse_prepare == 1 || decode_cluster_fuses_prepare(p))) {
      const QkvArgs prep = make_qkv_args(qp);
      check_attention(p);
      if (p.q.numel() == 0 || p.num_seqs == 0) return;
      launch_decode_cluster(p, &prep, cluster, stream);
      return;
    }
  }
  // Split-kernel fusion off (the default): the two ops, each validating its own params once.
  const bool want = tuning.fuse_prepare < 0 ? !fused_prepare_disabled() : tuning.fuse_prepare == 1;
  if (!want) {
    launch_qkv_prepare(qp, stream);
    launch_paged_attention(p, workspace, dev, stream, tuning, side);
    return;
  }
  const QkvArgs prep = make_qkv_args(qp);
  check_attention(p);
  if (!prepare_fusable(qp, p)) {
    launch_qkv_prepare(qp, stream);
    launch_paged_attention(p, workspace, dev, stream, tuning, side);
    return;
  }
  if (p.q.numel() == 0 || p.num_seqs == 0) return;
  launch_mma(p, &prep, workspace, dev, stream, tuning, side);
}

}  // namespace vireo::cuda
