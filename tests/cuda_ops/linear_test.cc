// linear (cuBLASLt) vs the CPU backend (OpenBLAS): decode and prefill shapes, odd sizes, bias; the tuned
// configurations (VIREO_GEMM_TUNE's path) the same way.
#include <cuda_runtime.h>

#include "backend/cuda/cublaslt_gemm.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

class LinearTest : public CudaOpsTest {
 protected:
  // One linear's inputs in the activation dtype (w scaled by 1 / sqrt(k)) and the CPU's F32 result.
  struct LinearCase {
    std::vector<float> x, w, b;
    std::vector<float> want;
  };
  LinearCase linear_case(int n, int k, int m, bool bias, DType act) {
    const float ws = 1.f / std::sqrt(float(k));
    LinearCase c{rand_vec(size_t(n) * k, -1, 1, act), rand_vec(size_t(m) * k, -ws, ws, act), rand_vec(m, -1, 1, act), {}};
    Tensor ref = cpu_poisoned({n, m});
    cpu_->linear({cpu_f32(c.x, {n, k}), cpu_f32(c.w, {m, k}), bias ? cpu_f32(c.b, {m}) : Tensor(), ref});
    c.want = to_host(ref);
    return c;
  }
};

std::string linear_trace(DType act, int n, int k, int m, bool bias) {
  return std::string(dtype_name(act)) + " N " + std::to_string(n) + " K " + std::to_string(k) + " M " + std::to_string(m) +
         (bias ? " bias" : "");
}

TEST_F(LinearTest, Linear) {
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_dtype(act);
    for (auto [n, k, m, bias] : std::vector<std::tuple<int, int, int, bool>>{
             {1, 4096, 6144, false}, {1, 4096, 512, true}, {7, 256, 96, true}, {33, 520, 1000, false},
             {130, 128, 77, true}, {257, 1024, 1024, false},
             // N <= 4: the GEMV path (K % 8 == 0), and one K it does not take
             {3, 12288, 40, true}, {4, 200, 64, false}, {2, 4104, 33, true}, {1, 12288, 4096, false}, {2, 100, 16, true}}) {
      SCOPED_TRACE(linear_trace(act, n, k, m, bias));
      const LinearCase c = linear_case(n, k, m, bias, act);
      Tensor out = gpu_poisoned({n, m}, act);
      gpu_->linear({gpu_from(c.x, {n, k}, act), gpu_from(c.w, {m, k}, act), bias ? gpu_from(c.b, {m}, act) : Tensor(), out});
      // Same shape again: the cached plan is reused.
      Tensor out2 = gpu_poisoned({n, m}, act);
      gpu_->linear({gpu_from(c.x, {n, k}, act), gpu_from(c.w, {m, k}, act), bias ? gpu_from(c.b, {m}, act) : Tensor(), out2});
      const auto& want = c.want;
      Tolerance tol = tol_for(act);
      if (act == DType::kF32) tol = {2e-4f, 2e-4f};  // summation order over K differs
      expect_close(to_host(out), want, tol, "linear");
      expect_close(to_host(out2), want, tol, "linear (cached plan)");
    }
  }
}

// CublasLtGemm with tuning on: BF16 / F16 plans of >= 1,024 rows take the configuration timed fastest for
// their 64-row bucket (cublaslt_tune.h); a second N of the bucket reuses it.
TEST_F(LinearTest, TunedConfigurations) {
  cuda::CublasLtGemm gemm;
  gemm.set_tune(true);
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (auto [n, k, m, bias] : std::vector<std::tuple<int, int, int, bool>>{
             {1024, 256, 384, true}, {1040, 256, 384, true}, {2112, 512, 256, false}}) {
      SCOPED_TRACE(linear_trace(act, n, k, m, bias));
      const LinearCase c = linear_case(n, k, m, bias, act);
      Tensor out = gpu_poisoned({n, m}, act);
      LinearParams p{gpu_from(c.x, {n, k}, act), gpu_from(c.w, {m, k}, act), bias ? gpu_from(c.b, {m}, act) : Tensor(), out};
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the backend's async uploads first (default stream below)
      gemm.run(p, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(to_host(out), c.want, tol_for(act), "tuned linear");
    }
    // Pretuned at a decode graph's batch size (each row count below 1,024 its own bucket), then run there.
    EXPECT_GT(gemm.pretune({256}), 0);
    for (auto [k, m, bias] : std::vector<std::tuple<int, int, bool>>{{256, 384, true}, {512, 256, false}}) {
      const int n = 256;
      SCOPED_TRACE(linear_trace(act, n, k, m, bias));
      const LinearCase c = linear_case(n, k, m, bias, act);
      Tensor out = gpu_poisoned({n, m}, act);
      LinearParams p{gpu_from(c.x, {n, k}, act), gpu_from(c.w, {m, k}, act), bias ? gpu_from(c.b, {m}, act) : Tensor(), out};
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      gemm.run(p, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(to_host(out), c.want, tol_for(act), "pretuned linear");
    }
  }
}

TEST_F(CudaOpsTest, LinearBiasInOtherDtype) {
  use_dtype(DType::kBF16);
  const int n = 5, k = 64, m = 40;
  auto x = rand_vec(n * k, -1, 1, DType::kBF16);
  auto w = rand_vec(m * k, -0.1f, 0.1f, DType::kBF16);
  auto b = rand_vec(m, -1, 1, DType::kF32);  // F32 bias: not fusable into a BF16 epilogue
  Tensor out = gpu_poisoned({n, m}, DType::kBF16);
  gpu_->linear({gpu_from(x, {n, k}, DType::kBF16), gpu_from(w, {m, k}, DType::kBF16), gpu_from(b, {m}, DType::kF32), out});
  Tensor ref = cpu_poisoned({n, m});
  cpu_->linear({cpu_f32(x, {n, k}), cpu_f32(w, {m, k}), cpu_f32(b, {m}), ref});
  expect_close(to_host(out), to_host(ref), tol_for(DType::kBF16), "linear f32 bias");
}

TEST_F(CudaOpsTest, LinearRejectsMismatchedShapes) {
  use_dtype(DType::kBF16);
  Tensor x = gpu_own(gpu_->alloc({2, 64}, DType::kBF16));
  Tensor w = gpu_own(gpu_->alloc({8, 32}, DType::kBF16));
  Tensor out = gpu_own(gpu_->alloc({2, 8}, DType::kBF16));
  EXPECT_THROW(gpu_->linear({x, w, Tensor(), out}), Error);
}

}  // namespace
}  // namespace vireo::testing
