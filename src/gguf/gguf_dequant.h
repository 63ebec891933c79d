// Dequantization of ggml tensor data to float, block by block as ggml-quants.c lays blocks out.
// GGUF weights not kept packed (core/quant_blocks.h, the CPU linear) are expanded at load into the model's dtype.
#pragma once
#include <cstdint>
#include <string>

namespace vireo {

// True for the types dequantize() handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, MXFP4,
// IQ4_NL and IQ4_XS.
bool ggml_can_dequantize(uint32_t type_id);
std::string ggml_dequantizable_types();  // the list above, for error messages

// Writes n values (a multiple of the type's block size) of `type_id` data at src to dst.
// Large tensors are split over threads by whole blocks; the result does not depend on the split.
void dequantize(uint32_t type_id, const uint8_t* src, float* dst, int64_t n);

}  // namespace vireo
