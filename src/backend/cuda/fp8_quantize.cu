// Per-token FP8 quantization of an activation for the W8A8 GEMM (fp8_linear.h; --quantization fp8):
// scale = max |x| / 448 (1 for a zero row) and q = satfinite_e4m3(x * (1 / scale)), as the host's fp8.h
// computes them; optionally of rms_norm(x) or silu_and_mul(x) computed on the way (the linear's prologue,
// no x' pass), or of silu_and_mul over an unscaled GEMM's output with its scales applied first.
//
// Why the multiply by a reciprocal and the fast SiLU: with the values in registers the kernel is bound by
// instruction issue, not HBM. The SiLU form of a 7,900-row Qwen3-8B step (24,576 bf16 read, 12,288 codes
// written a row) spent ~32 instructions an element: an IEEE division in silu and another in the
// quantization (~8 each), and each value converted to and from bf16 one at a time. Now: one multiply by
// the row's inverted scale (vLLM's scaled_fp8_conversion multiplies too), __fdividef in silu (rcp.approx:
// its f32 result is then rounded to bf16), and conversions in pairs.
#include <cuda_fp8.h>

#include <cstdlib>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/fp8_linear.h"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kQuantThreads = 256;

// The activation rows quantize_rows_kernel reads, with an optional prologue (the form of the linear).
// kSiluMulScaled: silu_and_mul of an unscaled FP8 GEMM's output, its scales (and bias) applied first.
enum class QuantIn { kPlain, kNorm, kSiluMul, kSiluMulScaled };
struct QuantArgs {
  const void* x;       // [n, k] ([n, 2k] for kSiluMul*) activation dtype
  const void* norm_w;  // kNorm: [k] activation dtype
  float eps;
  int64_t k;
  uint8_t* q;          // [n, k] E4M3
  float* scale;        // [n]
  // kSiluMulScaled: x[r, j] stands for round(x[r, j] * x_row_scale[r] * x_col_scale[j] + x_bias[j])
  const float* x_row_scale = nullptr;  // [n]
  const float* x_col_scale = nullptr;  // [2k]
  const void* x_bias = nullptr;        // [2k] activation dtype, or null
};

// Sum (or max) over the block (kQuantThreads threads); every thread gets the result.
__device__ __forceinline__ float quant_block_reduce(float v, float* scratch, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  __syncthreads();  // scratch may still be read from a previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.f;  // sums start at 0; maxima of |x| too
#pragma unroll
  for (int w = 0; w < kQuantThreads / 32; ++w) v = is_max ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

// Two floats rounded to T (to nearest even) in one conversion instruction, as two from_f<T> would give.
__device__ __forceinline__ void pack2(float a, float b, __nv_bfloat16* out) {
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void pack2(float a, float b, __half* out) {
  *reinterpret_cast<__half2*>(out) = __floats2half2_rn(a, b);
}

// silu(g) = g / (1 + e^-g) with the approximate reciprocal (2 ulp; its result is rounded to bf16 / f16
// next). Very negative g: e^-g = inf, rcp(inf) = 0, silu = -0 as the exact form's limit.
__device__ __forceinline__ float fast_silu(float g) { return __fdividef(g, 1.f + __expf(-g)); }

// Per-chunk pieces both kernels share (a chunk: one 16-byte vector of T).
// rms_norm's values: v * inv_rms * w[i ..), rounded to T, in place.
template <typename T>
__device__ __forceinline__ void norm_chunk(Vec<T>& v, const void* norm_w, int64_t i, float inv_rms) {
  constexpr int kV = Vec<T>::kN;
  Vec<T> w;
  w.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(norm_w) + i);
#pragma unroll
  for (int j = 0; j < kV; j += 2)
    pack2(to_f(v.v[j]) * inv_rms * to_f(w.v[j]), to_f(v.v[j + 1]) * inv_rms * to_f(w.v[j + 1]), v.v + j);
}
template <typename T>
__device__ __forceinline__ float sum_squares_chunk(const Vec<T>& v, float ss) {
#pragma unroll
  for (int j = 0; j < Vec<T>::kN; ++j) ss += to_f(v.v[j]) * to_f(v.v[j]);
  return ss;
}
template <typename T>
__device__ __forceinline__ float abs_max_chunk(const Vec<T>& v, float m) {
#pragma unroll
  for (int j = 0; j < Vec<T>::kN; ++j) m = fmaxf(m, fabsf(to_f(v.v[j])));
  return m;
}
// The codes of v * inv at out[0, kV), two a conversion (the .x of each pair in the lower byte).
template <typename T>
__device__ __forceinline__ void store_codes(uint8_t* out, const Vec<T>& v, float inv) {
  constexpr int kV = Vec<T>::kN;
  __nv_fp8x2_storage_t b[kV / 2];
#pragma unroll
  for (int j = 0; j < kV; j += 2)
    b[j / 2] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(to_f(v.v[j]), inv), __fmul_rn(to_f(v.v[j + 1]), inv)),
                                        __NV_SATFINITE, __NV_E4M3);
  if constexpr (kV == 8) *reinterpret_cast<uint2*>(out) = *reinterpret_cast<const uint2*>(b);
  else *reinterpret_cast<uint32_t*>(out) = *reinterpret_cast<const uint32_t*>(b);
}
// A row's scale from its max |value| (1 for a zero row), as the host's fp8_e4m3_scale rounds it.
__device__ __forceinline__ float row_scale_of(float amax) { return amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f; }

// One block a row: the prologue's values (rounded to T as the separate rms_norm / silu_and_mul kernels
// round them), then the scale and the codes. K % 8 == 0 (FP8 GEMM rows are multiples of 16), so 16-byte
// loads of T. kChunks > 0 (rows of at most kChunks * kQuantThreads * kV values): every load of the row is
// issued before any is used (predicated, no early exit, so all of a thread's kChunks x 16 bytes, twice
// that with silu_mul, are in flight together), the values are kept in registers as T (they are T-rounded
// anyway), and the norm's sum of squares, the max and the quantization all read those registers: one
// read of the row. kChunks 0: every pass reads the row again (rows longer than 8 chunks).
template <typename T, QuantIn kIn, int kChunks>
__global__ void __launch_bounds__(kQuantThreads) quantize_rows_kernel(QuantArgs a) {
  constexpr int kV = 16 / sizeof(T);
  __shared__ float scratch[kQuantThreads / 32];
  pdl_enter();
  const int64_t k = a.k;
  constexpr bool kSilu = kIn == QuantIn::kSiluMul || kIn == QuantIn::kSiluMulScaled;
  const T* row = static_cast<const T*>(a.x) + blockIdx.x * (kSilu ? 2 * k : k);
  [[maybe_unused]] const float rs = kIn == QuantIn::kSiluMulScaled ? a.x_row_scale[blockIdx.x] : 1.f;
  float inv_rms = 1.f;
  // The prologue's values of x[i .. i + kV) (v) and, for silu_mul, x[k + i ..) (u), rounded to T, into v.
  auto apply = [&](int64_t i, Vec<T>& v, const Vec<T>& u) {
    if constexpr (kIn == QuantIn::kNorm) {  // rms_norm: x * rsqrt(mean(x^2) + eps) * w
      norm_chunk(v, a.norm_w, i, inv_rms);
    } else if constexpr (kIn == QuantIn::kSiluMul) {
#pragma unroll
      for (int j = 0; j < kV; j += 2)
        pack2(fast_silu(to_f(v.v[j])) * to_f(u.v[j]), fast_silu(to_f(v.v[j + 1])) * to_f(u.v[j + 1]), v.v + j);
    } else if constexpr (kIn == QuantIn::kSiluMulScaled) {  // gate and up as the scaled GEMM would store them
      float gs[kV], us[kV], gb[kV] = {}, ub[kV] = {};
#pragma unroll
      for (int j = 0; j < kV; j += 4) {
        *reinterpret_cast<float4*>(gs + j) = *reinterpret_cast<const float4*>(a.x_col_scale + i + j);
        *reinterpret_cast<float4*>(us + j) = *reinterpret_cast<const float4*>(a.x_col_scale + k + i + j);
      }
      if (a.x_bias) {
        Vec<T> b0, b1;
        b0.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.x_bias) + i);
        b1.raw = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.x_bias) + k + i);
#pragma unroll
        for (int j = 0; j < kV; ++j) gb[j] = to_f(b0.v[j]), ub[j] = to_f(b1.v[j]);
      }
      Vec<T> g, up;
#pragma unroll
      for (int j = 0; j < kV; j += 2) {
        pack2(to_f(v.v[j]) * rs * gs[j] + gb[j], to_f(v.v[j + 1]) * rs * gs[j + 1] + gb[j + 1], g.v + j);
        pack2(to_f(u.v[j]) * rs * us[j] + ub[j], to_f(u.v[j + 1]) * rs * us[j + 1] + ub[j + 1], up.v + j);
      }
#pragma unroll
      for (int j = 0; j < kV; j += 2)
        pack2(fast_silu(to_f(g.v[j])) * to_f(up.v[j]), fast_silu(to_f(g.v[j + 1])) * to_f(up.v[j + 1]), v.v + j);
    }
  };
  auto load = [&](int64_t i, Vec<T>& v, Vec<T>& u) {
    v.raw = *reinterpret_cast<const uint4*>(row + i);
    if constexpr (kSilu) u.raw = *reinterpret_cast<const uint4*>(row + k + i);
  };
  uint8_t* out = a.q + blockIdx.x * k;
  // The row's scale (written once) and its reciprocal, both rounded as the host's fp8_quantize_rows.
  auto inverse_scale = [&](float amax) {
    const float s = row_scale_of(quant_block_reduce(amax, scratch, true));
    if (threadIdx.x == 0) a.scale[blockIdx.x] = s;
    return __fdiv_rn(1.f, s);
  };
  auto index = [](int c) { return (int64_t{c} * kQuantThreads + threadIdx.x) * kV; };
  float amax = 0.f;
  if constexpr (kChunks > 0) {
    Vec<T> xv[kChunks];
    Vec<T> uv[kSilu ? kChunks : 1];
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      if (index(c) < k) load(index(c), xv[c], uv[kSilu ? c : 0]);
    if constexpr (kIn == QuantIn::kNorm) {
      float ss = 0.f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        if (index(c) < k) ss = sum_squares_chunk(xv[c], ss);
      inv_rms = rsqrtf(quant_block_reduce(ss, scratch, false) / static_cast<float>(k) + a.eps);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (index(c) >= k) continue;
      apply(index(c), xv[c], uv[kSilu ? c : 0]);
      amax = abs_max_chunk(xv[c], amax);
    }
    const float inv = inverse_scale(amax);
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      if (index(c) < k) store_codes(out + index(c), xv[c], inv);
  } else {
    Vec<T> v, u;
    if constexpr (kIn == QuantIn::kNorm) {
      float ss = 0.f;
      for (int64_t i = threadIdx.x * kV; i < k; i += kQuantThreads * kV) {
        load(i, v, u);
        ss = sum_squares_chunk(v, ss);
      }
      inv_rms = rsqrtf(quant_block_reduce(ss, scratch, false) / static_cast<float>(k) + a.eps);
    }
    for (int64_t i = threadIdx.x * kV; i < k; i += kQuantThreads * kV) {
      load(i, v, u);
      apply(i, v, u);
      amax = abs_max_chunk(v, amax);
    }
    const float inv = inverse_scale(amax);
    for (int64_t i = threadIdx.x * kV; i < k; i += kQuantThreads * kV) {
      load(i, v, u);
      apply(i, v, u);
      store_codes(out + i, v, inv);
    }
  }
}

// An A/B switch: on unless the variable is set to 0.
bool env_not_zero(const char* name) {
  const char* v = std::getenv(name);
  return !(v && v[0] == '0');
}

// VIREO_FP8_QUANT_CACHED=0: every row re-read per pass (the kChunks 0 form), for A/B measurements.
bool quant_cached_enabled() {
  static const bool on = env_not_zero("VIREO_FP8_QUANT_CACHED");
  return on;
}

// The quantize kernel for rows of k values: the smallest register-cached form that holds them.
template <typename T, QuantIn kIn>
auto quantize_kernel_for(int64_t k) {
  constexpr int64_t kPerChunk = int64_t{kQuantThreads} * (16 / sizeof(T));
  const int64_t chunks = quant_cached_enabled() ? (k + kPerChunk - 1) / kPerChunk : 9;
  // 3 and 6: Qwen3-8B's 12,288-wide down input is 6 chunks of bf16 (registers for 8 would sit idle).
  return chunks <= 1   ? quantize_rows_kernel<T, kIn, 1>
         : chunks <= 2 ? quantize_rows_kernel<T, kIn, 2>
         : chunks <= 3 ? quantize_rows_kernel<T, kIn, 3>
         : chunks <= 4 ? quantize_rows_kernel<T, kIn, 4>
         : chunks <= 6 ? quantize_rows_kernel<T, kIn, 6>
         : chunks <= 8 ? quantize_rows_kernel<T, kIn, 8>
                       : quantize_rows_kernel<T, kIn, 0>;
}

}  // namespace

void launch_fp8_quantize_rows(const void* x, DType t, int64_t n, int64_t k, uint8_t* q, float* scale,
                              cudaStream_t stream, const void* norm_w, float eps, bool silu_mul) {
  if (k % 16 != 0) throw Error("fp8 quantize: K must be a multiple of 16");
  if (n == 0) return;
  const QuantArgs a{x, norm_w, eps, k, q, scale};
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto kernel = norm_w     ? quantize_kernel_for<T, QuantIn::kNorm>(k)
                  : silu_mul ? quantize_kernel_for<T, QuantIn::kSiluMul>(k)
                             : quantize_kernel_for<T, QuantIn::kPlain>(k);
    launch_pdl(kernel, dim3(static_cast<unsigned>(n)), dim3(kQuantThreads), 0, stream, a);
  };
  if (t == DType::kBF16) run(__nv_bfloat16{});
  else if (t == DType::kF16) run(__half{});
  else throw Error("fp8 quantize: activations must be bf16 or f16");
  check_launch("fp8 quantize_rows");
}

void launch_fp8_quantize_silu_scaled(const Fp8SiluScaledArgs& s, cudaStream_t stream) {
  if (s.k % 16 != 0) throw Error("fp8 quantize (silu, scaled): K must be a multiple of 16");
  if (!s.row_scale || !s.col_scale) throw Error("fp8 quantize (silu, scaled): the row and column scales are required");
  if (s.n == 0) return;
  QuantArgs a{s.y, nullptr, 0.f, s.k, s.q, s.scale};
  a.x_row_scale = s.row_scale;
  a.x_col_scale = s.col_scale;
  a.x_bias = s.bias;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(quantize_kernel_for<T, QuantIn::kSiluMulScaled>(s.k), dim3(static_cast<unsigned>(s.n)),
               dim3(kQuantThreads), 0, stream, a);
  };
  if (s.dtype == DType::kBF16) run(__nv_bfloat16{});
  else if (s.dtype == DType::kF16) run(__half{});
  else throw Error("fp8 quantize (silu, scaled): activations must be bf16 or f16");
  check_launch("fp8 quantize_rows (silu, scaled)");
}

}  // namespace vireo::cuda
