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
  __shared__ int sel, sel_last, picked, picked_last;
  __shared__ float sel_rem;
  pdl_enter();  // the statistics' and logits' writers complete before any read
  const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int C = a.num_chunks, V = a.vocab, n = a.num_top;
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
  if (tid == 0) sel = INT_MAX, sel_last = -1, picked = INT_MAX, picked_last = -1;
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
  float* out_lp = a.out_logprobs + static_cast<int64_t>(r) * (1 + n);
  auto write = [&](int token, float value) {  // one thread
    a.out_tokens[r] = token;
    if (a.out_tokens_mirror) a.out_tokens_mirror[r] = token;
    out_lp[0] = token >= 0 && token < V ? value - lse : __int_as_float(0x7fc00000);
    if (n > 0) {  // n == 1 here: the top-1
      out_lp[1] = bv - lse;
      a.out_top_ids[r] = bi;
    }
  };
  const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int best = bi == INT_MAX ? 0 : bi;
  if (row.forced_token >= 0) {
    if (tid == 0) write(row.forced_token, row.forced_token < V ? to_f(raw[row.forced_token]) : 0.0f);
    return;
  }
  if (row.temperature < 1e-5f || !(m > neg_inf())) {  // greedy; all -inf: 0, as slow_row
    if (tid == 0) write(best, bi == INT_MAX ? to_f(raw[0]) : bv);
    return;
  }

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
  {
    float acc = excl, rem = 0.0f;
    int found = -1, last = -1;
    auto visit = [&](int c, float w) {
      if (w > 0.0f) {
        last = c;
        if (found < 0 && acc + w > target) found = c, rem = target - acc;
      }
      acc += w;
    };
#pragma unroll
    for (int q = 0; q < kStatsKeep; ++q) visit(cb + q, kept_mass[q]);
    for (int c = cb + kStatsKeep; c < ce; ++c) visit(c, mass_of(st[c].x, st[c].y));
    if (found >= 0) atomicMin(&sel, found);
    if (last >= 0) atomicMax(&sel_last, last);
    __syncthreads();
    if (found >= 0 && found == sel) sel_rem = rem;
    __syncthreads();
  }
  const int c = sel != INT_MAX ? sel : sel_last;
  const float rr = sel != INT_MAX ? sel_rem : pos_inf();  // rounding: past the total
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
  float ls = 0.0f;
#pragma unroll
  for (int q = 0; q < kStatsMaxIds; ++q) {
    ex[q] = v[q] != neg_inf() ? expf(v[q] - m) : 0.0f;
    ls += ex[q];
  }
  float range_total;
  float run = lean_excl_scan(ls, range_total, red_scan_i);
  int idx = -1, lastnz = -1;
  float idx_v = 0.0f, last_v = 0.0f;
#pragma unroll
  for (int q = 0; q < kStatsMaxIds; ++q)
    if (ex[q] > 0.0f) {
      lastnz = i0 + q, last_v = v[q];
      run += ex[q];
      if (idx < 0 && run > rr) idx = i0 + q, idx_v = v[q];
    }
  if (idx >= 0) atomicMin(&picked, idx);
  if (lastnz >= 0) atomicMax(&picked_last, lastnz);
  __syncthreads();
  // The thread holding the picked id writes (ids are unique); none: the fallback, by thread 0.
  if (picked != INT_MAX) {
    if (idx == picked) write(idx, idx_v);
  } else if (picked_last >= 0) {
    if (lastnz == picked_last) write(lastnz, last_v);
  } else if (tid == 0) {
    write(best, bv);
  }
}

}  // namespace
}  // namespace vireo::cuda::sampling
