// Two independent ops of a serving step on two streams at once: how much of a bandwidth-bound op (the decode
// rows' attention) hides under a compute-bound one (a GEMM at the step's rows). This is the measurement behind
// a "nano-batch" design (decode rows and prompt rows as two chains on two streams, as NanoFlow does), before
// any engine code is written for it. Each line: op A alone, op B alone, both in turn on one stream, both at
// once on two streams (plain priorities, then B's stream at the device's highest priority), and the share of
// B's time the overlap hid.
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='OverlapBench.*'
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/sm_partition.h"
#include "bench_fixture.h"

namespace vireo {
namespace {

class OverlapBench : public bench::CudaBenchFixture {
 protected:
  void SetUp() override {
    bench::CudaBenchFixture::SetUp();
    if (IsSkipped()) return;
    int lo = 0, hi = 0;
    cudaDeviceGetStreamPriorityRange(&lo, &hi);
    cudaStreamCreateWithPriority(&plain_, cudaStreamNonBlocking, lo);
    cudaStreamCreateWithPriority(&urgent_, cudaStreamNonBlocking, hi);
    cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join_, cudaEventDisableTiming);
    cudaDeviceGetAttribute(&dev_.num_sms, cudaDevAttrMultiProcessorCount, 0);
    scratch_ = dev({int64_t{1} << 30}, DType::kU8);
    for (int n : {16, 24, 32, 48})
      if (auto part = cuda::SmPartition::create(0, n, hi)) parts_.push_back(std::move(part));
  }
  void TearDown() override {
    parts_.clear();
    if (plain_) cudaStreamDestroy(plain_);
    if (urgent_) cudaStreamDestroy(urgent_);
    if (fork_) cudaEventDestroy(fork_);
    if (join_) cudaEventDestroy(join_);
    bench::CudaBenchFixture::TearDown();
  }
  double time_us(const std::function<void(int)>& f) { return bench::median_us(stream_, f, 7, 5, 2); }

  // gemm(): issued on the backend's stream; attention(s): the decode rows' kernel on stream s.
  void compare(const std::string& name, const std::function<void()>& gemm, const AttentionParams& p) {
    auto attention = [&](cudaStream_t s) {
      cuda::launch_paged_attention(p, [&](size_t) { return scratch_.data; }, dev_, s);
    };
    auto beside = [&](cudaStream_t s) {
      cudaEventRecord(fork_, stream_);
      cudaStreamWaitEvent(s, fork_, 0);
      attention(s);  // issued first: its blocks are placed before the GEMM's
      gemm();
      cudaEventRecord(join_, s);
      cudaStreamWaitEvent(stream_, join_, 0);
    };
    const double a = time_us([&](int) { gemm(); });
    const double b = time_us([&](int) { attention(stream_); });
    const double serial = time_us([&](int) {
      gemm();
      attention(stream_);
    });
    const double both = time_us([&](int) { beside(plain_); });
    const double both_hi = time_us([&](int) { beside(urgent_); });
    const double best = std::min(both, both_hi);
    std::printf("%-44s gemm %7.1f  attn %6.1f  in turn %7.1f  at once %7.1f  (attn urgent %7.1f) us  hid %4.0f%%\n",
                name.c_str(), a, b, serial, both, both_hi, 100.0 * (serial - best) / b);
    // The attention on a partition of the SMs (a green context), the GEMM planned for the whole device and
    // for the SMs left (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET).
    auto* cuda_be = static_cast<cuda::CudaBackend*>(be_.get());
    for (const auto& part : parts_) {
      auto on_part = [&] {
        cudaEventRecord(fork_, stream_);
        cudaStreamWaitEvent(part->stream(), fork_, 0);
        attention(part->stream());
        gemm();
        cudaEventRecord(part->done(), part->stream());
        cudaStreamWaitEvent(stream_, part->done(), 0);
      };
      const double alone = time_us([&](int) {  // on the partition, joined back so the timer sees it
        cudaEventRecord(fork_, stream_);
        cudaStreamWaitEvent(part->stream(), fork_, 0);
        attention(part->stream());
        cudaEventRecord(part->done(), part->stream());
        cudaStreamWaitEvent(stream_, part->done(), 0);
      });
      const double whole = time_us([&](int) { on_part(); });
      cuda_be->set_gemm_sm_target(dev_.num_sms - part->num_sms());
      const double gemm_left = time_us([&](int) { gemm(); });
      const double fitted = time_us([&](int) { on_part(); });
      cuda_be->set_gemm_sm_target(0);
      std::printf("%-44s   %3d SMs: attn alone %6.1f  gemm on the rest alone %7.1f  at once %7.1f (gemm planned "
                  "for all) %7.1f (for the rest) us  hid %4.0f%%\n",
                  "", part->num_sms(), alone, gemm_left, whole, fitted,
                  100.0 * (serial - std::min(whole, fitted)) / b);
    }
  }

  // ~rows decode rows over 1k-1.15k keys, H32/8 D128 (Qwen3-8B), as a 256-client step carries them.
  AttentionParams decode_rows(int rows, bool fp8) {
    std::vector<std::pair<int, int>> seqs;
    for (int i = 0; i < rows; ++i) seqs.push_back({1, 1024 + (i * 37) % 128});
    return paged_params(seqs, 32, 8, 128, fp8, /*list_prefill=*/true);
  }

  cudaStream_t plain_ = nullptr, urgent_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  std::vector<std::unique_ptr<cuda::SmPartition>> parts_;
  cuda::DeviceInfo dev_;
  Tensor scratch_;
};

// Qwen3-8B's MLP projections at a 2,048-token step's rows (the prompt rows' share: 1,792), FP8 W8A8 (activation
// quantization + cuBLASLt) beside 228 decode rows over an FP8 cache; then BF16 GEMMs beside a BF16 cache.
TEST_F(OverlapBench, GemmBesideDecodeAttention) {
  struct Shape {
    const char* name;
    int64_t k, m;
  };
  const int64_t n = 1792;
  for (bool fp8 : {true, false}) {
    const AttentionParams p = decode_rows(228, fp8);
    for (const Shape& sh : {Shape{"gate_up 4096->24576", 4096, 24576}, Shape{"down 12288->4096", 12288, 4096}}) {
      Tensor w = fp8 ? fp8_weight(sh.m, sh.k) : rand_t({sh.m, sh.k}, -0.02f, 0.02f);
      Tensor x = rand_t({n, sh.k}), o = rand_t({n, sh.m});
      const std::string name = std::string(fp8 ? "fp8 " : "bf16 ") + sh.name + " x 1792 | 228 rows";
      compare(name, [&] { be_->linear({x, w, Tensor(), o}); }, p);
    }
  }
}

}  // namespace
}  // namespace vireo
