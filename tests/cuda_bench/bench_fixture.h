// What the kernel benchmarks of this folder share: a fixture that skips unless VIREO_KERNEL_BENCH=1 and a
// GPU is there, holds a bf16 CUDA backend and its stream, frees the tensors it hands out, fills them from
// a multiplicative hash, and times back-to-back calls between CUDA events.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace vireo::bench {

// Median over `reps` timings of `inner` back-to-back calls of f on `stream` (after `warmup` calls), per
// call, in microseconds. Several calls per event pair keep the host's launch latency out of short
// kernels. f gets the call's index: 0 .. warmup - 1 for the warm-up, then i * inner + j.
inline double median_us(cudaStream_t stream, const std::function<void(int)>& f, int reps, int inner, int warmup) {
  for (int i = 0; i < warmup; ++i) f(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ts;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, stream);
    for (int j = 0; j < inner; ++j) f(i * inner + j);
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    ts.push_back(ms * 1e3 / inner);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

class CudaBenchFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* on = std::getenv("VIREO_KERNEL_BENCH");
    if (!on || std::string(on) != "1") GTEST_SKIP() << "set VIREO_KERNEL_BENCH=1 to run the kernel benchmarks";
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
    be_ = create_backend("cuda", "bfloat16");
    stream_ = static_cast<cuda::CudaBackend*>(be_.get())->stream();
  }
  void TearDown() override {
    for (auto& t : owned_) be_->free(t);
  }
  // n values in [0, 1) from a multiplicative hash, not a full RNG (large tensors fill fast), salted by
  // the number of tensors handed out so far.
  std::vector<float> hash_unit(int64_t n) const {
    std::vector<float> h(n);
    const uint32_t salt = 0x9e3779b9u * static_cast<uint32_t>(owned_.size() + 1);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t v = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
      h[i] = static_cast<float>(v >> 8) * (1.0f / 16777216.0f);
    }
    return h;
  }
  // A device tensor of dtype dt with values spread over [lo, hi) (never zeros unless lo == hi == 0).
  Tensor rand_t(std::vector<int64_t> shape, float lo = -1, float hi = 1, DType dt = DType::kBF16) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> h = hash_unit(n);
    for (float& x : h) x = lo + (hi - lo) * x;
    return own(be_->upload(Tensor(h.data(), DType::kF32, shape), dt));
  }
  Tensor ints(const std::vector<int>& v) {
    return own(be_->upload(Tensor(const_cast<int*>(v.data()), DType::kI32, {int64_t(v.size())}), DType::kI32));
  }
  Tensor dev(std::vector<int64_t> shape, DType dt) { return own(be_->alloc(std::move(shape), dt)); }
  // Freed in TearDown.
  Tensor own(Tensor t) {
    owned_.push_back(t);
    return t;
  }

  std::unique_ptr<Backend> be_;
  cudaStream_t stream_ = nullptr;
  std::vector<Tensor> owned_;
};

}  // namespace vireo::bench
