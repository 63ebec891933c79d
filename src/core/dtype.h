// Element types of tensors and the scalar conversions every backend shares.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace vireo {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "F32", "F16", "BF16", ... (safetensors spelling)
// Parses safetensors names ("F32", "BF16") and vLLM --dtype names ("float32", "bfloat16", "half").
// Throws vireo::Error on anything else.
DType parse_dtype(std::string_view name);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements of src (F32/F16/BF16) to float.
void convert_to_f32(const void* src, DType src_dtype, float* dst, size_t n);

}  // namespace vireo
