// The lean merge of the fast path (sampling.cu): sample_kernel's job for batches of plain rows (forced,
// greedy, plain temperature) with at most the top-1 logprob, in a 128-thread block per row with six
// barriers. Private to sampling.cu.
//
// Why: at batch 1 the 512-thread sample_kernel took ~8 us of a ~12.5 us sampling (ncu, Qwen3-0.6B
// vocabulary, 75 chunks), ~1% of a step: ~15 barriers over 16 warps, 16-step sequential warp merges and
// four dependent L2 round trips (rows, partials, the chunk's ids, the token's logit). Here each thread
// merges a run of consecutive chunks, the block reductions read 4 warp entries, and the chosen token's
// logit comes from the partials (greedy) or the thread that drew it; the round trips are two.
//
// Same decisions as fast_row (sampling_fast.cuh): greedy = the best (value, lowest id); a draw picks the
// chunk where the cumulative rescaled tempered mass first passes uniform * total, then the id inside it
// where the running exact e = exp((l - max) / T) passes the rest, past the total the last id with
// weight. The float sums run in another order (runs of 16 ids a thread, not 4), so a draw can differ
// from fast_row's where a sum rounds across the boundary (~1e-7 of draws); batch-invariant mode keeps
// the 512-thread kernel.
#pragma once
#include <cfloat>
#include <climits>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_args.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_fast.cuh"

namespace vireo::cuda::sampling {
namespace {

constexpr int kLeanThreads = 128, kLeanWarps = kLeanThreads / 32;
constexpr int kLeanKeep = 2;  // chunks a thread keeps in registers (C <= 256)

// Exclusive prefix sum of one float per thread in thread order, and the block total. red: this call's
// own kLeanWarps floats (no barrier after: callers never reuse them).
__device__ __forceinline__ float lean_excl_scan(float v, float& total, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) red[warp] = inc;
  __syncthreads();
  float pre = 0.0f, tot = 0.0f;
#pragma unroll
  for (int w = 0; w < kLeanWarps; ++w) {
    if (w < warp) pre += red[w];
    tot += red[w];
  }
  total = tot;
  return pre + inc - v;
}

// A row's outputs (one thread): the token, its raw logprob, and with N = 1 the top-1 (bv, bi).
struct LeanWriter {
  const Args& a;
  int r, vocab;
  float lse, bv;
  int bi;
  __device__ __forceinline__ void operator()(int token, float value) const {
    float* out_lp = a.out_logprobs + static_cast<int64_t>(r) * (1 + a.num_top);
    a.out_tokens[r] = token;
    if (a.out_tokens_mirror) a.out_tokens_mirror[r] = token;
    out_lp[0] = token >= 0 && token < vocab ? value - lse : __int_as_float(0x7fc00000);
    if (a.num_top > 0) {  // num_top == 1 here: the top-1
      out_lp[1] = bv - lse;
      a.out_top_ids[r] = bi;
    }
  }
};

// Rows that draw nothing: forced, greedy, or all -inf (token 0, as slow_row). Written by thread 0;
// true when the row is done.
template <typename T>
__device__ __forceinline__ bool lean_no_draw(const SamplingRow& row, const T* raw, float m, const LeanWriter& write) {
  if (row.forced_token >= 0) {
    if (threadIdx.x == 0) write(row.forced_token, row.forced_token < write.vocab ? to_f(raw[row.forced_token]) : 0.0f);
    return true;
  }
  if (row.temperature < 1e-5f || !(m > neg_inf())) {
    if (threadIdx.x == 0) write(write.bi == INT_MAX ? 0 : write.bi, write.bi == INT_MAX ? to_f(raw[0]) : write.bv);
    return true;
  }
  return false;
}

// The draw's shared state (lean_sample_kernel, stats_sample_kernel): the chunk found and its rest of the
// target, then the id picked.
struct LeanDraw {
  int sel, sel_last, picked, picked_last;
  float sel_rem;
  __device__ __forceinline__ void reset() { sel = INT_MAX, sel_last = -1, picked = INT_MAX, picked_last = -1; }
};

// Step 2 of a draw: thread t holds the masses of chunks [cb, ce) (the first K in `kept`, the rest from
// mass(c)) and their exclusive prefix excl. Returns the chunk where the cumulative mass first passes
// target (none: the last chunk with mass, rr = +inf; no mass at all: -1) and the rest rr inside it.
template <int K, typename Mass>
__device__ __forceinline__ int lean_select(float excl, float target, int cb, int ce, const float (&kept)[K], Mass mass,
                                           LeanDraw& d, float& rr) {
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
  for (int q = 0; q < K; ++q) visit(cb + q, kept[q]);  // 0 past ce
  for (int c = cb + K; c < ce; ++c) visit(c, mass(c));
  if (found >= 0) atomicMin(&d.sel, found);
  if (last >= 0) atomicMax(&d.sel_last, last);
  __syncthreads();
  if (found >= 0 && found == d.sel) d.sel_rem = rem;
  __syncthreads();
  rr = d.sel != INT_MAX ? d.sel_rem : pos_inf();  // rounding: past the total
  return d.sel != INT_MAX ? d.sel : d.sel_last;
}

// Step 3: thread t holds ids [i0, i0 + K) of the chosen chunk, their logits v and exact weights e (0: not
// in the support). The id where the running weight in id order first passes rr is written by the thread
// holding it (write(token, logit)); none: the last id with weight; no weight: write(best, bv) by thread 0.
template <int K, typename Write>
__device__ __forceinline__ void lean_pick(const float (&v)[K], const float (&e)[K], int i0, float rr, LeanDraw& d,
                                          float* red_scan, int best, float bv, Write write) {
  float ls = 0.0f;
#pragma unroll
  for (int q = 0; q < K; ++q) ls += e[q];
  float chunk_total;
  float run = lean_excl_scan(ls, chunk_total, red_scan);
  int idx = -1, lastnz = -1;
  float idx_v = 0.0f, last_v = 0.0f;
#pragma unroll
  for (int q = 0; q < K; ++q)
    if (e[q] > 0.0f) {
      lastnz = i0 + q, last_v = v[q];
      run += e[q];
      if (idx < 0 && run > rr) idx = i0 + q, idx_v = v[q];
    }
  if (idx >= 0) atomicMin(&d.picked, idx);
  if (lastnz >= 0) atomicMax(&d.picked_last, lastnz);
  __syncthreads();
  // The thread holding the picked id writes (ids are unique); none: the fallback, by thread 0.
  if (d.picked != INT_MAX) {
    if (idx == d.picked) write(idx, idx_v);
  } else if (d.picked_last >= 0) {
    if (lastnz == d.picked_last) write(lastnz, last_v);
  } else if (threadIdx.x == 0) {
    write(best, bv);
  }
}

// kIters: chunk_kernel's steps per thread (chunks of kChunkStep * kIters ids).
template <typename T, int kIters>
__global__ void __launch_bounds__(kLeanThreads) lean_sample_kernel(Args a) {
  constexpr int kIds = kChunkStep * kIters / kLeanThreads;  // ids a thread scans in the drawn chunk
  __shared__ float2 red_ms[kLeanWarps];
  __shared__ float red_bv[kLeanWarps], red_scan_c[kLeanWarps], red_scan_i[kLeanWarps];
  __shared__ int red_bi[kLeanWarps];
  __shared__ LeanDraw draw;
  pdl_enter();  // chunk_kernel's partials complete before any read
  const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int C = a.num_chunks, V = a.vocab;
  const SamplingRow row = a.rows[r];
  const int64_t pb = static_cast<int64_t>(r) * C;
  // 1. Thread t merges chunks [cb, ce): (max, sum) online and the best (value, id).
  const int per = (C + kLeanThreads - 1) / kLeanThreads;
  const int cb = min(tid * per, C), ce = min(cb + per, C);
  float m = neg_inf(), s = 0.0f, bv = neg_inf();
  int bi = INT_MAX;
  // The first kLeanKeep chunks' (max, tempered sum) stay in registers for the draw (step 2), so its
  // masses cost no second L2 round trip after the barrier (C <= 128 chunks: one a thread).
  float keep_m[kLeanKeep], keep_t[kLeanKeep];
#pragma unroll
  for (int q = 0; q < kLeanKeep; ++q) {
    const int c = cb + q;
    keep_m[q] = c < ce ? a.pmax[pb + c] : neg_inf();
    keep_t[q] = c < ce ? a.ptsum[pb + c] : 0.0f;
    const float ps = c < ce ? a.psum[pb + c] : 0.0f;
    const int id = c < ce ? a.ptop_i[(pb + c) * kMaxTop] : INT_MAX;
    const float v = c < ce ? a.ptop_v[(pb + c) * kMaxTop] : neg_inf();
    if (c < ce) merge_online(m, s, keep_m[q], ps);
    if (id != INT_MAX && better(v, id, bv, bi)) bv = v, bi = id;
  }
  for (int c = cb + kLeanKeep; c < ce; ++c) {
    merge_online(m, s, a.pmax[pb + c], a.psum[pb + c]);
    const int id = a.ptop_i[(pb + c) * kMaxTop];
    const float v = a.ptop_v[(pb + c) * kMaxTop];
    if (id != INT_MAX && better(v, id, bv, bi)) bv = v, bi = id;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    merge_online(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  warp_best(bv, bi);
  if (lane == 0) red_ms[warp] = make_float2(m, s), red_bv[warp] = bv, red_bi[warp] = bi;
  if (tid == 0) draw.reset();
  __syncthreads();
  m = red_ms[0].x, s = red_ms[0].y, bv = red_bv[0], bi = red_bi[0];
#pragma unroll
  for (int w = 1; w < kLeanWarps; ++w) {
    merge_online(m, s, red_ms[w].x, red_ms[w].y);
    if (better(red_bv[w], red_bi[w], bv, bi)) bv = red_bv[w], bi = red_bi[w];
  }
  const float lse = m + logf(s);
  const LeanWriter write{a, r, V, lse, bv, bi};
  const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int best = bi == INT_MAX ? 0 : bi;
  if (lean_no_draw(row, raw, m, write)) return;

  // 2. The draw: the chunk where the cumulative rescaled mass passes uniform * total.
  const float inv_t = 1.0f / row.temperature;
  auto mass_of = [&](float pm, float pt) {
    return pm > neg_inf() ? pt * expf(__fmul_rn(__fsub_rn(pm, m), inv_t)) : 0.0f;
  };
  auto mass = [&](int c) { return mass_of(a.pmax[pb + c], a.ptsum[pb + c]); };
  float kept_mass[kLeanKeep];
#pragma unroll
  for (int q = 0; q < kLeanKeep; ++q) kept_mass[q] = mass_of(keep_m[q], keep_t[q]);  // 0 past ce
  float local = 0.0f;
#pragma unroll
  for (int q = 0; q < kLeanKeep; ++q) local += kept_mass[q];
  for (int c = cb + kLeanKeep; c < ce; ++c) local += mass(c);
  float total;
  const float excl = lean_excl_scan(local, total, red_scan_c);
  const float target = row.uniform * total;
  float rr;
  const int c = lean_select(excl, target, cb, ce, kept_mass, mass, draw, rr);
  if (c < 0) {  // no mass anywhere (block-uniform)
    if (tid == 0) write(best, bv);
    return;
  }
  // 3. The id inside chunk c: thread t scans ids [i0, i0 + kIds) in id order.
  const int i0 = c * a.chunk + tid * kIds;
  float v[kIds], e[kIds];
#pragma unroll
  for (int q = 0; q < kIds; q += kPerThread) load8(raw, V, a.aligned, i0 + q, *reinterpret_cast<float(*)[kPerThread]>(v + q));
#pragma unroll
  for (int q = 0; q < kIds; ++q) e[q] = i0 + q < V && v[q] != neg_inf() ? expf(__fmul_rn(__fsub_rn(v[q], m), inv_t)) : 0.0f;
  lean_pick(v, e, i0, rr, draw, red_scan_i, best, bv, write);
}

}  // namespace
}  // namespace vireo::cuda::sampling
