// Choosing among cuBLASLt's configurations by timing them (VIREO_GEMM_TUNE=1). cuBLASLt's heuristic keeps
// 128 x 128 tiles at every row count, so a serving step's time steps with the tile waves: at 2,112 rows of
// the 8B's FP8 projections it is 5-20% slower than the best configuration the library has (192 x 88,
// 96 x 192, 128 x 96 tiles; docs/cuda_kernels.md, session 56). The tuner times the heuristic's pick against
// configurations of the same kernel (other tiles, cluster shapes and custom options) on scratch operands of
// the shape and keeps the fastest; CublasLtGemm caches the choice per shape, form (FP8 scaled / unscaled,
// BF16, F16) and 64-row bucket.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace vireo::cuda {

// One GEMM as cuBLASLt runs it: D[m, n] = alpha op(A) op(B) (+ beta C), descriptors made by the caller
// (scale pointers, epilogue and all); the tuner supplies scratch A, B and D (C = D) of the layouts' sizes.
struct LtTuneProblem {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;  // scratch sizes
  float beta = 0.f;
  bool bias = false;  // the descriptor has a bias epilogue: its pointer is set to scratch while timing
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Times `algo` (the heuristic's pick) and the configurations of the same algorithm id in the candidate list
// that cublasLtMatmulAlgoCheck accepts, on a private stream; replaces `algo` with the fastest. Returns how
// much faster it is than the heuristic's (1.0: kept). Not while a stream is capturing (the caller checks).
double tune_lt_algo(const LtTuneProblem& p, cublasLtMatmulAlgo_t& algo);

// VIREO_GEMM_TUNE (default 0: the heuristic's pick; 2: chunked steps' buckets of >= 1,024 rows only, not the
// decode graphs' batch sizes), read once.
int gemm_tune_mode();
inline bool gemm_tune_enabled() { return gemm_tune_mode() != 0; }

}  // namespace vireo::cuda
