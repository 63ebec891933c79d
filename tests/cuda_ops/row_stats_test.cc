// LinearParams::row_stats on the GPU: the batch-1 streaming GEMV's epilogue (gemv_stream_rows.cuh, the
// lm_head's shapes: K 1024 / 2048, with and without the fused input norm, the backend's C ranges) and
// the stand-alone pass (range_stats.cu: other batch sizes, other C, other kernels). Oracle:
// cpu::range_stats over the GPU's own stored output (the statistics describe the values as stored).
// Outputs and statistics are poisoned first; asking for statistics must not change the output's bits.
#include <cstring>

#include "backend/cpu/cpu_range_stats.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

class RowStatsTest : public CudaOpsTest {
 protected:
  // y = x W^T (optionally over rmsnorm(x) * g) for n rows, with statistics over `ranges` ranges (0: the
  // backend's own C); checks them against the reference over the stored y.
  void check(int64_t n, int64_t k, int64_t m, bool norm, int64_t ranges) {
    const int64_t c = ranges > 0 ? ranges : gpu_->row_stats_ranges(m);
    ASSERT_GT(c, 0);
    SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " m " + std::to_string(m) + " C " +
                 std::to_string(c) + (norm ? " norm" : "") + " seed " + std::to_string(seed_));
    Tensor x = gpu_from(rand_vec(size_t(n * k), -1.f, 1.f, act_), {n, k}, act_);
    Tensor w = gpu_from(rand_vec(size_t(m * k), -0.5f, 0.5f, act_), {m, k}, act_);
    Tensor g = norm ? gpu_from(rand_vec(size_t(k), 0.5f, 1.5f, act_), {k}, act_) : Tensor();
    LinearParams plain{x, w, Tensor(), gpu_poisoned({n, m}, act_)};
    plain.input_norm = g;
    gpu_->linear(plain);
    LinearParams p = plain;
    p.out = gpu_poisoned({n, m}, act_);
    p.row_stats = gpu_poisoned({n, c, 4}, DType::kF32);
    gpu_->linear(p);
    const std::vector<float> y = to_host(p.out), y_plain = to_host(plain.out);
    ASSERT_EQ(std::memcmp(y.data(), y_plain.data(), y.size() * sizeof(float)), 0) << "statistics changed the output";
    std::vector<RangeStats> got(size_t(n * c)), want(size_t(n * c));
    gpu_->copy_to_host(p.row_stats, got.data());
    for (int64_t r = 0; r < n; ++r) cpu::range_stats(y.data() + r * m, m, c, want.data() + r * c);
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      const RangeStats &a = got[i], &b = want[i];
      const bool ok = a.max == b.max && a.best_value == b.best_value && a.best_id == b.best_id &&
                      std::fabs(a.sum - b.sum) <= 2e-6f * b.sum + 1e-30f;
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "range " << i << ": got (" << a.max << ", " << a.sum << ", " << a.best_value << ", "
                      << a.best_id << ") want (" << b.max << ", " << b.sum << ", " << b.best_value << ", " << b.best_id
                      << ")";
      }
    }
  }
};

// The lm_head forms the epilogue takes: batch 1, 2 and 4 KiB rows, the backend's C (rows split unevenly).
TEST_F(RowStatsTest, StreamRowsEpilogue) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    use_dtype(dt);
    for (auto [k, m] : std::vector<std::pair<int, int>>{{1024, 20001}, {2048, 4099}, {1024, 2112}})
      for (bool norm : {true, false}) check(1, k, m, norm, 0);
    check(1, 1024, 151936, true, 0);  // Qwen3's lm_head with model.norm
  }
}

// Everything else: the stand-alone pass after the linear (batch 2-7, K the epilogue does not take, fewer
// rows than ranges, any C, fp32 activations through cuBLASLt).
TEST_F(RowStatsTest, StandAlonePass) {
  use_dtype(DType::kBF16);
  check(2, 1024, 20001, true, 0);
  check(1, 4096, 5000, false, 0);   // the general streaming kernel
  check(1, 1024, 20001, true, 7);   // a C the epilogue does not make
  check(7, 512, 1000, false, 33);
  check(3, 256, 40, false, 100);    // empty ranges
  use_dtype(DType::kF32);
  check(1, 1024, 3001, false, 0);
  check(4, 128, 999, true, 16);
}

}  // namespace
}  // namespace vireo::testing
