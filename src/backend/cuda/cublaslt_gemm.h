// out[N, M] = x[N, K] @ w[M, K]^T (+ bias) through cuBLASLt, fp32 accumulate. One plan (layouts and
// the heuristic's algorithm) per shape and dtype, made on first use and cached.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

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
  // FP8 (cublaslt_fp8.cc): out[n, m] = (xq[n, k] x_scale[n]) @ (w[m, k] w_scale[m])^T (+ bias [m]), xq and
  // w E4M3, out and bias `out_dtype` (bf16/f16); fp32 accumulation, the scales applied per output element
  // (cuBLASLt's outer-vector scaling). k % 16 == 0, m % 16 == 0.
  struct Fp8Args {
    const uint8_t* w = nullptr;
    const float* w_scale = nullptr;
    const uint8_t* xq = nullptr;
    const float* x_scale = nullptr;
    const void* bias = nullptr;
    void* out = nullptr;
    int64_t n = 0, m = 0, k = 0;
    DType out_dtype = DType::kBF16;
    // [n, m] F32 scratch, needed where fp8_outer_vec() is false: the unscaled sums land there and a
    // kernel applies the scales and the bias (launch_fp8_rescale).
    float* acc = nullptr;
    // [n, m] out_dtype or null: out = residual + the product (+ bias), the add in the epilogue (beta = 1,
    // C = residual); residual may be out itself.
    const void* residual = nullptr;
  };
  void run_fp8(const Fp8Args& a, cudaStream_t stream);
  // Whether cuBLASLt has an FP8 algorithm with outer-vector scales (and the bias epilogue) for this shape;
  // the first call per shape asks, the answer is cached.
  bool fp8_outer_vec(int64_t n, int64_t m, int64_t k, DType out_dtype, bool bias = false);
  // out[n, m] = xq[n, k] @ w[m, k]^T in out_dtype, E4M3 codes, no scales (FAST_ACCUM): the scales are
  // applied by whoever reads out (run_mlp_fp8). fp8_unscaled_ok: whether cuBLASLt has an algorithm (cached).
  void run_fp8_unscaled(const uint8_t* w, const uint8_t* xq, void* out, int64_t n, int64_t m, int64_t k,
                        DType out_dtype, cudaStream_t stream);
  bool fp8_unscaled_ok(int64_t n, int64_t m, int64_t k, DType out_dtype);
  // GEMMs issued from now on are planned for n SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0: the whole device),
  // for while another stream holds the rest (SmPartition): their persistent grids then fit the free SMs
  // instead of waiting for busy ones. A plan per shape and target.
  void set_sm_count_target(int n) { sm_target_ = n; }
  // FP8 GEMMs of >= 1,024 rows take the fastest of cuBLASLt's configurations timed for their 64-row bucket
  // (cublaslt_tune.h) instead of the heuristic's pick. Default: VIREO_GEMM_TUNE (off).
  void set_tune(bool on) { tune_ = on; }
  // With tuning on: every shape planned so far (the start-up profile step's linears; FP8, BF16, F16) timed
  // at each row count (its bucket: tune_bucket). Returns the buckets tuned.
  int pretune(const std::vector<int64_t>& rows);
  // Tuned choices are kept per bucket of rows: each row count below 1,024 (the decode graphs' batch sizes:
  // few, fixed), 64-row buckets to 4,096 (a chunked step's row count varies; a tile wave more or less
  // moves its time ~10%), 512-row buckets past it (more waves: the last one matters less).
  static int64_t tune_bucket(int64_t n) {
    return n < 1024 ? n : n <= 4096 + 31 ? (n + 32) / 64 * 64 : (n + 256) / 512 * 512;
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool with_bias = false;
    // Tuning (VIREO_GEMM_TUNE) deferred: the plan was made by a query (fp8_outer_vec, fp8_unscaled_ok) outside
    // a run, where tuning may not synchronise; the next eager run tunes it (finish_tune).
    bool tune_pending = false;
    std::tuple<int64_t, int64_t, int64_t, int, bool, int> tune_key{};
    size_t tune_in_bytes = 0, tune_out_bytes = 0;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool, int>;  // N, M, K, dtype, fused bias, SM target
  // Layouts and descriptor of out[n, m] = x[n, k] w[m, k]^T (+ bias of the output type), no algorithm yet.
  Plan new_plan(cudaDataType_t in, cudaDataType_t out, int64_t n, int64_t m, int64_t k, bool bias);
  bool pick_algo(Plan& p);  // the heuristic's first algorithm; false (p destroyed): none
  static void destroy(Plan& p);
  Plan& plan(int64_t n, int64_t m, int64_t k, DType dt, bool bias);
  Plan& plan_fp8(int64_t n, int64_t m, int64_t k, DType out_dtype, bool bias);
  // E4M3 x E4M3 -> F32 (out_dtype kF32) or the activation dtype, no scales
  Plan& plan_fp8_unscaled(int64_t n, int64_t m, int64_t k, DType out_dtype = DType::kF32);
  // Whether each FP8 plan (scaled by key, unscaled by the negated dtype) could be built: asked once.
  std::map<Key, bool> fp8_plan_ok_;
  // VIREO_GEMM_TUNE (cublaslt_gemm_tune.cc): a new plan takes the configuration already timed for its bucket
  // (tune_bucket), else waits (tune_pending) for its first eager run of >= 1,024 rows (finish_tune) or for
  // pretune. key's dtype field is the plan's form: FP8 scaled the output dtype, FP8 unscaled -1 - it, plain
  // GEMMs kPlainForm + the dtype.
  static constexpr int kPlainForm = 1000;
  void tune_plan(Plan& p, const Key& key, size_t in_bytes, size_t out_bytes);
  // A run's plan: times it if pending, n >= 1,024, `stream` is not capturing and nothing was pretuned (a
  // no-op for other plans). A server pretunes at start-up and never times on its run path: a timing
  // synchronises the device and runs ~190 GEMMs (~0.4 s a bucket at 8k rows); serving with run-path timing
  // ran 8% slower than without the tuner (session 58).
  void finish_tune(Plan& p, cudaStream_t stream);
  bool use_tuned(Plan& p);  // the bucket's timed configuration, where one is and runs at this N
  void time_plan(Plan& p);  // times the candidates now (synchronises the device)
  static bool capturing(cudaStream_t stream);
  std::map<Key, cublasLtMatmulAlgo_t> tuned_;
  bool tune_;
  bool pretuned_ = false;  // pretune ran: the run path no longer times (finish_tune)

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  bool use_gemv_;
  int32_t sm_target_ = 0;
  std::map<Key, Plan> plans_, fp8_plans_;
};

}  // namespace vireo::cuda
