// The sample op on the device (semantics: backend/op_params.h; oracle: backend/cpu/cpu_sampling.cc).
// Two kernels; each row takes one of two paths, decided on the device from its SamplingRow:
//
// Fast path (forced rows, greedy rows, plain temperature rows: no top-k/top-p/min-p, and top-k rows:
// 1 <= top_k <= 20 (< V) with any top-p/min-p; no penalty or mask entries). The row is split into
// chunks of kChunkStep * iters ids (2048 for small batches, 8192 when M * chunks would exceed ~2048
// blocks), one 256-thread block per (row, chunk):
//   chunk_kernel: each thread loads 8 ids per step into registers (16-byte loads when the rows are
//     16-byte aligned, scalar loads otherwise), then the block computes the chunk max c, the sums
//     sum(exp(l - c)) (-> log-softmax) and, for draw rows, sum(exp((l - c) / T)) (the tempered mass
//     relative to the chunk max, rescaled by exp((c - max) / T) in the merge), and the chunk's
//     top-K list (best first, ties by lower id; K >= 1 so list[0] is the argmax).
//   sample_kernel (one 512-thread block per row): merges the partials: max, lse, top-N (per-thread
//     lists over the C * K candidates, then the block merge), greedy = top[0]; a draw scans the
//     chunks' masses in id order for the chunk where the cumulative mass passes uniform * total,
//     then scans only that chunk's ids (exact e = exp((l - max) / T), as below) in id order.
//   Top-k rows: the support is within the k best raw logits (tempering is monotone), so chunk_kernel
//     keeps 20-lists for them (whatever N; the partials' lists have stride 20), sample_kernel merges
//     them to the row's top 20 and one warp does min-p (e >= min_p), top-k (rank in (x desc, id asc)),
//     top-p (smallest prefix reaching top_p * the kept mass) and the draw in id order (topk_draw),
//     with the slow path's arithmetic for x and e.
// The logits are streamed once (plus one chunk per drawn row from L2). Both kernels are launched
// with PDL (launch_pdl) and wait (pdl_enter) before their first read.
//
// Slow path (rows with threshold searches or penalties/masks): chunk_kernel skips them and the same
// sample_kernel block runs the full single-block algorithm over the row, streamed from memory (L2
// after the first pass) once per pass, 16 bytes per lane:
//   1. raw pass: online max/sum-exp (-> log-softmax), per-thread top-K lists (-> top-N logprobs and
//      the greedy argmax), and for rows with penalties/masks an fp32 copy into workspace scratch;
//   2. penalised rows: penalty entries and masks applied to the copy, one more pass for max/argmax/min;
//   3. sampling rows: top-k and then top-p each become a threshold (x*, id*) in the order (value desc,
//      id asc) over x = (l - max) / T: kept iff x > x* or (x == x* and id <= id*). Found by a
//      histogram search: level 0 bins the value range in 2048 bins (count, and mass for top-p), a
//      suffix scan finds the bin where the k-th element / the top_p mass is reached, the next level
//      bins only that bin's members, until the boundary is one value; ties there are resolved by
//      finding the j-th tie in id order. min-p is the explicit e >= min_p (e = exp(x), e_max = 1).
//   4. the draw: per-segment sums of the kept e (segment = 32 lanes x 16 bytes), a block scan over the
//      segments finds the one where the cumulative mass passes uniform * total, one warp scans it.
// No host synchronisation; ranges read from the rows are clamped on the device.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <string>
#include <cstring>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_block.cuh"

namespace vireo::cuda {
namespace sampling {
namespace {

struct Args {
  const void* logits;          // [M, V] T
  int vocab;
  bool aligned;                // logits rows 16-byte aligned
  const SamplingRow* rows;     // [M]
  const int32_t* pairs;        // [E, 2] (id, output count) or null
  int num_pairs;
  const int32_t* masks;        // [E2] or null
  int num_masks;
  float* scratch;              // [M, V] fp32 penalised copies, or null when no row can have penalties
  int num_top;                 // N
  int32_t* out_tokens;         // [M]
  float* out_logprobs;         // [M, 1 + N]
  int32_t* out_top_ids;        // [M, N] or null
  // Fast-path partials, [M, C] (top lists [M, C, kMaxTop], the first K or kMaxTop used); pmax null:
  // every row takes the slow path.
  int chunk;                   // ids per chunk: kChunkStep * iters
  int num_chunks;              // C = ceil(V / chunk)
  float* pmax;                 // chunk max of the raw logits
  float* psum;                 // sum exp(l - chunk max)
  float* ptsum;                // draw rows: sum exp((l - chunk max) / T)
  float* ptop_v;               // chunk top-K values, best first ([M, C, kMaxTop]: stride kMaxTop)
  int32_t* ptop_i;             // their ids (INT_MAX: none)
};

// A threshold in the order (x desc, id asc): everything at or above it is kept.
struct Thr {
  float x;
  int id;
};
__device__ __forceinline__ bool passes(float x, int id, Thr t) { return x > t.x || (x == t.x && id <= t.id); }

// x = (l - max) * (1 / T) and e = exp(x), as the CPU reference computes them (no contraction).
struct Temper {
  float max, inv_t, min_p;
  __device__ __forceinline__ float x(float v) const { return __fmul_rn(__fsub_rn(v, max), inv_t); }
  __device__ __forceinline__ float e(float v) const { return v == neg_inf() ? 0.0f : expf(x(v)); }
  // In the support before top-k/top-p: nonzero probability, and min-p (p >= min_p * p_max <=> e >= min_p).
  __device__ __forceinline__ bool domain(float e) const { return e > 0.0f && !(min_p > 0.0f && e < min_p); }
};

__device__ __forceinline__ int bin_of(float x, float lo, float scale) {
  return static_cast<int>(fminf(fmaxf(__fmul_rn(__fsub_rn(x, lo), scale), 0.0f), float(kBins - 1)));
}

// The first id (in id order) where the running sum of weight(id, v) exceeds `target` (frac: target
// is frac * the row's total weight); past the total, the last id of nonzero weight; -1 if none.
// seg: dynamic shared memory, one float per segment.
template <typename W, typename F>
__device__ int pick(const W* p, int V, bool aligned, F weight, bool frac, float t, float* seg, Shared& sm) {
  constexpr int kVec = vec_of<W>(), kSeg = 32 * kVec;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, tid = threadIdx.x;
  const int num_seg = (V + kSeg - 1) / kSeg;
  for_each_segment(p, V, aligned, [&](int s, int id0, const float* v) {
    float w = 0.0f;
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      if (id0 + j < V) w += weight(id0 + j, v[j]);
    w = warp_sum(w);
    if (lane == 0) seg[s] = w;
  });
  if (tid == 0) sm.sel_seg = INT_MAX, sm.last_seg = -1;
  __syncthreads();
  // Each thread scans a run of consecutive segments.
  const int per = (num_seg + kThreads - 1) / kThreads;
  const int sb = min(tid * per, num_seg), se = min(sb + per, num_seg);
  float local = 0.0f;
  for (int s = sb; s < se; ++s) local += seg[s];
  float2 total;
  const float excl = block_excl_scan(make_float2(local, 0.0f), total, sm).x;
  const float target = frac ? t * total.x : t;
  float acc = excl, rem = 0.0f;
  int found = -1, last = -1;
  for (int s = sb; s < se; ++s) {
    const float w = seg[s];
    if (w > 0.0f) {
      last = s;
      if (found < 0 && acc + w > target) found = s, rem = target - acc;
    }
    acc += w;
  }
  if (found >= 0) atomicMin(&sm.sel_seg, found);
  if (last >= 0) atomicMax(&sm.last_seg, last);
  __syncthreads();
  if (found >= 0 && found == sm.sel_seg) sm.rem = rem;
  __syncthreads();
  int s = sm.sel_seg;
  float r = sm.rem;
  if (s == INT_MAX) s = sm.last_seg, r = pos_inf();  // rounding: past the total
  if (s < 0) return -1;                               // no weight anywhere (block-uniform)
  if (warp == 0) {
    float v[kVec], w[kVec];
    load_seg(p, V, aligned, s, lane, v);
    const int id0 = s * kSeg + lane * kVec;
    float ls = 0.0f;
    bool nz = false;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      w[j] = id0 + j < V ? weight(id0 + j, v[j]) : 0.0f;
      ls += w[j];
      nz |= w[j] > 0.0f;
    }
    float inc = ls;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += y;
    }
    float ex = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 0) ex = 0.0f;
    const unsigned cross = __ballot_sync(0xffffffffu, inc > r && nz);
    const unsigned nzmask = __ballot_sync(0xffffffffu, nz);
    const int chosen = cross ? __ffs(cross) - 1 : (nzmask ? 31 - __clz(nzmask) : 0);
    if (lane == chosen) {
      int idx = -1, lastnz = -1;
      float run = ex;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        if (w[j] > 0.0f) {
          lastnz = id0 + j;
          run += w[j];
          if (idx < 0 && run > r) idx = id0 + j;
        }
      sm.picked = idx >= 0 ? idx : lastnz;
    }
  }
  __syncthreads();
  const int id = sm.picked;
  __syncthreads();  // sm.picked may be rewritten by the next pick
  return id;
}

// Top-k (count mode: keep the `k` best) or top-p (mass mode: keep the best while the mass before an
// element is < top_p * the mass of the candidates) over the candidates domain && passes(prev).
// xlo: a lower bound of the candidates' x.
template <typename W>
__device__ Thr select(const W* p, int V, bool aligned, const Temper& tp, Thr prev, bool mass_mode, float param,
                      float xlo, float* seg, Shared& sm) {
  const int tid = threadIdx.x;
  // Membership of this level's pass: level 0 all candidates; level 1 bin b0 of level 0 (recomputed);
  // levels >= 2 the closed interval [ilo, ihi] (exact bounds of the previous level's bin).
  float blo = xlo, bscale = xlo < 0.0f ? fminf(kBins / -xlo, FLT_MAX) : 0.0f;  // this pass's binning
  float plo = 0.0f, pscale = 0.0f, ilo = 0.0f, ihi = 0.0f;
  int pb = 0;
  float above_c = 0.0f, above_m = 0.0f, target = param;
  for (int lvl = 0; lvl < kMaxLevels; ++lvl) {
    for (int b = tid; b < kBins; b += kThreads)
      sm.hist_count[b] = 0, sm.hist_mass[b] = 0.0f, sm.hist_min[b] = INT_MAX, sm.hist_max[b] = INT_MIN;
    __syncthreads();
    float cmin = pos_inf(), cmax = neg_inf();
    for_each(p, V, aligned, [&](int id, float v) {
      const float x = tp.x(v);
      if (lvl == 1 && bin_of(x, plo, pscale) != pb) return;
      if (lvl >= 2 && !(x >= ilo && x <= ihi)) return;
      if (!passes(x, id, prev)) return;
      const float e = tp.e(v);
      if (!tp.domain(e)) return;
      const int b = bin_of(x, blo, bscale);
      atomicAdd(&sm.hist_count[b], 1);
      if (mass_mode) atomicAdd(&sm.hist_mass[b], e);
      if (lvl >= 1) atomicMin(&sm.hist_min[b], fkey(x)), atomicMax(&sm.hist_max[b], fkey(x));
      cmin = fminf(cmin, x), cmax = fmaxf(cmax, x);
    });
    __syncthreads();
    cmin = block_minmax<false>(cmin, sm);
    cmax = block_minmax<true>(cmax, sm);
    // Bins from the top: thread t owns bins kBins-1-4t ... kBins-4-4t.
    constexpr int kPer = kBins / kThreads;
    float2 mine[kPer], sum = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int b = kBins - 1 - (tid * kPer + q);
      mine[q] = make_float2(float(sm.hist_count[b]), sm.hist_mass[b]);
      sum.x += mine[q].x, sum.y += mine[q].y;
    }
    float2 total;
    const float2 excl = block_excl_scan(sum, total, sm);
    const float cnt = total.x;
    if (cnt == 0.0f) return Thr{neg_inf(), INT_MAX};  // no candidates at all (level 0 only)
    if (lvl == 0) {
      if (!mass_mode && cnt <= param) return Thr{neg_inf(), INT_MAX};
      target = mass_mode ? param * total.y : param;
    }
    const float need = target - (mass_mode ? above_m : above_c);
    if (cmin == cmax) {
      // One value left: keep its first j ties in id order.
      float j = mass_mode ? ceilf(need / expf(cmin)) : need;
      j = fminf(fmaxf(j, 1.0f), cnt);
      if (j >= cnt) return Thr{cmin, INT_MAX};
      const float xv = cmin;
      const int id = pick(p, V, aligned,
                          [&](int i, float v) {
                            const float x = tp.x(v);
                            return x == xv && passes(x, i, prev) && tp.domain(tp.e(v)) ? 1.0f : 0.0f;
                          },
                          false, j - 1.0f, seg, sm);
      return Thr{xv, id >= 0 ? id : INT_MAX};
    }
    if ((!mass_mode && need == cnt) || (mass_mode && cnt == 1.0f) || lvl == kMaxLevels - 1) return Thr{cmin, INT_MAX};
    // The boundary bin: the first (from the top) where the running count/mass reaches the target.
    if (tid == 0) sm.sel_bin = INT_MAX;
    __syncthreads();
    float2 acc = make_float2(above_c + excl.x, above_m + excl.y);
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const float2 next = make_float2(acc.x + mine[q].x, acc.y + mine[q].y);
      if ((mass_mode ? next.y : next.x) >= target && mine[q].x > 0.0f) {
        atomicMin(&sm.sel_bin, tid * kPer + q);
        break;
      }
      acc = next;
    }
    __syncthreads();
    const int sel = sm.sel_bin;
    if (sel == INT_MAX) return Thr{cmin, INT_MAX};  // rounding: the target is past the mass; keep all
    if (tid == sel / kPer) sm.bin_above = acc;
    __syncthreads();
    above_c = sm.bin_above.x, above_m = sm.bin_above.y;
    const int b = kBins - 1 - sel;
    if (lvl == 0) {
      plo = blo, pscale = bscale, pb = b;
      blo = blo + b / bscale;  // approximate edges: only the binning of level 1 uses them
      bscale = fminf(bscale * kBins, FLT_MAX);
    } else {
      ilo = funkey(sm.hist_min[b]), ihi = funkey(sm.hist_max[b]);
      blo = ilo;
      bscale = ihi > ilo ? fminf(kBins / (ihi - ilo), FLT_MAX) : 0.0f;
    }
    __syncthreads();  // hist_* are cleared next
  }
  return Thr{neg_inf(), INT_MAX};  // not reached
}

// Temperature sampling over the work row (raw logits, or the penalised fp32 copy).
template <typename W>
__device__ int draw_token(const W* p, int V, bool aligned, const SamplingRow& row, float wmax, float wmin, float* seg,
                          Shared& sm) {
  if (!(wmax > neg_inf())) return 0;  // every id masked: nothing to draw from
  const Temper tp{wmax, 1.0f / row.temperature, row.min_p};
  const float xlo = fmaxf(tp.x(wmin), -104.0f);  // exp(x) == 0 below
  Thr tk{neg_inf(), INT_MAX}, tpp{neg_inf(), INT_MAX};
  if (row.top_k > 0 && row.top_k < V) tk = select(p, V, aligned, tp, tk, false, float(row.top_k), xlo, seg, sm);
  if (row.top_p < 1.0f) tpp = select(p, V, aligned, tp, tk, true, row.top_p, xlo, seg, sm);
  const int id = pick(p, V, aligned,
                      [&](int i, float v) {
                        const float x = tp.x(v);
                        if (!passes(x, i, tk) || !passes(x, i, tpp)) return 0.0f;
                        const float e = tp.e(v);
                        return tp.domain(e) ? e : 0.0f;
                      },
                      true, row.uniform, seg, sm);
  return id >= 0 ? id : 0;
}

// The single-block algorithm over row r (the slow path; see the header comment).
template <typename T, int K>
__device__ void slow_row(const Args& a, int r, const SamplingRow& row, Shared& sm, float* seg_sums) {
  const int tid = threadIdx.x, V = a.vocab;
  const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
  const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
  const bool penalised = a.scratch && row.forced_token < 0 && (pe > pb || me > mb);
  float* work = penalised ? a.scratch + static_cast<int64_t>(r) * V : nullptr;
  const bool work_aligned = (V & 3) == 0;  // scratch rows: V floats each, base 256-byte aligned

  // 1. Raw pass.
  float m = neg_inf(), s = 0.0f, vmin = pos_inf();
  float lv[K];
  int li[K];
  top_init(lv, li);
  for_each_segment(raw, V, a.aligned, [&](int, int id0, const float* v) {
    constexpr int kVec = vec_of<T>();
    if (work) {
      if (work_aligned && id0 + kVec <= V) {
#pragma unroll
        for (int q = 0; q < kVec; q += 4)
          *reinterpret_cast<float4*>(work + id0 + q) = make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]);
      } else {
        for (int j = 0; j < kVec; ++j)
          if (id0 + j < V) work[id0 + j] = v[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int id = id0 + j;
      if (id >= V) break;
      const float x = v[j];
      if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
      } else if (x > neg_inf()) {
        s += expf(x - m);
      }
      if (x > neg_inf() && x < vmin) vmin = x;
      top_insert(lv, li, x, id);
    }
  });
  block_online(m, s, sm);
  vmin = block_minmax<false>(vmin, sm);
  top_merge(lv, li, sm);
  const float lse = m + logf(s);
  const int n = a.num_top;
  for (int i = tid; i < n; i += kThreads) {
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n) + 1 + i] = sm.top_v[i] - lse;
    a.out_top_ids[static_cast<int64_t>(r) * n + i] = sm.top_i[i];
  }

  int token;
  if (row.forced_token >= 0) {
    token = row.forced_token;
  } else {
    float wmax = m, wmin = vmin;
    int wbest = sm.top_i[0] == INT_MAX ? 0 : sm.top_i[0];
    if (penalised) {
      // 2. Penalties, then masks, on the copy (entries have distinct ids; syncs order copy -> penalties -> masks).
      __syncthreads();
      for (int e = pb + tid; e < pe; e += kThreads) {
        const int id = a.pairs[2 * e], count = a.pairs[2 * e + 1];
        if (id < 0 || id >= V) continue;
        float l = work[id];
        if (row.repetition_penalty != 1.0f) l = l > 0.0f ? l / row.repetition_penalty : __fmul_rn(l, row.repetition_penalty);
        if (count > 0) l = __fsub_rn(l, __fadd_rn(__fmul_rn(row.frequency_penalty, float(count)), row.presence_penalty));
        work[id] = l;
      }
      __syncthreads();
      for (int e = mb + tid; e < me; e += kThreads) {
        const int id = a.masks[e];
        if (id >= 0 && id < V) work[id] = neg_inf();
      }
      __syncthreads();
      float bv = neg_inf(), mn = pos_inf();
      int bi = INT_MAX;
      for_each(static_cast<const float*>(work), V, work_aligned, [&](int id, float v) {
        if (better(v, id, bv, bi)) bv = v, bi = id;
        if (v > neg_inf() && v < mn) mn = v;
      });
      block_best(bv, bi, sm);
      wmax = bv, wbest = bi == INT_MAX ? 0 : bi;
      wmin = block_minmax<false>(mn, sm);
    }
    if (row.temperature < 1e-5f) {
      token = wbest;
    } else if (penalised) {
      token = draw_token(static_cast<const float*>(work), V, work_aligned, row, wmax, wmin, seg_sums, sm);
    } else {
      token = draw_token(raw, V, a.aligned, row, wmax, wmin, seg_sums, sm);
    }
  }
  if (tid == 0) {
    a.out_tokens[r] = token;
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n)] =
        token >= 0 && token < V ? to_f(raw[token]) - lse : __int_as_float(0x7fc00000);
  }
}

// ---- fast path ----
constexpr int kChunkThreads = 256, kChunkWarps = kChunkThreads / 32;
constexpr int kPerThread = 8;                              // ids per thread per step
constexpr int kChunkStep = kChunkThreads * kPerThread;     // 2048 ids per chunk step

// Drawn rows with an active top-k of at most kMaxTop (any top-p/min-p): the support is within the row's
// kMaxTop best raw logits. Only meaningful for rows that pass is_fast.
__device__ __forceinline__ bool is_topk_row(const SamplingRow& row, const Args& a) {
  return row.forced_token < 0 && row.temperature >= 1e-5f && row.top_k >= 1 && row.top_k <= kMaxTop &&
         row.top_k < a.vocab;
}

// Rows the fast path handles (block-uniform: depends on the row only). Mirrors slow_row's decisions:
// forced rows; else no penalty/mask entries in range and greedy, top-k <= kMaxTop (any top-p/min-p;
// is_topk_row), or no top-k/top-p/min-p.
__device__ __forceinline__ bool is_fast(const SamplingRow& row, const Args& a) {
  if (row.forced_token >= 0) return true;
  const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
  const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
  if (a.scratch && (pe > pb || me > mb)) return false;
  if (row.temperature < 1e-5f) return true;
  if (is_topk_row(row, a)) return true;
  return !(row.top_k > 0 && row.top_k < a.vocab) && !(row.top_p < 1.0f) && !(row.min_p > 0.0f);
}

// Ids [base, base + 8) of a row as float; ids >= V read as -inf (callers also mask them by id).
template <typename T>
__device__ __forceinline__ void load8(const T* row, int V, bool aligned, int base, float (&out)[kPerThread]) {
  constexpr int kVec = vec_of<T>();
  if (aligned && base + kPerThread <= V) {
#pragma unroll
    for (int q = 0; q < kPerThread; q += kVec) {
      Vec<T> v;
      v.raw = *reinterpret_cast<const uint4*>(row + base + q);
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[q + j] = to_f(v.v[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) out[j] = base + j < V ? to_f(row[base + j]) : neg_inf();
  }
}

// The partials of chunk c of fast row r, with top-K lists (K: kMaxTop for top-k rows). kSelect: the
// chunk list by K rounds of warp arg-best over the threads' values (a bitmask of taken values, no
// per-thread lists: fewer registers in the kernels for small K, whose other rows need few).
template <typename T, int K, int kIters, bool kSelect>
__device__ __forceinline__ void chunk_body(const Args& a, const SamplingRow& row, int r, int c) {
  __shared__ float red_a[kChunkWarps], red_b[kChunkWarps];
  __shared__ float wtop_v[kChunkWarps][K];
  __shared__ int wtop_i[kChunkWarps][K];
  const int C = a.num_chunks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, V = a.vocab;
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int base = c * (kIters * kChunkStep) + tid * kPerThread;
  float v[kIters][kPerThread];
#pragma unroll
  for (int it = 0; it < kIters; ++it) load8(p, V, a.aligned, base + it * kChunkStep, v[it]);

  // Chunk max (ids past V are -inf).
  float mx = neg_inf();
#pragma unroll
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) mx = fmaxf(mx, v[it][j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0) red_a[warp] = mx;
  __syncthreads();
  mx = red_a[0];
#pragma unroll
  for (int w = 1; w < kChunkWarps; ++w) mx = fmaxf(mx, red_a[w]);
  __syncthreads();  // red_a is rewritten below

  // Sums relative to the chunk max.
  // (top-k rows draw from their candidates: no tempered mass needed.)
  const bool draw = row.forced_token < 0 && row.temperature >= 1e-5f && !is_topk_row(row, a);
  const float inv_t = draw ? 1.0f / row.temperature : 0.0f;
  float s = 0.0f, ts = 0.0f;
  if (mx > neg_inf()) {
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const float x = v[it][j];
        if (x > neg_inf()) {
          s += expf(x - mx);
          if (draw) ts += expf(__fmul_rn(__fsub_rn(x, mx), inv_t));
        }
      }
  }
  s = warp_sum(s);
  ts = warp_sum(ts);
  if (lane == 0) red_a[warp] = s, red_b[warp] = ts;

  // Top-K of the chunk: per-thread lists (or kSelect), K rounds of warp arg-best, then warp 0 over the
  // warps' lists.
  if constexpr (kSelect) {
    static_assert(kIters * kPerThread <= 32, "taken bitmask");
    float bv;
    int bi, bj;
    unsigned taken = 0u;
    auto rescan = [&] {  // this thread's best value not taken yet
      bv = neg_inf(), bi = INT_MAX, bj = -1;
#pragma unroll
      for (int it = 0; it < kIters; ++it)
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          const int id = base + it * kChunkStep + j, q = it * kPerThread + j;
          if (id < V && !((taken >> q) & 1u) && better(v[it][j], id, bv, bi)) bv = v[it][j], bi = id, bj = q;
        }
    };
    rescan();
    for (int q = 0; q < K; ++q) {
      float wv = bv;
      int wi = bi;
      warp_best(wv, wi);
      if (bj >= 0 && bi == wi) {  // ids are unique: one lane (none when the warp has nothing left)
        taken |= 1u << bj;
        rescan();
      }
      if (lane == 0) wtop_v[warp][q] = wv, wtop_i[warp][q] = wi;
    }
  } else {
    float lv[K];
    int li[K];
    top_init(lv, li);
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int id = base + it * kChunkStep + j;
        if (id < V) top_insert(lv, li, v[it][j], id);
      }
#pragma unroll
    for (int q = 0; q < K; ++q) {
      float bv = lv[0];
      int bi = li[0];
      warp_best(bv, bi);
      if (li[0] == bi) {
#pragma unroll
        for (int j = 0; j + 1 < K; ++j) lv[j] = lv[j + 1], li[j] = li[j + 1];
        lv[K - 1] = neg_inf(), li[K - 1] = INT_MAX;
      }
      if (lane == 0) wtop_v[warp][q] = bv, wtop_i[warp][q] = bi;
    }
  }
  __syncthreads();
  const int64_t pi = static_cast<int64_t>(r) * C + c;
  if (warp == 0) {
    if (lane == 0) {
      float st = 0.0f, tt = 0.0f;
      for (int w = 0; w < kChunkWarps; ++w) st += red_a[w], tt += red_b[w];
      a.pmax[pi] = mx, a.psum[pi] = st, a.ptsum[pi] = tt;
    }
    int h = 0;
    for (int q = 0; q < K; ++q) {
      const bool has = lane < kChunkWarps && h < K;
      float cv = has ? wtop_v[lane][h] : neg_inf();
      int ci = has ? wtop_i[lane][h] : INT_MAX;
      const int mine = ci;
      warp_best(cv, ci);
      if (has && mine == ci) ++h;
      if (lane == 0) a.ptop_v[pi * kMaxTop + q] = cv, a.ptop_i[pi * kMaxTop + q] = ci;
    }
  }
}

// One block per (row, chunk): blockIdx.x = row * C + chunk. Partials of fast rows only. The kernels
// with small lists and 4 steps per thread are capped at 64 registers (>= 4 blocks per SM; their
// non-top-k rows need 48, the top-k rows' selection ~80 and spills a little instead).
template <typename T, int K, int kIters>
__global__ void __launch_bounds__(kChunkThreads, K < kMaxTop && kIters > 1 ? 4 : 1) chunk_kernel(Args a) {
  const int C = a.num_chunks, r = blockIdx.x / C, c = blockIdx.x - r * C;
  pdl_enter();  // before any read (logits, rows) and before the early return
  const SamplingRow row = a.rows[r];
  if (!is_fast(row, a)) return;  // the whole block
  if (K < kMaxTop && is_topk_row(row, a)) chunk_body<T, kMaxTop, kIters, true>(a, row, r, c);
  else chunk_body<T, K, kIters, false>(a, row, r, c);
}

// Temperature draw of a fast row from the partials: the chunk where the cumulative (rescaled) mass
// passes uniform * total, then the id inside it. m: the row max (> -inf); fallback: an id in the support.
template <typename T>
__device__ int fast_draw(const Args& a, int r, const SamplingRow& row, float m, int fallback, Shared& sm) {
  const int tid = threadIdx.x, V = a.vocab, C = a.num_chunks;
  const float inv_t = 1.0f / row.temperature;
  const int64_t pb = static_cast<int64_t>(r) * C;
  auto mass = [&](int c) {
    const float pm = a.pmax[pb + c];
    return pm > neg_inf() ? a.ptsum[pb + c] * expf(__fmul_rn(__fsub_rn(pm, m), inv_t)) : 0.0f;
  };
  if (tid == 0) sm.sel_seg = INT_MAX, sm.last_seg = -1;
  // Each thread scans a run of consecutive chunks.
  const int per = (C + kThreads - 1) / kThreads;
  const int cb = min(tid * per, C), ce = min(cb + per, C);
  float local = 0.0f;
  for (int c = cb; c < ce; ++c) local += mass(c);
  float2 total;
  const float excl = block_excl_scan(make_float2(local, 0.0f), total, sm).x;  // syncs: sel_seg set
  const float target = row.uniform * total.x;
  float acc = excl, rem = 0.0f;
  int found = -1, last = -1;
  for (int c = cb; c < ce; ++c) {
    const float w = mass(c);
    if (w > 0.0f) {
      last = c;
      if (found < 0 && acc + w > target) found = c, rem = target - acc;
    }
    acc += w;
  }
  if (found >= 0) atomicMin(&sm.sel_seg, found);
  if (last >= 0) atomicMax(&sm.last_seg, last);
  __syncthreads();
  if (found >= 0 && found == sm.sel_seg) sm.rem = rem;
  __syncthreads();
  int c = sm.sel_seg;
  float rr = sm.rem;
  if (c == INT_MAX) c = sm.last_seg, rr = pos_inf();  // rounding: past the total
  if (c < 0) return fallback;                         // block-uniform
  if (tid == 0) sm.picked = INT_MAX, sm.picked_last = -1;
  // The chunk's ids in id order: each thread a run of consecutive ids, a block scan of the runs.
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int lo = c * a.chunk, hi = min(V, lo + a.chunk);
  const int per_id = (a.chunk + kThreads - 1) / kThreads;
  const int ib = min(lo + tid * per_id, hi), ie = min(ib + per_id, hi);
  auto e_of = [&](int i) {
    const float v = to_f(p[i]);
    return v == neg_inf() ? 0.0f : expf(__fmul_rn(__fsub_rn(v, m), inv_t));
  };
  float ls = 0.0f;
  for (int i = ib; i < ie; ++i) ls += e_of(i);
  float2 tot2;
  float run = block_excl_scan(make_float2(ls, 0.0f), tot2, sm).x;  // syncs: picked* set
  int idx = -1, lastnz = -1;
  for (int i = ib; i < ie; ++i) {
    const float e = e_of(i);
    if (e > 0.0f) {
      lastnz = i;
      run += e;
      if (idx < 0 && run > rr) idx = i;
    }
  }
  if (idx >= 0) atomicMin(&sm.picked, idx);
  if (lastnz >= 0) atomicMax(&sm.picked_last, lastnz);
  __syncthreads();
  const int id = sm.picked != INT_MAX ? sm.picked : (sm.picked_last >= 0 ? sm.picked_last : fallback);
  __syncthreads();
  return id;
}

// The draw of a top-k row (is_topk_row) from the row's kMaxTop best raw logits in sm.top_v/top_i (best
// first, ties by lower id; sentinels INT_MAX / -inf), in warp 0 (lane j: candidate j), with the slow
// path's arithmetic: x = (l - max) / T, e = exp(x), min-p domain e >= min_p; the candidates ranked by
// (x desc, id asc) (the raw order up to ties that tempering creates); top-k keeps ranks < k of the
// domain, top-p the smallest prefix in rank order whose mass reaches top_p * the kept mass (at least
// one); the draw walks the kept candidates in id order: the first where the running mass exceeds
// uniform * kept mass, else the last kept. Nothing kept (min_p > 1): 0, as the slow path.
// m: the row max (> -inf). Block-uniform call (syncs).
__device__ int topk_draw(const SamplingRow& row, float m, Shared& sm) {
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid < 32) {
    const Temper tp{m, 1.0f / row.temperature, row.min_p};
    const bool valid = lane < kMaxTop && sm.top_i[lane] != INT_MAX;
    const float v = valid ? sm.top_v[lane] : neg_inf();
    const int id = valid ? sm.top_i[lane] : INT_MAX;
    const float x = valid && v > neg_inf() ? tp.x(v) : neg_inf();
    const float e = valid ? tp.e(v) : 0.0f;
    const bool dom = valid && tp.domain(e);
    // Rank among the domain candidates (they are a prefix of the order: e is monotone in x).
    int rank = 0;
    for (int j = 0; j < kMaxTop; ++j) {
      const float xj = __shfl_sync(0xffffffffu, x, j);
      const int ij = __shfl_sync(0xffffffffu, id, j);
      const bool dj = __shfl_sync(0xffffffffu, dom, j);
      if (dj && better(xj, ij, x, id)) ++rank;
    }
    const bool kept_k = dom && rank < row.top_k;
    bool keep = kept_k;
    if (row.top_p < 1.0f) {
      // Mass before this candidate in rank order, and the total, over the top-k survivors.
      float before = 0.0f, total = 0.0f;
      for (int j = 0; j < kMaxTop; ++j) {
        const float ej = __shfl_sync(0xffffffffu, kept_k ? e : 0.0f, j);
        const int rj = __shfl_sync(0xffffffffu, rank, j);
        total += ej;
        if (rj < rank) before += ej;
      }
      keep = kept_k && (rank == 0 || before < row.top_p * total);
    }
    // The draw in id order: run = the kept mass of ids <= this id (summed in lane order, so it is
    // monotone in id: every sum adds a superset of nonnegative terms in the same order).
    const float w = keep ? e : 0.0f;
    float run = 0.0f, total = 0.0f;
    for (int j = 0; j < kMaxTop; ++j) {
      const float wj = __shfl_sync(0xffffffffu, w, j);
      const int ij = __shfl_sync(0xffffffffu, id, j);
      total += wj;
      if (ij <= id) run += wj;
    }
    const float target = row.uniform * total;
    const int hit = keep && run > target ? id : INT_MAX;
    const int lastk = keep ? id : -1;
    int first = hit, last = lastk;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
      last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    }
    if (lane == 0) sm.picked = first != INT_MAX ? first : (last >= 0 ? last : 0);
  }
  __syncthreads();
  const int token = sm.picked;
  __syncthreads();
  return token;
}

// A fast row from the partials of chunk_kernel.
template <typename T, int K>
__device__ void fast_row(const Args& a, int r, const SamplingRow& row, Shared& sm) {
  const int tid = threadIdx.x, V = a.vocab, C = a.num_chunks, n = a.num_top;
  const int64_t pb = static_cast<int64_t>(r) * C;
  // (max, sum-exp) merged online per thread, then over the block; the chunks' top lists into per-thread
  // lists (loads of both issued before the first barrier).
  float m = neg_inf(), s = 0.0f;
  for (int c = tid; c < C; c += kThreads) merge_online(m, s, a.pmax[pb + c], a.psum[pb + c]);
  float lv[K];
  int li[K];
  top_init(lv, li);
  for (int i = tid; i < C * K; i += kThreads) {
    const int c = i / K;
    const int64_t at = (pb + c) * kMaxTop + (i - c * K);
    const int id = a.ptop_i[at];
    if (id != INT_MAX) top_insert(lv, li, a.ptop_v[at], id);
  }
  block_online(m, s, sm);
  const float lse = m + logf(s);
  top_merge(lv, li, sm);
  for (int i = tid; i < n; i += kThreads) {
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n) + 1 + i] = sm.top_v[i] - lse;
    a.out_top_ids[static_cast<int64_t>(r) * n + i] = sm.top_i[i];
  }
  const int best = sm.top_i[0] == INT_MAX ? 0 : sm.top_i[0];
  int token;
  if (row.forced_token >= 0) token = row.forced_token;
  else if (row.temperature < 1e-5f || !(m > neg_inf())) token = best;  // all -inf: 0, as slow_row
  else if (is_topk_row(row, a)) token = topk_draw(row, m, sm);
  else token = fast_draw<T>(a, r, row, m, best, sm);
  if (tid == 0) {
    const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
    a.out_tokens[r] = token;
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n)] =
        token >= 0 && token < V ? to_f(raw[token]) - lse : __int_as_float(0x7fc00000);
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kThreads) sample_kernel(Args a) {
  __shared__ Shared sm;
  extern __shared__ float seg_sums[];
  pdl_enter();  // chunk_kernel's partials (or the logits' producer) complete before any read
  const int r = blockIdx.x;
  const SamplingRow row = a.rows[r];
  if (a.pmax && is_fast(row, a)) {
    if (K < kMaxTop && is_topk_row(row, a)) fast_row<T, kMaxTop>(a, r, row, sm);
    else fast_row<T, K>(a, r, row, sm);
  } else slow_row<T, K>(a, r, row, sm, seg_sums);
}

template <typename T, int K>
void launch_for(const Args& a, int m, int iters, size_t dyn, cudaStream_t stream) {
  // Dynamic shared memory beyond 48 KB (vocabularies past ~350k) needs the opt-in, once per kernel.
  static const bool opted = [] {
    check(cudaFuncSetAttribute(sample_kernel<T, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024),
          "cudaFuncSetAttribute(sample_kernel)");
    return true;
  }();
  (void)opted;
  if (a.pmax) {
    const int blocks = m * a.num_chunks;
    if (iters == 1) launch_pdl(chunk_kernel<T, K, 1>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    else launch_pdl(chunk_kernel<T, K, 4>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    check_launch("sample chunk_kernel");
  }
  launch_pdl(sample_kernel<T, K>, dim3(m), dim3(kThreads), dyn, stream, a);
  check_launch("sample_kernel");
}

}  // namespace
}  // namespace sampling

void launch_sample(const SampleParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  using namespace sampling;
  if (p.logits.ndim() != 2) throw Error("sample: logits must be [M, V], got " + p.logits.shape_str());
  const int64_t m = p.logits.dim(0), vocab = p.logits.dim(1);
  const int n = p.num_top_logprobs;
  if (vocab <= 0 || vocab > (int64_t{96 * 1024 / 4} * 128)) throw Error("sample: vocabulary size out of range: " + p.logits.shape_str());
  if (n < 0 || n > kMaxTop || n > vocab) throw Error("sample: num_top_logprobs " + std::to_string(n) + " outside [0, min(20, V)]");
  if (p.rows.dtype != DType::kI32 || p.rows.numel() != m * int64_t(sizeof(SamplingRow) / 4))
    throw Error("sample: rows must be I32 [M * 14], got " + p.rows.shape_str());
  if (!p.penalty_tokens.empty() && (p.penalty_tokens.dtype != DType::kI32 || p.penalty_tokens.ndim() != 2 || p.penalty_tokens.dim(1) != 2))
    throw Error("sample: penalty_tokens must be I32 [E, 2], got " + p.penalty_tokens.shape_str());
  if (!p.mask_tokens.empty() && p.mask_tokens.dtype != DType::kI32) throw Error("sample: mask_tokens must be I32");
  if (p.out_tokens.dtype != DType::kI32 || p.out_tokens.numel() != m) throw Error("sample: out_tokens must be I32 [M]");
  if (p.out_logprobs.dtype != DType::kF32 || p.out_logprobs.numel() != m * (1 + n)) throw Error("sample: out_logprobs must be F32 [M, 1 + N]");
  if (n > 0 && (p.out_top_ids.dtype != DType::kI32 || p.out_top_ids.numel() != m * n)) throw Error("sample: out_top_ids must be I32 [M, N]");
  if (m == 0) return;
  Args a{};
  a.logits = p.logits.data;
  a.vocab = static_cast<int>(vocab);
  a.rows = static_cast<const SamplingRow*>(p.rows.data);
  a.pairs = p.penalty_tokens.empty() ? nullptr : p.penalty_tokens.ptr<int32_t>();
  a.num_pairs = p.penalty_tokens.empty() ? 0 : static_cast<int>(p.penalty_tokens.dim(0));
  a.masks = p.mask_tokens.empty() ? nullptr : p.mask_tokens.ptr<int32_t>();
  a.num_masks = p.mask_tokens.empty() ? 0 : static_cast<int>(p.mask_tokens.numel());
  // Workspace (one call): [scratch][fast-path partials]. Any row may have penalties (the host does
  // not read the rows): scratch for all M rows when penalty or mask entries exist; only penalised
  // rows touch theirs.
  const int list_k = n <= 1 ? 1 : n <= 5 ? 5 : kMaxTop;  // the K of the top lists (>= 1: the argmax)
  // Chunks of 2048 ids while that gives <= ~2048 blocks (small batches: many blocks per row), else 8192.
  const int64_t small_chunks = (vocab + kChunkStep - 1) / kChunkStep;
  const int iters = m * small_chunks <= 2048 ? 1 : 4;
  a.chunk = kChunkStep * iters;
  a.num_chunks = static_cast<int>((vocab + a.chunk - 1) / a.chunk);
  const size_t scratch_bytes = (a.pairs || a.masks) ? static_cast<size_t>(m * vocab) * sizeof(float) : 0;
  const size_t scratch_rounded = (scratch_bytes + 255) / 256 * 256;
  const size_t parts = static_cast<size_t>(m) * a.num_chunks;
  // Top lists with stride kMaxTop: top-k rows keep kMaxTop per chunk whatever N is.
  const size_t part_bytes = parts * (3 + kMaxTop) * sizeof(float) + parts * kMaxTop * sizeof(int32_t);
  char* ws = static_cast<char*>(workspace(scratch_rounded + part_bytes));
  if (scratch_bytes) a.scratch = reinterpret_cast<float*>(ws);
  float* pf = reinterpret_cast<float*>(ws + scratch_rounded);
  a.pmax = pf;
  a.psum = pf + parts;
  a.ptsum = pf + 2 * parts;
  a.ptop_v = pf + 3 * parts;
  a.ptop_i = reinterpret_cast<int32_t*>(pf + (3 + kMaxTop) * parts);
  a.num_top = n;
  a.out_tokens = p.out_tokens.ptr<int32_t>();
  a.out_logprobs = p.out_logprobs.ptr<float>();
  a.out_top_ids = n > 0 ? p.out_top_ids.ptr<int32_t>() : nullptr;
  const size_t esize = dtype_size(p.logits.dtype);
  a.aligned = (reinterpret_cast<uintptr_t>(p.logits.data) & 15) == 0 && (vocab * esize) % 16 == 0;
  const size_t dyn = static_cast<size_t>((vocab + 127) / 128) * sizeof(float);  // fp32 segments are the most
  dispatch_float(p.logits.dtype, "sample: logits", [&](auto t) {
    using T = decltype(t);
    if (list_k == 1) launch_for<T, 1>(a, static_cast<int>(m), iters, dyn, stream);
    else if (list_k == 5) launch_for<T, 5>(a, static_cast<int>(m), iters, dyn, stream);
    else launch_for<T, kMaxTop>(a, static_cast<int>(m), iters, dyn, stream);
  });
}

}  // namespace vireo::cuda
