// Streaming decode GEMV, batch 1, for rows that are one bulk copy each (K = 1024 or 2048: the Qwen3-0.6B
// lm_head, 151,936 x 1024, 311 MB a step). The general streaming kernel (gemv_stream.cuh) finishes a row
// as one chain: wait for the chunk, re-read x' from shared memory, 32 dependent FMAs a lane into one
// accumulator, five dependent shuffles, the store. At K = 1024 that chain, 144 times a warp with only 8
// warps an SM, kept the lm_head at ~95% of the copy ceiling (docs/cuda_kernels.md, session 21). Here a
// warp takes G rows at a time: its rows are one contiguous range, so a group is one bulk copy (8 KiB at
// K = 1024) on one barrier; it loads all of the group's vectors at once, keeps x' in registers (fp32),
// spreads each row over 4 accumulators, and reduces the G sums in one transpose tree (G / 2 + G / 4 + ...
// shuffles plus 5 - log2 G, instead of 5 G). Measured (session 22, docs/performance.md): the 0.6B step's
// graph 0.6-3.5 us shorter than on the general kernel, depending on the H200.
#pragma once
#include <cstdint>
#include <string_view>

#include "backend/cuda/gemv_stream_plan.cuh"
#include "backend/cuda/range_stats.cuh"

namespace vireo::cuda {
namespace {

// v[g]: a lane's partial sum of row g (G a power of two <= 32). Returns the warp's full sum of row
// lane >> (5 - log2 G), in every lane. At each transposing step a lane keeps the half of its values its
// partner does not keep, adding the partner's share of them.
template <int G>
__device__ __forceinline__ float warp_sum_rows(float (&v)[G], int lane) {
  int offset = 16;
#pragma unroll
  for (int w = G; w > 1; w /= 2, offset /= 2) {
    const bool hi = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < w / 2; ++i) {
      const float keep = hi ? v[i + w / 2] : v[i], send = hi ? v[i] : v[i + w / 2];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  }
#pragma unroll
  for (; offset > 0; offset /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
  return v[0];
}

constexpr int log2_small(int g) { return g <= 1 ? 0 : 1 + log2_small(g / 2); }

// out[row] = x' . w[row] + bias[row] for the rows of each warp (StreamPlan); no residual, no SiLU.
// kCv: 16-byte vectors a row (128 or 256); G: rows a group (stages are a multiple of it).
// a.row_stats: each warp also writes the RangeStats of its rows (as stored) to row_stats[warp]; the
// plan's even split of the rows over the grid's warps is RangeStats' split into C = warps ranges. The
// loop only parks each stored value in shared memory; the statistics come after it (range_stats.cuh).
template <typename T, int kCv, int kForm, int G>
__global__ void __launch_bounds__(kThreads, 1) gemv_stream_rows_kernel(GemvArgs a, StreamPlan p) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr int kJ = kCv / 32;  // vectors a lane reads of a row
  constexpr int kAcc = 4;       // independent sums a row
  constexpr uint32_t kRowBytes = kCv * 16;
  constexpr int kLogG = log2_small(G);
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int stages = p.stages;
  uint4* xs = reinterpret_cast<uint4*>(smem);  // x' [K]
  uint4* ring = xs + kCv + static_cast<size_t>(warp) * stages * kCv;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kRowBytes + size_t{kWarps} * stages * kRowBytes) + warp * stages;
  // row_stats: the warp's outputs as stored, one float a row (StreamPlan::stats_cap), after the barriers.
  float* parked = reinterpret_cast<float*>(smem + kRowBytes + size_t{kWarps} * stages * (kRowBytes + 8)) +
                  warp * p.stats_cap;

  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t row0 = gw * p.rows_lo + (gw < p.rows_extra ? gw : p.rows_extra);
  const int64_t nrows = p.rows_lo + (gw < p.rows_extra ? 1 : 0);
  const uint4* w = static_cast<const uint4*>(a.w) + row0 * kCv;  // the warp's rows, one contiguous range

  // The ring holds num_slots = stages / G slots of G rows; the barrier of a slot counts its group's
  // bytes, copied as one bulk copy (p.group_copy, the default) or one a row (the A/B switch).
  const int num_slots = stages / G;
  auto fill = [&](int slot, int64_t first_row, uint64_t policy) {  // lane 0
    const int n = static_cast<int>(min(int64_t{G}, nrows - first_row));
    uint4* dst = ring + slot * G * kCv;
    const uint4* src = w + first_row * kCv;
    mbar_arrive_expect(&bars[slot], n * kRowBytes);
    if (p.group_copy) {
      bulk_copy_only(dst, src, n * kRowBytes, &bars[slot], policy);
    } else {
      for (int g = 0; g < n; ++g) bulk_copy_only(dst + g * kCv, src + g * kCv, kRowBytes, &bars[slot], policy);
    }
  };

  // 1. Independent of the previous kernel: the ring's first fill.
  uint64_t policy = 0;
  if (lane == 0) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    for (int q = 0; q < num_slots; ++q) mbar_init(&bars[q]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int q = 0; q < num_slots && int64_t{q} * G < nrows; ++q) fill(q, int64_t{q} * G, policy);
  }
  __syncwarp();

  // 2. x may belong to the previous kernel. The lane's kJ vectors of x' then live in registers: x'
  // element (lane + 32 j) * kN + e is xf[j * kN + e].
  pdl_enter();
  stage_input<T, 1, form_prologue(kForm)>(a, xs, kCv);
  float xf[kJ * kN];
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    V xv;
    xv.raw = xs[lane + 32 * j];
#pragma unroll
    for (int e = 0; e < kN; ++e) xf[j * kN + e] = to_f(xv.v[e]);
  }

  // 3. A group of G rows a slot, slots in turn; the lanes (lane & (32 / G - 1)) == 0 store.
  const T* bias = static_cast<const T*>(a.bias);
  T* out = static_cast<T*>(a.out);
  const int mine = lane >> (5 - kLogG);  // the group row whose sum this lane ends with
  const bool writer = (lane & ((32 >> kLogG) - 1)) == 0;
  int slot = 0;
  uint32_t parity = 0;
  const bool stats = a.row_stats != nullptr;
  for (int64_t r = 0; r < nrows; r += G) {
    const bool store = writer && r + mine < nrows;
    const float b = bias && store ? to_f(bias[row0 + r + mine]) : 0.f;  // in flight during the group
    V wv[G][kJ];
    mbar_wait(&bars[slot], parity);
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int j = 0; j < kJ; ++j) wv[g][j].raw = r + g < nrows ? ring[(slot * G + g) * kCv + lane + 32 * j] : uint4{};
    }
    __syncwarp();  // every lane has read the group's slot
    if (lane == 0 && r + stages < nrows) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic reads before the async writes
      fill(slot, r + stages, policy);
    }
    if (++slot == num_slots) {
      slot = 0;
      parity ^= 1;
    }
    float v[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float acc[kAcc] = {};
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < kN; ++e) acc[e % kAcc] += to_f(wv[g][j].v[e]) * xf[j * kN + e];
      v[g] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    const float sum = warp_sum_rows<G>(v, lane);
    const T y = from_f<T>(sum + b);
    if (store) out[row0 + r + mine] = y;
    if (stats && store) parked[r + mine] = to_f(y);  // a shared store: nothing in the loop waits for it
  }
  if (stats) {  // the warp's range, two passes over the parked values
    __syncwarp();
    const float4 st = warp_range_stats(static_cast<int>(nrows), row0, [&](int i) { return parked[i]; });
    if (lane == 0) a.row_stats[gw] = st;
  }
}

// VIREO_GEMV_ROWS=0: batch-1 one-copy rows take the general streaming kernel (A/B).
bool stream_rows_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_ROWS");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// VIREO_GEMV_ROWS_COPY=row: one bulk copy a row instead of one a group of rows (A/B).
bool stream_rows_group_copy() {
  static const bool group = [] {
    const char* e = std::getenv("VIREO_GEMV_ROWS_COPY");
    return e == nullptr || std::string_view(e) != "row";
  }();
  return group;
}

// Whether the batch-1 launch a (already taken by the streaming kernel) suits this kernel: a row is one
// copy of 2 or 4 KiB, and the output is the plain product (plus bias).
template <typename T>
bool stream_rows_applies(const GemvArgs& a) {
  const int64_t nvec = a.k / Vec<T>::kN;
  return stream_rows_enabled() && !a.silu_out && a.residual == nullptr && (nvec == 128 || nvec == 256);
}

template <typename T, int kCv, int kForm>
bool launch_stream_rows_form(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  constexpr int kG = kCv == 128 ? 4 : 2;  // 12 stages of 2 KiB, 6 of 4 KiB: a multiple of G
  auto* kernel = gemv_stream_rows_kernel<T, kCv, kForm, kG>;
  static const size_t max_smem = stream_max_smem(reinterpret_cast<const void*>(kernel));
  return launch_stream_plan<T, 1, kCv>(kernel, max_smem, kG, a, num_sms, stream, stream_rows_group_copy());
}

template <typename T, int kCv>
bool launch_stream_rows_cv(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  switch (forms_enabled() ? gemv_form_of(a) : kFormAny) {
    case kFormNormOut: return launch_stream_rows_form<T, kCv, kFormNormOut>(a, num_sms, stream);
    case kFormPlainOut: return launch_stream_rows_form<T, kCv, kFormPlainOut>(a, num_sms, stream);
    default: return launch_stream_rows_form<T, kCv, kFormAny>(a, num_sms, stream);
  }
}

// The launch for a batch-1 GEMV the streaming kernel takes, or false (stream_rows_applies).
template <typename T>
bool launch_stream_rows(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  if (!stream_rows_applies<T>(a)) return false;
  return a.k / Vec<T>::kN == 128 ? launch_stream_rows_cv<T, 128>(a, num_sms, stream)
                                 : launch_stream_rows_cv<T, 256>(a, num_sms, stream);
}

}  // namespace
}  // namespace vireo::cuda
