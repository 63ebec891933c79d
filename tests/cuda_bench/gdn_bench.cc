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
#include "bench_fixture.h"
#include "core/dtype.h"

namespace vireo {
namespace {

class GdnBench : public bench::CudaBenchFixture {
 protected:
  double time_us(const std::function<void()>& f, int reps, int inner) {
    return bench::median_us(stream_, [&](int) { f(); }, reps, inner, 2);
  }
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
