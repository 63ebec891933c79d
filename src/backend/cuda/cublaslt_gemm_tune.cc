// CublasLtGemm's configuration tuning (VIREO_GEMM_TUNE=1; cublaslt_tune.h has the why): a choice per shape,
// form and row bucket, timed on first use in an eager step or for the listed rows at start-up (pretune).
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
  p.tune_pending = true;  // timed by the first eager run (finish_tune) or pretune, not here: a query may plan
  p.tune_key = key;
  p.tune_in_bytes = in_bytes;
  p.tune_out_bytes = out_bytes;
  use_tuned(p);
}

bool CublasLtGemm::use_tuned(Plan& p) {
  auto [n, m, k, form, bias, sm] = p.tune_key;
  auto it = tuned_.find(Key{tune_bucket(n), m, k, form, bias, sm});
  if (it == tuned_.end()) return false;
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &it->second, &r) == CUBLAS_STATUS_SUCCESS &&
      r.workspaceSize <= workspace_bytes_)
    p.algo = it->second;  // else the heuristic's pick stays: the bucket's choice does not run at this N
  p.tune_pending = false;
  return true;
}

void CublasLtGemm::finish_tune(Plan& p, cudaStream_t stream) {
  if (p.tune_pending && !pretuned_ && std::get<0>(p.tune_key) >= 1024 && !capturing(stream)) time_plan(p);
}

void CublasLtGemm::time_plan(Plan& p) {
  if (use_tuned(p)) return;  // another plan of the bucket was timed since this one was made
  p.tune_pending = false;
  auto [n, m, k, form, bias, sm] = p.tune_key;
  VIREO_CUDA_CHECK(cudaDeviceSynchronize());  // time the candidates alone on the GPU
  LtTuneProblem tp;
  tp.handle = handle_;
  tp.op = p.op;
  tp.a = p.a;
  tp.b = p.b;
  tp.c = p.c;
  tp.a_bytes = static_cast<size_t>(m * k) * p.tune_in_bytes;
  tp.b_bytes = static_cast<size_t>(n * k) * p.tune_in_bytes;
  tp.c_bytes = static_cast<size_t>(n * m) * p.tune_out_bytes;
  tp.bias = bias;
  tp.workspace = workspace_;
  tp.workspace_bytes = workspace_bytes_;
  const double gain = tune_lt_algo(tp, p.algo);
  tuned_[Key{tune_bucket(n), m, k, form, bias, sm}] = p.algo;
  log_debug("gemm tune: N={} M={} K={} form {}: {:.1f}% faster than the heuristic's pick", n, m, k, form,
            100.0 * (gain - 1.0));
}

int CublasLtGemm::pretune(const std::vector<int64_t>& rows) {
  if (!tune_ || sm_target_ != 0) return 0;
  pretuned_ = true;
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
    for (const int64_t row : rows) {
      const int64_t b = tune_bucket(row);  // timed at the bucket's own row count
      if (b < 1 || (b < 1024 && gemm_tune_mode() == 2) || (b >= 1024 && b > tune_bucket(most)) ||
          tuned_.count(Key{b, m, k, form, bias, 0}))
        continue;
      try {  // each form's own plan, timed here whatever its rows (a graph's batch size too)
        Plan& pl = form >= kPlainForm ? plan(b, m, k, static_cast<DType>(form - kPlainForm), bias)
                   : form >= 0        ? plan_fp8(b, m, k, static_cast<DType>(form), bias)
                                      : plan_fp8_unscaled(b, m, k, static_cast<DType>(-1 - form));
        if (pl.tune_pending) time_plan(pl);
        ++tuned;
      } catch (const Error&) {
      }
    }
  }
  return tuned;
}

}  // namespace vireo::cuda
