// Dequantization against blocks assembled by hand from ggml-quants.c's block layouts: known
// scales, mins and quants go in, value = scale * q - min comes out, for every element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_dequant.h"

namespace vireo {
namespace {

void put_half(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(&b[at], &h, 2);
}

std::vector<float> run(uint32_t type, const std::vector<uint8_t>& block, int64_t n) {
  std::vector<float> y(n, -12345.0f);
  dequantize(type, block.data(), y.data(), n);
  return y;
}

TEST(GgufDequant, Q4_0) {
  std::vector<uint8_t> b(18);
  put_half(b, 0, 0.5f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = run(2, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;              // low nibbles: values 0..15
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;    // high nibbles: values 16..31
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(GgufDequant, Q8_0) {
  std::vector<uint8_t> b(34);
  put_half(b, 0, 0.25f);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  auto y = run(8, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.25f) << j;
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[31], 30.0f);
}

TEST(GgufDequant, MXFP4) {
  // {u8 e; u8 qs[16]}: kvalues (E2M1 doubled) times 2^(e - 128); low nibbles values 0..15, high 16..31.
  const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int e : {0, 1, 120, 127, 130}) {
    std::vector<uint8_t> b(17);
    b[0] = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = run(39, b, 32);
    const float d = std::ldexp(1.0f, e - 128);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], kv[j] * d) << e << " " << j;
      EXPECT_EQ(y[j + 16], kv[15 - j] * d) << e << " " << j;
    }
  }
  std::vector<uint8_t> b(17, 0);
  b[0] = 127;  // scale 1/2: nibble 7 (12) is 6.0, the largest E2M1 value; nibble 15 (-12) is -6.0
  b[1] = 0xF7;
  auto y = run(39, b, 32);
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[16], -6.0f);
}

// Packs eight 6-bit scales and mins into the 12 bytes of a K-quant block.
void pack_k_scales(uint8_t* q, const int* sc, const int* m) {
  std::memset(q, 0, 12);
  for (int k = 0; k < 4; ++k) {
    q[k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    q[k + 4] = static_cast<uint8_t>(m[k] | ((m[k + 4] >> 4) << 6));
    q[k + 8] = static_cast<uint8_t>((sc[k + 4] & 15) | ((m[k + 4] & 15) << 4));
  }
}

constexpr int kSc[8] = {1, 2, 3, 63, 17, 33, 48, 5};
constexpr int kMin[8] = {0, 1, 2, 3, 60, 20, 40, 63};
int q4_of(int i) { return (i * 7 + i / 32) % 16; }   // value i's 4-bit quant
int hi_bit_of(int i) { return (i * 13 / 7) % 2; }      // value i's fifth bit (Q5_K)

// Q4_K / Q5_K: sub-block s = i / 32 of a 256-value block; pairs of sub-blocks share 32 bytes of qs.
std::vector<uint8_t> k_block(bool five_bit, float d, float dmin) {
  std::vector<uint8_t> b(five_bit ? 176 : 144, 0);
  put_half(b, 0, d);
  put_half(b, 2, dmin);
  pack_k_scales(&b[4], kSc, kMin);
  uint8_t* qh = &b[16];
  uint8_t* qs = &b[five_bit ? 48 : 16];
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32, l = i % 32, pair = s / 2;
    qs[pair * 32 + l] |= static_cast<uint8_t>(q4_of(i) << (s % 2 ? 4 : 0));
    if (five_bit) qh[l] |= static_cast<uint8_t>(hi_bit_of(i) << s);
  }
  return b;
}

TEST(GgufDequant, Q4_K) {
  const float d = 0.5f, dmin = 0.25f;
  auto y = run(12, k_block(false, d, dmin), 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], d * kSc[s] * q4_of(i) - dmin * kMin[s]) << i;
  }
  EXPECT_EQ(y[0], 0.0f);                         // q 0, scale 1, min 0
  EXPECT_EQ(y[160], 0.5f * 33 * q4_of(160) - 0.25f * 20);  // sub-block 5: high bits in bytes 1 and 5
}

TEST(GgufDequant, Q5_K) {
  const float d = 0.125f, dmin = 1.0f;
  auto y = run(13, k_block(true, d, dmin), 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], d * kSc[s] * (q4_of(i) + 16 * hi_bit_of(i)) - dmin * kMin[s]) << i;
  }
}

TEST(GgufDequant, Q6_K) {
  std::vector<uint8_t> b(210, 0);
  const int8_t sc[16] = {1, -2, 3, -4, 5, 127, -128, 8, 9, 10, -11, 12, 13, 14, 15, 16};
  std::memcpy(&b[192], sc, 16);
  put_half(b, 208, 0.5f);
  auto q6_of = [](int i) { return (i * 11 + 5) % 64; };
  for (int i = 0; i < 256; ++i) {
    // Half h of 128 values; value 32k + l of a half: 4 low bits in ql (k = 0, 1 low nibbles of
    // ql[l], ql[l + 32]; k = 2, 3 their high nibbles), 2 high bits at bits 2k of qh[l].
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const int q = q6_of(i);
    b[64 * h + l + (k % 2) * 32] |= static_cast<uint8_t>((q & 15) << (k >= 2 ? 4 : 0));
    b[128 + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
  auto y = run(14, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.5f * sc[i / 16] * (q6_of(i) - 32)) << i;
}

// Q2_K / Q3_K: value i is in half n = i / 128 and group j = (i % 128) / 32; its 2 bits sit at
// shift 2j of qs[32n + i % 32]; sub-block i / 16 holds its scale.
void put_q2(uint8_t* qs, int i, int q) { qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>(q << (2 * ((i % 128) / 32))); }

TEST(GgufDequant, Q2_K) {
  std::vector<uint8_t> b(84, 0);
  auto q2_of = [](int i) { return (i * 3 + i / 64) % 4; };
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>((s % 16) | (((15 - s) % 16) << 4));  // scale s, min 15 - s
  for (int i = 0; i < 256; ++i) put_q2(&b[16], i, q2_of(i));
  put_half(b, 80, 0.5f);
  put_half(b, 82, 0.25f);
  auto y = run(10, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.5f * (i / 16) * q2_of(i) - 0.25f * (15 - i / 16)) << i;
  EXPECT_EQ(y[0], -3.75f);  // scale 0, min 15
}

TEST(GgufDequant, Q3_K) {
  std::vector<uint8_t> b(110, 0);
  // 6-bit scales (stored + 32): low nibbles in bytes 0-7 (scales 8-15 in the high nibbles), the top
  // two bits of scale s in byte 8 + s % 4 at bit pair s / 4.
  const int sc[16] = {-32, -1, 0, 1, 31, 5, -7, 12, 20, -20, 9, -9, 3, -3, 15, -15};
  for (int s = 0; s < 16; ++s) {
    const int u = sc[s] + 32;
    b[96 + s % 8] |= static_cast<uint8_t>((u & 15) << (4 * (s / 8)));
    b[96 + 8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
  }
  put_half(b, 108, 0.25f);
  auto q3_of = [](int i) { return (i * 5 + i / 32) % 8; };  // 0..7; the stored value is q3 - 4
  for (int i = 0; i < 256; ++i) {
    put_q2(&b[32], i, q3_of(i) & 3);
    if (q3_of(i) & 4) b[i % 32] |= static_cast<uint8_t>(1 << (4 * (i / 128) + (i % 128) / 32));  // hmask
  }
  auto y = run(11, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.25f * sc[i / 16] * (q3_of(i) - 4)) << i;
  EXPECT_EQ(y[0], 0.25f * -32 * -4);
}

// IQ4_NL / IQ4_XS: nibbles index ggml's non-linear codebook, times the block's (sub-block's) scale.
constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(GgufDequant, IQ4_NL) {
  std::vector<uint8_t> b(18);
  put_half(b, 0, 0.5f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = run(20, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kIq4[j]) << j;
    EXPECT_EQ(y[j + 16], 0.5f * kIq4[15 - j]) << j;
  }
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
}

TEST(GgufDequant, IQ4_XS) {
  std::vector<uint8_t> b(136);
  put_half(b, 0, 0.25f);
  // Sub-block ib's 6-bit scale ls = 32 + 3 * ib - 10: low 4 bits in scales_l (two a byte), high 2 in scales_h.
  auto ls_of = [](int ib) { return 32 + 3 * ib - 10; };
  uint16_t scales_h = 0;
  for (int ib = 0; ib < 8; ++ib) {
    b[4 + ib / 2] |= static_cast<uint8_t>((ls_of(ib) & 0xF) << (4 * (ib % 2)));
    scales_h |= static_cast<uint16_t>((ls_of(ib) >> 4) << (2 * ib));
  }
  std::memcpy(&b[2], &scales_h, 2);
  auto nib = [](int i) { return (i * 7 + i / 32) & 0xF; };  // value i's code
  for (int i = 0; i < 256; ++i) {
    const int ib = i / 32, j = i % 32;
    uint8_t& q = b[8 + 16 * ib + j % 16];
    q |= static_cast<uint8_t>(nib(i) << (j < 16 ? 0 : 4));
  }
  auto y = run(23, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.25f * (ls_of(i / 32) - 32) * kIq4[nib(i)]) << i;
  EXPECT_EQ(y[0], 0.25f * -10 * -127);
  EXPECT_TRUE(ggml_can_dequantize(20));
  EXPECT_TRUE(ggml_can_dequantize(23));
}

TEST(GgufDequant, FloatTypesAndManyThreadsMatchOneBlockAtATime) {
  // 2^21 Q8_0 values take the multi-threaded path; each block must equal its own dequantization.
  const int64_t n = int64_t{1} << 21;
  std::vector<uint8_t> data(n / 32 * 34);
  std::mt19937 rng(7);
  for (auto& x : data) x = static_cast<uint8_t>(rng());
  for (int64_t blk = 0; blk < n / 32; ++blk) put_half(data, blk * 34, 0.001f * (blk % 100));
  std::vector<float> all(n), one(32);
  dequantize(8, data.data(), all.data(), n);
  for (int64_t blk = 0; blk < n / 32; blk += 997) {
    dequantize(8, data.data() + blk * 34, one.data(), 32);
    ASSERT_EQ(0, std::memcmp(one.data(), &all[blk * 32], 32 * sizeof(float))) << blk;
  }
  const uint16_t bf = f32_to_bf16(-2.5f), hf = f32_to_f16(0.75f);
  float out;
  dequantize(30, reinterpret_cast<const uint8_t*>(&bf), &out, 1);
  EXPECT_EQ(out, -2.5f);
  dequantize(1, reinterpret_cast<const uint8_t*>(&hf), &out, 1);
  EXPECT_EQ(out, 0.75f);
  EXPECT_FALSE(ggml_can_dequantize(16));  // IQ2_XXS
}

}  // namespace
}  // namespace vireo
