#include "model/fp8.h"

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

}  // namespace vireo
