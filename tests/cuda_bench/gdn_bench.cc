// Gated DeltaNet benchmark (device only; skipped unless VIREO_KERNEL_BENCH=1): gated_delta_net
// (gated_delta_net.cu) on a Qwen3.5-9B-like layer (Hk 16, Hv 32, dk = dv = 128, conv 4, bf16), decode
// steps of 1 / 8 / 32 sequences (one row each, contexts past 0 so the states are read) and one
// sequence's prefill chunk of 512 rows. 20 back-to-back calls per timing (PDL-chained); states in slots
// that rotate so the decode steps read their states from HBM, not L2.
//   bytes (decode): 2 x 64 KiB of ssm_state per (sequence, head) + conv state + proj + out
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='GdnBench.*'
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace vireo {
namespace {

class GdnBench : public ::testing::Test {
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
  Tensor rand_t(std::vector<int64_t> shape, float lo, float hi, DType dt) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> h(n);
    const uint32_t salt = 0x9e3779b9u * static_cast<uint32_t>(owned_.size() + 1);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t v = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
      h[i] = lo + (hi - lo) * static_cast<float>(v >> 8) * (1.0f / 16777216.0f);
    }
    Tensor t = be_->upload(Tensor(h.data(), DType::kF32, shape), dt);
    owned_.push_back(t);
    return t;
  }
  Tensor ints(const std::vector<int>& v) {
    Tensor t = be_->upload(Tensor(const_cast<int*>(v.data()), DType::kI32, {int64_t(v.size())}), DType::kI32);
    owned_.push_back(t);
    return t;
  }
  double time_us(const std::function<void()>& f, int reps, int inner) {
    for (int i = 0; i < 2; ++i) f();
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<double> ts;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(a, stream_);
      for (int j = 0; j < inner; ++j) f();
      cudaEventRecord(b, stream_);
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

  std::unique_ptr<Backend> be_;
  cudaStream_t stream_ = nullptr;
  std::vector<Tensor> owned_;
};

TEST_F(GdnBench, Qwen35LikeLayer) {
  constexpr int Hk = 16, Hv = 32, dk = 128, dv = 128, L = 4, kSlots = 256;
  constexpr int C = 2 * Hk * dk + Hv * dv, P = C + Hv * dv + 2 * Hv;
  Tensor conv_w = rand_t({C, L}, -0.5f, 0.5f, DType::kBF16), A_log = rand_t({Hv}, 0.f, 1.f, DType::kF32);
  Tensor dt_bias = rand_t({Hv}, -1.f, 1.f, DType::kF32), norm_w = rand_t({dv}, 0.8f, 1.2f, DType::kBF16);
  Tensor conv_state = rand_t({kSlots, L - 1, C}, -1.f, 1.f, DType::kBF16);
  Tensor ssm = rand_t({kSlots, Hv, dk, dv}, -0.1f, 0.1f, DType::kF32);  // 537 MB: slots rotate past L2
  std::printf("gated_delta_net Hk %d Hv %d dk %d dv %d conv %d bf16 (state %.0f KiB a sequence)\n", Hk, Hv, dk, dv, L,
              Hv * dk * dv * 4 / 1024.0);
  struct Case {
    int seqs, rows;  // rows a sequence
  };
  for (const Case c : {Case{1, 1}, Case{8, 1}, Case{32, 1}, Case{1, 512}}) {
    const int T = c.seqs * c.rows;
    Tensor proj = rand_t({T, P}, -1.f, 1.f, DType::kBF16), out = rand_t({T, Hv * dv}, 0.f, 0.f, DType::kBF16);
    std::vector<int> qs{0}, lens;
    for (int s = 0; s < c.seqs; ++s) qs.push_back(qs.back() + c.rows), lens.push_back(1000 + c.rows);
    // kSlots / seqs groups of slots in turn, so each call reads other states.
    const int groups = kSlots / c.seqs;
    std::vector<Tensor> slot_sets;
    for (int g = 0; g < groups; ++g) {
      std::vector<int> sl(c.seqs);
      for (int s = 0; s < c.seqs; ++s) sl[s] = g * c.seqs + s;
      slot_sets.push_back(ints(sl));
    }
    GatedDeltaNetParams p;
    p.proj = proj, p.conv_w = conv_w, p.A_log = A_log, p.dt_bias = dt_bias, p.norm_w = norm_w;
    p.conv_state = conv_state, p.ssm_state = ssm, p.out = out;
    p.query_start = ints(qs), p.seq_lens = ints(lens);
    p.num_seqs = c.seqs, p.num_k_heads = Hk, p.num_v_heads = Hv, p.head_k_dim = dk, p.head_v_dim = dv, p.conv_kernel = L;
    int g = 0;
    const double us = time_us([&] {
      p.state_slots = slot_sets[g];
      g = (g + 1) % groups;
      be_->gated_delta_net(p);
    }, 7, c.rows > 1 ? 3 : 20);
    const double bytes = c.seqs * (2.0 * Hv * dk * dv * 4 + 2.0 * (L - 1) * C * 2) + T * (P + Hv * dv) * 2.0;
    std::printf("gdn %2d seq x %3d rows %9.1f us %7.0f GB/s%s\n", c.seqs, c.rows, us, bytes / us / 1e3,
                c.rows > 1 ? "  (token-by-token recurrence)" : "");
  }
}

}  // namespace
}  // namespace vireo
