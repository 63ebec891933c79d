// MXFP4 (OCP microscaling FP4), as GPT-OSS's checkpoints store their experts: blocks of 32 E2M1 values
// in 16 bytes (byte j: element 2j in the low nibble, 2j + 1 in the high one) sharing one E8M0 scale
// 2^(s - 127).
#pragma once
#include <cstdint>

namespace vireo {

// out[r, g * 32 + i] = fp4(blocks[r, g, i / 2] nibble i % 2) * 2^(scales[r, g] - 127), for rows r < num_rows
// and groups g < num_groups: blocks [num_rows, num_groups, 16], scales [num_rows, num_groups], out
// [num_rows, num_groups * 32].
void mxfp4_dequantize(const uint8_t* blocks, const uint8_t* scales, int64_t num_rows, int64_t num_groups, float* out);

}  // namespace vireo
