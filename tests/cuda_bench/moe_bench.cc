// MoE layer benchmark (device only; skipped unless VIREO_KERNEL_BENCH=1): one Qwen3-30B-A3B sparse MLP
// (hidden 2048, moe_intermediate 768, 128 experts, top-8, norm_topk_prob, bf16) at T = 1, 8, 16, 32, 64,
// 512, 2048 tokens through the backend's moe op with each expert path forced (moe.h), then each path's
// kernels one by one on the same routing (ids from a host top-k, uploaded): the decode kernels
// (moe_decode.cu: gate_up, down with its ordered sum; T <= 64) and the grouped path's four.
// Per line: median us, GB/s and TFLOP/s, and the share of the roofline time max(bytes / HBM copy rate,
// FLOPs / cuBLASLt 8192^3 rate), both ceilings measured first in this process.
//   bytes: the distinct experts' weights the tokens touch (3 * hidden * inter * 2 each) + router + x + out
//   FLOPs: 2 * T * k * 3 * hidden * inter
// C_RouteOnly: the routing kernels alone (launch_moe_route) at T = 1, 8, 64 on the same shape, the small-T
// kernels (router GEMV over ceil(E / 4) x ceil(T / 8) blocks + one warp a token) and the large-T kernel
// (one block per 8 tokens reads the whole router), 50 back-to-back launches per timing (PDL chained).
//   bytes: router (128 x 2048 bf16 = 512 KiB) + x + logits scratch + ids / weights
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='MoeBench.*'
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/moe.h"
#include "bench_fixture.h"
#include "core/dtype.h"

namespace vireo {
namespace {

double g_hbm_gbs = 4300, g_gemm_tflops = 790;  // replaced by the measured ceilings

class MoeBench : public bench::CudaBenchFixture {
 protected:
  void SetUp() override {
    CudaBenchFixture::SetUp();
    if (IsSkipped()) return;
    saved_ = cuda::moe_path();
  }
  void TearDown() override {
    if (be_) cuda::set_moe_path(saved_);
    CudaBenchFixture::TearDown();
  }
  // bf16 values in [-a, a) from the fixture's hash (fast for 400M elements); `host` keeps them.
  Tensor rand_t(std::vector<int64_t> shape, float a, std::vector<float>* host = nullptr) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> h = hash_unit(n);
    for (float& x : h) x = bf16_to_f32(f32_to_bf16(a * (2.f * x - 1.f)));
    Tensor t = own(be_->upload(Tensor(h.data(), DType::kF32, shape), DType::kBF16));
    if (host) *host = std::move(h);
    return t;
  }
  // Median per-call time in us (bench::median_us) after 2 warm-up calls.
  double time_us(const std::function<void()>& f, int reps, int inner) {
    return bench::median_us(stream_, [&](int) { f(); }, reps, inner, 2);
  }
  static void report(const std::string& name, double us, double bytes, double flops) {
    const double roof_us = std::max(bytes / g_hbm_gbs / 1e3, flops / g_gemm_tflops / 1e6);
    std::printf("%-44s %9.1f us %7.0f GB/s %6.1f TFLOP/s %5.1f%% of roofline\n", name.c_str(), us, bytes / us / 1e3,
                flops / us / 1e6, 100 * roof_us / us);
  }

  cuda::MoePath saved_ = cuda::MoePath::kAuto;
};

TEST_F(MoeBench, A_Ceilings) {
  const size_t n = size_t{1} << 30;
  Tensor a = dev({int64_t(n)}, DType::kU8), b = dev({int64_t(n)}, DType::kU8);
  cudaMemsetAsync(a.data, 0x5a, n, stream_);
  double us = time_us([&] { cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDeviceToDevice, stream_); }, 9, 4);
  g_hbm_gbs = 2.0 * n / us / 1e3;
  const int64_t s = 8192;
  Tensor x = rand_t({s, s}, 1.f), w = rand_t({s, s}, 0.01f), o = dev({s, s}, DType::kBF16);
  us = time_us([&] { be_->linear({x, w, Tensor(), o}); }, 5, 4);
  g_gemm_tflops = 2.0 * s * s * s / us / 1e6;
  std::printf("moe ceilings: device copy %.0f GB/s, cuBLASLt bf16 GEMM 8192^3 %.0f TFLOP/s\n", g_hbm_gbs, g_gemm_tflops);
}

TEST_F(MoeBench, B_Qwen3_30B_A3B_Layer) {
  constexpr int64_t H = 2048, I = 768, E = 128;
  constexpr int k = 8;
  const double expert_bytes = 3.0 * H * I * 2;
  std::vector<float> router_h;
  Tensor router = rand_t({E, H}, 3.f / std::sqrt(float(H)), &router_h);
  Tensor gu = rand_t({E, 2 * I, H}, 3.f / std::sqrt(float(H))), down = rand_t({E, H, I}, 3.f / std::sqrt(float(I)));
  std::printf("moe Qwen3-30B-A3B layer: hidden %lld, inter %lld, %lld experts, top-%d, bf16 (%.2f GB of experts)\n",
              (long long)H, (long long)I, (long long)E, k, E * expert_bytes / 1e9);
  for (int64_t T : {1, 8, 16, 32, 64, 512, 2048}) {  // 16, 32: around the path switch
    std::vector<float> x_h;
    Tensor x = rand_t({T, H}, 1.f, &x_h), out = dev({T, H}, DType::kBF16);
    // Host routing as the GPU's (logits rounded to bf16, lowest id among ties): the distinct experts.
    std::vector<int> ids(T * k);
    std::vector<float> l(E);
    std::vector<int> order(E);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t e = 0; e < E; ++e) {
        float acc = 0;
        for (int64_t h = 0; h < H; ++h) acc += x_h[t * H + h] * router_h[e * H + h];
        l[e] = bf16_to_f32(f32_to_bf16(acc));
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
      std::copy_n(order.begin(), k, ids.begin() + t * k);
    }
    const size_t distinct = std::set<int>(ids.begin(), ids.end()).size();
    const double flops = 2.0 * T * k * 3 * H * I;
    const double bytes = distinct * expert_bytes + E * H * 2.0 + 2.0 * T * H * 2;
    const std::string shape = "T=" + std::to_string(T) + " (" + std::to_string(distinct) + " experts)";
    MoeParams p{x, router, gu, down, out, k, true};
    for (cuda::MoePath path : {cuda::MoePath::kPerSlot, cuda::MoePath::kGrouped}) {
      cuda::set_moe_path(path);
      const bool slow = path == cuda::MoePath::kPerSlot && T >= 512;
      const double us = time_us([&] { be_->moe(p); }, slow ? 3 : 9, slow ? 1 : (T <= 64 ? 20 : 3));
      report("moe " + shape + (path == cuda::MoePath::kGrouped ? " grouped" : " per-slot"), us, bytes, flops);
    }

    // The grouped path's kernels alone on the host routing (weights 1 / k; the route kernel's share is
    // the op's time less these).
    const int64_t S = T * k, max_tiles = cuda::moe_max_tiles(S, E);
    std::vector<float> wts(S, 1.f / k);
    Tensor ids_d = be_->upload(Tensor(ids.data(), DType::kI32, {S}), DType::kI32);
    Tensor wts_d = be_->upload(Tensor(wts.data(), DType::kF32, {S}), DType::kF32);
    owned_.push_back(ids_d);
    owned_.push_back(wts_d);
    Tensor sorted = dev({S}, DType::kI32), rows = dev({S}, DType::kI32), tiles = dev({max_tiles * 4}, DType::kI32);
    Tensor ntiles = dev({1}, DType::kI32), act = dev({S, I}, DType::kBF16), y = dev({S, H}, DType::kBF16);
    auto* tl = static_cast<cuda::MoeTile*>(tiles.data);
    auto sort = [&] {
      cuda::launch_moe_sort(ids_d.ptr<int>(), S, E, sorted.ptr<int>(), rows.ptr<int>(), tl, ntiles.ptr<int>(), stream_);
    };
    auto gate_up = [&] {
      cuda::launch_moe_gate_up_grouped(DType::kBF16, x.data, gu.data, sorted.ptr<int>(), k, tl, ntiles.ptr<int>(),
                                       max_tiles, H, I, act.data, stream_);
    };
    auto down_k = [&] {
      cuda::launch_moe_down_grouped(DType::kBF16, act.data, down.data, tl, ntiles.ptr<int>(), max_tiles, H, I, y.data,
                                    stream_);
    };
    auto combine = [&] {
      cuda::launch_moe_combine(DType::kBF16, y.data, ids_d.ptr<int>(), wts_d.ptr<float>(), rows.ptr<int>(), T, k, H,
                               out.data, stream_);
    };
    const int inner = T <= 64 ? 20 : 5;
    if (T <= 64) {  // the decode kernels (the per-slot path less its route kernel)
      auto gate_up_dec = [&] {
        cuda::launch_moe_gate_up_decode(DType::kBF16, x.data, gu.data, ids_d.ptr<int>(), T, k, H, I, act.data, stream_);
      };
      auto down_dec = [&] {
        cuda::launch_moe_down_decode(DType::kBF16, act.data, down.data, ids_d.ptr<int>(), wts_d.ptr<float>(), T, k, H,
                                     I, out.data, stream_);
      };
      const double gu_us = time_us(gate_up_dec, 9, inner), dn_us = time_us(down_dec, 9, inner);
      report("  decode gate_up " + shape, gu_us, distinct * 2.0 * H * I * 2 + 2.0 * T * H + 2.0 * S * I,
             2.0 * S * 2 * I * H);
      report("  decode down+sum " + shape, dn_us, distinct * 1.0 * H * I * 2 + 2.0 * S * I + 2.0 * T * H,
             2.0 * S * H * I);
      report("  decode gate_up + down " + shape, gu_us + dn_us, distinct * expert_bytes + 2.0 * T * H * 2,
             flops);
    }
    sort();  // the tables the GEMMs read
    report("  sort " + shape, time_us(sort, 9, inner), 12.0 * S, 0);
    report("  gate_up " + shape, time_us(gate_up, 9, inner),
           distinct * 2.0 * H * I * 2 + 2.0 * S * H + 2.0 * S * I, 2.0 * S * 2 * I * H);
    report("  down " + shape, time_us(down_k, 9, inner), distinct * 1.0 * H * I * 2 + 2.0 * S * I + 2.0 * S * H,
           2.0 * S * H * I);
    report("  combine " + shape, time_us(combine, 9, inner), 2.0 * S * H + 2.0 * T * H + 12.0 * S, 0);
  }
}

TEST_F(MoeBench, C_RouteOnly) {
  constexpr int64_t H = 2048, E = 128;
  constexpr int k = 8;
  // 128 routers (64 MiB, past the 50 MB L2), one per launch in turn, so each launch reads its router from
  // HBM as a model's 48 layers do between the expert streams.
  constexpr int64_t kCopies = 128;
  Tensor routers = rand_t({kCopies * E, H}, 3.f / std::sqrt(float(H)));
  std::printf("moe routing alone, Qwen3-30B-A3B router (%lld x %lld bf16, %.0f KiB, %lld copies in turn), top-%d, "
              "kSoftmax\n", (long long)E, (long long)H, E * H * 2 / 1024.0, (long long)kCopies, k);
  for (int64_t T : {1, 8, 64}) {
    Tensor x = rand_t({T, H}, 1.f);
    Tensor ids = dev({T * k}, DType::kI32), wts = dev({T * k}, DType::kF32), logits = dev({T * E}, DType::kF32);
    MoeParams p{x, routers.slice_rows(0, E), Tensor(), Tensor(), Tensor(), k, true};
    int64_t copy = 0;
    const double bytes = E * H * 2.0 + T * H * 2.0 + 2.0 * T * E * 4 + T * k * 8.0;
    for (cuda::MoeRoutePath path : {cuda::MoeRoutePath::kSmallT, cuda::MoeRoutePath::kLargeT}) {
      const double us = time_us([&] {
        copy = (copy + 1) % kCopies;
        p.router_w = routers.slice_rows(copy * E, (copy + 1) * E);
        cuda::launch_moe_route(p, x.data, T, ids.ptr<int>(), wts.ptr<float>(), logits.ptr<float>(), path, stream_);
      }, 9, 50);
      report(std::string("route T=") + std::to_string(T) +
                 (path == cuda::MoeRoutePath::kSmallT ? " small-T kernels" : " large-T kernel"),
             us, bytes, 2.0 * T * E * H);
    }
  }
}

}  // namespace
}  // namespace vireo
