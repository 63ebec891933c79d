// linear with the decode fusions of LinearParams (input_norm, silu_mul_input, residual): a fused GEMV
// for N <= 4, else rms_norm / silu_and_mul, cuBLASLt, add through scratch. Plain linear goes straight
// to CublasLtGemm::run.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_kernels.h"

namespace vireo::cuda {

// `scratch` must be graph-safe (the backend's workspace path): at most (N*K + N*M) elements plus padding.
void run_linear(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch, cudaStream_t stream);

}  // namespace vireo::cuda
