// cuBLASLt's FP8 GEMM for linears with FP8 weights (fp8_linear.h). Hopper takes E4M3 x E4M3 only in the
// "TN" form, both operands K-major, which is how the weights [M, K] and the activations [N, K] lie
// (column-major: W^T-view (M x K) times X-view (K x N), as CublasLtGemm::plan). Scales: one F32 per row of
// each operand (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUDA 12.9+): element (i, j) of the product is
// multiplied by w_scale[i] x x_scale[j] before the epilogue adds the bias.
// - The heuristic offers outer-vector algorithms only when the scale pointers are already set (cuBLASLt
//   13.1 on an H100: none without them, one with), so the plan sets placeholder pointers before asking.
// - FAST_ACCUM: the tensor cores' own FP8 accumulation, without promotion to F32 registers every few
//   k-blocks, as vLLM's CUTLASS FP8 kernels run; +20% at the 8B serving shapes (docs/cuda_kernels.md).
// - Where cuBLASLt has no such algorithm, an unscaled E4M3 GEMM into F32 scratch and launch_fp8_rescale
//   apply the scales and the bias instead.
// - A residual (Fp8Args::residual) joins in the epilogue as C with beta = 1, in place when out aliases it.
#include <string>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cublaslt_tune.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/fp8_linear.h"

namespace vireo::cuda {
namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cublasLt (fp8): ") + what + " failed (status " + std::to_string(s) + ")");
}

template <typename PlanT>
void set_fast_accum(PlanT& p) {
  const int8_t on = 1;
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)), "FAST_ACCUM");
}

}  // namespace

CublasLtGemm::Plan& CublasLtGemm::plan_fp8(int64_t n, int64_t m, int64_t k, DType out_dtype, bool bias) {
  Key key{n, m, k, static_cast<int>(out_dtype), bias, sm_target_};
  auto it = fp8_plans_.find(key);
  if (it != fp8_plans_.end()) return it->second;
  if (out_dtype != DType::kBF16 && out_dtype != DType::kF16) throw Error("linear (fp8): output must be bf16 or f16");
  const cudaDataType_t ot = out_dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  Plan p = new_plan(CUDA_R_8F_E4M3, ot, n, m, k, bias);
  const cublasLtMatmulMatrixScale_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof(outer)), "A_SCALE_MODE");
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof(outer)), "B_SCALE_MODE");
  set_fast_accum(p);
  const void* placeholder = workspace_;  // any device address: run_fp8 sets the real scales per call
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)),
           "A_SCALE_POINTER");
  lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)),
           "B_SCALE_POINTER");
  if (!pick_algo(p))
    throw Error("linear (fp8): cuBLASLt has no FP8 algorithm with per-row scales for N=" + std::to_string(n) +
                " M=" + std::to_string(m) + " K=" + std::to_string(k) + (bias ? " with the bias epilogue" : "") +
                " (needs CUDA 12.9+ and sm_90)");
  tune_plan(p, key, 1, 2);
  return fp8_plans_.emplace(key, p).first->second;
}

bool CublasLtGemm::fp8_outer_vec(int64_t n, int64_t m, int64_t k, DType out_dtype, bool bias) {
  const Key key{n, m, k, static_cast<int>(out_dtype), bias, sm_target_};
  auto it = fp8_plan_ok_.find(key);
  if (it != fp8_plan_ok_.end()) return it->second;  // asked once per shape: no retries on the step path
  bool ok = true;
  try {
    plan_fp8(n, m, k, out_dtype, bias);
  } catch (const Error&) {
    ok = false;  // cuBLASLt builds without outer-vector FP8 kernels for this shape (seen on an H100, CUDA 13)
  }
  return fp8_plan_ok_[key] = ok;
}

CublasLtGemm::Plan& CublasLtGemm::plan_fp8_unscaled(int64_t n, int64_t m, int64_t k, DType out_dtype) {
  Key key{n, m, k, -1 - static_cast<int>(out_dtype), false, sm_target_};  // apart from the scaled plans' keys
  auto it = fp8_plans_.find(key);
  if (it != fp8_plans_.end()) return it->second;
  const cudaDataType_t ot = out_dtype == DType::kBF16 ? CUDA_R_16BF : out_dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
  Plan p = new_plan(CUDA_R_8F_E4M3, ot, n, m, k, false);
  set_fast_accum(p);
  if (!pick_algo(p))
    throw Error("linear (fp8): cuBLASLt has no FP8 algorithm for N=" + std::to_string(n) + " M=" + std::to_string(m) +
                " K=" + std::to_string(k));
  tune_plan(p, key, 1, out_dtype == DType::kF32 ? 4 : 2);
  return fp8_plans_.emplace(key, p).first->second;
}

bool CublasLtGemm::fp8_unscaled_ok(int64_t n, int64_t m, int64_t k, DType out_dtype) {
  const Key key{n, m, k, -1 - static_cast<int>(out_dtype), false, sm_target_};
  auto it = fp8_plan_ok_.find(key);
  if (it != fp8_plan_ok_.end()) return it->second;
  bool ok = true;
  try {
    plan_fp8_unscaled(n, m, k, out_dtype);
  } catch (const Error&) {
    ok = false;
  }
  return fp8_plan_ok_[key] = ok;
}

void CublasLtGemm::run_fp8_unscaled(const uint8_t* w, const uint8_t* xq, void* out, int64_t n, int64_t m, int64_t k,
                                    DType out_dtype, cudaStream_t stream) {
  if (k % 16 != 0 || m % 16 != 0) throw Error("linear (fp8): M and K must be multiples of 16");
  if (n == 0 || m == 0) return;
  Plan& pl = plan_fp8_unscaled(n, m, k, out_dtype);
  finish_tune(pl, stream);
  const float alpha = 1.f, beta = 0.f;
  lt_check(cublasLtMatmul(handle_, pl.op, &alpha, w, pl.a, xq, pl.b, &beta, out, pl.c, out, pl.c, &pl.algo, workspace_,
                          workspace_bytes_, stream),
           "Matmul (unscaled)");
}

void CublasLtGemm::run_fp8(const Fp8Args& a, cudaStream_t stream) {
  if (a.k % 16 != 0 || a.m % 16 != 0) throw Error("linear (fp8): M and K must be multiples of 16");
  if (a.n == 0 || a.m == 0) return;
  const float alpha = 1.f, beta = a.residual ? 1.f : 0.f;
  const bool outer_vec = fp8_outer_vec(a.n, a.m, a.k, a.out_dtype);
  const bool fused_bias = a.bias != nullptr && outer_vec && fp8_outer_vec(a.n, a.m, a.k, a.out_dtype, true);
  if (!outer_vec) {
    // Unscaled fp32 sums, then out = sum x x_scale[n] x w_scale[m] + bias in a kernel of ours.
    if (!a.acc) throw Error("linear (fp8): no F32 scratch for the unscaled GEMM");
    Plan& pl = plan_fp8_unscaled(a.n, a.m, a.k);
    finish_tune(pl, stream);
    const float zero = 0.f;  // the residual joins in the rescale kernel
    lt_check(cublasLtMatmul(handle_, pl.op, &alpha, a.w, pl.a, a.xq, pl.b, &zero, a.acc, pl.c, a.acc, pl.c, &pl.algo,
                            workspace_, workspace_bytes_, stream),
             "Matmul (unscaled)");
    launch_fp8_rescale(a.acc, a.x_scale, a.w_scale, a.bias, a.out, a.out_dtype, a.n, a.m, stream, a.residual);
    return;
  }
  // The bias in the epilogue where cuBLASLt has an FP8 algorithm for it (fused_bias), else a pass of its own.
  Plan* pl = &plan_fp8(a.n, a.m, a.k, a.out_dtype, fused_bias);
  finish_tune(*pl, stream);
  const void* ws = a.w_scale;
  const void* xs = a.x_scale;
  lt_check(cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof(ws)), "A_SCALE_POINTER");
  lt_check(cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xs, sizeof(xs)), "B_SCALE_POINTER");
  if (fused_bias) {
    const void* bp = a.bias;
    lt_check(cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)), "BIAS_POINTER");
  }
  const void* c = a.residual ? a.residual : a.out;  // same layout as out: in place when they alias
  lt_check(cublasLtMatmul(handle_, pl->op, &alpha, a.w, pl->a, a.xq, pl->b, &beta, c, pl->c, a.out, pl->c, &pl->algo,
                          workspace_, workspace_bytes_, stream),
           "Matmul");
  if (a.bias && !fused_bias) launch_bias_add(a.out, a.out_dtype, a.bias, a.out_dtype, a.n, a.m, stream);
}

}  // namespace vireo::cuda

