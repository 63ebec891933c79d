// Prefill shape of the paged attention on Hopper warpgroup MMA (wgmma, sm_90a), run 6's kernel: since
// run 7 the warp-specialised kernel (attention_wgmma_ws.cuh, which reuses this file's tile helpers) is
// the default and VIREO_ATTN_WS=0 selects this one (VIREO_ATTN_WGMMA=0: the mma.sync prefill kernel).
//
// Block: 128 query rows (GQA-packed (token, head-in-group) rows of one sequence and one KV head, the
// rows of the 128-row mma.sync shape) = 2 warpgroups of 64 rows, 256 threads; one block per SM at
// D = 128 (194 registers), two at D = 64 (128). Every thread also gathers K/V pages with cp.async
// (page-table reads batched ahead of the copies); no producer warp yet.
//   Shared memory (1024-byte aligned, 128B-swizzled panels, wgmma_common.cuh):
//     Q [128 rows, D], loaded once; K and V: kWgStages buffers each of [64 keys, D].
//   Per 64-key tile j, per warpgroup (FA3's intra-warpgroup overlap, without warp specialisation):
//     S_j = Q K_j^T      wgmma m64n64k16, A = Q and B = K from shared memory, both K-major;
//     O += P_{j-1} V_{j-1}  wgmma m64nDk16, A = P in registers (the accumulator layout of S is the
//                        A-fragment layout), B = V from shared memory MN-major (transpose bit): V's
//                        [key, d] rows are stored exactly as K's, no transpose pass;
//     the softmax of S_j (mask, max, exp2, row sums) runs while the tensor cores do P_{j-1} V_{j-1};
//     then O is rescaled by the new max and S_j becomes P_j (bf16/f16 A fragments).
//   K/V pipeline: cp.async group g = {K_g, V_{g-1}} (V one tile behind K: iteration j reads K_j and
//     V_{j-1}), kWgStages buffers each; group j + kWgStages - 1 is issued after iteration j's wgmma
//     (behind the barrier that opened iteration j), into the buffers iteration j - 1 released.
// Masking, split handling (ws_o / ws_ml), epilogue rounding and the heaviest-rows-first order are
// the mma.sync prefill kernel's (attention_prefill_wide.cuh).
#pragma once
#include <cstdlib>

#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/wgmma_common.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWgRows = 64;                     // rows per warpgroup: wgmma's M
constexpr int kWgGroups = 2;                    // consumer warpgroups per block
constexpr int kWgBM = kWgRows * kWgGroups;      // 128 rows per block
constexpr int kWgThreads = 128 * kWgGroups;
constexpr int kWgBN = 64;                       // keys per K/V tile: the S wgmma's N
constexpr int kWgStages = 3;                    // K buffers (and V buffers): two tiles in flight

// Shared-memory byte offsets from the 1024-aligned base. A panel is 64 columns (128 bytes) wide.
template <int D>
struct WgSmem {
  static constexpr uint32_t kQPanel = kWgBM * 128;     // one panel of Q: [128 rows][128 B]
  static constexpr uint32_t kTilePanel = kWgBN * 128;  // one panel of a K or V tile: [64 keys][128 B]
  static constexpr uint32_t kTile = (D / 64) * kTilePanel;
  static constexpr uint32_t kK = (D / 64) * kQPanel;   // Q at 0, then the K buffers, then V
  static constexpr uint32_t kV = kK + kWgStages * kTile;
  static constexpr uint32_t kBytes = kV + kWgStages * kTile;
  static constexpr size_t kLaunchBytes = kBytes + 1024;  // slack to align the dynamic base
};

__device__ __forceinline__ void cp_async16_s(uint32_t smem_addr, const void* gmem, bool valid) {
  const int sz = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(sz));
}

// Source offsets (elements) of this thread's chunks of keys [kt0, kt0 + kWgBN) of KV head hk in the
// paged cache; ok: key < kend (else zero-fill). Branch-free (a masked key reads its clamped
// neighbour's table entry), so the compiler issues all page-table loads before the first cp.async
// instead of one dependent load per chunk. kend > kt0 for every tile gathered.
template <int D>
__device__ __forceinline__ void wg_tile_offsets(const MmaArgs& a, const int* table, int hk, int kt0, int kend,
                                                int bs_shift, int64_t (&off)[kWgBN * D / 8 / kWgThreads],
                                                bool (&ok)[kWgBN * D / 8 / kWgThreads]) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per key row
  const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
#pragma unroll
  for (int i = 0; i < kWgBN * kChunks / kWgThreads; ++i) {
    const int c = threadIdx.x + i * kWgThreads;
    const int key = kt0 + c / kChunks;
    ok[i] = key < kend;
    const int kc = min(key, kend - 1);
    const int page = bs_shift >= 0 ? kc >> bs_shift : kc / a.block_size;  // 16 / 32-token pages: a shift
    const int slot = table[page] * a.block_size + (kc - page * a.block_size);
    off[i] = static_cast<int64_t>(slot) * head_stride + static_cast<int64_t>(hk) * D + (c % kChunks) * 8;
  }
}

// cp.async of the chunks wg_tile_offsets described into the swizzled tile at smem byte address dst.
template <typename T, int D>
__device__ __forceinline__ void wg_tile_copy(const T* cache, const int64_t (&off)[kWgBN * D / 8 / kWgThreads],
                                             const bool (&ok)[kWgBN * D / 8 / kWgThreads], uint32_t dst) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int i = 0; i < kWgBN * kChunks / kWgThreads; ++i) {
    const int c = threadIdx.x + i * kWgThreads;
    const int r = c / kChunks, ch = c % kChunks;
    cp_async16_s(dst + (ch / 8) * WgSmem<D>::kTilePanel + swz128(r, ch % 8), cache + off[i], ok[i]);
  }
}

template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (N == 64) wgmma_ss_n64<T>(d, da, db, scale_d);
  else wgmma_ss_n128<T>(d, da, db, scale_d);
}
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs_trans_b(float (&d)[N / 8][4], const unsigned (&a)[4], uint64_t db) {
  if constexpr (N == 64) wgmma_rs_n64<T, 1>(d, a, db, 1);
  else wgmma_rs_n128<T, 1>(d, a, db, 1);
}

// One wgmma group of S = Q K^T over head dim D: D / 16 k16 steps across the 64-element, 128-byte-swizzled
// panels of the Q tile (q_addr, q_panel bytes apart) and a K tile (k_addr, k_panel bytes apart).
template <typename T, int D, int BN>
__device__ __forceinline__ void wgmma_qk_tile(float (&sc)[BN / 8][4], uint32_t q_addr, uint32_t q_panel,
                                              uint32_t k_addr, uint32_t k_panel) {
  const uint64_t da0 = wgmma_desc(q_addr, 16, 1024), db0 = wgmma_desc(k_addr, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off = (kk % 4) * 32u;  // k16 step within the panel
    const uint64_t da = wgmma_desc_add(da0, (kk / 4) * q_panel + off);
    const uint64_t db = wgmma_desc_add(db0, (kk / 4) * k_panel + off);
    wgmma_ss<T, BN>(sc, da, db, kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// One wgmma group of O += P V: P from registers (kKS k16 fragments), V an MN-major tile at v_addr whose
// 64-column panels are v_panel bytes apart.
template <typename T, int D, int kKS>
__device__ __forceinline__ void wgmma_pv_tile(float (&o)[D / 8][4], const unsigned (&pf)[kKS][4], uint32_t v_addr,
                                              uint32_t v_panel) {
  const uint64_t db0 = wgmma_desc(v_addr, v_panel, 1024);
#pragma unroll
  for (int ks = 0; ks < kKS; ++ks) wgmma_rs_trans_b<T, D>(o, pf[ks], wgmma_desc_add(db0, ks * 16 * 128));
  wgmma_commit();
}

// D = 64 fits two blocks per SM (128 registers, 65 KiB of shared memory); D = 128 one.
template <typename T, int D>
__global__ void __launch_bounds__(kWgThreads, D == 64 ? 2 : 1) attention_prefill_wgmma_kernel(MmaArgs a) {
  using L = WgSmem<D>;
  constexpr int kNT = kWgBN / 8;  // S accumulator groups of 8 keys
  constexpr int kKS = kWgBN / 16; // k16 steps of P V
  constexpr int kDT = D / 8;      // O accumulator groups of 8 columns
  extern __shared__ __align__(1024) unsigned char wg_smem_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(wg_smem_raw)) + 1023u) & ~1023u;
  pdl_enter();  // before any read of q / the cache and any return

  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, tq = lane % 4;
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = q_len * a.group;
  if (q_len <= 0 || rows <= 16) return;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kWgBM;  // heaviest (last) rows first
  if (row0 >= rows) return;
  const int split_len = split_len_for(kv_len, a.split_len_prefill, a.splits_prefill);
  const int nsplit = (kv_len + split_len - 1) / split_len;
  if (static_cast<int>(blockIdx.z) >= nsplit) return;
  const int kstart = blockIdx.z * split_len;
  const int last_tok = (min(rows, row0 + kWgBM) - 1) / a.group;
  const int kend = min(min(kv_len, kstart + split_len), kv_len - q_len + last_tok + 1);
  const int ntiles = kend > kstart ? (kend - kstart + kWgBN - 1) / kWgBN : 0;
  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);

  // Q [128 rows, D] -> swizzled panels, zero rows past the sequence; lands with cp.async group 0.
  {
    constexpr int kChunks = D / 8;
    const T* q = static_cast<const T*>(a.q);
    for (int c = threadIdx.x; c < kWgBM * kChunks; c += kWgThreads) {
      const int r = c / kChunks, ch = c % kChunks, rr = row0 + r;
      const bool ok = rr < rows;
      int64_t off = 0;
      if (ok) off = (static_cast<int64_t>(q0 + rr / a.group) * a.num_heads + hk * a.group + rr % a.group) * D + ch * 8;
      cp_async16_s(base + (ch / 8) * L::kQPanel + swz128(r, ch % 8), q + off, ok);
    }
  }
  // Group g: K tile g into K buffer g % S, V tile g - 1 into V buffer (g - 1) % S (each if it exists);
  // both tiles' page-table reads first. Keys >= kend are zero-filled (so P = 0 never meets stale
  // NaN/Inf bytes of V).
  const int bs_shift = (a.block_size & (a.block_size - 1)) == 0 ? __ffs(a.block_size) - 1 : -1;
  auto issue_group = [&](int grp) {
    constexpr int kPer = kWgBN * D / 8 / kWgThreads;
    int64_t koff[kPer], voff[kPer];
    bool kok[kPer], vok[kPer];
    const bool has_k = grp < ntiles, has_v = grp >= 1 && grp - 1 < ntiles;
    if (has_k) wg_tile_offsets<D>(a, table, hk, kstart + grp * kWgBN, kend, bs_shift, koff, kok);
    if (has_v) wg_tile_offsets<D>(a, table, hk, kstart + (grp - 1) * kWgBN, kend, bs_shift, voff, vok);
    if (has_k) wg_tile_copy<T, D>(kc, koff, kok, base + L::kK + (grp % kWgStages) * L::kTile);
    if (has_v) wg_tile_copy<T, D>(vc, voff, vok, base + L::kV + ((grp - 1) % kWgStages) * L::kTile);
  };
#pragma unroll
  for (int st = 0; st < kWgStages - 1; ++st) {
    issue_group(st);
    cp_async_commit();  // one group per step, empty past the end: uniform wait counts
  }

  // This lane's two rows: wr0 + g and wr0 + g + 8 (warp `warp` of warpgroup `wg` owns 16 rows).
  const int wr0 = row0 + wg * kWgRows + warp * 16;
  int tok[2], pos[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = wr0 + g + 8 * i;
    tok[i] = r < rows ? r / a.group : -1;
    pos[i] = r < rows ? kv_len - q_len + tok[i] : -1;  // -1: every key masked
  }
  const bool warp_rows_full = wr0 + 15 < rows;
  const int warp_min_pos = kv_len - q_len + wr0 / a.group;
  const uint32_t q_addr = base + wg * kWgRows * 128;  // this warpgroup's 64 rows of Q panel 0 (8 KiB aligned)

  float o[kDT][4], sc[kNT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
#pragma unroll
  for (int i = 0; i < kNT; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
  unsigned pf[kKS][4];  // P of the previous tile as A fragments
#pragma unroll
  for (int i = 0; i < kKS; ++i) pf[i][0] = pf[i][1] = pf[i][2] = pf[i][3] = 0u;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this lane's partial row sums

  // Step j opens with tile group j in shared memory (K_j, V_{j-1}).
  auto open_step = [&]() {
    cp_async_wait<kWgStages - 2>();  // group j landed (this thread's copies; Q came with group 0) ...
    fence_proxy_async_smem();        // ... visible to wgmma's async proxy ...
    __syncthreads();                 // ... and everyone's; both warpgroups are done with step j - 1
  };
  // Group j + kWgStages - 1 into the buffers step j - 1 read; issued after step j's wgmma so that
  // the page-table reads and address math of the gather run while the tensor cores work.
  auto prefetch = [&](int j) {
    issue_group(j + kWgStages - 1);
    cp_async_commit();
  };
  // S_j = Q K_j^T (one wgmma group).
  auto issue_s = [&](int j) {
    wgmma_qk_tile<T, D, kWgBN>(sc, q_addr, L::kQPanel, base + L::kK + (j % kWgStages) * L::kTile, L::kTilePanel);
  };
  // O += P_{j-1} V_{j-1} (one wgmma group).
  auto issue_pv = [&](int j) {
    wgmma_pv_tile<T, D, kKS>(o, pf, base + L::kV + ((j - 1) % kWgStages) * L::kTile, L::kTilePanel);
  };
  // Mask and online softmax of S_j (landed: the caller waited); corr: O's rescale factors.
  auto softmax_s = [&](int j, float (&corr)[2]) {
    reg_fence(sc);
    const int kbase = kstart + j * kWgBN;
    const bool full = warp_rows_full && kbase + kWgBN - 1 <= warp_min_pos && kbase + kWgBN <= kend;
    float mx[2];
    mask_scores_max<kNT>(sc, mx, full, kbase, kend, pos, tq);
    softmax_probs<kNT>(sc, m, l, mx, corr, a.scale_log2);
  };
  // P_j -> A fragments (the S accumulator layout is the A-fragment layout, rounded as the mma.sync kernels).
  auto make_p = [&]() {
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) pack_p_fragment<T, kNT>(pf[ks], sc, ks);
  };

  // No wgmma sits under a data-dependent branch (ptxas would serialise them): prologue (S_0),
  // steady steps (S_j with P_{j-1} V_{j-1}), drain (P V of the last tile). Warpgroups whose rows are
  // all past the sequence compute on zero Q rows and write nothing.
  if (ntiles > 0) {
    float corr[2];
    open_step();
    wgmma_fence();
    issue_s(0);
    prefetch(0);
    wgmma_wait<0>();
    softmax_s(0, corr);  // O is still zero: no rescale
    make_p();
    for (int j = 1; j < ntiles; ++j) {
      open_step();
      wgmma_fence();   // P fragments, O and S were last touched by ordinary instructions
      issue_s(j);
      issue_pv(j);
      prefetch(j);
      wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run under the softmax
      softmax_s(j, corr);
      wgmma_wait<0>();
      reg_fence(o);
      rescale_rows<kDT>(o, corr);
      make_p();
    }
    open_step();
    wgmma_fence();
    issue_pv(ntiles);
    wgmma_wait<0>();
    reg_fence(o);
  }
  cp_async_wait<0>();  // nothing left in flight at exit (ntiles == 0 leaves Q's copies otherwise)

  const int split = blockIdx.z;
  const bool direct = nsplit == 1;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    float ll = l[ri];
    ll += __shfl_xor_sync(0xffffffffu, ll, 1);
    ll += __shfl_xor_sync(0xffffffffu, ll, 2);
    if (tok[ri] < 0) continue;
    const int r = wr0 + g + 8 * ri;
    const int64_t th = static_cast<int64_t>(q0 + tok[ri]) * a.num_heads + hk * a.group + r % a.group;
    store_rows_out<T, D>(a, o, ri, th, m[ri], ll, split, direct, tq);
  }
}

// Host side (attention_mma.cu's launch_typed).

// Whether the prefill launch takes the wgmma kernel: tuning 1 / 0, or -1: VIREO_ATTN_WGMMA=1 (read once).
// On by default on sm_90a (H200, same process: 8k causal D128 291 vs 190 TFLOP/s for the mma.sync
// kernel, D64 249 vs 137, 4 x 2k 234 vs 194); VIREO_ATTN_WGMMA=0 gives the mma.sync prefill kernel.
inline bool prefill_wgmma_wanted(int tuning) {
  static const bool env = [] {
    const char* e = std::getenv("VIREO_ATTN_WGMMA");
    return e == nullptr || e[0] != '0';
  }();
  return tuning < 0 ? env : tuning == 1;
}

template <typename T, int D>
int wgmma_blocks_per_sm() {
  static const int n = [] {
    constexpr size_t smem = WgSmem<D>::kLaunchBytes;
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_wgmma_kernel<T, D>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int b = 0;
    VIREO_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, attention_prefill_wgmma_kernel<T, D>, kWgThreads, smem));
    return b < 1 ? 1 : b;
  }();
  return n;
}

// grid: (row tiles of kWgBM rows, seqs * kv heads, prefill splits), as the mma.sync prefill shapes.
template <typename T, int D>
void launch_prefill_wgmma(const MmaArgs& a, dim3 grid, cudaStream_t stream) {
  wgmma_blocks_per_sm<T, D>();  // sets the shared-memory attribute
  launch_pdl(attention_prefill_wgmma_kernel<T, D>, grid, dim3(kWgThreads), WgSmem<D>::kLaunchBytes, stream, a);
  check_launch("paged_attention prefill wgmma");
}

}  // namespace
}  // namespace vireo::cuda
