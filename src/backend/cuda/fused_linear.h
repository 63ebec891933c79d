// linear with the decode fusions of LinearParams (input_norm, silu_mul_input, residual): a fused GEMV
// for N <= 4, else rms_norm / silu_and_mul, cuBLASLt, add through scratch. Plain linear goes straight
// to CublasLtGemm::run.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/op_gpu_timer.h"

namespace vireo::cuda {

// `scratch` must be graph-safe (the backend's workspace path): at most (N*K + N*M) elements plus padding.
// batch_invariant: every product through launch_gemm_invariant and the fused forms always as the
// unfused sequence (no GEMV), whatever N is.
// timer (VIREO_OP_TIMING, eager steps): marks the parts of the FP8 form (its quantization); the caller
// marks the rest.
void run_linear(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                bool batch_invariant = false, OpGpuTimer* timer = nullptr);

}  // namespace vireo::cuda
