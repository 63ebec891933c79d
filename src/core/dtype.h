// Element types of tensors and the scalar conversions every backend shares.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace vireo {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kI32, kI64, kU8,
  // FP8 E4M3FN (OCP; torch.float8_e4m3fn). As a linear's weight (--quantization fp8) it carries one F32
  // dequantization scale per row in Tensor::row_scale: value = fp8 x scale[row].
  kF8E4M3,
  // ggml's block-quantized formats (GGUF weights kept packed, core/quant_blocks.h): a row's values are
  // stored as blocks of 32 or 256 values, so these have no per-element size.
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,
};

// Bytes per element; 0 for the block types (use dtype_row_bytes).
size_t dtype_size(DType t);
bool dtype_is_blocked(DType t);
// Bytes of n consecutive values (n a multiple of the block size for the block types).
size_t dtype_row_bytes(DType t, int64_t n);
std::string_view dtype_name(DType t);  // "F32", "F16", "BF16", ... (safetensors spelling), "Q4_K", ...
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
