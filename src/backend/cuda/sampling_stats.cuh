// The sample op's plain rows from the logits' RangeStats (SampleParams::row_stats), written by the
// lm_head itself (gemv_stream_rows.cuh's epilogue) or by range_stats.cu: no chunk_kernel pass over the
// logits. Private to sampling.cu.
//
// Why: at batch 1 the sampling after the decode graph was two kernels, chunk_kernel (~4 us: a pass over
// the 151,936 logits for per-chunk max / sums / argmax) and lean_sample_kernel (~5 us). The lm_head's
// warps already hold every logit as they store it, a range of ~144 ids each; the statistics cost them a
// few instructions a row. This kernel is lean_sample_kernel (sampling_lean.cuh) over those ranges.
//
// Rows: forced, greedy, or plain temperature 1 (the statistics' sums are exp(l - max), untempered), at
// most the top-1 logprob; the host checks (launch_sample). Same decisions as lean_sample_kernel: greedy
// = the best (value, lowest id); a draw picks the range where the cumulative mass first passes
// uniform * total, then the id inside it where the running exact e = exp(l - max) passes the rest, past
// the total the last id with weight. Sums run in another order than chunk_kernel's, so a draw can differ
// where a sum rounds across a boundary.
#pragma once
#include <cfloat>
#include <climits>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_args.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_lean.cuh"

namespace vireo::cuda::sampling {
namespace {

constexpr int kStatsKeep = 12;     // ranges a thread keeps in registers (C <= 1,536: one pass)
constexpr int kStatsMaxIds = 8;    // ids a thread scans in the drawn range
constexpr int kStatsMaxRange = kLeanThreads * kStatsMaxIds;  // the host sends longer ranges elsewhere

template <typename T>
__global__ void __launch_bounds__(kLeanThreads) stats_sample_kernel(Args a) {
  __shared__ float2 red_ms[kLeanWarps];
  __shared__ float red_bv[kLeanWarps], red_scan_c[kLeanWarps], red_scan_i[kLeanWarps];
  __shared__ int red_bi[kLeanWarps];
  __shared__ LeanDraw draw;
  pdl_enter();  // the statistics' and logits' writers complete before any read
  const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int C = a.num_chunks, V = a.vocab;
  const SamplingRow row = a.rows[r];
  const float4* st = a.range_stats + static_cast<int64_t>(r) * C;
  // 1. Thread t merges ranges [cb, ce): the max first, then the rescaled sums (independent expf, not an
  // online chain), and the best (value, id). Warps and the block likewise.
  const int per = (C + kLeanThreads - 1) / kLeanThreads;
  const int cb = min(tid * per, C), ce = min(cb + per, C);
  float bv = neg_inf();
  int bi = INT_MAX;
  float keep_m[kStatsKeep], keep_s[kStatsKeep];  // also for the draw's masses (step 2)
  float m = neg_inf();
#pragma unroll
  for (int q = 0; q < kStatsKeep; ++q) {
    const int c = cb + q;
    const float4 v = c < ce ? st[c] : make_float4(neg_inf(), 0.0f, neg_inf(), __int_as_float(INT_MAX));
    keep_m[q] = v.x, keep_s[q] = v.y;
    m = fmaxf(m, v.x);
    const int id = __float_as_int(v.w);
    if (id != INT_MAX && better(v.z, id, bv, bi)) bv = v.z, bi = id;
  }
  float s = 0.0f;
  if (m > neg_inf()) {
#pragma unroll
    for (int q = 0; q < kStatsKeep; ++q) s += keep_m[q] > neg_inf() ? keep_s[q] * expf(keep_m[q] - m) : 0.0f;
  }
  for (int c = cb + kStatsKeep; c < ce; ++c) {  // C > kLeanThreads * kStatsKeep only
    const float4 v = st[c];
    merge_online(m, s, v.x, v.y);
    const int id = __float_as_int(v.w);
    if (id != INT_MAX && better(v.z, id, bv, bi)) bv = v.z, bi = id;
  }
  auto rescale = [](float from, float to, float sum) { return from > neg_inf() ? sum * expf(from - to) : 0.0f; };
  float wm = m;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) wm = fmaxf(wm, __shfl_xor_sync(0xffffffffu, wm, o));
  s = rescale(m, wm, s);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  warp_best(bv, bi);
  if (lane == 0) red_ms[warp] = make_float2(wm, s), red_bv[warp] = bv, red_bi[warp] = bi;
  if (tid == 0) draw.reset();
  __syncthreads();
  m = red_ms[0].x, bv = red_bv[0], bi = red_bi[0];
#pragma unroll
  for (int w = 1; w < kLeanWarps; ++w) {
    m = fmaxf(m, red_ms[w].x);
    if (better(red_bv[w], red_bi[w], bv, bi)) bv = red_bv[w], bi = red_bi[w];
  }
  s = 0.0f;
#pragma unroll
  for (int w = 0; w < kLeanWarps; ++w) s += rescale(red_ms[w].x, m, red_ms[w].y);
  const float lse = m + logf(s);
  const LeanWriter write{a, r, V, lse, bv, bi};
  const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int best = bi == INT_MAX ? 0 : bi;
  if (lean_no_draw(row, raw, m, write)) return;

  // 2. The draw (temperature 1): the range where the cumulative rescaled mass passes uniform * total.
  auto mass_of = [&](float pm, float ps) { return pm > neg_inf() ? ps * expf(pm - m) : 0.0f; };
  float kept_mass[kStatsKeep];
  float local = 0.0f;
#pragma unroll
  for (int q = 0; q < kStatsKeep; ++q) local += kept_mass[q] = mass_of(keep_m[q], keep_s[q]);  // 0 past ce
  for (int c = cb + kStatsKeep; c < ce; ++c) local += mass_of(st[c].x, st[c].y);
  float total;
  const float excl = lean_excl_scan(local, total, red_scan_c);
  const float target = row.uniform * total;
  float rr;
  const int c = lean_select(excl, target, cb, ce, kept_mass, [&](int c) { return mass_of(st[c].x, st[c].y); }, draw, rr);
  if (c < 0) {  // no mass anywhere (block-uniform)
    if (tid == 0) write(best, bv);
    return;
  }
  // 3. The id inside range c: thread t scans a run of pt consecutive ids, in id order.
  const int lo = V / C, extra = V % C;
  const int b = c * lo + min(c, extra), e = b + lo + (c < extra ? 1 : 0);
  const int pt = (e - b + kLeanThreads - 1) / kLeanThreads;  // <= kStatsMaxIds (host check)
  const int i0 = b + tid * pt;
  float v[kStatsMaxIds], ex[kStatsMaxIds];
#pragma unroll
  for (int q = 0; q < kStatsMaxIds; ++q) v[q] = q < pt && i0 + q < e ? to_f(raw[i0 + q]) : neg_inf();
#pragma unroll
  for (int q = 0; q < kStatsMaxIds; ++q) ex[q] = v[q] != neg_inf() ? expf(v[q] - m) : 0.0f;
  lean_pick(v, ex, i0, rr, draw, red_scan_i, best, bv, write);
}

}  // namespace
}  // namespace vireo::cuda::sampling
