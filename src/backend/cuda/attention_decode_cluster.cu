// Decode attention for latency: few (sequence, KV head) pairs, each spread over a thread-block
// cluster of C blocks (C <= 16) whose partial softmaxes merge through distributed shared memory.
//
// Why: at batch 1 a decode step's attention reads ~4 MB (8 KV heads x 1k keys) yet took ~11 us with
// qkv_prepare in front of it: two dependent kernels, then a split merge through global memory
// (partials written, fenced, counted; the last block re-reads them). Here one kernel does it all:
//   - before the PDL wait every block issues the cp.async gathers of its keys written by earlier steps
//     (they overlap the qkv GEMV still running);
//   - after it, warps prepare the q heads of the block's KV group (q/k RMSNorm + RoPE: qkv_head.cuh,
//     the qkv_prepare kernel's own code, so q and k round exactly alike) and the block holding this
//     step's key writes its k and v into the cache and its tile;
//   - a 16-row mma.sync tile step per 64 keys (the decode shape of attention_mma.cu);
//   - the 4 warps merge in shared memory; then each block pushes its partial to the C blocks through
//     DSMEM (stores, no remote loads: block r owns a slice of the rows' outputs and receives every
//     block's part of that slice), one cluster barrier, and block r writes its slice.
// Rows: the (token, head-in-group) pairs of one sequence and KV head, q_len * G <= 16.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/attention_decode_cluster.h"
#include "backend/cuda/attention_fused_prologue.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/cuda_common.h"

namespace vireo::cuda {
namespace {

namespace cg = cooperative_groups;

// K/V tiles a block holds, all issued before the PDL wait (a batch-1 split is 1-2 tiles at 1k context).
// Two keep a block at ~90 KB, two blocks an SM: a 16-block cluster then fits in 8 SMs of a GPC and the
// next kernel's blocks can start beside it. Measured: three stages (one block an SM) made the 1k
// layer chain 50% slower and 32k contexts 75% slower (clusters no longer in one wave).
constexpr int kCStages = 2;
constexpr int kMaxCluster = 16;
// Planned contexts up to this many keys (<= 256 a block at C = 16): longer ones stream better through
// the split kernel's many blocks (1 x 32k: 79 vs 47 us on the H200). The decode graphs plan steps of
// short contexts with this as their hint (model/cuda_graph_step.cc, kGraphShortContext).
constexpr int kClusterMaxKeys = 4096;

// Shared memory of one block (bytes), D = head dim: K/V stages, q rows, RoPE rows, the merge inboxes.
template <typename T, int D>
constexpr size_t cluster_smem_bytes() {
  return size_t{2} * kCStages * kBN * (D + kPad) * sizeof(T)  // K and V tiles
         + size_t{16} * D * sizeof(T)                         // q rows
         + size_t{4} * kMaxHeadDim * sizeof(float)            // per-warp RoPE partner rows
         + (size_t{16} * D + kMaxCluster) * sizeof(float)     // inbox_o: [C][slice] partial outputs
         + size_t{kMaxCluster} * 16 * sizeof(float2);         // inbox_ml: [C][16] (max, sum) per row
}

__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

// kPrep: kPrepNone (q given), kPrepGeneric or kPrepFast (a.prep is given: the kernel prepares q and the new
// k / v itself; kPrepFast with prepare_head's fast form). One instantiation each, so none carries another's
// code (instruction fetch is a large part of a batch-1 layer).
enum : int { kPrepNone = 0, kPrepGeneric = 1, kPrepFast = 2 };
template <typename T, int D, int kPrep>
__global__ void __launch_bounds__(kThreads) attention_decode_cluster_kernel(MmaArgs a) {
  constexpr int kLd = D + kPad;
  constexpr int kNT = 2;  // 16 keys a warp of each 64-key tile
  constexpr int kDT = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);           // [kCStages][kBN][kLd]
  T* vs = ks + kCStages * kBN * kLd;                // [kCStages][kBN][kLd]
  T* qs = vs + kCStages * kBN * kLd;                // [16][D]
  float* rope = reinterpret_cast<float*>(qs + 16 * D);  // [4][kMaxHeadDim]
  float* inbox_o = rope + 4 * kMaxHeadDim;          // [C][per]: block j's unnormalised outputs of my slice
  float2* inbox_ml = reinterpret_cast<float2*>(inbox_o + 16 * D + kMaxCluster);  // [C][16]: block j's (max, sum)

  cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  // DSMEM may be written only once every block of the cluster runs: arrive now, wait before the pushes.
  cluster_arrive_relaxed();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  // Step metadata is copied before the step's first kernel: readable before the PDL wait.
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = min(q_len * a.group, 16);
  // Row r is (token r / G, head hk * G + r % G); a decode step has one token, so no division there.
  auto row_token = [&](int r) { return q_len == 1 ? 0 : r / a.group; };
  // This block's keys: the context split evenly over the cluster in whole pages (16 keys).
  const int split = ((kv_len + C - 1) / C + 15) / 16 * 16;
  const int kstart = rank * split;
  const int kend = min(kv_len, kstart + split);
  const int ntiles = q_len > 0 && kend > kstart ? (kend - kstart + kBN - 1) / kBN : 0;
  const int new0 = kv_len - q_len;  // keys >= new0 are this step's
  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  auto load_tile = [&](int it, TileRows which) {
    load_kv_tile<T, D, true>(a, table, hk, kstart + it * kBN, kend, ks, vs, it % kCStages, which, new0);
  };
#pragma unroll
  for (int st = 0; st < kCStages; ++st)
    if (st < ntiles) load_tile(st, TileRows::kOld);
  cp_async_commit();

  pdl_enter();
  if constexpr (kPrep != kPrepNone) {
    const int num_new = prepare_decode_items<T, D, kPrep == kPrepFast>(a, qs, rope, ks, vs, kCStages, hk, q0, q_len,
                                                                        rows, kstart, kend, new0);
    if (num_new > 0 && ntiles > kCStages) __threadfence();  // cache rows a later tile gathers (cp.async: L2)
  } else {
    for (int r = warp; r < rows; r += kThreads / 32) {
      const int64_t head = static_cast<int64_t>(q0) * a.num_heads + hk * a.group + r +
                           row_token(r) * (a.num_heads - a.group);  // (q0 + tok) H + hk G + r - tok G
      const T* src = static_cast<const T*>(a.q) + head * D;
      T v[D / 32];  // every load before any store: one round trip for the row, not D / 32
#pragma unroll
      for (int j = 0; j < D / 32; ++j) v[j] = src[lane + 32 * j];
#pragma unroll
      for (int j = 0; j < D / 32; ++j) qs[r * D + lane + 32 * j] = v[j];
    }
    // The new keys' rows of the tiles in flight (what load_kv_tile's kNew gathers), one 16-byte chunk a
    // thread: a decode step has one new key, so a short loop instead of the tile loader's unrolled body.
    const int lo = max(new0, kstart), hi = min(kend, kstart + kCStages * kBN);
    const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
    for (int c = threadIdx.x; c < (hi - lo) * (D / 8); c += kThreads) {
      const int key = lo + c / (D / 8), col = c % (D / 8) * 8, rel = key - kstart;  // tile rel / kBN = stage
      const int64_t off = paged_slot<true>(a, table, key) * head_stride + static_cast<int64_t>(hk) * D + col;
      cp_async16(ks + rel * kLd + col, static_cast<const T*>(a.k_cache) + off, true);
      cp_async16(vs + rel * kLd + col, static_cast<const T*>(a.v_cache) + off, true);
    }
    cp_async_commit();
  }
  for (int i = threadIdx.x; i < (16 - rows) * D; i += kThreads) qs[rows * D + i] = from_f<T>(0.f);
  cp_async_wait<0>();
  __syncthreads();

  // Q fragments (rows g and g + 8) and each row's causal limit.
  unsigned qf[D / 16][4];
  int pos[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = g + 8 * i;
    pos[i] = r < rows ? kv_len - q_len + row_token(r) : -1;
    const unsigned* qrow = reinterpret_cast<const unsigned*>(qs + r * D);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][i] = qrow[(kk * 16 + 2 * tq) / 2];
      qf[kk][i + 2] = qrow[(kk * 16 + 8 + 2 * tq) / 2];
    }
  }
  float oacc[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int kw0 = warp * (kBN / 4);
  // Tiles 0 .. kCStages - 1 landed above; each later tile refills the stage of the tile kCStages before it.
  for (int it = 0; it < ntiles; ++it) {
    if (it > 0) {
      cp_async_wait<kCStages - 1>();
      __syncthreads();
    }
    const int stage = it % kCStages;
    const int kbase = kstart + it * kBN + kw0;
    if (kbase < kend) {  // this warp's 16 keys: any in range
      float sacc[kNT][4];
      qk_scores<T, D, kNT>(sacc, qf, ks + stage * kBN * kLd, kw0, lane);
      float mx[2];
      mask_scores_max<kNT>(sacc, mx, false, kbase, kend, pos, tq);
      online_softmax_step<kNT, kDT>(sacc, oacc, m, l, mx, a.scale_log2);
      pv_accumulate<T, D, kNT>(oacc, sacc, vs + stage * kBN * kLd, kw0, lane);
    }
    __syncthreads();  // every warp is done with this stage
    if (it + kCStages < ntiles) load_tile(it + kCStages, TileRows::kAll);
    cp_async_commit();
  }
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
  }
  cp_async_wait<0>();
  __syncthreads();  // the tile buffers become the warp-merge buffers

  // The 4 warps' key quarters -> this block's partial per row (max, sum, unnormalised output).
  float* sm_o = reinterpret_cast<float*>(smem_raw);  // [4][16][D]
  float* sm_m = sm_o + 4 * 16 * D;                   // [4][16]
  float* sm_l = sm_m + 4 * 16;                       // [4][16]
  store_warp_partial<D>(sm_o, sm_m, sm_l, oacc, m, l, warp, g, tq);
  __syncthreads();
  // Block `rank` owns outputs [rank * per, (rank + 1) * per) of the rows * D; each block pushes its part
  // of every slice to the slice's owner (inbox_o[rank][.]) and its (max, sum) of each row to all.
  const int total = rows * D, per = (total + C - 1) / C;
  cluster_wait();
  for (int idx = threadIdx.x; idx < total; idx += kThreads) {
    const int r = idx / D, col = idx % D;
    float mm, ll;
    const float oo = merge_warp_partials<D>(sm_o, sm_m, sm_l, r, col, mm, ll);
    const int owner = idx / per;
    cluster.map_shared_rank(inbox_o, owner)[rank * per + idx - owner * per] = oo;
    if (col < C) cluster.map_shared_rank(inbox_ml, col)[rank * 16 + r] = make_float2(mm, ll);
  }
  cluster.sync();  // every push has landed (release / acquire)

  const int e0 = rank * per, e1 = min(total, e0 + per);
  for (int idx = e0 + threadIdx.x; idx < e1; idx += kThreads) {
    const int r = idx / D, col = idx % D;
    float mm = -INFINITY;
#pragma unroll 1
    for (int j = 0; j < C; ++j) mm = fmaxf(mm, inbox_ml[j * 16 + r].x);
    const float mu = mm == -INFINITY ? 0.f : mm;
    float ll = 0.f, oo = 0.f;
#pragma unroll 1
    for (int j = 0; j < C; ++j) {
      const float2 ml = inbox_ml[j * 16 + r];
      const float f = exp2f(ml.x - mu);
      ll += ml.y * f;
      oo += inbox_o[j * per + idx - e0] * f;
    }
    const int tok = row_token(r);
    const int64_t th = static_cast<int64_t>(q0 + tok) * a.num_heads + hk * a.group + r - tok * a.group;
    static_cast<T*>(a.out)[th * D + col] = from_f<T>(ll > 0.f ? oo / ll : 0.f);
  }
}

template <typename T, int D, int kPrep>
void launch_typed(const MmaArgs& a, int num_pairs, int cluster, cudaStream_t stream) {
  auto kernel = attention_decode_cluster_kernel<T, D, kPrep>;
  constexpr size_t smem = cluster_smem_bytes<T, D>();
  static_assert(size_t{2} * kCStages * kBN * (D + kPad) * sizeof(T) >= (4 * 16 * D + 2 * 4 * 16) * sizeof(float),
                "the warp merge must fit in the tile buffers");
  static bool attrs_set = [&] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  }();
  (void)attrs_set;
  launch_pdl_clusters(kernel, dim3(static_cast<unsigned>(cluster), static_cast<unsigned>(num_pairs), 1), dim3(kThreads), smem,
                      stream, static_cast<unsigned>(cluster), "cudaLaunchKernelEx(attention_decode_cluster)", a);
}

}  // namespace

namespace {

int cluster_env() {
  static const int env = [] {
    const char* v = std::getenv("VIREO_DECODE_CLUSTER");
    return v ? std::atoi(v) : -1;
  }();
  return env;
}

// Whether (sequence, KV head) pairs of this shape get clusters at all: few pairs (batch 1 at 8 KV heads),
// rows = q_len * G <= 16, bf16/f16 at head dim 64/128 (checked by the callers).
bool cluster_shape_applies(int64_t pairs, int rows, const DeviceInfo& dev) {
  return rows > 0 && rows <= 16 && pairs > 0 && pairs <= dev.num_sms / kMaxCluster;
}

// Blocks a pair gets for a planned context of max_kv keys (each block's share is whole pages, in 64-key
// tiles). Measured on the H200 (session 18, batch 1, `vireo bench latency`, cluster size forced): a
// block's extra tile costs about what 6.5 more blocks in the cluster cost (their pushes, barrier and
// merge). Qwen3-0.6B step at 1,025-1,152 keys: C = 16 (2 tiles a block) 816 us, 13 786, 11 780, 9 783,
// 8 (3 tiles) 823; at 3,969-4,096: 16 (4 tiles) 994, 12 (6) 1,061; at 257-384: 16 777, 10 739. Qwen3-8B
// at 1,152: 16 4,369 us, 9 4,318. So C minimises 6.5 tiles(C) + C; ties go to fewer blocks.
int cluster_for_context(int max_kv, int max_c) {
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int c = 1; c <= max_c; ++c) {
    const int split = ((max_kv + c - 1) / c + 15) / 16 * 16;  // the kernel's split
    const int64_t cost = int64_t{13} * ((split + kBN - 1) / kBN) + 2 * c;
    if (cost < best_cost) {
      best_cost = cost;
      best = c;
    }
  }
  return best;
}

}  // namespace

int decode_cluster_size(const AttentionParams& p, const DeviceInfo& dev, int want) {
  if (want < 0) want = cluster_env();
  if (want == 0) return 0;
  const int group = p.num_heads / p.num_kv_heads;
  if (!mma_supported(p) || p.max_query_len <= 0 || int64_t{p.max_query_len} * group > 16) return 0;
  if (p.block_size <= 0 || (p.block_size & (p.block_size - 1)) != 0) return 0;  // the kernel pages by shifts
  if (want > 0) return std::min(want, kMaxCluster);
  // Before session 18 C was as many blocks as SMs allow (16 at 8 pairs): 0.6B decode layer at 1k
  // context 28.3 -> 25.5 us against the split kernel. Batch 4 (C = 4, ~5 tiles a block) measured 4%
  // slower end to end than the split kernel.
  const int64_t pairs = int64_t{p.num_seqs} * p.num_kv_heads;
  if (!cluster_shape_applies(pairs, p.max_query_len * group, dev)) return 0;
  const int max_kv = p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
  if (max_kv > kClusterMaxKeys) return 0;
  const int by_sms = static_cast<int>(std::min<int64_t>(dev.num_sms / pairs, kMaxCluster));
  return cluster_for_context(std::max(max_kv, 1), by_sms);
}

int decode_cluster_context_bucket(int num_seqs, int num_heads, int num_kv_heads, int head_dim, int max_len,
                                  const DeviceInfo& dev) {
  if (cluster_env() >= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) return 0;
  if ((head_dim != 64 && head_dim != 128) || max_len > kClusterMaxKeys) return 0;
  if (!cluster_shape_applies(int64_t{num_seqs} * num_kv_heads, num_heads / num_kv_heads, dev)) return 0;
  const int step = max_len <= 2048 ? 128 : 256;
  return std::min(kClusterMaxKeys, (std::max(max_len, 1) + step - 1) / step * step);
}

bool decode_cluster_fuses_prepare(const AttentionParams& p) {
  const int rows = p.max_query_len * (p.num_heads / p.num_kv_heads);
  return rows + 2 <= kThreads / 32;
}

void launch_decode_cluster(const AttentionParams& p, const QkvArgs* prep, int cluster, cudaStream_t stream) {
  MmaArgs a = make_mma_args(p);
  if (prep) a.prep = *prep;
  const int pairs = p.num_seqs * p.num_kv_heads;
  auto launch = [&]<typename T, int D>() {
    if (!prep) launch_typed<T, D, kPrepNone>(a, pairs, cluster, stream);
    else if (qkv_fast_form(*prep, D, p.q.dtype)) launch_typed<T, D, kPrepFast>(a, pairs, cluster, stream);
    else launch_typed<T, D, kPrepGeneric>(a, pairs, cluster, stream);
  };
  if (p.q.dtype == DType::kBF16) {
    if (p.head_dim == 64) launch.template operator()<__nv_bfloat16, 64>();
    else launch.template operator()<__nv_bfloat16, 128>();
  } else {
    if (p.head_dim == 64) launch.template operator()<__half, 64>();
    else launch.template operator()<__half, 128>();
  }
  check_launch("attention_decode_cluster");
}

}  // namespace vireo::cuda
