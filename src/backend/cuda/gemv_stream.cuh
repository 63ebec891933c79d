// Streaming decode GEMV for matrices too large for the register-resident kernel (Qwen3-8B: qkv 48 MB,
// o_proj 32 MB, gate_up 192 MB, down 96 MB, lm_head). Each warp owns a contiguous run of rows, so its
// weights are one contiguous byte range, and streams that range through its own ring of shared-memory
// stages with bulk asynchronous copies (cp.async.bulk, completion counted on an mbarrier per stage).
// One block of 8 warps per SM keeps stages * 8 * chunk bytes (~128-192 KiB) in flight all the time,
// where the grid-stride kernel (gemv.cu) alternates "issue 8 loads a lane, wait, FMA": on the H200 its
// 32-48 MB shapes reached only 57-67% of HBM because each warp's few rows are a chain of round trips.
// The first `stages` copies of every warp are issued before the PDL wait (weights never depend on the
// previous kernel); x' is staged after it (gemv_common.cuh), exactly as the other GEMV kernels do.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/gemv_common.cuh"
#include "backend/cuda/gemv_stream_plan.cuh"
#include "backend/cuda/gemv_stream_rows.cuh"

namespace vireo::cuda {
namespace {

// kCv: 16-byte vectors per copy (64, 128 or 256, dividing a row: a chunk never spans two rows).
// kForm: GemvForm (gemv_common.cuh), the batch-1 launches' forms get code of their own.
template <typename T, int NR, int kCv, int kForm = kFormAny>
__global__ void __launch_bounds__(kThreads, 1) gemv_stream_kernel(GemvArgs a, StreamPlan p) {
  const bool silu_out = kForm == kFormAny ? a.silu_out : kForm == kFormNormSilu;
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr uint32_t kChunkBytes = kCv * 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nvec = a.k / kN;
  const int stages = p.stages;
  uint4* xs = reinterpret_cast<uint4*>(smem);  // x' [NR, K]
  uint4* ring = reinterpret_cast<uint4*>(smem + size_t{NR} * nvec * 16) + static_cast<size_t>(warp) * stages * kCv;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + size_t{NR} * nvec * 16 + size_t{kWarps} * stages * kChunkBytes) +
                   warp * stages;

  // The warp's units: rows [row0, row0 + nrows), or with silu_out the (gate, up) row pairs
  // (row0 + i, half + row0 + i), gate row first; each row is per_row chunks.
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t row0 = gw * p.rows_lo + (gw < p.rows_extra ? gw : p.rows_extra);
  const int64_t nrows = p.rows_lo + (gw < p.rows_extra ? 1 : 0);
  const int64_t per_row = nvec / kCv;
  const int64_t half = silu_out ? a.m / 2 : 0;
  const int64_t per_unit = silu_out ? 2 * per_row : per_row;
  const int64_t total = nrows * per_unit;  // chunks of this warp
  const uint4* w = static_cast<const uint4*>(a.w);
  auto chunk_src = [&](int64_t c) {
    if (!silu_out) return w + row0 * nvec + c * kCv;  // one contiguous range
    const int64_t unit = c / per_unit, within = c - unit * per_unit;
    const int64_t h = within / per_row, col = within - h * per_row;
    return w + (row0 + unit + h * half) * nvec + col * kCv;
  };

  // 1. Independent of the previous kernel: the ring's first fill.
  uint64_t policy = 0;
  if (lane == 0) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    for (int s = 0; s < stages; ++s) mbar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // init visible to the copy engine
    for (int s = 0; s < stages && s < total; ++s) bulk_copy(ring + s * kCv, chunk_src(s), kChunkBytes, &bars[s], policy);
  }
  __syncwarp();

  // Lane j holds the bias and (after the wait) the residuals of the warp's row j < 32, so the epilogue
  // of a row does not start with a dependent global load.
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = kForm == kFormAny || kForm == kFormPlainResidual ? static_cast<const T*>(a.residual) : nullptr;
  T* out = static_cast<T*>(a.out);
  const bool lane_row = lane < nrows && !silu_out;
  const float lane_bias = bias && lane_row ? to_f(bias[row0 + lane]) : 0.f;

  // 2. x, residual and out may belong to the previous kernel.
  pdl_enter();
  float lane_res[NR];
#pragma unroll
  for (int n = 0; n < NR; ++n) lane_res[n] = res && lane_row ? to_f(res[n * a.m + row0 + lane]) : 0.f;
  stage_input<T, NR, form_prologue(kForm)>(a, xs, nvec);

  // 3. Consume chunk c from stage c % stages (its (c / stages)-th use: parity), refill it with c + stages.
  float acc[NR];
#pragma unroll
  for (int n = 0; n < NR; ++n) acc[n] = 0.f;
  float gate[NR];  // silu_out: the unit's reduced gate dot products (every lane)
  int s = 0;
  uint32_t parity = 0;
  int64_t col0 = 0, row = row0;  // col0: the chunk's first vector within its row; row: the unit's first
  bool up = false;               // silu_out: the chunk belongs to the up row
  for (int64_t c = 0; c < total; ++c) {
    mbar_wait(&bars[s], parity);
    const uint4* st = ring + s * kCv;
#pragma unroll
    for (int j = 0; j < kCv / 32; ++j) {
      V wv;
      wv.raw = st[lane + 32 * j];
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        V xv;
        xv.raw = xs[n * nvec + col0 + lane + 32 * j];
#pragma unroll
        for (int e = 0; e < kN; ++e) acc[n] += to_f(wv.v[e]) * to_f(xv.v[e]);
      }
    }
    __syncwarp();  // every lane has read stage s
    if (lane == 0 && c + stages < total) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic reads before the async write
      bulk_copy(ring + s * kCv, chunk_src(c + stages), kChunkBytes, &bars[s], policy);
    }
    if (++s == stages) {
      s = 0;
      parity ^= 1;
    }
    col0 += kCv;
    if (col0 == nvec && silu_out) {  // a gate or up row is complete; after the up row, lane n writes
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        float v = acc[n];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[n] = 0.f;
        if (!up) {
          gate[n] = v;
        } else if (lane == n) {
          const float bg = bias ? to_f(bias[row]) : 0.f, bu = bias ? to_f(bias[half + row]) : 0.f;
          out[n * half + row] = act_mul_round<T, kForm == kFormAny>(gate[n] + bg, v + bu, a.act);
        }
      }
      col0 = 0;
      if (up) ++row;
      up = !up;
    } else if (col0 == nvec) {  // the row is complete: reduce, epilogue (lane n writes (row, n))
      const int j = static_cast<int>(row - row0);  // warp-uniform
      const float b = j < 32 ? __shfl_sync(0xffffffffu, lane_bias, j) : (bias ? to_f(bias[row]) : 0.f);
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        float v = acc[n];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[n] = 0.f;
        const int64_t idx = n * a.m + row;
        const float r = j < 32 ? __shfl_sync(0xffffffffu, lane_res[n], j) : (res && lane == n ? to_f(res[idx]) : 0.f);
        if (lane == n) {
          T y = from_f<T>(v + b);
          if (kForm == kFormPlainResidual || res) y = from_f<T>(r + to_f(y));  // the add op's rounding
          out[idx] = y;
        }
      }
      col0 = 0;
      ++row;
    }
  }
}

template <typename T, int NR, int kCv, int kForm = kFormAny>
bool launch_stream_cv(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  auto* kernel = gemv_stream_kernel<T, NR, kCv, kForm>;
  static const size_t max_smem = stream_max_smem(reinterpret_cast<const void*>(kernel));
  return launch_stream_plan<T, NR, kCv>(kernel, max_smem, 1, a, num_sms, stream);
}

// Whether the streaming kernel takes [M, K] weights of 16-bit T: rows of at least 2 KiB made of whole
// 1 KiB chunks (K = 1024, 1536, 2048, 3072, 3584, 4096, 12288, 14336, ...), and at least 2 rows a warp.
// Qwen3-0.6B's lm_head (K = 1024) was left to the grid-stride kernel until session 21, when four A/B pairs
// over two device calls measured the batch-1 step's graph 0.3-2.0 us shorter here (mean 1.1 us of ~660).
bool stream_applies(int64_t m, int64_t k, int num_sms) {
  const int64_t nvec = k / 8;
  return stream_enabled() && nvec >= 128 && nvec % 64 == 0 && m >= int64_t{num_sms} * kWarps * 2;
}

// With silu_out a warp's unit is a (gate, up) pair: at least 2 pairs a warp.
bool stream_applies(const GemvArgs& a, int num_sms) {
  return stream_applies(a.silu_out ? a.m / 2 : a.m, a.k, num_sms);
}

// The streaming launch for this shape, or false (see stream_applies).
template <typename T, int NR>
bool launch_stream(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  static_assert(sizeof(T) == 2, "16-bit weights only");
  if (!stream_applies(a, num_sms)) return false;
  const int64_t nvec = a.k / Vec<T>::kN;
  if constexpr (NR == 1) {  // batch 1: the layer's forms (and the lm_head's) get their own code
    if (launch_stream_rows<T>(a, num_sms, stream)) return true;  // one copy a row (the 0.6B lm_head)
    auto by_form = [&]<int kCv>() {
      switch (forms_enabled() ? gemv_form_of(a) : kFormAny) {
        case kFormNormOut: return launch_stream_cv<T, 1, kCv, kFormNormOut>(a, num_sms, stream);
        case kFormNormSilu: return launch_stream_cv<T, 1, kCv, kFormNormSilu>(a, num_sms, stream);
        case kFormPlainResidual: return launch_stream_cv<T, 1, kCv, kFormPlainResidual>(a, num_sms, stream);
        case kFormPlainOut: return launch_stream_cv<T, 1, kCv, kFormPlainOut>(a, num_sms, stream);
        default: return launch_stream_cv<T, 1, kCv>(a, num_sms, stream);
      }
    };
    if (nvec % 256 == 0) return by_form.template operator()<256>();
    if (nvec % 128 == 0) return by_form.template operator()<128>();
    return by_form.template operator()<64>();
  }
  if (nvec % 256 == 0) return launch_stream_cv<T, NR, 256>(a, num_sms, stream);
  if (nvec % 128 == 0) return launch_stream_cv<T, NR, 128>(a, num_sms, stream);
  return launch_stream_cv<T, NR, 64>(a, num_sms, stream);
}

}  // namespace
}  // namespace vireo::cuda
