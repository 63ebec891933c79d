// FP8 linears (fp8_linear.h; --quantization fp8) against BF16 on the Qwen3-8B shapes (device only; skipped
// unless VIREO_KERNEL_BENCH=1). Ceilings measured first in this process: HBM copy, cuBLASLt BF16 and FP8
// (outer-vector scales) GEMMs at 8192^3. Then per shape:
//   decode N = 1 / 4 / 8: the FP8 GEMV vs the BF16 GEMV; bytes = weights (1 or 2 per element) + scales + x +
//     out, from 4 weight copies so the reads come from HBM, not the 50 MB L2;
//   N = 256 (a 256-client decode step) and N = 4096 (prefill): run_linear_fp8 (the activation quantization
//     kernel + cuBLASLt FP8) vs cuBLASLt BF16; FLOPs = 2 N M K;
//   the activation quantization alone (D_Quantize), in GB/s against the copy ceiling;
//   decode batches' W8A8 GEMM alone (E_SmallGemm): cuBLASLt's vs the wgmma kernel (fp8_gemm_small.h).
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='Fp8Bench.*'
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/fp8_gemm_small.h"
#include "backend/cuda/fp8_gemm_ws.h"
#include "backend/cuda/fp8_linear.h"
#include "bench_fixture.h"
#include "core/fp8.h"

namespace vireo {
namespace {

double g_hbm_gbs = 4300, g_bf16_tflops = 790, g_fp8_tflops = 1500;  // replaced by the measured ceilings

class Fp8Bench : public bench::CudaBenchFixture {
 protected:
  double time_us(const std::function<void(int)>& f, int reps = 9, int inner = 10) {
    return bench::median_us(stream_, f, reps, inner, 2);
  }
  static void line(const std::string& name, double us, double bytes, double flops, double tflops_ceiling) {
    const double roof = std::max(bytes / g_hbm_gbs / 1e3, flops / tflops_ceiling / 1e6);
    std::printf("%-46s %9.1f us %7.0f GB/s %7.1f TFLOP/s %5.1f%% of roofline\n", name.c_str(), us, bytes / us / 1e3,
                flops / us / 1e6, 100 * roof / us);
  }
};

TEST_F(Fp8Bench, A_Ceilings) {
  const size_t n = size_t{1} << 30;
  Tensor a = dev({int64_t(n)}, DType::kU8), b = dev({int64_t(n)}, DType::kU8);
  cudaMemsetAsync(a.data, 0x5a, n, stream_);
  const double cus = time_us([&](int) { cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDeviceToDevice, stream_); }, 9, 4);
  g_hbm_gbs = 2.0 * n / cus / 1e3;
  const int64_t s = 8192;
  Tensor x = rand_t({s, s}), w = rand_t({s, s}, -0.01f, 0.01f), o = rand_t({s, s});
  g_bf16_tflops = 2.0 * s * s * s / time_us([&](int) { be_->linear({x, w, Tensor(), o}); }, 5, 4) / 1e6;
  Tensor w8 = fp8_weight(s, s);
  g_fp8_tflops = 2.0 * s * s * s / time_us([&](int) { be_->linear({x, w8, Tensor(), o}); }, 5, 4) / 1e6;
  std::printf("ceiling: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s, fp8 linear (quantize + GEMM) %.0f TFLOP/s at 8192^3\n",
              g_hbm_gbs, g_bf16_tflops, g_fp8_tflops);
}

TEST_F(Fp8Bench, B_Linears) {
  struct Shape {
    const char* name;
    int64_t k, m;
  };
  for (const Shape& sh : std::vector<Shape>{{"qkv 4096->6144", 4096, 6144},
                                            {"o_proj 4096->4096", 4096, 4096},
                                            {"gate_up 4096->24576", 4096, 24576},
                                            {"down 12288->4096", 12288, 4096}}) {
    constexpr int kCopies = 4;
    std::vector<Tensor> wb, w8;
    for (int i = 0; i < kCopies; ++i) {
      wb.push_back(rand_t({sh.m, sh.k}, -0.02f, 0.02f));
      w8.push_back(fp8_weight(sh.m, sh.k));
    }
    for (int64_t n : {1, 4, 8, 256, 4096}) {
      Tensor x = rand_t({n, sh.k}), o = rand_t({n, sh.m});
      const double bus = time_us([&](int i) { be_->linear({x, wb[i % kCopies], Tensor(), o}); });
      const double fus = time_us([&](int i) { be_->linear({x, w8[i % kCopies], Tensor(), o}); });
      const double flops = 2.0 * n * sh.m * sh.k, io = 2.0 * n * (sh.k + sh.m);
      const std::string name = "N=" + std::to_string(n) + " " + sh.name;
      line(name + " bf16", bus, 2.0 * sh.m * sh.k + io, flops, g_bf16_tflops);
      line(name + " fp8", fus, 1.0 * sh.m * sh.k + 4.0 * sh.m + io, flops, g_fp8_tflops);
    }
  }
}

// Where the GEMV should hand over to the W8A8 GEMM (fp8_gemm_min_rows): for N = 1 .. 16 rows, the
// weight-only GEMV (up to the kernel's kFp8GemvMaxRows) against the activation quantization plus cuBLASLt's
// FP8 GEMM, each from 4 weight copies.
TEST_F(Fp8Bench, C_SmallN) {
  cuda::CublasLtGemm gemm;
  for (auto [name, k, m] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"qkv", 4096, 6144}, {"gate_up", 4096, 24576}, {"down", 12288, 4096}}) {
    constexpr int kCopies = 4;
    std::vector<Tensor> w8;
    for (int i = 0; i < kCopies; ++i) w8.push_back(fp8_weight(m, k));
    for (int64_t n : {1, 2, 3, 4, 6, 8, 12, 16}) {
      Tensor x = rand_t({n, k}), o = rand_t({n, m}), xq = dev({n, k}, DType::kU8), xs = dev({n}, DType::kF32);
      const double gemv = n > cuda::kFp8GemvMaxRows ? 0 : time_us([&](int i) {
        const Tensor& w = w8[i % kCopies];
        cuda::launch_gemv_fp8({x.data, static_cast<const uint8_t*>(w.data), w.row_scale, nullptr, o.data, n, m, k,
                               DType::kBF16},
                              stream_);
      });
      if (!gemm.fp8_outer_vec(n, m, k, DType::kBF16)) {
        std::printf("small N=%-3lld %-8s gemv %7.1f us   (no outer-vector FP8 GEMM)\n", (long long)n, name, gemv);
        continue;
      }
      const double gm = time_us([&](int i) {
        const Tensor& w = w8[i % kCopies];
        cuda::launch_fp8_quantize_rows(x.data, DType::kBF16, n, k, xq.ptr<uint8_t>(), xs.ptr<float>(), stream_);
        gemm.run_fp8({static_cast<const uint8_t*>(w.data), w.row_scale, xq.ptr<uint8_t>(), xs.ptr<float>(), nullptr,
                      o.data, n, m, k, DType::kBF16, nullptr},
                     stream_);
      });
      std::printf("small N=%-3lld %-8s gemv %7.1f us   quantize + gemm %7.1f us\n", (long long)n, name, gemv, gm);
    }
  }
}

// The activation quantization alone (the W8A8 linears' prologue kernel) at a decode step's, a serving mixed
// step's and a large prefill step's rows, in the three forms a Qwen3-8B layer runs: qkv / gate_up inputs
// with the RMSNorm on the way, o_proj's plain input, down's SiLU-and-mul input ([N, 2 x 12288] bf16).
// Bytes = the rows read + the E4M3 codes and scales written; it is bound by HBM bandwidth (copy ceiling).
TEST_F(Fp8Bench, D_Quantize) {
  struct Form {
    const char* name;
    int64_t k;
    bool norm, silu;
  };
  for (const Form& f : std::vector<Form>{{"norm K 4096", 4096, true, false},
                                         {"plain K 4096", 4096, false, false},
                                         {"silu_mul K 12288", 12288, false, true}}) {
    for (int64_t n : {256, 2304, 8192}) {
      const int64_t in_k = f.silu ? 2 * f.k : f.k;
      Tensor x = rand_t({n, in_k}), w = rand_t({f.k}, 0.5f, 1.5f), xq = dev({n, f.k}, DType::kU8),
             xs = dev({n}, DType::kF32);
      const double us = time_us([&](int) {
        cuda::launch_fp8_quantize_rows(x.data, DType::kBF16, n, f.k, xq.ptr<uint8_t>(), xs.ptr<float>(), stream_,
                                       f.norm ? w.data : nullptr, 1e-6f, f.silu);
      });
      const double bytes = 2.0 * n * in_k + 1.0 * n * f.k + 4.0 * n;
      std::printf("quantize %-18s N=%-5lld %8.1f us %7.0f GB/s %5.1f%% of copy\n", f.name, (long long)n, us,
                  bytes / us / 1e3, 100.0 * bytes / us / 1e3 / g_hbm_gbs);
    }
  }
}

// The W8A8 GEMM of a decode batch alone (activations already quantized): cuBLASLt's outer-vector-scaled
// algorithm vs the wgmma kernel of fp8_gemm_small.h (with its split reduction), from 4 weight copies.
// Bytes = the weights once (HBM) + the codes, scales and bf16 output; the kernel's activation re-reads (L2)
// are not counted.
TEST_F(Fp8Bench, E_SmallGemm) {
  cuda::CublasLtGemm gemm;
  for (auto [name, k, m] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"qkv", 4096, 6144}, {"o_proj", 4096, 4096}, {"gate_up", 4096, 24576}, {"down", 12288, 4096}}) {
    constexpr int kCopies = 4;
    std::vector<Tensor> w8;
    for (int i = 0; i < kCopies; ++i) w8.push_back(fp8_weight(m, k));
    for (int64_t n : {16, 64, 128}) {
      Tensor o = rand_t({n, m}), xq = dev({n, k}, DType::kU8), xs = rand_t({n}, 0.5f, 1.f, DType::kF32);
      cudaMemsetAsync(xq.data, 0x30, xq.nbytes(), stream_);
      const size_t part = cuda::fp8_small_gemm_scratch(n, m, k);
      Tensor ws = dev({int64_t(std::max<size_t>(part, 16))}, DType::kU8);
      auto args = [&](int i) {
        const Tensor& w = w8[i % kCopies];
        return cuda::CublasLtGemm::Fp8Args{static_cast<const uint8_t*>(w.data), w.row_scale, xq.ptr<uint8_t>(),
                                           xs.ptr<float>(), nullptr, o.data, n, m, k, DType::kBF16, nullptr};
      };
      const double lt = gemm.fp8_outer_vec(n, m, k, DType::kBF16) ? time_us([&](int i) { gemm.run_fp8(args(i), stream_); }) : 0;
      const double sm = cuda::fp8_small_gemm_ok(n, m, k)
                            ? time_us([&](int i) { cuda::launch_fp8_small_gemm(args(i), ws.ptr<float>(), stream_); })
                            : 0;
      const double bytes = 1.0 * m * k + 4.0 * m + 1.0 * n * k + 4.0 * n + 2.0 * n * m;
      std::printf("small gemm N=%-3lld %-8s cuBLASLt %7.1f us (%5.0f GB/s)   wgmma %7.1f us (%5.0f GB/s, %4.1f%% of copy, "
                  "scratch %zu KB)\n",
                  (long long)n, name, lt, lt > 0 ? bytes / lt / 1e3 : 0, sm, sm > 0 ? bytes / sm / 1e3 : 0,
                  sm > 0 ? 100 * bytes / sm / 1e3 / g_hbm_gbs : 0, part >> 10);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Prefill-sized W8A8 GEMMs alone (the activations already quantized; o_proj and down with the residual in
// place, as the serving step runs them): cuBLASLt's outer-vector FP8 GEMM vs the warp-specialised wgmma
// kernel (fp8_gemm_ws.h), alternated, 4 weight copies. VIREO_WS_ROWS=2048,8192 picks the row counts.
TEST_F(Fp8Bench, F_WsGemm) {
  cuda::CublasLtGemm gemm;
  const std::vector<int64_t> rows = bench::env_int_list("VIREO_WS_ROWS", {2048, 8192});
  const bool pairs = bench::env_int_list("VIREO_WS_PAIRS", {1})[0] != 0;  // 0: skip the block-pair kernel
  if (pairs) std::printf("block pairs: %d clusters of 2 at once\n", cuda::fp8_gemm_pair_clusters());
  struct Shape {
    const char* name;
    int64_t k, m;
    bool residual;
  };
  for (const Shape& sh : std::vector<Shape>{{"qkv", 4096, 6144, false},
                                            {"o_proj", 4096, 4096, true},
                                            {"gate_up", 4096, 24576, false},
                                            {"down", 12288, 4096, true}}) {
    constexpr int kCopies = 4;
    std::vector<Tensor> w8;
    for (int i = 0; i < kCopies; ++i) w8.push_back(fp8_weight(sh.m, sh.k));
    for (int64_t n : rows) {
      Tensor x = rand_t({n, sh.k}), o = rand_t({n, sh.m}, -1.f, 1.f);
      Tensor xq = dev({n, sh.k}, DType::kU8), xs = dev({n}, DType::kF32);
      cuda::launch_fp8_quantize_rows(x.data, DType::kBF16, n, sh.k, xq.ptr<uint8_t>(), xs.ptr<float>(), stream_);
      auto args = [&](int i) {
        const Tensor& w = w8[i % kCopies];
        cuda::CublasLtGemm::Fp8Args g{static_cast<const uint8_t*>(w.data), w.row_scale, xq.ptr<uint8_t>(),
                                      xs.ptr<float>(), nullptr, o.data, n, sh.m, sh.k, DType::kBF16, nullptr};
        g.residual = sh.residual ? o.data : nullptr;
        return g;
      };
      const double flops = 2.0 * n * sh.m * sh.k;
      // Four kernels interleaved, twice (the second round reported: clocks settle under the FP8 load).
      double lt[2] = {0, 0}, ws[2] = {0, 0}, pp[2] = {0, 0}, p2[2] = {0, 0};
      for (int r = 0; r < 2; ++r) {
        lt[r] = time_us([&](int i) { gemm.run_fp8(args(i), stream_); }, 7, 8);
        ws[r] = cuda::fp8_gemm_ws_ok(n, sh.m, sh.k) ? time_us([&](int i) { cuda::launch_fp8_gemm_ws(args(i), stream_); }, 7, 8)
                                                    : 0;
        pp[r] = time_us([&](int i) { cuda::launch_fp8_gemm_pingpong(args(i), stream_); }, 7, 8);
        if (pairs) p2[r] = time_us([&](int i) { cuda::launch_fp8_gemm_pingpong(args(i), stream_, 2); }, 7, 8);
      }
      auto rate = [&](double us) { return us > 0 ? flops / us / 1e6 : 0.0; };
      auto vs = [&](double us) { return us > 0 ? 100.0 * (us - lt[1]) / lt[1] : 0.0; };
      std::printf("ws gemm N=%-5lld %-8s cuBLASLt %7.1f / %7.1f us (%5.0f TFLOP/s)  cooperative %7.1f / %7.1f us (%5.0f, "
                  "%+.1f%%)  ping-pong %7.1f / %7.1f us (%5.0f, %+.1f%%)  pairs %7.1f / %7.1f us (%5.0f, %+.1f%%)\n",
                  (long long)n, sh.name, lt[0], lt[1], rate(lt[1]), ws[0], ws[1], rate(ws[1]), vs(ws[1]), pp[0], pp[1],
                  rate(pp[1]), vs(pp[1]), p2[0], p2[1], rate(p2[1]), vs(p2[1]));
      std::fflush(stdout);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The serving steps' GEMMs as a mixed step runs them (cuBLASLt: qkv / o_proj / down with outer-vector scales,
// gate_up unscaled, run_mlp_fp8), at step sizes around the serving workload's ~2,100 rows: whether the time a
// row is flat or steps with the tile waves (a 128-row tile of 32 / 48 / 192 column tiles over 132 SMs).
// VIREO_SWEEP_ROWS overrides the rows.
TEST_F(Fp8Bench, H_RowSweep) {
  cuda::CublasLtGemm gemm;
  std::vector<int64_t> rows = bench::env_int_list("VIREO_SWEEP_ROWS", {});
  if (rows.empty())
    for (int64_t n = 1792; n <= 2816; n += 64) rows.push_back(n);
  struct Shape {
    int64_t k, m;
    bool residual, unscaled;
  };
  const std::vector<Shape> shapes{{4096, 6144, false, false}, {4096, 4096, true, false}, {4096, 24576, false, true},
                                  {12288, 4096, true, false}};
  // VIREO_SWEEP_BF16=1: the BF16 weights' GEMMs instead (the backend's linear: cuBLASLt, residual epilogue).
  const bool bf16 = bench::env_int_list("VIREO_SWEEP_BF16", {0})[0] != 0;
  constexpr int kCopies = 4;
  std::vector<std::vector<Tensor>> w8(shapes.size());
  for (size_t s = 0; s < shapes.size(); ++s)
    for (int i = 0; i < kCopies; ++i)
      w8[s].push_back(bf16 ? rand_t({shapes[s].m, shapes[s].k}, -0.02f, 0.02f) : fp8_weight(shapes[s].m, shapes[s].k));
  // BF16 activations and outputs per shape ([max N, K], [max N, M]; a step's rows are their first N rows).
  std::vector<Tensor> xb(shapes.size()), ob(shapes.size());
  for (size_t s = 0; bf16 && s < shapes.size(); ++s) {
    const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
    xb[s] = rand_t({max_rows, shapes[s].k});
    ob[s] = rand_t({max_rows, shapes[s].m}, -1.f, 1.f);
  }
  const int64_t max_n = *std::max_element(rows.begin(), rows.end());
  Tensor xq = dev({max_n, 12288}, DType::kU8), xs = dev({max_n}, DType::kF32);
  Tensor x = rand_t({max_n, 12288});
  cuda::launch_fp8_quantize_rows(x.data, DType::kBF16, max_n, 12288, xq.ptr<uint8_t>(), xs.ptr<float>(), stream_);
  Tensor o = rand_t({max_n, 24576}, -1.f, 1.f);
  for (int64_t n : rows) {
    double us[4], total = 0;
    for (size_t s = 0; s < shapes.size(); ++s) {
      const Shape& sh = shapes[s];
      auto run = [&](int i) {
        const Tensor& w = w8[s][i % kCopies];
        if (bf16) {
          LinearParams p;
          p.x = xb[s].slice_rows(0, n);
          p.w = w;
          p.out = ob[s].slice_rows(0, n);
          if (sh.residual) p.residual = p.out;
          be_->linear(p);
          return;
        }
        if (sh.unscaled) {
          gemm.run_fp8_unscaled(static_cast<const uint8_t*>(w.data), xq.ptr<uint8_t>(), o.data, n, sh.m, sh.k, DType::kBF16,
                                stream_);
          return;
        }
        cuda::CublasLtGemm::Fp8Args g{static_cast<const uint8_t*>(w.data), w.row_scale, xq.ptr<uint8_t>(),
                                      xs.ptr<float>(), nullptr, o.data, n, sh.m, sh.k, DType::kBF16, nullptr};
        g.residual = sh.residual ? o.data : nullptr;
        gemm.run_fp8(g, stream_);
      };
      time_us(run, 3, 8);  // clocks settle under the FP8 load
      us[s] = time_us(run, 7, 8);
      total += us[s];
    }
    const double flops = 2.0 * n * 4096 * (6144 + 4096 + 24576 + 12288);
    std::printf("sweep%s N=%-5lld qkv %6.1f  o_proj %6.1f  gate_up %6.1f  down %6.1f  layer %7.1f us  %6.2f us / 16 rows  %5.0f TFLOP/s\n",
                bf16 ? " bf16" : "", (long long)n, us[0], us[1], us[2], us[3], total, 16.0 * total / n, flops / total / 1e6);
    std::fflush(stdout);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace vireo
