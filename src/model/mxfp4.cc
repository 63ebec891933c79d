#include "model/mxfp4.h"

#include <cmath>

namespace vireo {

void mxfp4_dequantize(const uint8_t* blocks, const uint8_t* scales, int64_t num_rows, int64_t num_groups, float* out) {
  static constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int64_t g = 0; g < num_rows * num_groups; ++g) {
    const int exp = static_cast<int>(scales[g]) - 127;
    const uint8_t* b = blocks + g * 16;
    float* o = out + g * 32;
    for (int j = 0; j < 16; ++j) {
      o[2 * j] = std::ldexp(kE2M1[b[j] & 0x0F], exp);
      o[2 * j + 1] = std::ldexp(kE2M1[b[j] >> 4], exp);
    }
  }
}

}  // namespace vireo
