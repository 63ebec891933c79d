// The sample op's slow path (sampling.cu's header comment): one block per row, threshold searches for
// top-k / top-p, penalties on an fp32 scratch copy, the segment-scan draw. Private to sampling.cu.
#pragma once
#include <cfloat>
#include <climits>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_args.cuh"

namespace vireo::cuda::sampling {
namespace {

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
  const RunPick pick = pick_run(sb, se, excl, target, [&](int i) { return seg[i]; }, sm);
  const int s = pick.index;
  float r = pick.rem;
  if (s < 0) return -1;  // no weight anywhere (block-uniform)
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
// xlo: a lower bound of the candidates' x. Masses are fixed point (fix_mass, u64): exact in any
// summation order, so a boundary inside a tie group of ~1e5 ids (flat rows) is found at the CPU's
// position (float atomics drifted by ~1e-3 of the mass there, tens of ids); the target is compared
// in double, as the mid path (sampling_mid.cuh) does.
template <typename W>
__device__ Thr select(const W* p, int V, bool aligned, const Temper& tp, Thr prev, bool mass_mode, float param,
                      float xlo, float* seg, Shared& sm) {
  using u64 = unsigned long long;
  const int tid = threadIdx.x;
  // Membership of this level's pass: level 0 all candidates; level 1 bin b0 of level 0 (recomputed);
  // levels >= 2 the closed interval [ilo, ihi] (exact bounds of the previous level's bin).
  float blo = xlo, bscale = xlo < 0.0f ? fminf(kBins / -xlo, FLT_MAX) : 0.0f;  // this pass's binning
  float plo = 0.0f, pscale = 0.0f, ilo = 0.0f, ihi = 0.0f;
  int pb = 0;
  float above_c = 0.0f, target = param;  // count mode: the count to reach
  u64 above_m = 0;
  double target_m = 0.0;                 // mass mode: top_p * the candidates' fixed-point mass
  for (int lvl = 0; lvl < kMaxLevels; ++lvl) {
    for (int b = tid; b < kBins; b += kThreads)
      sm.hist_count[b] = 0, sm.hist_mass[b] = 0ull, sm.hist_min[b] = INT_MAX, sm.hist_max[b] = INT_MIN;
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
      if (mass_mode) atomicAdd(&sm.hist_mass[b], fix_mass(e));
      if (lvl >= 1) atomicMin(&sm.hist_min[b], fkey(x)), atomicMax(&sm.hist_max[b], fkey(x));
      cmin = fminf(cmin, x), cmax = fmaxf(cmax, x);
    });
    __syncthreads();
    cmin = block_minmax<false>(cmin, sm);
    cmax = block_minmax<true>(cmax, sm);
    // Bins from the top: thread t owns bins kBins-1-4t ... kBins-4-4t.
    constexpr int kPer = kBins / kThreads;
    float mc[kPer], sum_c = 0.0f;  // counts (exact in float: < 2^24)
    u64 mm[kPer], sum_m = 0;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int b = kBins - 1 - (tid * kPer + q);
      mc[q] = float(sm.hist_count[b]);
      mm[q] = sm.hist_mass[b];
      sum_c += mc[q], sum_m += mm[q];
    }
    float2 total;
    const float excl_c = block_excl_scan(make_float2(sum_c, 0.0f), total, sm).x;
    u64 total_m;
    const u64 excl_m = block_excl_scan_u64<kThreads>(sum_m, total_m, sm.red_u64);
    const float cnt = total.x;
    if (cnt == 0.0f) return Thr{neg_inf(), INT_MAX};  // no candidates at all (level 0 only)
    if (lvl == 0) {
      if (!mass_mode && cnt <= param) return Thr{neg_inf(), INT_MAX};
      if (mass_mode) target_m = static_cast<double>(param) * static_cast<double>(total_m);
    }
    if (cmin == cmax) {
      // One value left: keep its first j ties in id order. Count mode: j = what is still needed; mass
      // mode: tie i (from 0) is kept iff above + i * m_e < target, so j = ceil((target - above) / m_e).
      float j;
      if (mass_mode) {
        const double me = static_cast<double>(fix_mass(expf(cmin)));
        const double need = target_m - static_cast<double>(above_m);
        j = me > 0.0 ? static_cast<float>(fmin(ceil(need / me), 1e9)) : cnt;
      } else {
        j = target - above_c;
      }
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
    if ((!mass_mode && target - above_c == cnt) || (mass_mode && cnt == 1.0f) || lvl == kMaxLevels - 1)
      return Thr{cmin, INT_MAX};
    // The boundary bin: the first (from the top) where the running count/mass reaches the target.
    if (tid == 0) sm.sel_bin = INT_MAX;
    __syncthreads();
    float acc_c = above_c + excl_c;
    u64 acc_m = above_m + excl_m;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const float next_c = acc_c + mc[q];
      const u64 next_m = acc_m + mm[q];
      const bool reached = mass_mode ? static_cast<double>(next_m) >= target_m : next_c >= target;
      if (reached && mc[q] > 0.0f) {
        atomicMin(&sm.sel_bin, tid * kPer + q);
        break;
      }
      acc_c = next_c, acc_m = next_m;
    }
    __syncthreads();
    const int sel = sm.sel_bin;
    if (sel == INT_MAX) return Thr{cmin, INT_MAX};  // count mode only (exact masses reach any target <= total)
    if (tid == sel / kPer) sm.bin_above_c = acc_c, sm.bin_above_m = acc_m;
    __syncthreads();
    above_c = sm.bin_above_c, above_m = sm.bin_above_m;
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
    if (a.out_tokens_mirror) a.out_tokens_mirror[r] = token;
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n)] =
        token >= 0 && token < V ? to_f(raw[token]) - lse : __int_as_float(0x7fc00000);
  }
}

}  // namespace
}  // namespace vireo::cuda::sampling
