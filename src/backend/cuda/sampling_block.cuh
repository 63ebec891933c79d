// Block-wide building blocks of the sampling kernel (sampling.cu): row iteration in 16-byte segments,
// reductions, scans, the per-thread top-K list. One block of kThreads threads works on one logits row.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>

#include "backend/cuda/cuda_types.cuh"

namespace vireo::cuda::sampling {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;       // 16-byte loads in flight per thread
constexpr int kBins = 2048;      // histogram bins of one threshold-search level
constexpr int kMaxTop = 20;      // top-N logprobs
constexpr int kMaxLevels = 16;   // threshold-search levels (4 suffice for real data; the cap only bounds loops)
constexpr int kCandCap = 4096;   // mid path: candidates of a row's boundary bins (sampling_mid.cuh)

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

// The total order of candidates: larger value first, ties by lower id.
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

// Order-preserving int key of a float (for atomicMin/Max in shared memory) and back.
__device__ __forceinline__ int fkey(float f) {
  const int i = __float_as_int(f);
  return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float funkey(int k) { return __int_as_float(k >= 0 ? k : k ^ 0x7fffffff); }

// Fixed-point mass of e in [0, 1]: e * 2^40, rounded. Sums of up to 2^23 of them are exact in u64, so
// any summation order gives the same mass (float sums of ~1e5 equal terms drift by ~1e-3 relative).
__device__ __forceinline__ unsigned long long fix_mass(float e) { return __float2ull_rn(e * 1099511627776.0f); }

// Shared memory of the kernel (static part, ~44 KB); segment sums are dynamic (see pick()).
struct Shared {
  union {
    struct {
      unsigned long long hist_mass[kBins];   // fixed-point (fix_mass) mass per bin (top-p levels)
      int hist_count[kBins];
      int hist_min[kBins], hist_max[kBins];  // fkey of the smallest/largest member per bin (levels >= 1)
    };
    unsigned long long cand_keys[kCandCap];  // mid path: the sorted candidates (never with the above)
  };
  unsigned long long red_u64[kWarps];
  unsigned long long mid_mk, mid_rem;
  int mid_n_kept;
  float red[kWarps];
  int red_i[kWarps];
  float2 red2[kWarps];
  float warp_top_v[kWarps][kMaxTop];
  int warp_top_i[kWarps][kMaxTop];
  float top_v[kMaxTop];
  int top_i[kMaxTop];
  int sel_bin, sel_seg, last_seg, picked, picked_last;
  float rem;
  float bin_above_c;                 // select(): count and fixed-point mass above the boundary bin
  unsigned long long bin_above_m;
};

// ---- row iteration: lane l of a warp covers ids [seg * 32 * kVec + l * kVec, + kVec) of a segment ----
template <typename W>
constexpr int vec_of() { return 16 / static_cast<int>(sizeof(W)); }

// Values of one lane in segment `seg`, as float; ids >= V read as 0 (callers mask them by id).
template <typename W>
__device__ __forceinline__ void load_seg(const W* row, int V, bool aligned, int seg, int lane, float* out) {
  constexpr int kVec = vec_of<W>();
  const int base = seg * 32 * kVec + lane * kVec;
  if (aligned && base + kVec <= V) {
    Vec<W> v;
    v.raw = *reinterpret_cast<const uint4*>(row + base);
#pragma unroll
    for (int j = 0; j < kVec; ++j) out[j] = to_f(v.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) out[j] = base + j < V ? to_f(row[base + j]) : 0.0f;
  }
}

// f(seg, first id of this lane, float v[kVec]) for every segment; warp-uniform calls, so f may use
// warp collectives. kUnroll segments per warp are loaded before any is processed.
template <typename W, typename F>
__device__ __forceinline__ void for_each_segment(const W* row, int V, bool aligned, F&& f) {
  constexpr int kVec = vec_of<W>(), kSeg = 32 * kVec;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_seg = (V + kSeg - 1) / kSeg;
  for (int s0 = warp; s0 < num_seg; s0 += kWarps * kUnroll) {
    float v[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (s0 + u * kWarps < num_seg) load_seg(row, V, aligned, s0 + u * kWarps, lane, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = s0 + u * kWarps;
      if (s < num_seg) f(s, s * kSeg + lane * kVec, v[u]);
    }
  }
}

// f(id, value) for every id < V.
template <typename W, typename F>
__device__ __forceinline__ void for_each(const W* row, int V, bool aligned, F&& f) {
  constexpr int kVec = vec_of<W>();
  for_each_segment(row, V, aligned, [&](int, int id0, const float* v) {
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      if (id0 + j < V) f(id0 + j, v[j]);
  });
}

// ---- reductions (every thread gets the result; two __syncthreads each) ----
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ void warp_best(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i)) v = ov, i = oi;
  }
}

template <bool kMax>
__device__ __forceinline__ float block_minmax(float v, Shared& sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, ov) : fminf(v, ov);
  }
  if ((threadIdx.x & 31) == 0) sm.red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = sm.red[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, sm.red[w]) : fminf(r, sm.red[w]);
  __syncthreads();
  return r;
}

// (v, i) := the best over the block.
__device__ __forceinline__ void block_best(float& v, int& i, Shared& sm) {
  warp_best(v, i);
  if ((threadIdx.x & 31) == 0) sm.red[threadIdx.x >> 5] = v, sm.red_i[threadIdx.x >> 5] = i;
  __syncthreads();
  v = sm.red[0], i = sm.red_i[0];
  for (int w = 1; w < kWarps; ++w)
    if (better(sm.red[w], sm.red_i[w], v, i)) v = sm.red[w], i = sm.red_i[w];
  __syncthreads();
}

// Online softmax state: s = sum(exp(l - m)). Merging rescales to the larger max.
__device__ __forceinline__ void merge_online(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (!(mx > neg_inf())) {
    m = neg_inf(), s = 0.0f;
    return;
  }
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}
__device__ __forceinline__ void block_online(float& m, float& s, Shared& sm) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) merge_online(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  if ((threadIdx.x & 31) == 0) sm.red2[threadIdx.x >> 5] = make_float2(m, s);
  __syncthreads();
  m = sm.red2[0].x, s = sm.red2[0].y;
  for (int w = 1; w < kWarps; ++w) merge_online(m, s, sm.red2[w].x, sm.red2[w].y);
  __syncthreads();
}

// Exclusive prefix sum of one float2 per thread, in thread order; `total` is the block sum.
__device__ __forceinline__ float2 block_excl_scan(float2 v, float2& total, Shared& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float2 inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float x = __shfl_up_sync(0xffffffffu, inc.x, o), y = __shfl_up_sync(0xffffffffu, inc.y, o);
    if (lane >= o) inc.x += x, inc.y += y;
  }
  float2 ex = make_float2(__shfl_up_sync(0xffffffffu, inc.x, 1), __shfl_up_sync(0xffffffffu, inc.y, 1));
  if (lane == 0) ex = make_float2(0.0f, 0.0f);
  if (lane == 31) sm.red2[warp] = inc;
  __syncthreads();
  float2 pre = make_float2(0.0f, 0.0f), tot = make_float2(0.0f, 0.0f);
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) pre.x += sm.red2[w].x, pre.y += sm.red2[w].y;
    tot.x += sm.red2[w].x, tot.y += sm.red2[w].y;
  }
  __syncthreads();
  total = tot;
  return make_float2(pre.x + ex.x, pre.y + ex.y);
}

// Exclusive prefix sum of one u64 per thread (kNT threads), in thread order; `total` is the block sum.
// red: kNT / 32 words of shared memory. Integer sums: exact, so any summation order gives the same.
template <int kNT>
__device__ __forceinline__ unsigned long long block_excl_scan_u64(unsigned long long v, unsigned long long& total,
                                                                 unsigned long long* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) red[warp] = inc;
  __syncthreads();
  unsigned long long pre = 0, tot = 0;
  for (int w = 0; w < kNT / 32; ++w) {
    if (w < warp) pre += red[w];
    tot += red[w];
  }
  __syncthreads();
  total = tot;
  return pre + inc - v;
}

// ---- per-thread top-K list (registers; best first) ----
template <int K>
__device__ __forceinline__ void top_init(float (&lv)[K], int (&li)[K]) {
#pragma unroll
  for (int j = 0; j < K; ++j) lv[j] = neg_inf(), li[j] = INT_MAX;
}
template <int K>
__device__ __forceinline__ void top_insert(float (&lv)[K], int (&li)[K], float v, int id) {
  if (!better(v, id, lv[K - 1], li[K - 1])) return;
#pragma unroll
  for (int j = 0; j < K; ++j)
    if (better(v, id, lv[j], li[j])) {
      const float tv = lv[j];
      const int ti = li[j];
      lv[j] = v, li[j] = id;
      v = tv, id = ti;
    }
}
// The warp's best (value, id) over the heads of its lanes' lists (each best first); the lane holding it
// pops its head. Ids are unique across lanes (sentinels: INT_MAX).
template <int K>
__device__ __forceinline__ void warp_pop_best(float (&lv)[K], int (&li)[K], float& bv, int& bi) {
  bv = lv[0];
  bi = li[0];
  warp_best(bv, bi);
  if (li[0] == bi) {
#pragma unroll
    for (int j = 0; j + 1 < K; ++j) lv[j] = lv[j + 1], li[j] = li[j + 1];
    lv[K - 1] = neg_inf(), li[K - 1] = INT_MAX;
  }
}

// Block top-K into sm.top_v/top_i: K rounds of warp arg-best over the lists' heads per warp, then
// the same over the warps' lists in warp 0. Ids are unique across threads (sentinels: INT_MAX).
template <int K>
__device__ __forceinline__ void top_merge(float (&lv)[K], int (&li)[K], Shared& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    float bv;
    int bi;
    warp_pop_best(lv, li, bv, bi);
    if (lane == 0) sm.warp_top_v[warp][r] = bv, sm.warp_top_i[warp][r] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    int h = 0;
    for (int r = 0; r < K; ++r) {
      const bool has = lane < kWarps && h < K;
      float cv = has ? sm.warp_top_v[lane][h] : neg_inf();
      int ci = has ? sm.warp_top_i[lane][h] : INT_MAX;
      const int mine = ci;
      warp_best(cv, ci);
      if (has && mine == ci) ++h;
      if (lane == 0) sm.top_v[r] = cv, sm.top_i[r] = ci;
    }
  }
  __syncthreads();
}

// The draw's search over runs: thread t holds the consecutive indices [b, e) whose weights follow the
// exclusive prefix `excl` (a block scan). Returns the lowest index where the running weight passes
// `target` (block-wide) and what is left of the target inside it; past the total (rounding) the last
// index with weight and +inf; index < 0 when nothing has weight (block-uniform). sm.sel_seg and
// sm.last_seg must hold INT_MAX / -1, visible to every thread, on entry.
struct RunPick {
  int index;
  float rem;
};
template <typename W>
__device__ __forceinline__ RunPick pick_run(int b, int e, float excl, float target, W weight, Shared& sm) {
  float acc = excl, rem = 0.0f;
  int found = -1, last = -1;
  for (int i = b; i < e; ++i) {
    const float w = weight(i);
    if (w > 0.0f) {
      last = i;
      if (found < 0 && acc + w > target) found = i, rem = target - acc;
    }
    acc += w;
  }
  if (found >= 0) atomicMin(&sm.sel_seg, found);
  if (last >= 0) atomicMax(&sm.last_seg, last);
  __syncthreads();
  if (found >= 0 && found == sm.sel_seg) sm.rem = rem;
  __syncthreads();
  RunPick p{sm.sel_seg, sm.rem};
  if (p.index == INT_MAX) p.index = sm.last_seg, p.rem = pos_inf();  // rounding: past the total
  return p;
}

}  // namespace vireo::cuda::sampling
