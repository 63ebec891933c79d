// Which FP8 scaling forms this machine's cuBLASLt runs, and how fast (device only; skipped unless
// VIREO_KERNEL_BENCH=1). Session 37 found no outer-vector (per-row x per-token) FP8 algorithm on an H100
// with cuBLASLt 13.1, although cuBLAS 12.9's notes list channel- and block-scaled FP8 on Hopper. This asks
// the library directly, form by form, on the Qwen3-8B serving shapes, and prints for each: the heuristic's
// status and count, the matmul's status, the time and TFLOP/s. Forms:
//   bf16       : the BF16 GEMM we run today (the baseline);
//   scalar     : per-tensor scales (one F32 each), D bf16;
//   outer*     : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F on both operands, scale pointers set before
//                the heuristic, D bf16 / f32, with and without FAST_ACCUM;
//   block      : weights BLK128x128_32F, activations VEC128_32F (DeepSeek-style block scales), D bf16;
//   unscaled32 : no scales, D f32 (the fallback's GEMM; its rescale pass comes on top);
//   unscaled bf16 : no scales, D bf16 (the scales applied by whoever reads D);
//   mixed      : one operand per-row, the other per-tensor.
// Each form times every algorithm the heuristic offers (up to 8): the first's time and the best's.
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='CublasLtFp8Probe.*'
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_fixture.h"

namespace vireo {
namespace {

struct Form {
  const char* name;
  cudaDataType_t in, out;
  int scale_a, scale_b;  // -1: no scale pointer; else a cublasLtMatmulMatrixScale_t
  bool fast_accum;
};

class CublasLtFp8Probe : public bench::CudaBenchFixture {
 protected:
  void SetUp() override {
    bench::CudaBenchFixture::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cublasLtCreate(&lt_), CUBLAS_STATUS_SUCCESS);
    ws_ = dev({int64_t(ws_bytes_)}, DType::kU8);
  }
  void TearDown() override {
    if (lt_) cublasLtDestroy(lt_);
    bench::CudaBenchFixture::TearDown();
  }
  // Runs one form of out[n, m] = x[n, k] w[m, k]^T (column-major TN, as CublasLtGemm) and prints a line.
  void probe(const Form& f, int64_t n, int64_t m, int64_t k, const Tensor& w, const Tensor& x, const Tensor& out,
             const Tensor& sa, const Tensor& sb) {
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    if (f.fast_accum) {
      const int8_t one = 1;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &one, sizeof(one));
    }
    if (f.scale_a >= 0) {
      const auto ma = static_cast<cublasLtMatmulMatrixScale_t>(f.scale_a);
      const auto mb = static_cast<cublasLtMatmulMatrixScale_t>(f.scale_b);
      const void* pa = sa.data;
      const void* pb = sb.data;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof(ma));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof(mb));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb));
    }
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, f.in, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, f.in, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, f.out, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_, sizeof(ws_bytes_));
    cublasLtMatmulHeuristicResult_t res[kMaxAlgos] = {};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, lc, lc, pref, max_algos_, res, &found);
    cublasStatus_t ms = CUBLAS_STATUS_NOT_SUPPORTED;
    double us = 0;
    // Every candidate the heuristic returns is timed; the line reports the first's time and the best's.
    double us0 = 0;
    int best = -1;
    for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < found; ++i) {
      const float alpha = 1.f, beta = 0.f;
      cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
      auto call = [&](int) {
        s = cublasLtMatmul(lt_, op, &alpha, w.data, la, x.data, lb, &beta, out.data, lc, out.data, lc, &res[i].algo,
                           ws_.data, ws_bytes_, stream_);
      };
      call(0);
      cudaStreamSynchronize(stream_);
      if (i == 0) ms = s;
      if (s != CUBLAS_STATUS_SUCCESS || cudaGetLastError() != cudaSuccess) continue;
      const double t = bench::median_us(stream_, call, 5, 5, 1);
      if (i == 0) us0 = t;
      if (std::getenv("VIREO_PROBE_ALL")) {
        int tile = -1, splitk = -1, stages = -1, swizzle = -1;
        size_t wr = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof(swizzle), &wr);
        std::printf("    candidate %2d: %8.1f us  tile %d splitk %d stages %d swizzle %d ws %zu\n", i, t, tile, splitk,
                    stages, swizzle, res[i].workspaceSize);
      }
      if (best < 0 || t < us) us = t, best = i;
    }
    auto tf = [&](double t) { return t > 0 ? 2.0 * n * m * k / t / 1e6 : 0.0; };
    std::printf("N=%-5lld M=%-6lld K=%-6lld %-24s heuristic %2d (%d found)  matmul %2d  first %8.1f us %7.1f TFLOP/s"
                "  best #%d %8.1f us %7.1f TFLOP/s\n",
                (long long)n, (long long)m, (long long)k, f.name, int(hs), found, int(ms), us0, tf(us0), best, us, tf(us));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }

  static constexpr int kMaxAlgos = 32;
  cublasLtHandle_t lt_ = nullptr;
  size_t ws_bytes_ = 32u << 20;
  int max_algos_ = 8;  // heuristic candidates asked for (<= kMaxAlgos)
  Tensor ws_;
};

TEST_F(CublasLtFp8Probe, Forms) {
  int ver = 0;
  cublasLtGetProperty(MAJOR_VERSION, &ver);
  int minor = 0;
  cublasLtGetProperty(MINOR_VERSION, &minor);
  std::printf("cublasLt %d.%d (runtime %zu)\n", ver, minor, cublasLtGetVersion());
  constexpr int kOuter = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, kScalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  constexpr int kVec128 = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, kBlk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const std::vector<Form> forms = {
      {"bf16", CUDA_R_16BF, CUDA_R_16BF, -1, -1, false},
      {"scalar", CUDA_R_8F_E4M3, CUDA_R_16BF, kScalar, kScalar, false},
      {"scalar fast", CUDA_R_8F_E4M3, CUDA_R_16BF, kScalar, kScalar, true},
      {"outer bf16", CUDA_R_8F_E4M3, CUDA_R_16BF, kOuter, kOuter, false},
      {"outer bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, kOuter, kOuter, true},
      {"outer f32", CUDA_R_8F_E4M3, CUDA_R_32F, kOuter, kOuter, false},
      {"block128 bf16", CUDA_R_8F_E4M3, CUDA_R_16BF, kBlk, kVec128, false},
      {"block128 bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, kBlk, kVec128, true},
      {"unscaled32", CUDA_R_8F_E4M3, CUDA_R_32F, -1, -1, false},
      {"unscaled32 fast", CUDA_R_8F_E4M3, CUDA_R_32F, -1, -1, true},
      {"unscaled bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, -1, -1, true},
      {"outer w, scalar x fast", CUDA_R_8F_E4M3, CUDA_R_16BF, kOuter, kScalar, true},
      {"scalar w, outer x fast", CUDA_R_8F_E4M3, CUDA_R_16BF, kScalar, kOuter, true},
  };
  struct Shape {
    int64_t n, m, k;
  };
  // The 8B serving step's four projections at 2,304 rows (256 decode rows + a 2,048-token prefill budget),
  // then other sizes.
  for (const Shape& s : std::vector<Shape>{{2304, 6144, 4096}, {2304, 4096, 4096}, {2304, 24576, 4096},
                                           {2304, 4096, 12288}, {256, 24576, 4096}, {8192, 24576, 4096}}) {
    Tensor wb = rand_t({s.m, s.k}, -0.02f, 0.02f), xb = rand_t({s.n, s.k});
    Tensor w8 = dev({s.m, s.k}, DType::kU8), x8 = dev({s.n, s.k}, DType::kU8);
    cudaMemsetAsync(w8.data, 0x38, w8.nbytes(), stream_);  // 0x38 = 1.0 in E4M3
    cudaMemsetAsync(x8.data, 0x30, x8.nbytes(), stream_);  // 0.5
    Tensor out = dev({s.n, s.m}, DType::kF32);
    // Scales sized for the largest form (block: ceil(m/128) x ceil(k/128); vec128: ceil(k/128) x n).
    const int64_t ns = std::max<int64_t>({s.m, s.n, (s.m / 128 + 1) * (s.k / 128 + 1), (s.k / 128 + 1) * s.n});
    Tensor sa = rand_t({ns}, 0.5f, 1.f, DType::kF32), sb = rand_t({ns}, 0.5f, 1.f, DType::kF32);
    for (const Form& f : forms) {
      const bool fp8 = f.in == CUDA_R_8F_E4M3;
      probe(f, s.n, s.m, s.k, fp8 ? w8 : wb, fp8 ? x8 : xb, out, sa, sb);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The lm_head of a 256-client decode step (Qwen3's 151,936-row vocabulary, K 4096, N = the step's rows): as
// the op timing shows it (H100 973 us, H200 772 us in session 43) it runs near the time of reading its BF16
// weights twice, not at the GEMM's FLOP rate (~380 us). Every heuristic candidate is timed.
TEST_F(CublasLtFp8Probe, LmHead) {
  const std::vector<Form> forms = {
      {"bf16", CUDA_R_16BF, CUDA_R_16BF, -1, -1, false},
      {"outer bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
       CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, true},
  };
  for (int64_t n : {240, 256}) {
    const int64_t m = 151936, k = 4096;
    Tensor wb = rand_t({m, k}, -0.02f, 0.02f), xb = rand_t({n, k});
    Tensor w8 = dev({m, k}, DType::kU8), x8 = dev({n, k}, DType::kU8);
    cudaMemsetAsync(w8.data, 0x38, w8.nbytes(), stream_);
    cudaMemsetAsync(x8.data, 0x30, x8.nbytes(), stream_);
    Tensor out = dev({n, m}, DType::kF32);
    Tensor sa = rand_t({m}, 0.5f, 1.f, DType::kF32), sb = rand_t({m}, 0.5f, 1.f, DType::kF32);
    for (const Form& f : forms) {
      const bool fp8 = f.in == CUDA_R_8F_E4M3;
      probe(f, n, m, k, fp8 ? w8 : wb, fp8 ? x8 : xb, out, sa, sb);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The decode step's projections at graph batch sizes (op timing, H100, 256 rows: o_proj 19.6 us = 438 TFLOP/s,
// down 40.2 us = 640 TFLOP/s, where gate_up reaches 1,080): few output tiles for 132 SMs (N 4096 at 128-wide
// tiles is 32 columns of tiles). Up to 32 heuristic candidates each, to see whether one (split-K, narrower
// tiles) beats the heuristic's first, which Vireo takes.
TEST_F(CublasLtFp8Probe, DecodeShapes) {
  max_algos_ = kMaxAlgos;
  // Vireo's form, then the unscaled fallback's (F32 out, a rescale pass after it), then BF16 weights.
  const std::vector<Form> forms = {
      {"outer bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
       CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, true},
      {"unscaled32 fast", CUDA_R_8F_E4M3, CUDA_R_32F, -1, -1, true},
      {"unscaled bf16 fast", CUDA_R_8F_E4M3, CUDA_R_16BF, -1, -1, true},
      {"bf16", CUDA_R_16BF, CUDA_R_16BF, -1, -1, false},
  };
  struct Shape {
    int64_t m, k;
  };
  for (int64_t n : {128, 256}) {
    for (const Shape& s : std::vector<Shape>{{6144, 4096}, {4096, 4096}, {24576, 4096}, {4096, 12288}}) {
      Tensor w8 = dev({s.m, s.k}, DType::kU8), x8 = dev({n, s.k}, DType::kU8);
      cudaMemsetAsync(w8.data, 0x38, w8.nbytes(), stream_);
      cudaMemsetAsync(x8.data, 0x30, x8.nbytes(), stream_);
      Tensor wb = rand_t({s.m, s.k}, -0.02f, 0.02f), xb = rand_t({n, s.k});
      Tensor out = dev({n, s.m}, DType::kF32);
      Tensor sa = rand_t({std::max(s.m, n)}, 0.5f, 1.f, DType::kF32), sb = rand_t({std::max(s.m, n)}, 0.5f, 1.f, DType::kF32);
      for (const Form& f : forms) {
        const bool fp8 = f.in == CUDA_R_8F_E4M3;
        probe(f, n, s.m, s.k, fp8 ? w8 : wb, fp8 ? x8 : xb, out, sa, sb);
      }
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}


// Beyond the heuristic: every configuration cuBLASLt's algorithms accept for Vireo's FP8 form (outer-vector
// scales, FAST_ACCUM, D bf16; beta = 1 with the residual as C for o_proj and down, as run_fp8 runs them) at
// the 8B serving step's shapes, each timed on random codes (constant codes draw less power and clock higher).
// The heuristic offers one outer-vector candidate a shape; this asks whether another tile / stages / cluster /
// swizzle of the same kernels is faster. Prints the heuristic's config and time, then the five fastest found.
// Run: VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='CublasLtFp8Probe.Search'
// (VIREO_PROBE_ROWS=2048,2304 picks the row counts.)
TEST_F(CublasLtFp8Probe, Search) {
  struct Shape {
    int64_t m, k;
    bool residual;
    const char* name;
  };
  const std::vector<int64_t> rows = bench::env_int_list("VIREO_PROBE_ROWS", {2048});
  auto random_codes = [&](int64_t count) {
    std::vector<uint8_t> h(static_cast<size_t>(count));
    uint32_t x = 12345u;
    for (auto& b : h) {
      x = x * 1664525u + 1013904223u;
      b = static_cast<uint8_t>(x >> 24);
      if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
      if ((b & 0x78) == 0x78) b &= 0xB7;  // magnitudes below 256: sums stay in range
    }
    Tensor t = dev({count}, DType::kU8);
    cudaMemcpy(t.data, h.data(), h.size(), cudaMemcpyHostToDevice);
    return t;
  };
  const cudaDataType_t in = CUDA_R_8F_E4M3, ot = CUDA_R_16BF;
  for (int64_t n : rows) {
    for (const Shape& s : std::vector<Shape>{{6144, 4096, false, "qkv"},
                                             {4096, 4096, true, "o_proj"},
                                             {24576, 4096, false, "gate_up"},
                                             {4096, 12288, true, "down"}}) {
      Tensor w8 = random_codes(s.m * s.k), x8 = random_codes(n * s.k);
      Tensor out = rand_t({n, s.m}, -1.f, 1.f, DType::kBF16);
      Tensor sa = rand_t({s.m}, 1e-4f, 2e-4f, DType::kF32), sb = rand_t({n}, 1e-3f, 2e-3f, DType::kF32);
      cublasLtMatmulDesc_t op;
      cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
      const int8_t one = 1;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &one, sizeof(one));
      const auto outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof(outer));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof(outer));
      const void* pa = sa.data;
      const void* pb = sb.data;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb));
      cublasLtMatrixLayout_t la, lb, lc;
      cublasLtMatrixLayoutCreate(&la, in, s.k, s.m, s.k);
      cublasLtMatrixLayoutCreate(&lb, in, s.k, n, s.k);
      cublasLtMatrixLayoutCreate(&lc, ot, s.m, n, s.m);
      const float alpha = 1.f, beta = s.residual ? 1.f : 0.f;
      auto time_algo = [&](const cublasLtMatmulAlgo_t& algo, bool quick) {
        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
        auto call = [&](int) {
          st = cublasLtMatmul(lt_, op, &alpha, w8.data, la, x8.data, lb, &beta, out.data, lc, out.data, lc, &algo, ws_.data,
                              ws_bytes_, stream_);
        };
        call(0);
        if (cudaStreamSynchronize(stream_) != cudaSuccess || st != CUBLAS_STATUS_SUCCESS) {
          cudaGetLastError();
          return -1.0;
        }
        return quick ? bench::median_us(stream_, call, 1, 2, 0) : bench::median_us(stream_, call, 5, 4, 2);  // per call
      };
      auto describe = [](const cublasLtMatmulAlgo_t& a) {
        int32_t id = -1, splitk = -1;
        uint32_t tile = 0, stages = 0, swz = 0, custom = 0;
        uint16_t cluster = 0;
        size_t wr = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom), &wr);
        cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &wr);
        char buf[160];
        std::snprintf(buf, sizeof(buf), "algo %d tile %u stages %u splitk %d swizzle %u custom %u cluster %u", id, tile,
                      stages, splitk, swz, custom, unsigned(cluster));
        return std::string(buf);
      };
      auto tf = [&](double us) { return us > 0 ? 2.0 * n * s.m * s.k / us / 1e6 : 0.0; };
      // The heuristic's pick (what CublasLtGemm::plan_fp8 takes).
      cublasLtMatmulPreference_t pref;
      cublasLtMatmulPreferenceCreate(&pref);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_, sizeof(ws_bytes_));
      cublasLtMatmulHeuristicResult_t hr[kMaxAlgos] = {};
      int found = 0;
      cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, lc, lc, pref, kMaxAlgos, hr, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      for (int i = 0; i < found; ++i) {
        const double us = time_algo(hr[i].algo, false);
        std::printf("%-8s N=%-5lld heuristic #%d  %8.1f us %7.1f TFLOP/s  %s\n", s.name, (long long)n, i, us, tf(us),
                    describe(hr[i].algo).c_str());
      }
      // Every algorithm id, and every (tile, stages, swizzle, cluster, custom option) it lists.
      int ids[256], num_ids = 0;
      cublasLtMatmulAlgoGetIds(lt_, CUBLAS_COMPUTE_32F, CUDA_R_32F, in, in, ot, ot, 256, ids, &num_ids);
      struct Hit {
        double us;
        cublasLtMatmulAlgo_t algo;
      };
      std::vector<Hit> hits;
      int tried = 0, checked = 0;
      for (int ii = 0; ii < num_ids; ++ii) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(lt_, CUBLAS_COMPUTE_32F, CUDA_R_32F, in, in, ot, ot, ids[ii], &algo) !=
            CUBLAS_STATUS_SUCCESS)
          continue;
        size_t wr = 0;
        uint32_t tiles[CUBLASLT_MATMUL_TILE_END], stages[CUBLASLT_MATMUL_STAGES_END];
        int num_tiles = 0, num_stages = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof(tiles), &wr) ==
            CUBLAS_STATUS_SUCCESS)
          num_tiles = static_cast<int>(wr / sizeof(uint32_t));
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, sizeof(stages), &wr) ==
            CUBLAS_STATUS_SUCCESS)
          num_stages = static_cast<int>(wr / sizeof(uint32_t));
        if (num_tiles == 0) tiles[num_tiles++] = CUBLASLT_MATMUL_TILE_UNDEFINED;
        if (num_stages == 0) stages[num_stages++] = CUBLASLT_MATMUL_STAGES_UNDEFINED;
        int32_t swz_ok = 0, custom_max = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz_ok, sizeof(swz_ok), &wr);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof(custom_max), &wr);
        custom_max = std::min(custom_max, 3);
        const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                     CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1};
        for (int ti = 0; ti < num_tiles; ++ti)
          for (int si = 0; si < num_stages; ++si)
            for (uint32_t swz = 0; swz <= (swz_ok ? 1u : 0u); ++swz)
              for (uint16_t cl : clusters)
                for (uint32_t custom = 0; custom <= static_cast<uint32_t>(custom_max); ++custom) {
                  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[ti], sizeof(uint32_t));
                  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[si], sizeof(uint32_t));
                  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz));
                  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl));
                  cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom));
                  ++tried;
                  cublasLtMatmulHeuristicResult_t r{};
                  if (cublasLtMatmulAlgoCheck(lt_, op, la, lb, lc, lc, &algo, &r) != CUBLAS_STATUS_SUCCESS) continue;
                  if (r.workspaceSize > ws_bytes_) continue;
                  ++checked;
                  const double us = time_algo(algo, true);  // a first pass; the best are timed again below
                  if (us > 0) hits.push_back({us, algo});
                }
      }
      auto by_time = [](const Hit& a, const Hit& b) { return a.us < b.us; };
      std::sort(hits.begin(), hits.end(), by_time);
      if (hits.size() > 10) hits.resize(10);
      for (Hit& h : hits) h.us = time_algo(h.algo, false);
      std::sort(hits.begin(), hits.end(), by_time);
      std::printf("%-8s N=%-5lld %d algorithm ids, %d configurations tried, %d accepted\n", s.name, (long long)n, num_ids,
                  tried, checked);
      for (size_t i = 0; i < std::min<size_t>(5, hits.size()); ++i)
        std::printf("%-8s N=%-5lld search #%zu  %8.1f us %7.1f TFLOP/s  %s\n", s.name, (long long)n, i, hits[i].us,
                    tf(hits[i].us), describe(hits[i].algo).c_str());
      std::fflush(stdout);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace vireo
