// CublasLtGemm's configuration tuning (VIREO_GEMM_TUNE=1; cublaslt_tune.h has the why): a choice per shape,
// form and 64-row bucket, timed on first use in an eager step or for every bucket after the start-up profile.
#include <algorithm>
#include <map>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cublaslt_tune.h"
#include "backend/cuda/cuda_common.h"
#include "core/log.h"

namespace vireo::cuda {

bool CublasLtGemm::capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone;
}

void CublasLtGemm::tune_plan(Plan& p, const Key& key, size_t in_bytes, size_t out_bytes) {
  if (!tune_) return;
  auto [n, m, k, form, bias, sm] = key;
  const Key bucket{tune_bucket(n), m, k, form, bias, sm};
  auto it = tuned_.find(bucket);
  if (it != tuned_.end()) {  // the bucket's choice, where it runs at this N
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &it->second, &r) == CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= workspace_bytes_)
      p.algo = it->second;
    return;
  }
  if (!tune_now_) {  // a query or a captured step: the next eager run's (finish_tune)
    p.tune_pending = true;
    p.tune_key = key;
    p.tune_in_bytes = in_bytes;
    p.tune_out_bytes = out_bytes;
    return;
  }
  p.tune_pending = false;
  VIREO_CUDA_CHECK(cudaDeviceSynchronize());  // time the candidates alone on the GPU
  LtTuneProblem tp;
  tp.handle = handle_;
  tp.op = p.op;
  tp.a = p.a;
  tp.b = p.b;
  tp.c = p.c;
  tp.a_bytes = static_cast<size_t>(m * k) * in_bytes;
  tp.b_bytes = static_cast<size_t>(n * k) * in_bytes;
  tp.c_bytes = static_cast<size_t>(n * m) * out_bytes;
  tp.bias = bias;
  tp.workspace = workspace_;
  tp.workspace_bytes = workspace_bytes_;
  const double gain = tune_lt_algo(tp, p.algo);
  tuned_[bucket] = p.algo;
  log_debug("gemm tune: N={} M={} K={} form {}: {:.1f}% faster than the heuristic's pick", n, m, k, form,
            100.0 * (gain - 1.0));
}

void CublasLtGemm::finish_tune(Plan& p) {
  if (p.tune_pending && tune_now_) tune_plan(p, p.tune_key, p.tune_in_bytes, p.tune_out_bytes);
}

int CublasLtGemm::pretune(const std::vector<int64_t>& rows) {
  if (!tune_ || sm_target_ != 0) return 0;
  // N 0: one per (M, K, form, bias), with the most rows it was planned for. A shape is timed at a chunked
  // step's bucket (>= 1,024 rows) only up to that: the lm_head runs on the sampled rows alone (at most
  // --max-num-seqs), where timing its 150k-row weights at 4,096 rows would take a minute of start-up.
  std::map<Key, int64_t> shapes;
  auto add = [&](int64_t n, int64_t m, int64_t k, int form, bool bias) {
    int64_t& most = shapes[Key{0, m, k, form, bias, 0}];
    most = std::max(most, n);
  };
  for (const auto& [key, plan] : fp8_plans_) {
    auto [n, m, k, form, bias, sm] = key;
    if (sm == 0) add(n, m, k, form, bias);
  }
  for (const auto& [key, plan] : plans_) {
    auto [n, m, k, dt, bias, sm] = key;
    if (sm == 0 && (dt == static_cast<int>(DType::kBF16) || dt == static_cast<int>(DType::kF16)))
      add(n, m, k, kPlainForm + dt, bias);
  }
  int tuned = 0;
  for (const auto& [s, most] : shapes) {
    auto [zero, m, k, form, bias, sm] = s;
    for (const int64_t b : rows) {
      if (b < 1 || (b >= 1024 && b > most) || tuned_.count(Key{tune_bucket(b), m, k, form, bias, 0})) continue;
      tune_now_ = true;
      try {  // each form's own plan call: it times the bucket on the way (or finish_tune, for a plan made earlier)
        Plan& pl = form >= kPlainForm ? plan(b, m, k, static_cast<DType>(form - kPlainForm), bias)
                   : form >= 0        ? plan_fp8(b, m, k, static_cast<DType>(form), bias)
                                      : plan_fp8_unscaled(b, m, k, static_cast<DType>(-1 - form));
        finish_tune(pl);
        ++tuned;
      } catch (const Error&) {
      }
      tune_now_ = false;
    }
  }
  return tuned;
}

}  // namespace vireo::cuda
