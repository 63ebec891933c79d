// ggml's block-quantized weight formats (the DTypes kQ4_0 ... kQ6_K: GGUF weights kept packed), decoded
// one block at a time. A row of K values is K / values blocks of `bytes` bytes each, as ggml-quants.c lays
// them out (gguf/gguf_dequant.cc lists every layout). The decoders are inline and written as fixed-length
// loops over contiguous bytes so that a kernel compiled for AVX2 (target_clones) vectorises them; each
// value is computed with the same float operations as gguf/gguf_dequant.cc (ggml's order), so a decoded
// weight is bitwise the value a GGUF load dequantizes to (tests/core/quant_blocks_test.cc checks it).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace vireo::qblocks {

struct Format {
  int64_t values = 0;  // values per block (32 or 256)
  int64_t bytes = 0;   // bytes per block
};

constexpr Format format(DType t) {
  switch (t) {
    case DType::kQ4_0: return {32, 18};
    case DType::kQ4_1: return {32, 20};
    case DType::kQ5_0: return {32, 22};
    case DType::kQ5_1: return {32, 24};
    case DType::kQ8_0: return {32, 34};
    case DType::kQ2_K: return {256, 84};
    case DType::kQ3_K: return {256, 110};
    case DType::kQ4_K: return {256, 144};
    case DType::kQ5_K: return {256, 176};
    case DType::kQ6_K: return {256, 210};
    default: return {1, static_cast<int64_t>(dtype_size(t))};
  }
}

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline void decode_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
  for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
}

inline void decode_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
  for (int j = 0; j < 16; ++j) y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
}

// Q5_0 / Q5_1: the fifth bit of value j is bit j of qh.
template <bool kHasMin>
inline void decode_q5(const uint8_t* b, float* y) {
  const float d = half_at(b), m = kHasMin ? half_at(b + 2) : 0.0f;
  const uint8_t* p = b + (kHasMin ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    y[j] = kHasMin ? static_cast<float>(lo) * d + m : static_cast<float>(lo - 16) * d;
  }
  for (int j = 0; j < 16; ++j) {
    const int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j + 16] = kHasMin ? static_cast<float>(hi) * d + m : static_cast<float>(hi - 16) * d;
  }
}

inline void decode_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// K-quants' 12 scale bytes: eight 6-bit scales and mins (gguf_dequant.cc, k_scale_min).
inline void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: pairs of 32-value sub-blocks share 32 bytes of qs (low nibbles, then high).
template <bool kFiveBit>
inline void decode_qk(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFiveBit ? 48 : 16);
  for (int pair = 0; pair < 4; ++pair) {
    int sc0, m0, sc1, m1;
    k_scale_min(2 * pair, scales, sc0, m0);
    k_scale_min(2 * pair + 1, scales, sc1, m1);
    const float d0 = d * sc0, min0 = dmin * m0, d1 = d * sc1, min1 = dmin * m1;
    const uint8_t* q = qs + 32 * pair;
    float* o = y + 64 * pair;
    for (int l = 0; l < 32; ++l) {
      const int lo = (q[l] & 0xF) | (kFiveBit ? ((qh[l] >> (2 * pair)) & 1) << 4 : 0);
      o[l] = d0 * static_cast<float>(lo) - min0;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = (q[l] >> 4) | (kFiveBit ? ((qh[l] >> (2 * pair + 1)) & 1) << 4 : 0);
      o[l + 32] = d1 * static_cast<float>(hi) - min1;
    }
  }
}

// Q6_K: two halves of 128; value l + 32k of a half (l < 32, k < 4) takes 4 bits of ql (k odd: byte l + 32;
// k >= 2: the high nibble) and bits 2k of qh[l]; its scale is sc[l / 16 + 2k] of the half.
inline void decode_q6_k(const uint8_t* b, float* y) {
  const float d = half_at(b + 208);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
    float* o = y + 128 * half;
    for (int k = 0; k < 4; ++k) {
      const uint8_t* q = ql + (k & 1) * 32;
      const int shift = (k >> 1) * 4;
      for (int s = 0; s < 2; ++s) {
        const int scale = sc[s + 2 * k];
        for (int l = 16 * s; l < 16 * s + 16; ++l) {
          const int v = (((q[l] >> shift) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
          o[32 * k + l] = d * scale * v;
        }
      }
    }
  }
}

// Q2_K: value i in half n = i / 128, group j = (i % 128) / 32 (2 bits at shift 2j of qs[32n + i % 32]),
// sub-block i / 16 (4-bit scale and min).
inline void decode_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int s = 0; s < 2; ++s) {
        const int sc = scales[8 * n + 2 * j + s];
        const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 16 * s; l < 16 * s + 16; ++l) {
          const int q = (qs[32 * n + l] >> (2 * j)) & 3;
          y[128 * n + 32 * j + l] = dl * q - ml;
        }
      }
}

// Q3_K: as Q2_K's geometry plus a third bit in hmask[i % 32] at bit 4n + j (clear: subtract 4), and 16
// signed 6-bit scales.
inline void decode_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* packed = b + 96;
  const float d = half_at(b + 108);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int s = 0; s < 2; ++s) {
        const int sub = 8 * n + 2 * j + s;
        const int scale =
            (((packed[sub % 8] >> (4 * (sub / 8))) & 0xF) | (((packed[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4)) - 32;
        const float dl = d * scale;
        for (int l = 16 * s; l < 16 * s + 16; ++l) {
          const int q = (qs[32 * n + l] >> (2 * j)) & 3;
          const int high = (hmask[l] >> (4 * n + j)) & 1;
          y[128 * n + 32 * j + l] = dl * (q - (high ? 0 : 4));
        }
      }
}

// One block of type t at b into y[format(t).values]. t must be one of the block types.
inline void decode(DType t, const uint8_t* b, float* y) {
  switch (t) {
    case DType::kQ4_0: return decode_q4_0(b, y);
    case DType::kQ4_1: return decode_q4_1(b, y);
    case DType::kQ5_0: return decode_q5<false>(b, y);
    case DType::kQ5_1: return decode_q5<true>(b, y);
    case DType::kQ8_0: return decode_q8_0(b, y);
    case DType::kQ2_K: return decode_q2_k(b, y);
    case DType::kQ3_K: return decode_q3_k(b, y);
    case DType::kQ4_K: return decode_qk<false>(b, y);
    case DType::kQ5_K: return decode_qk<true>(b, y);
    case DType::kQ6_K: return decode_q6_k(b, y);
    default: return;
  }
}

}  // namespace vireo::qblocks
