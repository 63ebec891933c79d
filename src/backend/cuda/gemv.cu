// linear for a handful of rows (decode: N <= 4), bf16/f16: a memory-bound GEMV that streams each
// weight row once with 16-byte loads, several in flight per lane, and applies it to all N inputs.
// cuBLASLt reached 38-65% of HBM bandwidth on these shapes (docs/cuda_kernels.md).
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWarps = 8;   // one output column (weight row) per warp
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

template <typename T, int NR>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, T* __restrict__ out,
                                                           int64_t k, int64_t m) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (row >= m) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + row * k);
  const int64_t nvec = k / kN;
  float acc[NR];
#pragma unroll
  for (int n = 0; n < NR; ++n) acc[n] = 0.f;
  int64_t c = lane;
  for (; c + 32 * (kUnroll - 1) < nvec; c += 32 * kUnroll) {
    V wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u].raw = __ldcs(wr + c + 32 * u);  // streamed once: evict first
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        V xv;
        xv.raw = reinterpret_cast<const uint4*>(x + n * k)[c + 32 * u];
#pragma unroll
        for (int e = 0; e < kN; ++e) acc[n] += to_f(wv[u].v[e]) * to_f(xv.v[e]);
      }
    }
  }
  for (; c < nvec; c += 32) {
    V wv;
    wv.raw = __ldcs(wr + c);
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      V xv;
      xv.raw = reinterpret_cast<const uint4*>(x + n * k)[c];
#pragma unroll
      for (int e = 0; e < kN; ++e) acc[n] += to_f(wv.v[e]) * to_f(xv.v[e]);
    }
  }
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    float v = acc[n];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) out[n * m + row] = from_f<T>(v + (bias ? to_f(bias[row]) : 0.f));
  }
}

template <typename T>
void launch_typed(const LinearParams& p, int64_t n, int64_t k, int64_t m, cudaStream_t stream) {
  const T* bias = p.bias.empty() ? nullptr : p.bias.ptr<T>();
  const unsigned grid = static_cast<unsigned>((m + kWarps - 1) / kWarps);
  const T* x = p.x.ptr<T>();
  const T* w = p.w.ptr<T>();
  T* o = p.out.ptr<T>();
  switch (n) {
    case 1: gemv_kernel<T, 1><<<grid, kWarps * 32, 0, stream>>>(x, w, bias, o, k, m); break;
    case 2: gemv_kernel<T, 2><<<grid, kWarps * 32, 0, stream>>>(x, w, bias, o, k, m); break;
    case 3: gemv_kernel<T, 3><<<grid, kWarps * 32, 0, stream>>>(x, w, bias, o, k, m); break;
    default: gemv_kernel<T, 4><<<grid, kWarps * 32, 0, stream>>>(x, w, bias, o, k, m); break;
  }
  check_launch("gemv");
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool launch_gemv_small_n(const LinearParams& p, cudaStream_t stream) {
  const int64_t m = p.w.dim(0), k = p.w.dim(1), n = p.x.numel() / k;
  const DType t = p.x.dtype;
  if (n < 1 || n > 4 || k % 8 != 0 || (t != DType::kBF16 && t != DType::kF16)) return false;
  // Past ~64M weights (gate_up 4096x24576) cuBLASLt streamed slightly faster on the H200 (run 4).
  if (m * k > (int64_t{64} << 20)) return false;
  if (!p.bias.empty() && p.bias.dtype != t) return false;
  if (!aligned16(p.x.data) || !aligned16(p.w.data)) return false;
  if (t == DType::kBF16) launch_typed<__nv_bfloat16>(p, n, k, m, stream);
  else launch_typed<__half>(p, n, k, m, stream);
  return true;
}

}  // namespace vireo::cuda
