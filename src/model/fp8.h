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

}  // namespace vireo
