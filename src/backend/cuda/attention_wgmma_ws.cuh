// Warp-specialised prefill attention on Hopper wgmma (sm_90a), FlashAttention-3's structure with our
// own code: the default prefill kernel on sm_90a (VIREO_ATTN_WS=0 returns to attention_wgmma.cuh's
// kernel, whose tile helpers this one shares).
//
// Block: 384 threads = 3 warpgroups, one block per SM.
//   WG 0, the producer (setmaxnreg down to kWsProdRegs): gathers Q and the K / V pages of each tile
//     into 128B-swizzled shared memory and signals each tile on its own "full" mbarrier. A tile whose
//     keys are all valid is copied by TMA, one box per (page, 64-column panel) issued by the lanes of
//     warp 0 (kv_tensor_map.h; the bytes counted on the full barrier); Q and a tile holding the last
//     key (zero-filled past it) by 16-byte cp.async. VIREO_ATTN_TMA=0: cp.async for every tile.
//     Q by TMA too where the GQA group divides 64 (WsMaps::q_on): each consumer warpgroup's 64 rows
//     on that warpgroup's q_full barrier, reloaded once that warpgroup's last S of the previous item
//     read them (its q_empty), so the warpgroup ahead in the ping-pong never waits for the other's
//     and the producer never waits for Q to land. Otherwise Q goes by cp.async with K_0 (one group,
//     after both warpgroups released Q).
//   WG 1, 2, the consumers (setmaxnreg up to kWsMathRegs): 64 query rows each (128 GQA-packed rows a
//     block, as attention_wgmma.cuh), S = Q K^T and O += P V on wgmma, online softmax in registers.
// Pipeline: kStages K buffers and kStages V buffers of [BN keys, D], each with a full barrier (the
//   producer's 4 warps arrive once the copies landed and were fenced for the async proxy) and an empty
//   barrier (the consumers' 8 warps arrive once their wgmma that read it completed). The producer
//   signals group g only after issuing group g + 1 (cp.async.wait_group 1), so its copies stay two
//   deep; with kStages >= 3 that lag never holds a consumer back (see ws_produce).
// Per consumer warpgroup, step j (FA3 intra-warpgroup overlap): issue S_j = Q K_j^T and
//   O += P_{j-1} V_{j-1}, wait for S_j only, mask + softmax S_j while P V runs, then rescale O.
// Ping-pong (flag kWsPingPong): the two consumer warpgroups issue their step's wgmma in turn (named
//   barriers 1 and 2), so one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores.
// Persistent (flag kWsPersistent): grid = SM count; block b takes work items b, 2G-1-b, 2G+b, ... of
//   the heaviest-first list (pairs of heavy and light causal row tiles), so the producer gathers the
//   next item's Q and first tiles while the consumers finish the current one.
// Work item: (128-row tile x, (seq, kv head) y, key split z); rows, masking, splits and the epilogue
//   (direct bf16/f16 output or ws_o / ws_ml partials for the merge kernel) are the wgmma kernel's.
#pragma once
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/kv_tensor_map.h"
#include "backend/cuda/tma_barrier.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWsThreads = 384;
// Registers a thread after setmaxnreg: 128 * 56 + 256 * 224 = 64512 <= 65536 (launch: 384 x 168).
// The producer spilled at 40; the consumers (O 64 + S 64 + P 32 at D 128, BN 128) fit 224 unspilled.
constexpr int kWsProdRegs = 56;
constexpr int kWsMathRegs = 224;
constexpr int kWsPingPong = 1, kWsPersistent = 2;  // WsGrid::flags
// Flag kWsFlushItemEnd: the producer signals an item's last V tile as soon as it lands instead of after
// issuing the next item's first group. That group waits for q_empty (Q by cp.async; by TMA the next
// item's Q waits for it), which the consumers release only after their item's last S, so under the
// deferred signal every item's drain (P_{n-1} V_{n-1}) waited for the next item's Q and K_0 to be issued:
// ncu's top stall (13% of the 8 x 1k case's warp samples, H100, session 51). The producer has nothing to
// issue in that gap anyway.
constexpr int kWsFlushItemEnd = 4;

// Work-item grid: x row tiles of 128 rows, y = seqs * kv heads (or listed prefill seqs * kv heads,
// MmaArgs::prefill_seqs), z key splits.
struct WsGrid {
  int x, y, z, flags;
};

// TMA maps of the K and V caches (kv_tensor_map.h), used when `on` (the cache's block size is
// kWsPageRows, the default 16; other block sizes keep cp.async).
constexpr int kWsPageRows = 16;
struct WsMaps {
  CUtensorMap k, v, q;
  int on;    // K / V pages by TMA (whole valid tiles)
  int q_on;  // Q by TMA (q_tensor_map: GQA group | 64)
};

template <int D, int BN>
struct WsSmem {
  static constexpr uint32_t kQPanel = kWgBM * 128;     // Q panel: [128 rows][128 B]
  static constexpr uint32_t kTilePanel = BN * 128;     // K or V panel: [BN keys][128 B]
  static constexpr uint32_t kTile = (D / 64) * kTilePanel;
  static constexpr uint32_t kQ = (D / 64) * kQPanel;
  // As many stages as fit in 227 KiB (2 KiB kept for barriers and alignment), 3..4.
  static constexpr int kStages = (227 * 1024 - 2048 - kQ) / (2 * kTile) >= 4 ? 4 : 3;
  static constexpr uint32_t kK = kQ;
  static constexpr uint32_t kV = kK + kStages * kTile;
  // Barriers: full_k, full_v, empty_k, empty_v [kStages], then q_empty [2] (one a consumer warpgroup, each
  // reading only its own 64 rows of Q) and q_full [2] (Q by TMA).
  static constexpr uint32_t kBar = kV + kStages * kTile;
  static constexpr uint32_t kBytes = kBar + 8 * (4 * kStages + 4);
  static constexpr size_t kLaunchBytes = kBytes + 1024;
  static_assert(kLaunchBytes <= 227 * 1024, "shared memory");
};

// One work item, decoded identically by producer and consumers.
struct WsItem {
  int s, hk, row0, rows, q0, q_len, kv_len, kstart, kend, ntiles, split, nsplit;
  bool valid;
};

// Item of rank r in the heaviest-first order: row tiles from the last (longest causal rows) down,
// then (seq, kv head), then split.
template <int BN>
__device__ __forceinline__ WsItem ws_item(const MmaArgs& a, const WsGrid& gr, int r) {
  WsItem it{};
  const int yz = gr.y * gr.z;
  const int x = gr.x - 1 - r / yz, y = (r % yz) / gr.z, z = r % gr.z;
  it.s = a.prefill_seqs ? a.prefill_seqs[y / a.num_kv_heads] : y / a.num_kv_heads;
  it.hk = y % a.num_kv_heads;
  it.q0 = a.query_start[it.s];
  it.q_len = a.query_start[it.s + 1] - it.q0;
  it.kv_len = a.seq_lens[it.s];
  it.rows = it.q_len * a.group;
  it.row0 = x * kWgBM;
  it.valid = it.q_len > 0 && it.rows > 16 && it.row0 < it.rows;
  if (!it.valid) return it;
  const int split_len = split_len_for(it.kv_len, a.split_len_prefill, a.splits_prefill);
  it.nsplit = (it.kv_len + split_len - 1) / split_len;
  it.split = z;
  if (z >= it.nsplit) {
    it.valid = false;
    return it;
  }
  it.kstart = z * split_len;
  const int last_tok = (min(it.rows, it.row0 + kWgBM) - 1) / a.group;
  it.kend = min(min(it.kv_len, it.kstart + split_len), it.kv_len - it.q_len + last_tok + 1);
  it.ntiles = it.kend > it.kstart ? (it.kend - it.kstart + BN - 1) / BN : 0;
  return it;
}

// k-th item rank of this block: one item per block, or the persistent snake over gridDim.x blocks.
__device__ __forceinline__ int ws_rank(const WsGrid& gr, int k) {
  if (!(gr.flags & kWsPersistent)) return k == 0 ? static_cast<int>(blockIdx.x) : 1 << 30;
  const int G = gridDim.x, b = blockIdx.x;
  return k * G + ((k & 1) ? G - 1 - b : b);
}

// Producer: one thread of WG 0 (pt = 0..127). Chunk column ch of rows r0 + kRowStep * i.
template <typename T, int D, int BN>
struct WsProducer {
  static constexpr int kChunks = D / 8;               // 16-byte chunks per row
  static constexpr int kRowStep = 128 / kChunks;      // rows covered by one pass of 128 threads
  static constexpr int kBatch = 4;                    // page-table reads issued before their copies (8 spills)
  using L = WsSmem<D, BN>;

  const MmaArgs& a;
  uint32_t base;
  int pt, bs_shift;
  uint32_t pend = 0;  // barrier of the last committed group, signalled once the next one is issued

  // Signal the previous group: this thread's copies of it landed (all but the newest group), made
  // visible to the async proxy; one lane per warp arrives (the full barriers count 4).
  __device__ __forceinline__ void finish_prev(bool all) {
    if (all) cp_async_wait<0>();
    else cp_async_wait<1>();
    if (pend != 0) {
      fence_proxy_async_smem();
      __syncwarp();
      if (pt % 32 == 0) ws_bar_arrive(pend);
    }
  }

  // Keys [kt0, kt0 + BN) of KV head hk into the tile at dst. A whole tile of valid keys that starts
  // on a page goes by TMA (when `tma`): lanes of warp 0 issue one box per (page, panel), lane 0
  // having added the tile's bytes to its full barrier `full` first. Otherwise cp.async: keys >= kend
  // zero-filled, table reads branch-free (clamped key) and batched ahead of the copies.
  __device__ __forceinline__ void tile(const T* cache, const CUtensorMap* map, bool tma, const int* table, int hk,
                                       int kt0, int kend, uint32_t dst, uint32_t full) {
    if (tma && kt0 + BN <= kend && kt0 % kWsPageRows == 0) {
      constexpr int kPanels = D / 64, kBoxes = BN / kWsPageRows * kPanels;
      static_assert(kBoxes <= 32, "one box a lane");
      if (pt < 32) {
        if (pt == 0) ws_bar_expect_tx(full, BN * D * sizeof(T));
        __syncwarp();
        if (pt < kBoxes) {
          const int pg = pt / kPanels, panel = pt % kPanels;
          const int blk = __ldg(table + kt0 / kWsPageRows + pg);
          tma_load_3d(dst + panel * L::kTilePanel + pg * (kWsPageRows * 128), map, panel * 64, hk, blk * kWsPageRows, full);
        }
      }
      return;
    }
    const int ch = pt % kChunks, r0 = pt / kChunks;
    const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
    const T* src0 = cache + static_cast<int64_t>(hk) * D + ch * 8;
    const uint32_t dst0 = dst + (ch / 8) * L::kTilePanel;
#pragma unroll
    for (int b = 0; b < BN / kRowStep; b += kBatch) {
      int slot[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int kc = min(kt0 + r0 + (b + i) * kRowStep, kend - 1);
        const int page = bs_shift >= 0 ? kc >> bs_shift : kc / a.block_size;
        slot[i] = __ldg(table + page) * a.block_size + (kc - page * a.block_size);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int r = r0 + (b + i) * kRowStep;
        cp_async16_s(dst0 + swz128(r, ch % 8), src0 + static_cast<int64_t>(slot[i]) * head_stride, kt0 + r < kend);
      }
    }
  }

  __device__ __forceinline__ void q_tile(const WsItem& it) {
    const T* q = static_cast<const T*>(a.q);
    for (int c = pt; c < kWgBM * kChunks; c += 128) {
      const int r = c / kChunks, ch = c % kChunks, rr = it.row0 + r;
      const bool ok = rr < it.rows;
      int64_t off = 0;
      if (ok) off = (static_cast<int64_t>(it.q0 + rr / a.group) * a.num_heads + it.hk * a.group + rr % a.group) * D + ch * 8;
      cp_async16_s(base + (ch / 8) * L::kQPanel + swz128(r, ch % 8), q + off, ok);
    }
  }

  // Warpgroup h's 64 rows of Q by TMA, one box a 64-column panel, counted on `full` (the 4 producer warps
  // arrive at once: the phase completes when the bytes land). Rows past the item's own are another
  // sequence's tokens or zeros past the tensor; the consumers mask every key for them.
  __device__ __forceinline__ void q_half_tma(const WsItem& it, int h, const CUtensorMap* map, uint32_t full) {
    if (pt == 0) {
      ws_bar_expect_tx(full, kWgRows * D * sizeof(T));
      const int tok0 = it.q0 + (it.row0 + h * kWgRows) / a.group;
#pragma unroll
      for (int panel = 0; panel < D / 64; ++panel)
        tma_load_3d(base + panel * L::kQPanel + h * kWgRows * 128, map, panel * 64, it.hk * a.group, tok0, full);
    }
    __syncwarp();
    if (pt % 32 == 0) ws_bar_arrive(full);
  }
};

template <typename T, int D, int BN>
__device__ __forceinline__ void ws_produce(const MmaArgs& a, const WsGrid& gr, const WsMaps& maps, uint32_t base) {
  using L = WsSmem<D, BN>;
  constexpr int S = L::kStages;
  WsProducer<T, D, BN> p{a, base, static_cast<int>(threadIdx.x),
                         (a.block_size & (a.block_size - 1)) == 0 ? __ffs(a.block_size) - 1 : -1};
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const uint32_t bar = base + L::kBar;
  const uint32_t full_k = bar, full_v = bar + 8 * S, empty_k = bar + 16 * S, empty_v = bar + 24 * S;
  const uint32_t q_empty = bar + 32 * S, q_full = q_empty + 16;  // [2] each, one a consumer warpgroup
  const bool qt = maps.q_on;
  uint32_t kv = 0, nq = 0;  // tiles and items loaded so far (stage / phase of every barrier)
  // Q by TMA: warpgroup h's rows once its own last S of the previous item read them.
  auto load_q = [&](const WsItem& it, int h) {
    if (nq > 0) ws_bar_wait(q_empty + 8 * h, (nq - 1) & 1);
    p.q_half_tma(it, h, &maps.q, q_full + 8 * h);
  };
  const int total = gr.x * gr.y * gr.z;
  for (int k = 0;; ++k) {
    const int r = ws_rank(gr, k);
    if (r >= total) break;
    const WsItem it = ws_item<BN>(a, gr, r);
    if (!it.valid || it.ntiles == 0) continue;
    const int* table = a.block_tables + static_cast<int64_t>(it.s) * a.max_blocks_per_seq;
    // Order K_0 (+ Q by cp.async), V_0, K_1, V_1, ... (by TMA: K_0, Q rows of warpgroup 0, V_0, Q rows
    // of warpgroup 1, K_1, ...): group g is signalled after group g + 1 is issued. K_t's signal waits for
    // V_t's buffer (released at consumer step t - S + 1) and V_t's for K_{t+1}'s (step t + 1 - S): both
    // before the step t, t + 1 that need them when S >= 2; S >= 3 leaves a step of slack so a warpgroup
    // never waits for the other's softmax. Q by cp.async waits for both warpgroups' last S of the
    // previous item; by TMA each half waits for its own.
    if (!qt && nq > 0) {
      ws_bar_wait(q_empty, (nq - 1) & 1);
      ws_bar_wait(q_empty + 8, (nq - 1) & 1);
    }
    for (int t = 0; t < it.ntiles; ++t, ++kv) {
      const uint32_t st = kv % S, use = kv / S;
      const int kt0 = it.kstart + t * BN;
      if (use > 0) ws_bar_wait(empty_k + 8 * st, (use - 1) & 1);
      if (t == 0 && !qt) p.q_tile(it);
      p.tile(kc, &maps.k, maps.on, table, it.hk, kt0, it.kend, base + L::kK + st * L::kTile, full_k + 8 * st);
      cp_async_commit();
      p.finish_prev(false);
      p.pend = full_k + 8 * st;
      if (t == 0 && qt) load_q(it, 0);
      if (use > 0) ws_bar_wait(empty_v + 8 * st, (use - 1) & 1);
      p.tile(vc, &maps.v, maps.on, table, it.hk, kt0, it.kend, base + L::kV + st * L::kTile, full_v + 8 * st);
      cp_async_commit();
      p.finish_prev(false);
      p.pend = full_v + 8 * st;
      if (t == 0 && qt) load_q(it, 1);
    }
    ++nq;
    if (gr.flags & kWsFlushItemEnd) {  // the item's last V now, not after the next item's Q (see the flag)
      p.finish_prev(true);
      p.pend = 0;
    }
  }
  p.finish_prev(true);
}

// Consumers: warpgroup cw (0, 1) of the math warpgroups, 64 rows each.
template <typename T, int D, int BN>
__device__ __forceinline__ void ws_consume(const MmaArgs& a, const WsGrid& gr, uint32_t base, bool q_tma) {
  using L = WsSmem<D, BN>;
  constexpr int S = L::kStages;
  constexpr int kNT = BN / 8;  // S accumulator groups of 8 keys
  constexpr int kKS = BN / 16; // k16 steps of P V
  constexpr int kDT = D / 8;   // O accumulator groups of 8 columns
  const int cw = threadIdx.x / 128 - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, tq = lane % 4;
  const uint32_t bar = base + L::kBar;
  const uint32_t full_k = bar, full_v = bar + 8 * S, empty_k = bar + 16 * S, empty_v = bar + 24 * S;
  const uint32_t q_empty = bar + 32 * S + 8 * cw, q_full = bar + 32 * S + 16 + 8 * cw;  // this warpgroup's
  const uint32_t q_addr = base + cw * kWgRows * 128;  // this warpgroup's 64 rows of Q panel 0
  const bool pp = gr.flags & kWsPingPong;
  // Ping-pong: warpgroup cw issues after the other one's arrive on barrier 1 + cw (256 threads: 128
  // syncing + 128 arriving). Warpgroup 1 opens with an arrive for warpgroup 0, and warpgroup 0 takes
  // the one arrive left over at the end, so the counts balance whatever the number of steps.
  auto issue_begin = [&]() {
    if (pp) ws_named_sync(1 + cw, 256);
  };
  auto issue_end = [&]() {
    if (pp) ws_named_arrive(2 - cw, 256);
  };
  auto release = [&](uint32_t b) {
    if (lane == 0) ws_bar_arrive(b);  // this warp's wgmma that read the buffer completed
  };
  if (pp && cw == 1) ws_named_arrive(1, 256);

  uint32_t kv = 0, nq = 0;  // tiles and items consumed (phases of the barriers)
  const int total = gr.x * gr.y * gr.z;
  for (int k = 0;; ++k) {
    const int r = ws_rank(gr, k);
    if (r >= total) break;
    const WsItem it = ws_item<BN>(a, gr, r);
    if (!it.valid) continue;
    const int wr0 = it.row0 + cw * kWgRows + warp * 16;
    int tok[2], pos[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int rr = wr0 + g + 8 * i;
      tok[i] = rr < it.rows ? rr / a.group : -1;
      pos[i] = rr < it.rows ? it.kv_len - it.q_len + tok[i] : -1;  // -1: every key masked
    }
    const bool warp_rows_full = wr0 + 15 < it.rows;
    const int warp_min_pos = it.kv_len - it.q_len + wr0 / a.group;

    float o[kDT][4], sc[kNT][4];
#pragma unroll
    for (int i = 0; i < kDT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    unsigned pf[kKS][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    auto issue_s = [&](uint32_t st) {
      wgmma_qk_tile<T, D, BN>(sc, q_addr, L::kQPanel, base + L::kK + st * L::kTile, L::kTilePanel);
    };
    auto issue_pv = [&](uint32_t st) {
      wgmma_pv_tile<T, D, kKS>(o, pf, base + L::kV + st * L::kTile, L::kTilePanel);
    };
    auto softmax_s = [&](int j, float (&corr)[2]) {
      reg_fence(sc);
      const int kbase = it.kstart + j * BN;
      const bool full = warp_rows_full && kbase + BN - 1 <= warp_min_pos && kbase + BN <= it.kend;
      float mx[2];
      mask_scores_max<kNT>(sc, mx, full, kbase, it.kend, pos, tq);
      softmax_probs<kNT>(sc, m, l, mx, corr, a.scale_log2);
    };
    auto make_p = [&]() {
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) pack_p_fragment<T, kNT>(pf[ks], sc, ks);
    };

    const int n = it.ntiles;
    if (n > 0) {
      float corr[2];
      // Step 0: S_0 alone.
      uint32_t st = kv % S;
      if (q_tma) ws_bar_wait(q_full, nq & 1);  // by cp.async, Q came with K_0
      ++nq;
      ws_bar_wait(full_k + 8 * st, (kv / S) & 1);
      issue_begin();
      wgmma_fence();
      issue_s(st);
      issue_end();
      wgmma_wait<0>();
      release(empty_k + 8 * st);
      if (n == 1) release(q_empty);
      softmax_s(0, corr);
      make_p();
      // Steps 1 .. n-1: S_j with P_{j-1} V_{j-1}.
      for (int j = 1; j < n; ++j) {
        const uint32_t pst = st;
        const uint32_t pkv = kv;
        ++kv;
        st = kv % S;
        // V_{j-1} was signalled before K_j (issue order), so the second wait is free; both stay out
        // of the wgmma sequence (a branch between two wgmma makes ptxas add a register fence).
        ws_bar_wait(full_k + 8 * st, (kv / S) & 1);
        ws_bar_wait(full_v + 8 * pst, (pkv / S) & 1);
        issue_begin();
        wgmma_fence();
        issue_s(st);
        issue_pv(pst);
        issue_end();
        wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run under the softmax
        release(empty_k + 8 * st);
        if (j == n - 1) release(q_empty);
        softmax_s(j, corr);
        wgmma_wait<0>();
        release(empty_v + 8 * pst);
        reg_fence(o);
        rescale_rows<kDT>(o, corr);
        make_p();
      }
      // Drain: P_{n-1} V_{n-1}.
      ws_bar_wait(full_v + 8 * st, (kv / S) & 1);
      issue_begin();
      wgmma_fence();
      issue_pv(st);
      issue_end();
      wgmma_wait<0>();
      release(empty_v + 8 * st);
      reg_fence(o);
      ++kv;
    }

    const bool direct = it.nsplit == 1;
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float ll = l[ri];
      ll += __shfl_xor_sync(0xffffffffu, ll, 1);
      ll += __shfl_xor_sync(0xffffffffu, ll, 2);
      if (tok[ri] < 0) continue;
      const int rr = wr0 + g + 8 * ri;
      const int64_t th = static_cast<int64_t>(it.q0 + tok[ri]) * a.num_heads + it.hk * a.group + rr % a.group;
      store_rows_out<T, D>(a, o, ri, th, m[ri], ll, it.split, direct, tq);
    }
  }
  if (pp && cw == 0) ws_named_sync(1, 256);  // warpgroup 1's last arrive
}

template <typename T, int D, int BN>
__global__ void __launch_bounds__(kWsThreads, 1) attention_prefill_ws_kernel(MmaArgs a, WsGrid gr,
                                                                                  const __grid_constant__ WsMaps maps) {
  using L = WsSmem<D, BN>;
  extern __shared__ __align__(1024) unsigned char ws_smem_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(ws_smem_raw)) + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
    const uint32_t bar = base + L::kBar;
    for (int i = 0; i < 2 * L::kStages; ++i) ws_bar_init(bar + 8 * i, 4);  // full: the producer's 4 warps
    for (int i = 2 * L::kStages; i < 4 * L::kStages; ++i) ws_bar_init(bar + 8 * i, 8);  // empty: 8 warps
    // q_empty [2]: one consumer warpgroup's 4 warps; q_full [2]: the producer's 4 warps (+ TMA bytes).
    for (int i = 4 * L::kStages; i < 4 * L::kStages + 4; ++i) ws_bar_init(bar + 8 * i, 4);
  }
  __syncthreads();
  pdl_enter();  // before any read of q / the cache
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWsProdRegs));
    ws_produce<T, D, BN>(a, gr, maps, base);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWsMathRegs));
    ws_consume<T, D, BN>(a, gr, base, maps.q_on != 0);
  }
}

// Host side. Variants for same-process A/B (read once): VIREO_ATTN_WS=0 selects attention_wgmma.cuh's
// kernel; VIREO_ATTN_WS_BN=64|128 the key tile (default 128); VIREO_ATTN_WS_FLAGS the WsGrid flags
// (default 7: ping-pong, persistent, flush at item end); VIREO_ATTN_WS_QTMA=0 loads Q by cp.async.
struct WsConfig {
  bool on = true;
  bool q_tma = true;
  int bn = 128;
  int flags = kWsPingPong | kWsPersistent | kWsFlushItemEnd;
};
inline const WsConfig& ws_config() {
  static const WsConfig c = [] {
    WsConfig w;
    if (const char* e = std::getenv("VIREO_ATTN_WS")) w.on = e[0] != '0';
    if (const char* e = std::getenv("VIREO_ATTN_WS_BN")) w.bn = std::atoi(e) == 64 ? 64 : 128;
    if (const char* e = std::getenv("VIREO_ATTN_WS_FLAGS")) w.flags = std::atoi(e) & 7;
    if (const char* e = std::getenv("VIREO_ATTN_WS_QTMA")) w.q_tma = e[0] != '0';
    return w;
  }();
  return c;
}

template <typename T, int D, int BN>
void launch_ws(const MmaArgs& a, dim3 grid, int num_sms, int flags, const WsMaps& maps, cudaStream_t stream) {
  using L = WsSmem<D, BN>;
  static const bool attr = [] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_ws_kernel<T, D, BN>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(L::kLaunchBytes)));
    return true;
  }();
  (void)attr;
  const WsGrid gr{static_cast<int>(grid.x), static_cast<int>(grid.y), static_cast<int>(grid.z), flags};
  const int64_t items = int64_t{gr.x} * gr.y * gr.z;
  const int blocks = (flags & kWsPersistent) ? static_cast<int>(std::min<int64_t>(items, num_sms)) : static_cast<int>(items);
  launch_pdl(attention_prefill_ws_kernel<T, D, BN>, dim3(blocks), dim3(kWsThreads), L::kLaunchBytes, stream, a, gr, maps);
  check_launch("paged_attention prefill wgmma (warp-specialised)");
}

// grid: (row tiles of 128 rows, seqs * kv heads, prefill splits), as launch_prefill_wgmma;
// num_slots: the cache's num_blocks * block_size; num_tokens: q's rows ([num_tokens, num_heads, D]).
template <typename T, int D>
void launch_prefill_ws(const MmaArgs& a, dim3 grid, int num_sms, int64_t num_slots, int64_t num_tokens,
                       cudaStream_t stream) {
  const WsConfig& c = ws_config();
  WsMaps maps{};
  const DType dt = std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16;
  const KvMapShape k{a.k_cache, dt, num_slots, a.num_kv_heads, D, a.block_size};
  KvMapShape v = k;
  v.base = a.v_cache;
  maps.on = a.block_size == kWsPageRows && kv_tensor_map(k, &maps.k) && kv_tensor_map(v, &maps.v);
  maps.q_on = c.q_tma && q_tensor_map(QMapShape{a.q, dt, num_tokens, a.num_heads, D, a.group}, &maps.q);
  if (c.bn == 64) launch_ws<T, D, 64>(a, grid, num_sms, c.flags, maps, stream);
  else launch_ws<T, D, 128>(a, grid, num_sms, c.flags, maps, stream);
}

}  // namespace
}  // namespace vireo::cuda
