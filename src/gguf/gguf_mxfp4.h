// ggml's MXFP4 blocks repacked into the layout GPT-OSS's HF checkpoints (and MoeParams) use, so GGUF experts
// can stay packed. ggml's block is 17 bytes {u8 e; u8 qs[16]} with value j < 16 in qs[j]'s low nibble and
// value j + 16 in its high one, read as (2 * E2M1) * 2^(e - 128); HF's keeps a row's scales apart and
// packs values 2j, 2j + 1 into byte j's low / high nibble, read as E2M1 * 2^(e - 127): the same value,
// so nibbles and scale bytes carry over unchanged.
#pragma once
#include <cstdint>

namespace vireo {

// num_blocks ggml MXFP4 blocks at src -> blocks [num_blocks, 16] and scales [num_blocks].
void repack_ggml_mxfp4(const uint8_t* src, int64_t num_blocks, uint8_t* blocks, uint8_t* scales);

}  // namespace vireo
