// Kernel choice of the batch-invariant linear (gemm_invariant.cu). Plain host code (tested without a GPU).
//
// Why a row's bits cannot depend on N here: every kernel accumulates each output element on its own
// chain, k ascending, in one fp32 register (tensor-core kernels: one mma.sync m16n8k16 per 16 k, zero-
// padded past K; the SIMT kernel: one fmaf per k), with no split-K and no cross-thread reduction. The
// block tile (16 or 64 rows) only decides which elements share a block, never the order of an element's
// sum, so it may follow N. The kernel family (mma or SIMT) follows only the dtype, K and alignment, which
// are the same for every row of a weight.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace vireo::cuda {

enum class InvariantGemmKernel : uint8_t {
  kMma16,  // bf16/f16 tensor cores, 16-row x 64-column blocks (decode-sized N)
  kMma64,  // bf16/f16 tensor cores, 64-row x 64-column blocks
  kSimt,   // any float dtype (F32 activations, K % 8 != 0 or unaligned rows): 64 x 64 blocks of fmaf chains
};

struct InvariantGemmPlan {
  InvariantGemmKernel kernel = InvariantGemmKernel::kSimt;
  int block_rows = 64;  // rows of x (N) per block
  int block_cols = 64;  // rows of w (output columns, M) per block
  int64_t grid_x = 0;   // over output columns
  int64_t grid_y = 0;   // over rows of x
};

constexpr int kInvariantMmaSmallRows = 16;  // N up to this: 16-row blocks

// x rows and w rows start 16-byte aligned when aligned16 (base pointers aligned and K % 8 == 0).
inline InvariantGemmPlan plan_invariant_gemm(int64_t n, int64_t m, int64_t k, DType dtype, bool aligned16) {
  InvariantGemmPlan p;
  const bool mma = (dtype == DType::kBF16 || dtype == DType::kF16) && k % 8 == 0 && aligned16;
  if (mma) {
    p.kernel = n <= kInvariantMmaSmallRows ? InvariantGemmKernel::kMma16 : InvariantGemmKernel::kMma64;
    p.block_rows = n <= kInvariantMmaSmallRows ? 16 : 64;
  }
  p.grid_x = (m + p.block_cols - 1) / p.block_cols;
  p.grid_y = (n + p.block_rows - 1) / p.block_rows;
  return p;
}

}  // namespace vireo::cuda
