// Batch-invariant paged attention (--batch-invariant): one kernel shape for every query row, prefill,
// chunked prefill or decode, and no key splits. A block holds 64 rows (token, head-in-group) of one
// sequence and one KV head, 16 per warp (the packing of attention_mma.cu's prefill shape); each warp
// walks the 64-key tiles from key 0 up to the last key any row of the block sees. What a row computes:
// its scores (mma.sync over D, per element independent of the other rows), then per tile a masked
// max / exp2 / sum within its lane quad and P V on the tensor cores, in tile order from key 0, and one
// division at the end. Tiles past the row's own position are all masked for it: its max stays, the
// correction is exp2(0) = 1 and every product added is zero, so they leave its bits unchanged. Hence a
// row's output depends on its q and its sequence's keys [0, position] only, not on which other rows
// (tokens of its chunk, other sequences) share the launch, and a decode row equals the same token
// recomputed inside a prefill chunk.
#include <algorithm>

#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"

namespace vireo::cuda {
namespace {

constexpr int kInvRows = 64;  // rows per block (4 warps x 16)

template <typename T, int D>
constexpr size_t invariant_smem_bytes() {
  return size_t{kStages} * 2 * kBN * (D + kPad) * sizeof(T);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_invariant_kernel(MmaArgs a) {
  constexpr int kNT = kBN / 8;  // score n-tiles per warp (every warp sees all 64 keys of a tile)
  constexpr int kDT = D / 8;    // output n-tiles
  constexpr int kLd = D + kPad;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);  // [kStages][kBN][kLd]
  T* vs = ks + kStages * kBN * kLd;        // [kStages][kBN][kLd]

  pdl_enter();  // before the first read of q / the cache, before any return
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = q_len * a.group;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kInvRows;  // longest rows first
  if (q_len <= 0 || row0 >= rows) return;
  const int last_tok = (min(rows, row0 + kInvRows) - 1) / a.group;
  const int kend = kv_len - q_len + last_tok + 1;  // keys [0, kend) cover every row of the block
  const int ntiles = (kend + kBN - 1) / kBN;

  const int wr0 = row0 + 16 * warp;
  int tok[2], head[2], pos[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = wr0 + g + 8 * i;
    const bool ok = r < rows;
    tok[i] = ok ? r / a.group : -1;
    head[i] = ok ? hk * a.group + r % a.group : 0;
    pos[i] = ok ? kv_len - q_len + tok[i] : -1;  // -1: every key masked
  }
  unsigned qf[D / 16][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const unsigned* qrow = tok[i] >= 0 ? reinterpret_cast<const unsigned*>(
                                             static_cast<const T*>(a.q) +
                                             (static_cast<int64_t>(q0 + tok[i]) * a.num_heads + head[i]) * D)
                                       : nullptr;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][i] = qrow ? qrow[(kk * 16 + 2 * tq) / 2] : 0u;
      qf[kk][i + 2] = qrow ? qrow[(kk * 16 + 8 + 2 * tq) / 2] : 0u;
    }
  }

  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  auto load_tile = [&](int it, int stage) { load_kv_tile<T, D>(a, table, hk, it * kBN, kend, ks, vs, stage); };
  float oacc[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this lane's partial row sums
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ntiles) load_tile(st, st);
    cp_async_commit();
  }
  for (int it = 0; it < ntiles; ++it) {
    const int stage = it % kStages;
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (it + kStages - 1 < ntiles) load_tile(it + kStages - 1, (it + kStages - 1) % kStages);
    cp_async_commit();
    const T* kt = ks + stage * kBN * kLd;
    const T* vt = vs + stage * kBN * kLd;
    // Mask by the row's own position only; online softmax in the log2 domain.
    float sacc[kNT][4];
    qk_scores<T, D, kNT>(sacc, qf, kt, 0, lane);
    const int kbase = it * kBN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kbase + nt * 8 + 2 * tq + (e & 1);
        const int ri = e / 2;
        const float v = key <= pos[ri] ? sacc[nt][e] : -INFINITY;
        sacc[nt][e] = v;
        mx[ri] = fmaxf(mx[ri], v);
      }
    online_softmax_step<kNT, kDT>(sacc, oacc, m, l, mx, a.scale_log2);
    pv_accumulate<T, D, kNT>(oacc, sacc, vt, 0, lane);
  }
  cp_async_wait<0>();
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
    l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
  }
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    if (tok[ri] < 0) continue;
    const int64_t th = static_cast<int64_t>(q0 + tok[ri]) * a.num_heads + head[ri];
    const float inv = l[ri] > 0.f ? 1.f / l[ri] : 0.f;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      const int col = dt * 8 + 2 * tq;
      *reinterpret_cast<unsigned*>(static_cast<T*>(a.out) + th * D + col) =
          pack2<T>(oacc[dt][2 * ri] * inv, oacc[dt][2 * ri + 1] * inv);
    }
  }
}

template <typename T, int D>
void launch_typed(const AttentionParams& p, const MmaArgs& a, cudaStream_t stream) {
  constexpr size_t smem = invariant_smem_bytes<T, D>();
  static const bool attr_set = [] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_invariant_kernel<T, D>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)attr_set;
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * D);
  // max_query_len is a host hint; without it every row of the step may be one sequence's.
  const int64_t max_q = p.max_query_len > 0 ? p.max_query_len : num_tokens;
  const int64_t row_tiles = (max_q * a.group + kInvRows - 1) / kInvRows;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(int64_t{p.num_seqs} * p.num_kv_heads));
  launch_pdl(attention_invariant_kernel<T, D>, grid, dim3(kThreads), smem, stream, a);
  check_launch("paged_attention (batch-invariant)");
}

}  // namespace

void launch_paged_attention_invariant(const AttentionParams& p, cudaStream_t stream) {
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 || p.head_dim <= 0)
    throw Error("paged_attention: bad num_heads/num_kv_heads/head_dim");
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  if (p.q.numel() != num_tokens * p.num_heads * p.head_dim || p.out.numel() != p.q.numel())
    throw Error("paged_attention: q and out must be [T, H, D]");
  if (p.k_cache.dtype != p.q.dtype || p.v_cache.dtype != p.q.dtype || p.out.dtype != p.q.dtype)
    throw Error("paged_attention: q, caches and out must share one dtype");
  if (p.query_start.dtype != DType::kI32 || p.seq_lens.dtype != DType::kI32 || p.block_tables.dtype != DType::kI32)
    throw Error("paged_attention: query_start, seq_lens, block_tables must be I32");
  if (num_tokens == 0 || p.num_seqs == 0) return;
  // Sinks (the kernel below has none): the same plain kernel, which takes them.
  if (!mma_supported(p) || !p.sinks.empty()) {  // one warp per (token, head) from key 0 up: invariant as it is
    launch_paged_attention_simple(p, stream);
    return;
  }
  const MmaArgs a = make_mma_args(p);
  if (p.q.dtype == DType::kBF16) {
    if (p.head_dim == 64) launch_typed<__nv_bfloat16, 64>(p, a, stream);
    else launch_typed<__nv_bfloat16, 128>(p, a, stream);
  } else {
    if (p.head_dim == 64) launch_typed<__half, 64>(p, a, stream);
    else launch_typed<__half, 128>(p, a, stream);
  }
}

}  // namespace vireo::cuda
