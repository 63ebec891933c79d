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
//   IQ4_NL {half d; u8 qs[16]}  x = d * kIq4Values[nibble] (a fixed non-linear codebook); nibbles as Q4_0
//   IQ4_XS {half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}  8 sub-blocks of 32, each an IQ4_NL block
//                            whose scale is d * (ls - 32), ls 6 bits: 4 from scales_l, 2 from scales_h
// Each value is computed with the float operations in ggml's order, so results equal ggml's bitwise.
#include "gguf/gguf_dequant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "gguf/gguf_types.h"

namespace vireo {
namespace {

// The block types' decoders are core's (core/quant_blocks.h), shared with the CPU kernels that read the
// blocks packed; tests/gguf/gguf_dequant_test.cc checks them on hand-assembled blocks.
template <DType kT>
void block(const uint8_t* b, float* y) {
  qblocks::decode(kT, b, y);
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

// IQ4_NL / IQ4_XS's codebook (ggml's kvalues_iq4nl).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float half_at(const uint8_t* b) {
  uint16_t h;
  std::memcpy(&h, b, 2);
  return f16_to_f32(h);
}

// 32 values of one IQ4_NL-coded sub-block at scale d: low nibbles are values 0..15, high 16..31.
void iq4_values(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
  }
}

void block_iq4_nl(const uint8_t* b, float* y) { iq4_values(b + 2, half_at(b), y); }

void block_iq4_xs(const uint8_t* b, float* y) {
  const float d = half_at(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    iq4_values(qs + 16 * ib, d * static_cast<float>(ls - 32), y + 32 * ib);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_0: return block<DType::kQ4_0>;
    case GgmlType::kQ4_1: return block<DType::kQ4_1>;
    case GgmlType::kQ5_0: return block<DType::kQ5_0>;
    case GgmlType::kQ5_1: return block<DType::kQ5_1>;
    case GgmlType::kQ8_0: return block<DType::kQ8_0>;
    case GgmlType::kQ2_K: return block<DType::kQ2_K>;
    case GgmlType::kQ3_K: return block<DType::kQ3_K>;
    case GgmlType::kQ4_K: return block<DType::kQ4_K>;
    case GgmlType::kQ5_K: return block<DType::kQ5_K>;
    case GgmlType::kQ6_K: return block<DType::kQ6_K>;
    case GgmlType::kMXFP4: return block_mxfp4;
    case GgmlType::kIQ4_NL: return block_iq4_nl;
    case GgmlType::kIQ4_XS: return block_iq4_xs;
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
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4, IQ4_NL, IQ4_XS";
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
