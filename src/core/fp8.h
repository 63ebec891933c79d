// FP8 values as checkpoints store them (OCP FP8: E4M3FN, the "F8_E4M3" of safetensors and torch's
// float8_e4m3fn: bias 7, no infinities, 0x7F / 0xFF NaN, largest 448; E5M2: IEEE-like, bias 15).
#pragma once
#include <cstdint>

namespace vireo {

float fp8_e4m3_to_f32(uint8_t v);
float fp8_e5m2_to_f32(uint8_t v);

// Block-scaled dequantization of one FP8 matrix: out[r, c] = fp8(w[r, c]) * scale[r / block_rows,
// c / block_cols] for w [rows, cols], scale [ceil(rows / block_rows), ceil(cols / block_cols)] (row-major).
// A per-tensor scale is block_rows = rows, block_cols = cols; a per-channel one block_rows = 1, block_cols = cols.
struct Fp8Matrix {
  const uint8_t* w = nullptr;
  const float* scale = nullptr;
  int64_t rows = 0, cols = 0, block_rows = 1, block_cols = 1;
  bool e5m2 = false;
};
void fp8_dequantize(const Fp8Matrix& m, float* out);

// Nearest E4M3FN code to v, ties to even, saturating at +-448 (CUDA's __nv_cvt_float_to_fp8 with
// __NV_SATFINITE and __NV_E4M3, so the host and the device quantize alike); NaN gives 0x7F.
uint8_t f32_to_fp8_e4m3(float v);

// The dequantization scale of a row (or any vector) whose largest magnitude is amax: amax / 448, so the
// largest value lands on E4M3's largest finite code; an all-zero row gets 1. Device kernels use the same
// formula (fp8_quantize.cu) and quantize each value as f32_to_fp8_e4m3(v * inv), inv = 1 / scale rounded
// once (a multiply an element, as vLLM's scaled_fp8_conversion; the device's division was its bottleneck).
inline float fp8_e4m3_scale(float amax) { return amax > 0.f ? amax / 448.f : 1.f; }

// Per-row quantization of w [rows, cols] (F32) into q [rows, cols] E4M3 codes and scale [rows]:
// q = f32_to_fp8_e4m3(w * (1 / scale[row])), scale = fp8_e4m3_scale(max |w[row, :]|).
void fp8_quantize_rows(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scale);

}  // namespace vireo
