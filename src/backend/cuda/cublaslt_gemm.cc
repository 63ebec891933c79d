#include "backend/cuda/cublaslt_gemm.h"

#include <string>

#include "backend/cuda/cublaslt_tune.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"

namespace vireo::cuda {
namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cublasLt: ") + what + " failed (status " + std::to_string(s) + ")");
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: throw Error("linear: unsupported dtype " + std::string(dtype_name(t)));
  }
}

}  // namespace

CublasLtGemm::CublasLtGemm(size_t workspace_bytes, bool use_gemv)
    : workspace_bytes_(workspace_bytes), use_gemv_(use_gemv), tune_(gemm_tune_enabled()) {
  lt_check(cublasLtCreate(&handle_), "cublasLtCreate");
  VIREO_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CublasLtGemm::~CublasLtGemm() {
  for (auto* plans : {&plans_, &fp8_plans_})
    for (auto& [k, p] : *plans) destroy(p);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

// Row-major out[N, M] is column-major [M, N]: C(M x N) = W^T-view(M x K) * X-view(K x N), where
// W row-major [M, K] is column-major [K, M] (transposed: op T) and X row-major [N, K] is column-major
// [K, N] (op N).
CublasLtGemm::Plan CublasLtGemm::new_plan(cudaDataType_t in, cudaDataType_t out, int64_t n, int64_t m, int64_t k,
                                          bool bias) {
  Plan p;
  lt_check(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)), "TRANSA");
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)), "TRANSB");
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out, sizeof(out)), "BIAS_DATA_TYPE");
  }
  if (sm_target_ > 0)  // the SMs left beside another stream's work (set_sm_count_target)
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target_, sizeof(sm_target_)),
             "SM_COUNT_TARGET");
  lt_check(cublasLtMatrixLayoutCreate(&p.a, in, k, m, k), "layout W");
  lt_check(cublasLtMatrixLayoutCreate(&p.b, in, k, n, k), "layout X");
  lt_check(cublasLtMatrixLayoutCreate(&p.c, out, m, n, m), "layout out");
  p.with_bias = bias;
  return p;
}

bool CublasLtGemm::pick_algo(Plan& p) {
  cublasLtMatmulPreference_t pref;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
  lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                sizeof(workspace_bytes_)),
           "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    return false;
  }
  p.algo = res.algo;
  return true;
}

void CublasLtGemm::destroy(Plan& p) {
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatmulDescDestroy(p.op);
}

CublasLtGemm::Plan& CublasLtGemm::plan(int64_t n, int64_t m, int64_t k, DType dt, bool bias) {
  Key key{n, m, k, static_cast<int>(dt), bias, sm_target_};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const cudaDataType_t t = cuda_type(dt);
  Plan p = new_plan(t, t, n, m, k, bias);
  if (!pick_algo(p))
    throw Error("linear: cuBLASLt has no algorithm for N=" + std::to_string(n) + " M=" + std::to_string(m) +
                " K=" + std::to_string(k));
  if (dt == DType::kBF16 || dt == DType::kF16) tune_plan(p, Key{n, m, k, kPlainForm + static_cast<int>(dt), bias, sm_target_}, 2, 2);
  return plans_.emplace(key, p).first->second;
}

void CublasLtGemm::run(const LinearParams& p, cudaStream_t stream) {
  if (p.w.ndim() != 2) throw Error("linear: w must be [M, K]");
  if (!p.input_norm.empty() || p.silu_mul_input || !p.residual.empty())
    throw Error("linear: CublasLtGemm::run takes the plain form; fused forms go through run_linear (fused_linear.h)");
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  if (p.x.dim(-1) != k) throw Error("linear: x last dim " + std::to_string(p.x.dim(-1)) + " != K " + std::to_string(k));
  const int64_t n = p.x.numel() / k;
  if (p.out.numel() != n * m) throw Error("linear: out must be [N, M]");
  if (p.x.dtype != p.w.dtype || p.out.dtype != p.x.dtype)
    throw Error("linear: x, w and out must share one dtype (upload weights in the activation dtype)");
  if (!p.bias.empty() && p.bias.numel() != m) throw Error("linear: bias must be [M]");
  if (n == 0 || m == 0) return;
  if (use_gemv_ && launch_gemv_small_n(p, stream)) return;  // decode shapes: a streaming GEMV beats the library
  const bool fused_bias = !p.bias.empty() && p.bias.dtype == p.out.dtype;
  Plan& pl = plan(n, m, k, p.x.dtype, fused_bias);
  finish_tune(pl, stream);
  if (fused_bias) {
    const void* bp = p.bias.data;
    lt_check(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)), "BIAS_POINTER");
  }
  const float alpha = 1.f, beta = 0.f;
  lt_check(cublasLtMatmul(handle_, pl.op, &alpha, p.w.data, pl.a, p.x.data, pl.b, &beta, p.out.data, pl.c, p.out.data,
                          pl.c, &pl.algo, workspace_, workspace_bytes_, stream),
           "Matmul");
  if (!p.bias.empty() && !fused_bias) launch_bias_add(p.out.data, p.out.dtype, p.bias.data, p.bias.dtype, n, m, stream);
}

}  // namespace vireo::cuda
