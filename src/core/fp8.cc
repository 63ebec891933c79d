#include "core/fp8.h"

#include <cstring>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace vireo {
namespace {

// Sign, then `exp_bits` exponent and `man_bits` mantissa bits; subnormals where the exponent field is 0.
float decode(uint8_t v, int exp_bits, int man_bits, int bias) {
  const int man = v & ((1 << man_bits) - 1);
  const int exp = (v >> man_bits) & ((1 << exp_bits) - 1);
  const float sign = (v & 0x80) ? -1.f : 1.f;
  const float frac = static_cast<float>(man) / static_cast<float>(1 << man_bits);
  if (exp == 0) return sign * std::ldexp(frac, 1 - bias);
  return sign * std::ldexp(1.f + frac, exp - bias);
}

std::array<float, 256> make_e4m3() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i)
    t[i] = (i & 0x7F) == 0x7F ? std::numeric_limits<float>::quiet_NaN() : decode(static_cast<uint8_t>(i), 4, 3, 7);
  return t;
}

std::array<float, 256> make_e5m2() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) {
    const int exp = (i >> 2) & 0x1F, man = i & 3;
    if (exp == 0x1F)
      t[i] = man ? std::numeric_limits<float>::quiet_NaN()
                 : ((i & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity());
    else
      t[i] = decode(static_cast<uint8_t>(i), 5, 2, 15);
  }
  return t;
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = make_e4m3();
  return t;
}
const std::array<float, 256>& e5m2_table() {
  static const std::array<float, 256> t = make_e5m2();
  return t;
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t v) { return e4m3_table()[v]; }
float fp8_e5m2_to_f32(uint8_t v) { return e5m2_table()[v]; }

void fp8_dequantize(const Fp8Matrix& m, float* out) {
  const std::array<float, 256>& table = m.e5m2 ? e5m2_table() : e4m3_table();
  const int64_t scale_cols = (m.cols + m.block_cols - 1) / m.block_cols;
  for (int64_t r = 0; r < m.rows; ++r) {
    const uint8_t* w = m.w + r * m.cols;
    const float* s = m.scale + (r / m.block_rows) * scale_cols;
    float* o = out + r * m.cols;
    for (int64_t c0 = 0; c0 < m.cols; c0 += m.block_cols) {
      const float sc = s[c0 / m.block_cols];
      const int64_t c1 = c0 + m.block_cols < m.cols ? c0 + m.block_cols : m.cols;
      for (int64_t c = c0; c < c1; ++c) o[c] = table[w[c]] * sc;
    }
  }
}

uint8_t f32_to_fp8_e4m3(float v) {
  // Bit arithmetic, no libm calls: the encoder runs per value on the CPU's FP8 paths (a KV cache's every
  // K / V element, FP8 weights at load). Checked against a brute-force encoder (fp8_online_test.cc).
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7F;  // NaN
  if (mag >= 0x43E00000u) return sign | 0x7E;  // >= 448: saturate (satfinite), infinity included
  if (mag < 0x3C800000u) {  // below 2^-6: subnormal codes, multiples of 2^-9 (8 x 2^-9 is code 0x08)
    float a;
    std::memcpy(&a, &mag, 4);
    // a * 2^9 < 8 is exact; adding 2^23 rounds it to an integer, ties to even (the default rounding mode).
    const float r = (a * 512.f + 8388608.f) - 8388608.f;
    return sign | static_cast<uint8_t>(r);
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding the 20 dropped bits to nearest, ties to even; a
  // carry into the exponent is the next binade's code. Rebias the exponent from 127 to 7.
  const uint32_t rounded = mag + 0x7FFFFu + ((mag >> 20) & 1u);
  const uint32_t code = (rounded >> 20) - ((127u - 7u) << 3);
  return sign | static_cast<uint8_t>(code >= 0x7F ? 0x7E : code);  // 0x7F is NaN: 448 is the largest
}

void fp8_quantize_rows(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + r * cols;
    float amax = 0.f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float s = fp8_e4m3_scale(amax), inv = 1.f / s;
    scale[r] = s;
    uint8_t* o = q + r * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] = f32_to_fp8_e4m3(x[c] * inv);
  }
}

}  // namespace vireo
