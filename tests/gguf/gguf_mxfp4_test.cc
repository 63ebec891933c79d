// ggml's MXFP4 blocks repacked into the HF layout (gguf/gguf_mxfp4.h): every byte of random blocks, scales
// 0-255 among them, decodes through the HF reading (model/mxfp4.h) to what ggml's dequantization gives,
// and one block placed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gguf/gguf_dequant.h"
#include "gguf/gguf_mxfp4.h"
#include "model/mxfp4.h"

namespace vireo {
namespace {

TEST(GgufMxfp4, RepackedBlocksDecodeAsGgmlDequantizes) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t num_blocks = 512;
  std::vector<uint8_t> ggml(size_t(num_blocks * 17));
  for (auto& b : ggml) b = static_cast<uint8_t>(byte(rng));
  for (int64_t b = 0; b < 256; ++b) ggml[b * 17] = static_cast<uint8_t>(b);  // every scale byte
  std::vector<float> want(size_t(num_blocks * 32)), got(want.size());
  dequantize(39, ggml.data(), want.data(), num_blocks * 32);
  std::vector<uint8_t> blocks(static_cast<size_t>(num_blocks * 16)), scales(static_cast<size_t>(num_blocks));
  repack_ggml_mxfp4(ggml.data(), num_blocks, blocks.data(), scales.data());
  mxfp4_dequantize(blocks.data(), scales.data(), 1, num_blocks, got.data());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << i;  // -0 (HF's nibble 8) == +0 (ggml's)
  }
}

TEST(GgufMxfp4, NibblesMoveToElementOrder) {
  std::vector<uint8_t> ggml(17);
  ggml[0] = 121;
  for (int j = 0; j < 16; ++j) ggml[1 + j] = static_cast<uint8_t>((j & 0x0F) | (((j + 3) & 0x0F) << 4));
  uint8_t blocks[16], scale = 0;
  repack_ggml_mxfp4(ggml.data(), 1, blocks, &scale);
  EXPECT_EQ(scale, 121);
  auto nibble = [&](int i) { return i % 2 ? blocks[i / 2] >> 4 : blocks[i / 2] & 0x0F; };  // HF element i
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(nibble(i), i) << i;                 // ggml value i: qs[i]'s low nibble
    EXPECT_EQ(nibble(16 + i), (i + 3) & 0x0F) << i;  // ggml value 16 + i: qs[i]'s high nibble
  }
}

}  // namespace
}  // namespace vireo
