#include "model/mxfp4.h"

#include <cmath>

namespace vireo {
namespace {

// ldexp(E2M1[n], s - 127) for every scale byte s and nibble n (16 KiB): one lookup a value instead of an
// ldexp, the same floats.
struct Mxfp4Table {
  float v[256][16];
  Mxfp4Table() {
    static constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    for (int s = 0; s < 256; ++s)
      for (int n = 0; n < 16; ++n) v[s][n] = std::ldexp(kE2M1[n], s - 127);
  }
};

}  // namespace

void mxfp4_dequantize(const uint8_t* blocks, const uint8_t* scales, int64_t num_rows, int64_t num_groups, float* out) {
  static const Mxfp4Table table;
  for (int64_t g = 0; g < num_rows * num_groups; ++g) {
    const float* t = table.v[scales[g]];
    const uint8_t* b = blocks + g * 16;
    float* o = out + g * 32;
    for (int j = 0; j < 16; ++j) {
      o[2 * j] = t[b[j] & 0x0F];
      o[2 * j + 1] = t[b[j] >> 4];
    }
  }
}

}  // namespace vireo
