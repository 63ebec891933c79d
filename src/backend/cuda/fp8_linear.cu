// FP8 linears' kernels (--quantization fp8): weights [M, K] in E4M3 with one F32 scale per row. The
// activations' per-token quantization for the W8A8 GEMM is in fp8_quantize.cu.
// - gemv_fp8: decode rows (N <= 8), weight-only: out[n, m] = scale[m] * sum_k fp8(w[m, k]) * x[n, k] in
//   fp32 (+ bias). Memory-bound on the weights: 1 byte a weight instead of BF16's 2.
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/fp8_linear.h"

namespace vireo::cuda {
namespace {

// 16 E4M3 codes (one uint4) to floats, through the hardware's e4m3x2 -> f16x2 conversion.
__device__ __forceinline__ void fp8x16_to_f32(const uint4& raw, float* f) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>(words[i] >> (16 * h));
      const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&hr));
      f[4 * i + 2 * h] = v.x;
      f[4 * i + 2 * h + 1] = v.y;
    }
  }
}

constexpr int kGemvWarps = 8;
constexpr int kGemvTileK = 2048;                  // x[:, tile] staged in shared memory (N x 2048 x 2 bytes)
constexpr int kGemvChunks = kGemvTileK / (32 * 16);  // 16-byte weight chunks a lane takes per row and tile

// A block: kGemvWarps x R weight rows. Per K tile: x's tile into shared memory (normalised on the way with
// the input norm: x * rsqrt(mean(x^2) + eps) * g rounded to T, as the rms_norm kernel writes it), then each
// lane loads all its chunks of its R rows (R x 4 x 16 bytes in flight: a streaming read needs many loads
// outstanding) and multiplies them with the N rows of x. With silu_out a warp's rows come in (gate, up)
// pairs, row j and row j + m / 2, so the epilogue can write act(gate) * up.
template <typename T, int N, int R>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_fp8_kernel(Fp8GemvArgs a) {
  __shared__ __align__(16) T xs[N][kGemvTileK];
  __shared__ float inv_rms[N];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* __restrict__ gnorm = static_cast<const T*>(a.norm_w);
  const int64_t m = a.m, k = a.k;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t unit0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * R;  // first row (pair: R / 2)
  auto row_of = [&](int r) -> int64_t {
    return a.silu_out ? unit0 / 2 + r / 2 + (r % 2) * (m / 2) : unit0 + r;
  };
  auto valid = [&](int r) { return a.silu_out ? unit0 / 2 + r / 2 < m / 2 : unit0 + r < m; };
  constexpr int kV = 16 / sizeof(T);
  // The weights depend on no earlier kernel: the first tile's loads go out before the PDL wait.
  uint4 wv[R][kGemvChunks];
  auto load_tile = [&](int64_t t0, int tk) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < kGemvChunks; ++j) {
        const int c = (j * 32 + lane) * 16;
        wv[r][j] = valid(r) && c < tk ? __ldg(reinterpret_cast<const uint4*>(a.w + row_of(r) * k + t0 + c))
                                      : make_uint4(0, 0, 0, 0);
      }
  };
  load_tile(0, static_cast<int>(k < kGemvTileK ? k : kGemvTileK));
  pdl_enter();
  if (gnorm) {  // each block computes the N rows' norms itself (N x K values from L2)
    __shared__ float partial[N][kGemvWarps];
    for (int n = 0; n < N; ++n) {
      float ss = 0.f;
      for (int64_t c = threadIdx.x * kV; c < k; c += kGemvWarps * 32 * kV) {
        Vec<T> v;
        v.raw = *reinterpret_cast<const uint4*>(x + n * k + c);
#pragma unroll
        for (int e = 0; e < kV; ++e) ss += to_f(v.v[e]) * to_f(v.v[e]);
      }
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      if (lane == 0) partial[n][warp] = ss;
    }
    __syncthreads();
    if (threadIdx.x < N) {
      float ss = 0.f;
      for (int w = 0; w < kGemvWarps; ++w) ss += partial[threadIdx.x][w];
      inv_rms[threadIdx.x] = rsqrtf(ss / static_cast<float>(k) + a.eps);
    }
  }
  float acc[R][N];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < N; ++n) acc[r][n] = 0.f;
  for (int64_t t0 = 0; t0 < k; t0 += kGemvTileK) {
    const int tk = static_cast<int>(k - t0 < kGemvTileK ? k - t0 : kGemvTileK);
    if (t0 > 0) load_tile(t0, tk);
    __syncthreads();  // the previous tile's readers are done (and inv_rms is written)
    for (int i = threadIdx.x * kV; i < N * tk; i += kGemvWarps * 32 * kV) {
      const int n = i / tk, c = i % tk;  // tk % 16 == 0: a vector never straddles two rows
      Vec<T> v;
      v.raw = *reinterpret_cast<const uint4*>(x + n * k + t0 + c);
      if (gnorm) {
        Vec<T> g;
        g.raw = *reinterpret_cast<const uint4*>(gnorm + t0 + c);
#pragma unroll
        for (int e = 0; e < kV; ++e) v.v[e] = from_f<T>(to_f(v.v[e]) * inv_rms[n] * to_f(g.v[e]));
      }
      *reinterpret_cast<uint4*>(&xs[n][c]) = v.raw;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kGemvChunks; ++j) {
      const int c = (j * 32 + lane) * 16;
      if (c >= tk) break;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float f[16];
        fp8x16_to_f32(wv[r][j], f);
#pragma unroll
        for (int n = 0; n < N; ++n) {
          float s = 0.f;
#pragma unroll
          for (int h = 0; h < 16; h += kV) {
            Vec<T> v;
            v.raw = *reinterpret_cast<const uint4*>(&xs[n][c + h]);
#pragma unroll
            for (int e = 0; e < kV; ++e) s = fmaf(f[h + e], to_f(v.v[e]), s);
          }
          acc[r][n] += s;
        }
      }
    }
  }
  // Epilogue: lane n < N writes row n's outputs; each value rounded to T as the separate kernels would.
  const T* __restrict__ bias = static_cast<const T*>(a.bias);
  T* out = static_cast<T*>(a.out);  // may alias residual (in place): no __restrict__
  const T* res = static_cast<const T*>(a.residual);
  float y[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float mine = 0.f;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float v = acc[r][n];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (n == lane) mine = v;
    }
    y[r] = 0.f;
    if (valid(r) && lane < N) {
      const int64_t row = row_of(r);
      float v = mine * a.w_scale[row];
      if (bias) v += to_f(bias[row]);
      y[r] = to_f(from_f<T>(v));
    }
  }
  if (lane >= N) return;
  const int n = lane;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (!valid(r)) continue;
    if (a.silu_out) {
      if (r % 2 == 0) {
        const int64_t j = row_of(r);
        out[n * (m / 2) + j] = from_f<T>(gate_act(a.act, y[r]) * y[r + 1]);
      }
    } else {
      const int64_t row = row_of(r);
      out[n * m + row] = res ? from_f<T>(to_f(res[n * m + row]) + y[r]) : from_f<T>(y[r]);
    }
  }
}

template <typename T, int N>
void launch_gemv_n(const Fp8GemvArgs& a, cudaStream_t stream) {
  // Four rows a warp where that still gives every SM a block (8B-sized matrices), else two.
  const bool wide = (a.m + kGemvWarps * 4 - 1) / (kGemvWarps * 4) >= 132;
  const int64_t rows_per_block = int64_t{kGemvWarps} * (wide ? 4 : 2);
  const dim3 grid(static_cast<unsigned>((a.m + rows_per_block - 1) / rows_per_block));
  auto kernel = wide ? gemv_fp8_kernel<T, N, 4> : gemv_fp8_kernel<T, N, 2>;
  launch_pdl(kernel, grid, dim3(kGemvWarps * 32), 0, stream, a);
}

template <typename T>
void launch_gemv_typed(const Fp8GemvArgs& a, cudaStream_t stream) {
  switch (a.n) {
    case 1: return launch_gemv_n<T, 1>(a, stream);
    case 2: return launch_gemv_n<T, 2>(a, stream);
    case 3: return launch_gemv_n<T, 3>(a, stream);
    case 4: return launch_gemv_n<T, 4>(a, stream);
    case 5: return launch_gemv_n<T, 5>(a, stream);
    case 6: return launch_gemv_n<T, 6>(a, stream);
    case 7: return launch_gemv_n<T, 7>(a, stream);
    default: return launch_gemv_n<T, 8>(a, stream);
  }
}

template <typename T>
__global__ void rescale_kernel(const float* __restrict__ acc, const float* __restrict__ xs,
                               const float* __restrict__ ws, const T* __restrict__ bias, T* out,
                               int64_t n, int64_t m, const T* residual) {  // residual may alias out
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * m;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / m, c = i % m;
    float v = acc[i] * xs[r] * ws[c];
    if (bias) v += to_f(bias[c]);
    if (residual) v = to_f(residual[i]) + to_f(from_f<T>(v));
    out[i] = from_f<T>(v);
  }
}

}  // namespace

void launch_fp8_rescale(const float* acc, const float* x_scale, const float* w_scale, const void* bias, void* out,
                        DType t, int64_t n, int64_t m, cudaStream_t stream, const void* residual) {
  if (n * m == 0) return;
  const int64_t blocks = std::min<int64_t>((n * m + 255) / 256, 132 * 16);
  if (t == DType::kBF16)
    launch_pdl(rescale_kernel<__nv_bfloat16>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, acc, x_scale,
               w_scale, static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(out), n, m,
               static_cast<const __nv_bfloat16*>(residual));
  else if (t == DType::kF16)
    launch_pdl(rescale_kernel<__half>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, acc, x_scale, w_scale,
               static_cast<const __half*>(bias), static_cast<__half*>(out), n, m, static_cast<const __half*>(residual));
  else
    throw Error("fp8 rescale: activations must be bf16 or f16");
  check_launch("fp8 rescale");
}

void launch_gemv_fp8(const Fp8GemvArgs& a, cudaStream_t stream) {
  if (a.n < 1 || a.n > kFp8GemvMaxRows) throw Error("fp8 gemv: 1 to 8 rows");
  if (a.k % 16 != 0) throw Error("fp8 gemv: K must be a multiple of 16");
  if (a.silu_out && a.m % 2 != 0) throw Error("fp8 gemv: silu_out needs an even M");
  if (a.m == 0) return;
  if (a.dtype == DType::kBF16) launch_gemv_typed<__nv_bfloat16>(a, stream);
  else if (a.dtype == DType::kF16) launch_gemv_typed<__half>(a, stream);
  else throw Error("fp8 gemv: activations must be bf16 or f16");
  check_launch("fp8 gemv");
}

}  // namespace vireo::cuda
