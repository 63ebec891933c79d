// AVX2 decode-row kernels for GGUF block-quantized weights (cpu_linear_blocks_avx2.cc): Q4_0, Q8_0, Q4_K,
// Q5_K, Q6_K; cpu_linear_blocks.cc's portable kernels serve the other types and CPUs without AVX2.
#pragma once
#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"

namespace vireo::cpu {

// Whether this CPU has AVX2, FMA and F16C and there is a kernel for block type t.
bool gemv_blocks_avx2_available(DType t);
// out [n, m] = x [n, k] @ W^T, W [m, k] in block type t (gemv_blocks_avx2_available(t)); n <= kGemvMaxRows.
void gemv_blocks_avx2(ThreadPool& pool, const float* x, int64_t n, int64_t k, DType t, const uint8_t* w, int64_t m,
                      float* out);

}  // namespace vireo::cpu
