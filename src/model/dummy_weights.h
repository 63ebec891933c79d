// --load-format dummy: reproducible random weights. Each value depends only on
// (seed, tensor name, index), so results do not depend on thread count or load order.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace vireo {

// Fills host memory `out` (F32/F16/BF16) with uniform values of standard deviation `stddev`
// (mean 0), or with `stddev` == 0: all ones (norm weights). Multi-threaded.
void fill_dummy(Tensor& out, uint64_t seed, const std::string& name, float stddev);
// Fills n bytes at out with integers uniform in [lo, hi], each from (seed, name, index) alone (MXFP4
// blocks and scales of dummy experts).
void fill_dummy_bytes(uint8_t* out, int64_t n, uint64_t seed, const std::string& name, int lo, int hi);
// Fills `out` (a block type, DType kQ4_0 ... kQ6_K) with random quants and every block's fp16 scales set
// so that values spread about `stddev` (for speed runs of packed GGUF weights: VIREO_DUMMY_QUANT).
void fill_dummy_blocks(Tensor& out, uint64_t seed, const std::string& name, float stddev);

}  // namespace vireo
