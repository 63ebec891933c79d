// Device-side scalar helpers: load/store any activation type as float, 16-byte vectors.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/error.h"

namespace vireo::cuda {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

// One element of an FP8 KV cache (--kv-cache-dtype fp8): an E4M3 code of the value itself (scale 1).
struct KvFp8 {
  uint8_t bits;
};
__device__ __forceinline__ float to_f(KvFp8 x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
}

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
// Nearest E4M3 code, ties to even, saturating at +-448: the host's f32_to_fp8_e4m3 (core/fp8.h).
template <>
__device__ __forceinline__ KvFp8 from_f<KvFp8>(float x) {
  return KvFp8{static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))};
}

// 16 E4M3 codes (a 16-byte chunk of an FP8 cache row) as 16 halves in lo (codes 0-7) and hi (8-15):
// every E4M3 value is exact in f16, one conversion a pair.
__device__ __forceinline__ void fp8x16_to_half16(const uint4& raw, uint4& lo, uint4& hi) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
  unsigned h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const __half2_raw p = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    h[i] = static_cast<unsigned>(p.x) | (static_cast<unsigned>(p.y) << 16);
  }
  lo = make_uint4(h[0], h[1], h[2], h[3]);
  hi = make_uint4(h[4], h[5], h[6], h[7]);
}

// 16 bytes of T: 4 floats or 8 halves.
template <typename T>
struct Vec {
  static constexpr int kN = 16 / sizeof(T);
  union {
    uint4 raw;
    T v[kN];
  };
};

// Calls f(C{}) with C the element type of a KV cache of dtype t whose activations are T: T, or KvFp8.
template <typename T, typename F>
void dispatch_cache(DType t, F&& f) {
  if (t == DType::kF8E4M3) f(KvFp8{});
  else f(T{});
}

// Calls f(T{}) with T the C++ type of a float dtype.
template <typename F>
void dispatch_float(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); return;
    case DType::kF16: f(__half{}); return;
    case DType::kBF16: f(__nv_bfloat16{}); return;
    default: throw Error(std::string(what) + ": unsupported dtype " + std::string(dtype_name(t)));
  }
}

}  // namespace vireo::cuda
