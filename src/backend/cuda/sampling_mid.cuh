// The sample op's mid path (sampling.cu's header comment): rows with penalties/masks or threshold
// searches (top-k > 20, top-p without top-k, min-p), spread over all chunks of the row. Private to
// sampling.cu.
//
// Every drawn candidate of a mid row is ranked by its key (bits of e, ~id): e = exp((w - W) / T) as
// Temper computes it (w: the work value, raw or penalised; W: the row's work max), larger e first,
// ties by lower id. The kept set is always a prefix of that order (min-p: e >= min_p; top-k: the k
// best; top-p: the smallest prefix whose mass reaches top_p * the top-k set's mass), so one key
// threshold says which ids are drawn from. Masses are fixed point (e * 2^40, rounded, u64): sums are
// exact in any order, so the histogram's, the chunks' and the candidates' masses agree to the unit
// and the result does not depend on the chunking.
//   penalty_kernel (rows with entries): the penalised values of the listed ids into scratch and a
//     bit per id (no full-row copy); later passes read raw values and take scratch where the bit is set.
//   chunk_kernel (shared with the fast path): raw partials (logprobs) and the chunk's work max/argmax.
//   hist_kernel (rows with top-k/top-p): per chunk, a 2048-bin histogram of e (bin = bits(e) >> 19:
//     16 bins per octave; count and mass) added into the row's global histogram; the last block of
//     the row (arrival counter) finds the candidate bins: the top-k boundary bin, and the bins where
//     the top-p boundary can lie for any top-k set mass between the exact bounds the histogram gives.
//     More than kCandCap candidates: the row falls back to the single-block slow path.
//   mid_chunk_kernel: per chunk, the mass of the surely kept ids (bins above the candidates) and the
//     candidates (bits of e, id) compacted into the row's list.
//   sample_kernel -> mid_row: raw merge (logprobs), work argmax (greedy rows), else sorts the
//     candidates (bitonic, shared memory), finds the key threshold, adds the kept candidates' masses
//     to their chunks, scans the chunks for uniform * total and scans that chunk's ids in id order.
#pragma once
#include <cfloat>
#include <climits>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_args.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_fast.cuh"
#include "backend/cuda/sampling_slow.cuh"

namespace vireo::cuda::sampling {

constexpr int kHistBins = 2048;  // bins of e: bits(e) >> 19 (e <= 1: bins <= 2032)

static_assert(kHistBins == 2048, "chunk_kernel zeroes 2048 bins per mid row");
static_assert(kCandCap * 8 <= 8 * kBins + 3 * kBins * 4, "cand_keys alias the slow path's histogram arrays");

enum MidStatus : int { kPlanCut = 0, kPlanEmpty = 1, kPlanFallback = 2 };

// The threshold plan of a row (hist_kernel's last block). Candidates: domain ids with bin in
// [bot_bin, top_bin]; ids of higher bins are kept, lower ones dropped. top_bin = -1: no cut.
struct MidPlan {
  int status;
  int top_bin, bot_bin;
  int topk_active;                   // top_k < number of domain ids
  unsigned long long count_above;    // domain ids above top_bin
  unsigned long long mass_above;     // and their mass
  unsigned long long total_mass;     // the whole domain's mass
};

namespace {

using u64 = unsigned long long;

__device__ __forceinline__ int bin_of_e(float e) { return min(static_cast<int>(__float_as_uint(e) >> 19), kHistBins - 1); }
__device__ __forceinline__ u64 cand_key(float e, int id) {
  return (static_cast<u64>(__float_as_uint(e)) << 32) | (0xffffffffu - static_cast<unsigned>(id));
}
__device__ __forceinline__ float key_e(u64 k) { return __uint_as_float(static_cast<unsigned>(k >> 32)); }
__device__ __forceinline__ int key_id(u64 k) { return static_cast<int>(0xffffffffu - static_cast<unsigned>(k)); }

__device__ __forceinline__ bool has_entries(const SamplingRow& row, const Args& a) {
  const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
  const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
  return pe > pb || me > mb;
}
// Rows of the mid path: not fast (not forced), mid path on.
__device__ __forceinline__ bool is_mid(const SamplingRow& row, const Args& a) {
  return a.plan && row.forced_token < 0 && !is_fast(row, a);
}
__device__ __forceinline__ bool mid_draws(const SamplingRow& row) { return row.temperature >= 1e-5f; }
// Mid rows that draw with a top-k or top-p cut: hist_kernel plans them.
__device__ __forceinline__ bool needs_hist(const SamplingRow& row, const Args& a) {
  return is_mid(row, a) && mid_draws(row) && ((row.top_k > 0 && row.top_k < a.vocab) || row.top_p < 1.0f);
}

// The work row: raw values, except ids whose bit is set (penalties/masks), read from scratch.
struct WorkRow {
  const uint32_t* bits;  // null: no entries
  const float* ov;
};
__device__ __forceinline__ WorkRow work_row(const Args& a, int r, const SamplingRow& row) {
  if (a.pen_bits && a.scratch && has_entries(row, a))
    return {a.pen_bits + static_cast<int64_t>(r) * a.bit_words, a.scratch + static_cast<int64_t>(r) * a.vocab};
  return {nullptr, nullptr};
}
// Ids [base, base + 8) (base % 8 == 0).
__device__ __forceinline__ void overlay8(const WorkRow& w, int V, int base, float (&v)[kPerThread]) {
  if (!w.bits || base >= V) return;
  const unsigned m = (w.bits[base >> 5] >> (base & 31)) & 0xffu;
  if (m) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      if ((m >> j) & 1u) v[j] = w.ov[base + j];
  }
}
__device__ __forceinline__ float work_value(const WorkRow& w, float raw, int id) {
  return w.bits && ((w.bits[id >> 5] >> (id & 31)) & 1u) ? w.ov[id] : raw;
}

// The row's work max from the chunk partials, in every warp (no shared memory, no barrier).
__device__ __forceinline__ float row_work_max(const Args& a, int r) {
  const int C = a.num_chunks, lane = threadIdx.x & 31;
  float m = neg_inf();
  for (int c = lane; c < C; c += 32) m = fmaxf(m, a.pwmax[static_cast<int64_t>(r) * C + c]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

// ---- penalty_kernel: one block per row with entries ----
template <typename T>
__global__ void __launch_bounds__(kThreads) penalty_kernel(Args a) {
  pdl_enter();  // scratch/bits may still be read by the previous call's kernels
  const int r = blockIdx.x, tid = threadIdx.x, V = a.vocab;
  const SamplingRow row = a.rows[r];
  if (!is_mid(row, a) || !has_entries(row, a)) return;
  uint32_t* bits = a.pen_bits + static_cast<int64_t>(r) * a.bit_words;
  float* ov = a.scratch + static_cast<int64_t>(r) * V;
  const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  for (int i = tid; i < a.bit_words; i += kThreads) bits[i] = 0u;
  __syncthreads();
  // Penalties (entries have distinct ids), then masks (sync: a mask wins over a penalty).
  const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
  for (int e = pb + tid; e < pe; e += kThreads) {
    const int id = a.pairs[2 * e], count = a.pairs[2 * e + 1];
    if (id < 0 || id >= V) continue;
    float l = to_f(raw[id]);
    if (row.repetition_penalty != 1.0f) l = l > 0.0f ? l / row.repetition_penalty : __fmul_rn(l, row.repetition_penalty);
    if (count > 0) l = __fsub_rn(l, __fadd_rn(__fmul_rn(row.frequency_penalty, float(count)), row.presence_penalty));
    ov[id] = l;
    atomicOr(&bits[id >> 5], 1u << (id & 31));
  }
  __syncthreads();
  const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
  for (int e = mb + tid; e < me; e += kThreads) {
    const int id = a.masks[e];
    if (id < 0 || id >= V) continue;
    ov[id] = neg_inf();
    atomicOr(&bits[id >> 5], 1u << (id & 31));
  }
}

// Loads this thread's ids of chunk c (kIters steps of 8) as work values; ids >= V are -inf.
template <typename T, int kIters>
__device__ __forceinline__ void load_work(const Args& a, int r, const WorkRow& wr, int c, float (&v)[kIters][kPerThread]) {
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * a.vocab;
  const int base = c * (kIters * kChunkStep) + threadIdx.x * kPerThread;
#pragma unroll
  for (int it = 0; it < kIters; ++it) load8(p, a.vocab, a.aligned, base + it * kChunkStep, v[it]);
#pragma unroll
  for (int it = 0; it < kIters; ++it) overlay8(wr, a.vocab, base + it * kChunkStep, v[it]);
}

// ---- hist_kernel: one block per (row, chunk) of rows with top-k/top-p ----

// The plan of row r from its complete histogram (the row's last hist_kernel block, kChunkThreads).
__device__ void plan_row(const Args& a, int r, const SamplingRow& row, u64* red, int* sel, u64* val) {
  constexpr int kPer = kHistBins / kChunkThreads;  // 8 bins per thread, in descending bin order
  const int tid = threadIdx.x;
  const int64_t hb = static_cast<int64_t>(r) * kHistBins;
  unsigned cnt[kPer];
  u64 ms[kPer], lc = 0, lm = 0;
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    const int bin = kHistBins - 1 - (tid * kPer + q);
    cnt[q] = __ldcg(&a.hist_count[hb + bin]);
    ms[q] = __ldcg(&a.hist_mass[hb + bin]);
    lc += cnt[q], lm += ms[q];
  }
  if (tid == 0) sel[0] = INT_MAX, sel[1] = -1, sel[2] = INT_MAX;  // bk pos, L pos, first nonempty pos
  u64 total_c, total_m;
  const u64 ec = block_excl_scan_u64<kChunkThreads>(lc, total_c, red);
  const u64 em = block_excl_scan_u64<kChunkThreads>(lm, total_m, red);  // syncs: sel set
  MidPlan pl{};
  pl.total_mass = total_m;
  if (total_c == 0) {
    if (tid == 0) pl.status = kPlanEmpty, pl.top_bin = -1, a.plan[r] = pl;
    return;
  }
  const u64 k = row.top_k > 0 ? static_cast<u64>(row.top_k) : 0;
  const bool topk = row.top_k > 0 && row.top_k < a.vocab && k < total_c;
  const bool topp = row.top_p < 1.0f;
  {
    u64 c = ec;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int pos = tid * kPer + q;
      if (cnt[q]) {
        atomicMin(&sel[2], pos);
        if (topk && c < k && c + cnt[q] >= k) atomicMin(&sel[0], pos);
      }
      c += cnt[q];
    }
  }
  __syncthreads();
  const int bk = sel[0], first = sel[2];
  if (topk && bk == INT_MAX) {  // not reached: k < total count
    if (tid == 0) pl.status = kPlanFallback, a.plan[r] = pl;
    return;
  }
  // Mass above the top-k boundary bin: the top-k set's mass is within [it, it + mass(bk)].
  {
    u64 m = em;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      if (tid * kPer + q == bk) val[0] = m;
      m += ms[q];
    }
  }
  __syncthreads();
  const u64 mk_lo = topk ? val[0] : total_m;
  int top_pos = bk, bot_pos = bk;
  if (topp) {
    // The last kept id's bin for target t: the last nonempty bin whose mass before it is < t (the
    // first id is always kept). Monotone in t: the lowest target gives the highest bin.
    const double t_lo = static_cast<double>(row.top_p) * static_cast<double>(mk_lo);
    u64 m = em;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      if (cnt[q] && static_cast<double>(m) < t_lo) atomicMax(&sel[1], tid * kPer + q);
      m += ms[q];
    }
    __syncthreads();
    const int l = sel[1] >= 0 ? sel[1] : first;
    top_pos = topk ? min(l, bk) : l;
    bot_pos = topk ? bk : l;
  } else if (!topk) {
    top_pos = bot_pos = -1;  // no cut (top-k >= the domain)
  }
  if (top_pos < 0) {
    if (tid == 0) {
      pl.status = kPlanCut, pl.top_bin = -1, pl.bot_bin = 0, pl.topk_active = 0;
      a.plan[r] = pl;
    }
    return;
  }
  // Counts and mass above the range, count through its bottom.
  {
    u64 c = ec, m = em;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int pos = tid * kPer + q;
      if (pos == top_pos) val[1] = c, val[2] = m;
      c += cnt[q];
      m += ms[q];
      if (pos == bot_pos) val[3] = c;
    }
  }
  __syncthreads();
  if (tid == 0) {
    pl.top_bin = kHistBins - 1 - top_pos;
    pl.bot_bin = kHistBins - 1 - bot_pos;
    pl.topk_active = topk ? 1 : 0;
    pl.count_above = val[1];
    pl.mass_above = val[2];
    pl.status = val[3] - val[1] > static_cast<u64>(kCandCap) ? kPlanFallback : kPlanCut;
    a.plan[r] = pl;
  }
}

template <typename T, int kIters>
__global__ void __launch_bounds__(kChunkThreads) hist_kernel(Args a) {
  __shared__ unsigned hc[kHistBins];
  __shared__ u64 hm[kHistBins];
  __shared__ u64 red[kChunkWarps];
  __shared__ int sel[4];
  __shared__ u64 val[4];
  __shared__ bool last;
  const int C = a.num_chunks, r = blockIdx.x / C, c = blockIdx.x - r * C, tid = threadIdx.x;
  pdl_enter();
  const SamplingRow row = a.rows[r];
  if (!needs_hist(row, a)) return;  // the whole block
  for (int b = tid; b < kHistBins; b += kChunkThreads) hc[b] = 0u, hm[b] = 0ull;
  const float W = row_work_max(a, r);
  const WorkRow wr = work_row(a, r, row);
  float v[kIters][kPerThread];
  load_work<T, kIters>(a, r, wr, c, v);
  __syncthreads();
  if (W > neg_inf()) {
    const Temper tp{W, 1.0f / row.temperature, row.min_p};
    const int base = c * (kIters * kChunkStep) + tid * kPerThread;
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int id = base + it * kChunkStep + j;
        const float e = tp.e(v[it][j]);
        if (id < a.vocab && tp.domain(e)) {
          const int b = bin_of_e(e);
          atomicAdd(&hc[b], 1u);
          atomicAdd(&hm[b], fix_mass(e));
        }
      }
  }
  __syncthreads();
  const int64_t hb = static_cast<int64_t>(r) * kHistBins;
  for (int b = tid; b < kHistBins; b += kChunkThreads)
    if (hc[b]) {
      atomicAdd(&a.hist_count[hb + b], hc[b]);
      atomicAdd(&a.hist_mass[hb + b], hm[b]);
    }
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&a.arrivals[r], 1u) == static_cast<unsigned>(C - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  plan_row(a, r, row, red, sel, val);
}

// ---- mid_chunk_kernel: one block per (row, chunk) of drawn mid rows ----
template <typename T, int kIters>
__global__ void __launch_bounds__(kChunkThreads) mid_chunk_kernel(Args a) {
  __shared__ u64 red[kChunkWarps];
  const int C = a.num_chunks, r = blockIdx.x / C, c = blockIdx.x - r * C, tid = threadIdx.x, lane = tid & 31;
  pdl_enter();
  const SamplingRow row = a.rows[r];
  if (!is_mid(row, a) || !mid_draws(row)) return;
  int top = -1, bot = 0;
  if (needs_hist(row, a)) {
    const MidPlan& pl = a.plan[r];
    if (pl.status != kPlanCut) return;
    top = pl.top_bin, bot = pl.bot_bin;
  }
  const float W = row_work_max(a, r);
  const WorkRow wr = work_row(a, r, row);
  float v[kIters][kPerThread];
  load_work<T, kIters>(a, r, wr, c, v);
  u64 sure = 0;
  if (W > neg_inf()) {
    const Temper tp{W, 1.0f / row.temperature, row.min_p};
    const int base = c * (kIters * kChunkStep) + tid * kPerThread;
    const int64_t cb = static_cast<int64_t>(r) * kCandCap;
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int id = base + it * kChunkStep + j;
        const float e = tp.e(v[it][j]);
        const bool dom = id < a.vocab && tp.domain(e);
        const int b = dom ? bin_of_e(e) : -1;
        if (dom && b > top) sure += fix_mass(e);
        const bool cand = dom && b <= top && b >= bot;
        const unsigned mask = __ballot_sync(0xffffffffu, cand);  // warp-uniform loop
        if (mask) {
          const int leader = __ffs(mask) - 1;
          unsigned first = 0;
          if (lane == leader) first = atomicAdd(&a.cand_count[r], static_cast<unsigned>(__popc(mask)));
          first = __shfl_sync(0xffffffffu, first, leader);
          if (cand) {
            const unsigned slot = first + __popc(mask & ((1u << lane) - 1u));
            if (slot < static_cast<unsigned>(kCandCap)) a.cand[cb + slot] = make_uint2(__float_as_uint(e), static_cast<unsigned>(id));
          }
        }
      }
  }
  u64 total;
  block_excl_scan_u64<kChunkThreads>(sure, total, red);
  if (tid == 0) a.pmass[static_cast<int64_t>(r) * C + c] = total;
}

// ---- sample_kernel side ----

// Descending bitonic sort of n (a power of two) keys in shared memory, whole block; ends synced.
__device__ void bitonic_desc(u64* keys, int n) {
  for (int k = 2; k <= n; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int x = i ^ j;
        if (x > i) {
          const u64 p = keys[i], q = keys[x];
          const bool desc = (i & k) == 0;
          if (desc ? p < q : p > q) keys[i] = q, keys[x] = p;
        }
      }
      __syncthreads();
    }
}

// The draw of a mid row: W = the work max (> -inf), best = the work argmax (kept: the fallback).
// cm: dynamic shared memory, C words. Block-uniform call.
template <typename T>
__device__ int mid_draw(const Args& a, int r, const SamplingRow& row, float W, int best, int n, Shared& sm, u64* cm) {
  const int tid = threadIdx.x, C = a.num_chunks, V = a.vocab;
  const Temper tp{W, 1.0f / row.temperature, row.min_p};
  const bool hist = needs_hist(row, a);
  MidPlan pl{};
  pl.top_bin = -1;
  if (hist) pl = a.plan[r];
  for (int c = tid; c < C; c += kThreads) cm[c] = a.pmass[static_cast<int64_t>(r) * C + c];
  u64 tkey = static_cast<u64>(pl.top_bin + 1) << 51;  // the keys of the bins above the candidates
  if (n > 0) {
    int n_pad = 1;
    while (n_pad < n) n_pad <<= 1;
    u64* keys = sm.cand_keys;
    const int64_t cb = static_cast<int64_t>(r) * kCandCap;
    for (int i = tid; i < n_pad; i += kThreads) {
      u64 k = 0;  // padding sorts last
      if (i < n) {
        const uint2 cd = a.cand[cb + i];
        k = (static_cast<u64>(cd.x) << 32) | (0xffffffffu - cd.y);
      }
      keys[i] = k;
    }
    if (tid == 0) sm.mid_n_kept = n, sm.mid_mk = pl.total_mass;
    __syncthreads();
    bitonic_desc(keys, n_pad);
    const int per = (n + kThreads - 1) / kThreads;
    const int jb = min(tid * per, n), je = min(jb + per, n);
    u64 local = 0;
    for (int j = jb; j < je; ++j) local += fix_mass(key_e(keys[j]));
    u64 total;
    const u64 excl = block_excl_scan_u64<kThreads>(local, total, sm.red_u64);
    const bool topk = pl.topk_active != 0, topp = row.top_p < 1.0f;
    const u64 k = row.top_k > 0 ? static_cast<u64>(row.top_k) : 0;
    if (topk) {
      // The top-k set's mass: above + the first k - count_above candidates.
      const u64 kk = k - pl.count_above;  // >= 1 (top-k boundary in the bottom bin)
      u64 m = pl.mass_above + excl;
      for (int j = jb; j < je; ++j) {
        m += fix_mass(key_e(keys[j]));
        if (static_cast<u64>(j) + 1 == kk) sm.mid_mk = m;
      }
    }
    __syncthreads();
    const double t = static_cast<double>(row.top_p) * static_cast<double>(sm.mid_mk);
    u64 before = pl.mass_above + excl;
    for (int j = jb; j < je; ++j) {
      const u64 rank = pl.count_above + j;
      const bool keep = !(topk && rank >= k) && !(topp && !(rank == 0 || static_cast<double>(before) < t));
      if (!keep) {
        atomicMin(&sm.mid_n_kept, j);
        break;
      }
      before += fix_mass(key_e(keys[j]));
    }
    __syncthreads();
    const int nk = sm.mid_n_kept;
    if (nk > 0) tkey = keys[nk - 1];
    for (int j = tid; j < nk; j += kThreads) {
      const int id = key_id(keys[j]);
      if (id >= 0 && id < V) atomicAdd(&cm[id / a.chunk], fix_mass(key_e(keys[j])));
    }
  }
  if (tid == 0) sm.sel_seg = INT_MAX, sm.picked = INT_MAX;
  __syncthreads();
  // The chunk where the running kept mass passes floor(uniform * total).
  const int per_c = (C + kThreads - 1) / kThreads;
  const int cb0 = min(tid * per_c, C), ce0 = min(cb0 + per_c, C);
  u64 lsum = 0;
  for (int c = cb0; c < ce0; ++c) lsum += cm[c];
  u64 total;
  const u64 cexcl = block_excl_scan_u64<kThreads>(lsum, total, sm.red_u64);
  if (total == 0) return best;  // block-uniform; not reached (the argmax is kept)
  const double ud = static_cast<double>(row.uniform);
  const u64 ufix = !(ud > 0.0) ? 0ull : ud >= 1.0 ? ~0ull : static_cast<u64>(ud * 18446744073709551616.0);
  const u64 target = __umul64hi(ufix, total);  // floor(uniform * total) < total
  {
    u64 acc = cexcl;
    for (int c = cb0; c < ce0; ++c) {
      if (acc <= target && acc + cm[c] > target) {  // the one chunk with excl <= target < incl
        atomicMin(&sm.sel_seg, c);
        sm.mid_rem = target - acc;  // one writer
        break;
      }
      acc += cm[c];
    }
  }
  __syncthreads();
  const int c = sm.sel_seg;
  if (c == INT_MAX) return best;  // block-uniform; not reached (exact sums)
  const u64 rem = sm.mid_rem;
  // The chunk's ids in id order: runs of consecutive ids per thread, a block scan of the runs.
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const WorkRow wr = work_row(a, r, row);
  const int lo = c * a.chunk, hi = min(V, lo + a.chunk);
  const int per_id = (a.chunk + kThreads - 1) / kThreads;
  const int ib = min(lo + tid * per_id, hi), ie = min(ib + per_id, hi);
  auto weight = [&](int i) -> u64 {
    const float e = tp.e(work_value(wr, to_f(p[i]), i));
    if (!tp.domain(e) || cand_key(e, i) < tkey) return 0ull;
    return fix_mass(e);
  };
  u64 ls = 0;
  for (int i = ib; i < ie; ++i) ls += weight(i);
  u64 tot2;
  u64 run = block_excl_scan_u64<kThreads>(ls, tot2, sm.red_u64);
  for (int i = ib; i < ie; ++i) {
    const u64 w = weight(i);
    if (run <= rem && run + w > rem) {  // the one id with excl <= rem < incl (w > 0)
      atomicMin(&sm.picked, i);
      break;
    }
    run += w;
  }
  __syncthreads();
  const int id = sm.picked != INT_MAX ? sm.picked : best;
  __syncthreads();
  return id;
}

// A mid row (sample_kernel): logprobs from the raw partials, then the work argmax or the draw; rows
// whose plan fell back (or whose candidates overflowed) run the slow path instead.
template <typename T, int K>
__device__ void mid_row(const Args& a, int r, const SamplingRow& row, Shared& sm, float* dyn) {
  const int tid = threadIdx.x, C = a.num_chunks, V = a.vocab, n = a.num_top;
  const bool draws = mid_draws(row), hist = draws && needs_hist(row, a);
  int status = kPlanCut;
  unsigned n_cand = 0;
  if (hist) {
    status = a.plan[r].status;
    if (status == kPlanCut) n_cand = a.cand_count[r];
  }
  if (status == kPlanFallback || n_cand > static_cast<unsigned>(kCandCap)) {
    slow_row<T, K>(a, r, row, sm, dyn);
    return;
  }
  float raw_max;
  const float lse = merge_raw<K>(a, r, sm, raw_max);
  float bv = neg_inf();
  int bi = INT_MAX;
  for (int c = tid; c < C; c += kThreads) {
    const int64_t at = static_cast<int64_t>(r) * C + c;
    const float v = a.pwmax[at];
    const int i = a.pwarg[at];
    if (better(v, i, bv, bi)) bv = v, bi = i;
  }
  block_best(bv, bi, sm);
  const int best = bi == INT_MAX || bi < 0 || bi >= V ? 0 : bi;
  int token;
  if (!draws) token = best;
  else if (!(bv > neg_inf()) || status == kPlanEmpty) token = 0;  // nothing to draw from, as slow_row
  else token = mid_draw<T>(a, r, row, bv, best, static_cast<int>(n_cand), sm, reinterpret_cast<u64*>(dyn));
  if (tid == 0) {
    const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
    a.out_tokens[r] = token;
    if (a.out_tokens_mirror) a.out_tokens_mirror[r] = token;
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n)] =
        token >= 0 && token < V ? to_f(raw[token]) - lse : __int_as_float(0x7fc00000);
  }
}

}  // namespace
}  // namespace vireo::cuda::sampling
