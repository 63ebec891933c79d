#include "core/dtype.h"

#include "core/error.h"
#include "core/fp8.h"
#include "core/quant_blocks.h"

namespace vireo {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF8E4M3: return 1;
    default: return 0;  // block types
  }
}

bool dtype_is_blocked(DType t) { return t >= DType::kQ4_0; }

size_t dtype_row_bytes(DType t, int64_t n) {
  const qblocks::Format f = qblocks::format(t);
  return static_cast<size_t>(n / f.values * f.bytes);
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_1: return "Q4_1";
    case DType::kQ5_0: return "Q5_0";
    case DType::kQ5_1: return "Q5_1";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ2_K: return "Q2_K";
    case DType::kQ3_K: return "Q3_K";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ5_K: return "Q5_K";
    case DType::kQ6_K: return "Q6_K";
  }
  return "?";
}

DType parse_dtype(std::string_view n) {
  if (n == "F32" || n == "float32" || n == "float") return DType::kF32;
  if (n == "F16" || n == "float16" || n == "half") return DType::kF16;
  if (n == "BF16" || n == "bfloat16") return DType::kBF16;
  if (n == "I32" || n == "int32") return DType::kI32;
  if (n == "I64" || n == "int64") return DType::kI64;
  if (n == "U8" || n == "uint8") return DType::kU8;
  throw Error("unsupported dtype '" + std::string(n) + "'");
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

namespace {
// BF16 -> F32 in blocks of 16 (a fixed-length inner loop the compiler vectorises at -O2), with an AVX2
// clone: the CPU backend widens BF16 weight bands for every prefill GEMM through this.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void widen_bf16(const uint16_t* s, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t u = 0; u < 16; ++u) dst[i + u] = bf16_to_f32(s[i + u]);
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}
}  // namespace

void convert_to_f32(const void* src, DType t, float* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16:
      widen_bf16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kF8E4M3: {  // codes as their values (no scale: an FP8 KV cache's)
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    default:
      throw Error("convert_to_f32: unsupported source dtype " + std::string(dtype_name(t)));
  }
}

}  // namespace vireo
