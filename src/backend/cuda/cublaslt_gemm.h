// out[N, M] = x[N, K] @ w[M, K]^T (+ bias) through cuBLASLt, fp32 accumulate. One plan (layouts and
// the heuristic's algorithm) per shape and dtype, made on first use and cached.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "backend/op_params.h"

namespace vireo::cuda {

class CublasLtGemm {
 public:
  // use_gemv: small-N bf16/f16 shapes go to the GEMV kernel (gemv.cu); off to time cuBLASLt alone.
  explicit CublasLtGemm(size_t workspace_bytes = size_t{32} << 20, bool use_gemv = true);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  void run(const LinearParams& p, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool with_bias = false;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool>;  // N, M, K, dtype, fused bias
  Plan& plan(int64_t n, int64_t m, int64_t k, DType dt, bool bias);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  bool use_gemv_;
  std::map<Key, Plan> plans_;
};

}  // namespace vireo::cuda
