// Block layouts (all little-endian, `half` = IEEE fp16):
//   Q4_0 {half d; u8 qs[16]}            x = (nibble - 8) * d; low nibbles are values 0..15, high 16..31
//   Q4_1 {half d, m; u8 qs[16]}         x = nibble * d + m
//   Q5_0 {half d; u32 qh; u8 qs[16]}    fifth bit of value j in qh bit j; x = (q5 - 16) * d
//   Q5_1 {half d, m; u32 qh; u8 qs[16]} x = q5 * d + m
//   Q8_0 {half d; i8 qs[32]}            x = q * d
//   Q4_K {half d, dmin; u8 scales[12]; u8 qs[128]}              8 sub-blocks of 32 with 6-bit scale/min
//   Q5_K {half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}   as Q4_K plus a fifth bit per value
//   Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d}         16 sub-blocks of 16, x = (q6 - 32) * d * scale
//   Q2_K {u8 scales[16]; u8 qs[64]; half d, dmin}               16 sub-blocks of 16, 4-bit scale and min
//   Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d}       16 sub-blocks of 16, 6-bit signed scales
//   MXFP4 {u8 e; u8 qs[16]}  x = kvalues[nibble] * 2^(e - 128) (E2M1 values doubled, the E8M0 scale halved);
//                            low nibbles are values 0..15, high 16..31 (GPT-OSS's experts)
// Each value is computed with the float operations in ggml's order, so results equal ggml's bitwise.
#include "gguf/gguf_dequant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf_types.h"

namespace vireo {
namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void block_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void block_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0 / Q5_1: the 4-bit part as Q4, bit j of qh is the fifth bit of value j (j < 32).
template <bool kHasMin>
void block_q5(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* p = b + (kHasMin ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    if (kHasMin) {
      const float m = half_at(b + 2);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    } else {
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

void block_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

void block_mxfp4(const uint8_t* b, float* y) {
  static constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const float d = std::ldexp(1.0f, static_cast<int>(b[0]) - 128);  // ggml_e8m0_to_fp32_half, exactly
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kValues[qs[j] & 0xF]) * d;
    y[j + 16] = static_cast<float>(kValues[qs[j] >> 4]) * d;
  }
}

// The 12 bytes of K-quant scales hold eight 6-bit scales and eight 6-bit mins: sub-blocks 0-3 in
// the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 in the nibbles of bytes
// 8-11 with their top two bits in the spare high bits of bytes 0-7.
void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K (no qh) and Q5_K: pairs of sub-blocks share 32 bytes of qs (low nibbles, then high).
template <bool kFiveBit>
void block_qk(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFiveBit ? 48 : 16);
  for (int pair = 0; pair < 4; ++pair) {
    int sc0, m0, sc1, m1;
    k_scale_min(2 * pair, scales, sc0, m0);
    k_scale_min(2 * pair + 1, scales, sc1, m1);
    const float d0 = d * sc0, min0 = dmin * m0, d1 = d * sc1, min1 = dmin * m1;
    for (int l = 0; l < 32; ++l) {
      int lo = qs[l] & 0xF, hi = qs[l] >> 4;
      if (kFiveBit) {
        lo += ((qh[l] >> (2 * pair)) & 1) << 4;
        hi += ((qh[l] >> (2 * pair + 1)) & 1) << 4;
      }
      y[l] = d0 * static_cast<float>(lo) - min0;
      y[l + 32] = d1 * static_cast<float>(hi) - min1;
    }
    qs += 32;
    y += 64;
  }
}

// Q6_K: two halves of 128 values; in each, value l + 32 * k (k < 4) takes 4 bits from ql and 2 bits
// from qh[l], and sub-block scale (l / 16) + 2 * k.
void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[s] * q0;
      y[l + 32] = d * sc[s + 2] * q1;
      y[l + 64] = d * sc[s + 4] * q2;
      y[l + 96] = d * sc[s + 6] * q3;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// Q2_K and Q3_K share a geometry: value i sits in half n = i / 128, group j = (i % 128) / 32
// (its 2 bits at shift 2j of qs[32n + i % 32]), and sub-block i / 16 gives its scale.
void block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int i = 0; i < 256; ++i) {
    const int n = i / 128, j = (i % 128) / 32;
    const int q = (qs[32 * n + i % 32] >> (2 * j)) & 3;
    const int sc = scales[i / 16];
    const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
    y[i] = dl * q - ml;
  }
}

// Q3_K: a third bit per value in hmask[i % 32] at bit 4n + j (clear means subtract 4), and 16
// 6-bit scales: low nibbles in bytes 0-7 (scales 8-15 in the high nibbles), top two bits in
// bytes 8-11 (byte 8 + s % 4, bit pair s / 4).
void block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* packed = b + 96;
  const float d = half_at(b + 108);
  int scales[16];
  for (int s = 0; s < 16; ++s)
    scales[s] = (((packed[s % 8] >> (4 * (s / 8))) & 0xF) | (((packed[8 + s % 4] >> (2 * (s / 4))) & 3) << 4)) - 32;
  for (int i = 0; i < 256; ++i) {
    const int n = i / 128, j = (i % 128) / 32;
    const int q = (qs[32 * n + i % 32] >> (2 * j)) & 3;
    const int high = (hmask[i % 32] >> (4 * n + j)) & 1;
    const float dl = d * scales[i / 16];
    y[i] = dl * (q - (high ? 0 : 4));
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_0: return block_q4_0;
    case GgmlType::kQ4_1: return block_q4_1;
    case GgmlType::kQ5_0: return block_q5<false>;
    case GgmlType::kQ5_1: return block_q5<true>;
    case GgmlType::kQ8_0: return block_q8_0;
    case GgmlType::kQ2_K: return block_q2_k;
    case GgmlType::kQ3_K: return block_q3_k;
    case GgmlType::kQ4_K: return block_qk<false>;
    case GgmlType::kQ5_K: return block_qk<true>;
    case GgmlType::kQ6_K: return block_q6_k;
    case GgmlType::kMXFP4: return block_mxfp4;
    default: return nullptr;
  }
}

// Values [begin, end) (whole blocks) of src into dst.
void dequantize_range(uint32_t type, const uint8_t* src, float* dst, int64_t begin, int64_t end) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      std::memcpy(dst + begin, src + begin * 4, (end - begin) * 4);
      return;
    case GgmlType::kF16:
      convert_to_f32(src + begin * 2, DType::kF16, dst + begin, end - begin);
      return;
    case GgmlType::kBF16:
      convert_to_f32(src + begin * 2, DType::kBF16, dst + begin, end - begin);
      return;
    default:
      break;
  }
  const GgmlTypeTraits tr = ggml_type_traits(type);
  const BlockFn fn = block_fn(type);
  for (int64_t i = begin / tr.block_size; i < end / tr.block_size; ++i)
    fn(src + i * tr.type_size, dst + i * tr.block_size);
}

}  // namespace

bool ggml_can_dequantize(uint32_t type) {
  const auto t = static_cast<GgmlType>(type);
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16 || block_fn(type) != nullptr;
}

std::string ggml_dequantizable_types() {
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4";
}

void dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  if (!ggml_can_dequantize(type)) throw Error("dequantize: unsupported ggml type " + ggml_type_name(type));
  const int64_t bs = ggml_type_traits(type).block_size;
  if (n % bs != 0) throw Error("dequantize: " + std::to_string(n) + " values is not whole " + ggml_type_name(type) + " blocks");
  const int64_t num_blocks = n / bs;
  const int nt = static_cast<int>(
      std::clamp<int64_t>(n / (1 << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  if (nt == 1) {
    dequantize_range(type, src, dst, 0, n);
    return;
  }
  std::vector<std::thread> threads;
  const int64_t per = (num_blocks + nt - 1) / nt;
  for (int t = 0; t < nt; ++t) {
    const int64_t b = t * per * bs, e = std::min(num_blocks, (t + 1) * per) * bs;
    if (b < e) threads.emplace_back(dequantize_range, type, src, dst, b, e);
  }
  for (auto& th : threads) th.join();
}

}  // namespace vireo
