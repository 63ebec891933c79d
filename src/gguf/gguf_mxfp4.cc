#include "gguf/gguf_mxfp4.h"

namespace vireo {

void repack_ggml_mxfp4(const uint8_t* src, int64_t num_blocks, uint8_t* blocks, uint8_t* scales) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* in = src + b * 17;
    const uint8_t* qs = in + 1;
    uint8_t* out = blocks + b * 16;
    scales[b] = in[0];
    auto nibble = [qs](int i) { return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4; };  // value i of the block
    for (int j = 0; j < 16; ++j) out[j] = static_cast<uint8_t>(nibble(2 * j) | (nibble(2 * j + 1) << 4));
  }
}

}  // namespace vireo
