// FP8 linears (fp8_linear.h; --quantization fp8) against host references: the per-row activation
// quantization kernel bit for bit (codes and scales as fp8.h computes them), the weight-only GEMV (N <
// fp8_gemm_min_rows) against sum(fp8(w) x scale x x) in double, the W8A8 cuBLASLt path against the same sum
// over the host-quantized activation, and every fused form (input_norm, silu_mul_input, residual, silu_mul_output)
// against the CPU's separate ops with the GPU's roundings in between; the MLP block with gate_up unscaled
// (run_mlp_fp8) against the two fused linears' host reference.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/fp8_gemm_small.h"
#include "backend/cuda/fp8_gemm_ws.h"
#include "backend/cuda/fp8_linear.h"
#include "cuda_test_util.h"
#include "core/fp8.h"

namespace vireo::testing {
namespace {

class Fp8LinearTest : public CudaOpsTest {
 protected:
  struct Fp8Weight {
    Tensor dev;                 // F8_E4M3 [m, k] with row_scale
    std::vector<float> deq;     // fp8 x scale, [m, k]
    std::vector<float> dev_scale;  // the row scales, [m]
  };
  Fp8Weight weight(int m, int k) {
    const std::vector<float> w = rand_vec(size_t(m) * k, -0.1f, 0.1f, DType::kF32);
    std::vector<uint8_t> q(w.size());
    std::vector<float> s(m);
    fp8_quantize_rows(w.data(), m, k, q.data(), s.data());
    Fp8Weight out;
    out.deq.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i) out.deq[i] = fp8_e4m3_to_f32(q[i]) * s[i / k];
    out.dev_scale = s;
    Tensor scale = gpu_own(gpu_->alloc({m}, DType::kF32));
    gpu_->copy_from_host(s.data(), scale);
    out.dev = gpu_own(gpu_->alloc({m, k}, DType::kF8E4M3));
    gpu_->copy_from_host(q.data(), out.dev);
    out.dev.row_scale = scale.ptr<float>();
    return out;
  }
  // x [n, k] as the GPU's matmul sees it: itself (GEMV) or quantized per row to E4M3 (the W8A8 GEMM).
  std::vector<float> as_multiplied(const std::vector<float>& x, int n, int k, int m) const {
    if (n < cuda::fp8_gemm_min_rows(m, k)) return x;
    std::vector<uint8_t> q(x.size());
    std::vector<float> s(n), out(x.size());
    fp8_quantize_rows(x.data(), n, k, q.data(), s.data());
    for (size_t i = 0; i < x.size(); ++i) out[i] = fp8_e4m3_to_f32(q[i]) * s[i / k];
    return out;
  }
  // y [n, m] = x' w'^T + bias in double, rounded to the activation dtype. abs_sums (if given): sum_k
  // |x' w'| per element, the scale of the GEMM's accumulation error.
  std::vector<float> product(const std::vector<float>& x, int n, int k, const Fp8Weight& w, int m,
                             const std::vector<float>* bias, std::vector<float>* abs_sums = nullptr) {
    const std::vector<float> xm = as_multiplied(x, n, k, m);
    std::vector<float> y(size_t(n) * m);
    if (abs_sums) abs_sums->assign(y.size(), 0.f);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) {
        double acc = 0, mag = 0;
        for (int c = 0; c < k; ++c) {
          const double t = double(xm[size_t(i) * k + c]) * w.deq[size_t(j) * k + c];
          acc += t;
          mag += std::fabs(t);
        }
        if (bias) acc += (*bias)[j];
        y[size_t(i) * m + j] = round_to(act_, static_cast<float>(acc));
        if (abs_sums) (*abs_sums)[size_t(i) * m + j] = static_cast<float>(mag);
      }
    return y;
  }
  // The W8A8 GEMM accumulates in the FP8 tensor cores' own precision (cuBLASLt's FAST_ACCUM, as vLLM's
  // CUTLASS FP8 kernels): its error grows with sum_k |x w|, to about 2^-11 of it at K = 2064 and 4096 (an
  // H100, session 38). Every element: |got - want| <= the dtype's tolerance + 2^-10 sum_k |x w|; a wrong
  // scale, row or column is off by about the value itself, ~20x above that here.
  void expect_close_accumulated(const std::vector<float>& got, const std::vector<float>& want,
                                const std::vector<float>& abs_sums, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    const Tolerance tol = tol_for(act_);
    size_t bad = 0;
    std::string first;
    for (size_t i = 0; i < got.size(); ++i) {
      const float err = std::fabs(got[i] - want[i]);
      if (std::isfinite(got[i]) && err <= tol.atol + tol.rtol * std::fabs(want[i]) + abs_sums[i] / 1024.f) continue;
      if (++bad <= 5) first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " + std::to_string(want[i]);
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off (seed " << seed_ << "):" << first;
  }
  // x [n, k] drawn in [-2, 2], quantized per row on the host (fp8.h) and uploaded: a W8A8 GEMM's activation.
  struct QuantizedRows {
    std::vector<uint8_t> codes;
    std::vector<float> scales;
    Tensor codes_dev, scales_dev;  // U8 [n, k], F32 [n]
  };
  QuantizedRows quantized_rows(int n, int k) {
    const auto x = rand_vec(size_t(n) * k, -2.f, 2.f, DType::kF32);
    QuantizedRows r;
    r.codes.resize(x.size());
    r.scales.resize(n);
    fp8_quantize_rows(x.data(), n, k, r.codes.data(), r.scales.data());
    r.codes_dev = gpu_own(gpu_->alloc({n, k}, DType::kU8));
    r.scales_dev = gpu_own(gpu_->alloc({n}, DType::kF32));
    gpu_->copy_from_host(r.codes.data(), r.codes_dev);
    gpu_->copy_from_host(r.scales.data(), r.scales_dev);
    return r;
  }
  std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v) x = round_to(act_, x);
    return v;
  }
};

TEST_F(Fp8LinearTest, QuantizeRowsMatchesTheHostBitForBit) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    use_dtype(t);
    // Rows up to 8 chunks of 2048 values go through the register-cached kernels, longer ones re-read.
    for (auto [n, k] : std::vector<std::pair<int, int>>{{1, 16}, {3, 1024}, {4, 2064}, {37, 4096}, {5, 12288},
                                                        {3, 20000}}) {
      SCOPED_TRACE("N " + std::to_string(n) + " K " + std::to_string(k));
      auto x = rand_vec(size_t(n) * k, -3.f, 3.f, t);
      if (n > 2) std::fill(x.begin() + k, x.begin() + 2 * k, 0.f);  // an all-zero row: scale 1
      Tensor xd = gpu_from(x, {n, k}, t);
      Tensor q = gpu_own(gpu_->alloc({n, k}, DType::kU8)), s = gpu_own(gpu_->alloc({n}, DType::kF32));
      std::vector<uint8_t> junk(q.nbytes(), 0x55);
      gpu_->copy_from_host(junk.data(), q);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the backend's asynchronous uploads land first
      cuda::launch_fp8_quantize_rows(xd.data, t, n, k, q.ptr<uint8_t>(), s.ptr<float>(), nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the default stream, not the backend's
      std::vector<uint8_t> got_q(q.nbytes());
      std::vector<float> got_s(n);
      gpu_->copy_to_host(q, got_q.data());
      gpu_->copy_to_host(s, got_s.data());
      std::vector<uint8_t> want_q(x.size());
      std::vector<float> want_s(n);
      fp8_quantize_rows(x.data(), n, k, want_q.data(), want_s.data());
      EXPECT_EQ(got_s, want_s);
      size_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += got_q[i] != want_q[i];
      EXPECT_EQ(bad, 0u) << "codes differ (seed " << seed_ << ")";
    }
  }
}

TEST_F(Fp8LinearTest, PlainGemvAndGemmWithBias) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    use_dtype(t);
    for (auto [m, k] : std::vector<std::pair<int, int>>{{16, 16}, {256, 512}, {1024, 2064}, {6144, 4096}}) {
      Fp8Weight w = weight(m, k);
      const auto bias = rand_vec(m, -1.f, 1.f, t);
      Tensor bg = gpu_from(bias, {m}, t);
      for (int n : {1, 2, 3, 5, 8, 9, 64, 301}) {
        if (size_t(n) * m * k > size_t{1} << 31) continue;  // the host reference's time
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE("N " + std::to_string(n) + " M " + std::to_string(m) + " K " + std::to_string(k) +
                       (with_bias ? " bias" : ""));
          const auto x = rand_vec(size_t(n) * k, -1.f, 1.f, t);
          Tensor out = gpu_poisoned({n, m}, t);
          gpu_->linear({gpu_from(x, {n, k}, t), w.dev, with_bias ? bg : Tensor(), out});
          std::vector<float> mag;
          const auto want = product(x, n, k, w, m, with_bias ? &bias : nullptr, &mag);
          if (n < cuda::fp8_gemm_min_rows(m, k)) expect_close(to_host(out), want, tol_for(t), "fp8 gemv");
          else expect_close_accumulated(to_host(out), want, mag, "fp8 gemm");
        }
      }
    }
  }
}

// The decode-batch W8A8 kernel (fp8_gemm_small.h: up to 128 rows, M and K multiples of 128; the linear takes
// it where fp8_gemm_small_preferred, every shape here up to 128 rows) across its row tiles (64 / 128, zero rows
// past N), its K splits (few weight rows: many splits, reduced by a second kernel; many rows: one split,
// written directly), a bias and an in-place residual. Rows past 128: cuBLASLt's path, the same checks.
TEST_F(Fp8LinearTest, SmallGemmRowsAndSplits) {
  use_dtype(DType::kBF16);
  for (auto [m, k] : std::vector<std::pair<int, int>>{{256, 2048}, {768, 512}, {4096, 256}, {2048, 1024}}) {
    Fp8Weight w = weight(m, k);
    const auto bias = rand_vec(m, -1.f, 1.f, act_);
    Tensor bg = gpu_from(bias, {m}, act_);
    for (int n : {9, 33, 64, 65, 128, 129, 200, 256}) {
      ASSERT_EQ(cuda::fp8_small_gemm_ok(n, m, k), n <= 128);  // preferred too on 132-SM GPUs (H100, H200)
      SCOPED_TRACE("N " + std::to_string(n) + " M " + std::to_string(m) + " K " + std::to_string(k));
      const auto x = rand_vec(size_t(n) * k, -1.f, 1.f, act_);
      std::vector<float> mag;
      const auto y = product(x, n, k, w, m, &bias, &mag);
      Tensor out = gpu_poisoned({n, m}, act_);
      gpu_->linear({gpu_from(x, {n, k}, act_), w.dev, bg, out});
      expect_close_accumulated(to_host(out), y, mag, "small gemm + bias");
      // In place: out = residual + (x w^T), out aliasing the residual.
      const auto r = rand_vec(size_t(n) * m, -1.f, 1.f, act_);
      const auto y0 = product(x, n, k, w, m, nullptr);
      std::vector<float> want(y0.size());
      for (size_t i = 0; i < y0.size(); ++i) want[i] = round_to(act_, r[i] + y0[i]);
      Tensor res = gpu_from(r, {n, m}, act_);
      LinearParams p{gpu_from(x, {n, k}, act_), w.dev, Tensor(), res};
      p.residual = res;
      gpu_->linear(p);
      std::vector<float> mag2;
      product(x, n, k, w, m, nullptr, &mag2);
      expect_close_accumulated(to_host(res), want, mag2, "small gemm + residual in place");
    }
  }
}

// The warp-specialised W8A8 GEMMs (fp8_gemm_ws.h: cooperative and ping-pong; opt-in in the linear, so called
// directly here) against sum(code x x_scale x w') in double: activation row tiles of 128 (zero-filled rows past
// N, N = 1 included), weight column tiles of 256 / 128, K stages of 128 bytes through the ring (fewer stages a
// tile than the ring, and more), more tiles than SMs (the persistent walk; odd and even tile counts a block for
// the ping-pong turns; odd row tiles for the block pairs), two row-tile groups (K 8192), bias and an in-place
// residual, bf16 and f16 out.
TEST_F(Fp8LinearTest, WsGemmTilesStagesAndEpilogue) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    use_dtype(t);
    struct Case {
      int n, m, k;
      bool bias, residual;
    };
    for (const Case& c : std::vector<Case>{{1, 256, 128, false, false}, {77, 768, 1536, true, false},
                                           {128, 256, 512, false, true}, {129, 512, 384, true, true},
                                           {700, 768, 256, false, false}, {1100, 4096, 256, true, true},
                                           {300, 384, 640, true, false}, {1030, 256, 8192, true, true}}) {
      SCOPED_TRACE("N " + std::to_string(c.n) + " M " + std::to_string(c.m) + " K " + std::to_string(c.k));
      ASSERT_TRUE(cuda::fp8_gemm_pingpong_ok(c.n, c.m, c.k));
      Fp8Weight w = weight(c.m, c.k);
      const QuantizedRows xq = quantized_rows(c.n, c.k);
      const std::vector<uint8_t>& q = xq.codes;
      const std::vector<float>& xs = xq.scales;
      const Tensor &qd = xq.codes_dev, &sd = xq.scales_dev;
      const auto bias = rand_vec(c.m, -1.f, 1.f, t);
      const auto r = rand_vec(size_t(c.n) * c.m, -1.f, 1.f, t);
      std::vector<float> want(size_t(c.n) * c.m), mag(want.size());
      for (int i = 0; i < c.n; ++i)
        for (int j = 0; j < c.m; ++j) {
          double acc = 0, abs_sum = 0;
          for (int kk = 0; kk < c.k; ++kk) {
            const double v = double(fp8_e4m3_to_f32(q[size_t(i) * c.k + kk])) * xs[i] * w.deq[size_t(j) * c.k + kk];
            acc += v;
            abs_sum += std::fabs(v);
          }
          const size_t e = size_t(i) * c.m + j;
          if (c.bias) acc += bias[j];
          if (c.residual) acc += r[e];
          want[e] = round_to(t, static_cast<float>(acc));
          mag[e] = static_cast<float>(abs_sum);
        }
      for (const int kernel : {0, 1, 2}) {  // cooperative, ping-pong, ping-pong in block pairs
        // VIREO_WS_TEST_KERNELS (e.g. "01"): only those (a device script runs a new kernel alone, under a timeout).
        const char* only = std::getenv("VIREO_WS_TEST_KERNELS");
        if (only && !std::strchr(only, '0' + kernel)) continue;
        const bool pingpong = kernel > 0;
        if (!pingpong && !cuda::fp8_gemm_ws_ok(c.n, c.m, c.k)) continue;
        SCOPED_TRACE(kernel == 0 ? "cooperative" : kernel == 1 ? "ping-pong" : "ping-pong pairs");
        Tensor out = c.residual ? gpu_from(r, {c.n, c.m}, t) : gpu_poisoned({c.n, c.m}, t);
        Tensor bd = c.bias ? gpu_from(bias, {c.m}, t) : Tensor();
        cuda::CublasLtGemm::Fp8Args g{w.dev.ptr<uint8_t>(), w.dev.row_scale, qd.ptr<uint8_t>(), sd.ptr<float>(),
                                      c.bias ? bd.data : nullptr, out.data, c.n, c.m, c.k, t, nullptr};
        g.residual = c.residual ? out.data : nullptr;  // in place
        // The backend uploads on its own non-blocking stream (up to 4 MiB asynchronously): let them land before
        // the kernel runs on the default stream.
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        if (pingpong) cuda::launch_fp8_gemm_pingpong(g, nullptr, kernel);
        else cuda::launch_fp8_gemm_ws(g, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the default stream, not the backend's
        expect_close_accumulated(to_host(out), want, mag, pingpong ? "ping-pong gemm" : "ws gemm");
      }
    }
  }
}

// CublasLtGemm with tuning on (VIREO_GEMM_TUNE's path, cublaslt_tune.h): plans of >= 1,024 rows take the
// fastest configuration timed for their 64-row bucket, another N of the bucket reuses it. Every element against
// the host, scaled (bias, residual in place) and unscaled (gate_up's form) GEMMs.
TEST_F(Fp8LinearTest, TunedConfigurationsMatchTheHost) {
  use_dtype(DType::kBF16);
  cuda::CublasLtGemm gemm;
  gemm.set_tune(true);
  struct Case {
    int n, m, k;
    bool bias, residual;
  };
  for (const Case& c : std::vector<Case>{{1024, 256, 512, true, true}, {1100, 384, 256, true, false},
                                         {1090, 384, 256, false, false}, {2112, 512, 256, false, true}}) {
    SCOPED_TRACE("N " + std::to_string(c.n) + " M " + std::to_string(c.m) + " K " + std::to_string(c.k));
    Fp8Weight w = weight(c.m, c.k);
    const QuantizedRows xq = quantized_rows(c.n, c.k);
    const std::vector<uint8_t>& q = xq.codes;
    const std::vector<float>& xs = xq.scales;
    const Tensor &qd = xq.codes_dev, &sd = xq.scales_dev;
    const auto bias = rand_vec(c.m, -1.f, 1.f, DType::kBF16);
    const auto r = rand_vec(size_t(c.n) * c.m, -1.f, 1.f, DType::kBF16);
    std::vector<float> want(size_t(c.n) * c.m), raw(want.size()), mag(want.size()), raw_mag(want.size());
    for (int i = 0; i < c.n; ++i)
      for (int j = 0; j < c.m; ++j) {
        double acc = 0, abs_sum = 0, codes = 0, codes_abs = 0;
        for (int kk = 0; kk < c.k; ++kk) {
          const double wq = w.deq[size_t(j) * c.k + kk] / w.dev_scale[j];
          const double v = double(fp8_e4m3_to_f32(q[size_t(i) * c.k + kk])) * wq;
          codes += v;
          codes_abs += std::fabs(v);
          acc += v * xs[i] * w.dev_scale[j];
          abs_sum += std::fabs(v * xs[i] * w.dev_scale[j]);
        }
        const size_t e = size_t(i) * c.m + j;
        if (c.bias) acc += bias[j];
        if (c.residual) acc += r[e];
        want[e] = round_to(DType::kBF16, static_cast<float>(acc));
        raw[e] = round_to(DType::kBF16, static_cast<float>(codes));
        mag[e] = static_cast<float>(abs_sum);
        raw_mag[e] = static_cast<float>(codes_abs);
      }
    Tensor out = c.residual ? gpu_from(r, {c.n, c.m}, DType::kBF16) : gpu_poisoned({c.n, c.m}, DType::kBF16);
    Tensor bd = c.bias ? gpu_from(bias, {c.m}, DType::kBF16) : Tensor();
    cuda::CublasLtGemm::Fp8Args g{w.dev.ptr<uint8_t>(), w.dev.row_scale, qd.ptr<uint8_t>(), sd.ptr<float>(),
                                  c.bias ? bd.data : nullptr, out.data, c.n, c.m, c.k, DType::kBF16, nullptr};
    g.residual = c.residual ? out.data : nullptr;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the backend's async uploads first
    gemm.run_fp8(g, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close_accumulated(to_host(out), want, mag, "tuned scaled gemm");
    Tensor un = gpu_poisoned({c.n, c.m}, DType::kBF16);
    // run_fp8_unscaled plans (and tunes) on first use; fp8_unscaled_ok before it would plan untuned.
    gemm.run_fp8_unscaled(w.dev.ptr<uint8_t>(), qd.ptr<uint8_t>(), un.data, c.n, c.m, c.k, DType::kBF16, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close_accumulated(to_host(un), raw, raw_mag, "tuned unscaled gemm");
  }
}

TEST_F(Fp8LinearTest, FusedForms) {
  use_dtype(DType::kBF16);
  const int k = 512, m = 768;
  Fp8Weight w = weight(m, k);
  const auto g = rand_vec(k, 0.5f, 1.5f, act_);
  Tensor gg = gpu_from(g, {k}, act_);
  auto view = [](const std::vector<float>& v, std::vector<int64_t> shape) {
    return Tensor(const_cast<float*>(v.data()), DType::kF32, std::move(shape));
  };
  for (int n : {1, 4, 8, 9, 100}) {
    SCOPED_TRACE("N " + std::to_string(n));
    // input_norm + residual, in place (out aliases residual).
    {
      const auto x = rand_vec(size_t(n) * k, -1.f, 1.f, act_), r = rand_vec(size_t(n) * m, -1.f, 1.f, act_);
      Tensor xn = cpu_poisoned({n, k});
      cpu_->rms_norm({view(x, {n, k}), view(g, {k}), xn, Tensor(), 1e-6f});
      // The GPU's norm may round a value to the other side of a bf16 step than the CPU's (another summation
      // order); past fp8_gemm_min_rows that can move its E4M3 code one step, ~2^-4 of the value: the
      // accumulated tolerance (2^-10 sum_k |x w|) covers a few such flips a row, as in the GEMM's own tests.
      std::vector<float> abs_sums;
      auto y = product(rounded(to_host(xn)), n, k, w, m, nullptr, &abs_sums);
      std::vector<float> want(y.size());
      for (size_t i = 0; i < y.size(); ++i) want[i] = round_to(act_, r[i] + y[i]);
      Tensor res = gpu_from(r, {n, m}, act_);
      LinearParams p{gpu_from(x, {n, k}, act_), w.dev, Tensor(), res};
      p.input_norm = gg;
      p.residual = res;
      gpu_->linear(p);
      expect_close_accumulated(to_host(res), want, abs_sums, "norm + residual");
    }
    // silu_mul_input.
    {
      const auto x = rand_vec(size_t(n) * 2 * k, -3.f, 3.f, act_);
      Tensor a = cpu_poisoned({n, k});
      cpu_->silu_and_mul({view(x, {n, 2 * k}), a});
      const auto want = product(rounded(to_host(a)), n, k, w, m, nullptr);
      Tensor out = gpu_poisoned({n, m}, act_);
      LinearParams p{gpu_from(x, {n, 2 * k}, act_), w.dev, Tensor(), out};
      p.silu_mul_input = true;
      gpu_->linear(p);
      expect_close(to_host(out), want, tol_for(act_), "silu_mul_input");
    }
    // input_norm + silu_mul_output (w as [2I, K]).
    {
      const auto x = rand_vec(size_t(n) * k, -1.f, 1.f, act_);
      Tensor xn = cpu_poisoned({n, k});
      cpu_->rms_norm({view(x, {n, k}), view(g, {k}), xn, Tensor(), 1e-6f});
      std::vector<float> abs_sums;
      const auto y = product(rounded(to_host(xn)), n, k, w, m, nullptr, &abs_sums);
      Tensor a = cpu_poisoned({n, m / 2});
      cpu_->silu_and_mul({view(y, {n, m}), a});
      // The same norm flips as above, through silu(gate) x up: |d out| <= 1.1 |up| |d gate| + |silu(gate)| |d up|
      // (silu's slope stays under 1.1).
      const auto want = rounded(to_host(a));
      std::vector<float> mag(want.size());
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < m / 2; ++j) {
          const size_t gi = size_t(i) * m + j, ui = gi + m / 2;
          const float silu_g = y[gi] / (1.f + std::exp(-y[gi]));
          mag[size_t(i) * (m / 2) + j] = 1.1f * std::fabs(y[ui]) * abs_sums[gi] + std::fabs(silu_g) * abs_sums[ui];
        }
      Tensor out = gpu_poisoned({n, m / 2}, act_);
      LinearParams p{gpu_from(x, {n, k}, act_), w.dev, Tensor(), out};
      p.input_norm = gg;
      p.silu_mul_output = true;
      gpu_->linear(p);
      expect_close_accumulated(to_host(out), want, mag, "norm + silu_mul_output");
    }
  }
}

// run_mlp_fp8: h += down(silu(gate) * up), [gate; up] = norm(h) gate_up^T, with gate_up's GEMM unscaled and
// its scales (and bias) applied in down's quantization. The reference is the two fused linears' chain on
// the host (per-token quantization of norm(h), the GEMM rounded to bf16, silu_and_mul, quantization, down,
// the residual add). gate_up's values differ from the host's by an ulp here and there (rounded twice on the
// GPU, unscaled then scaled, where the reference rounds once; FAST_ACCUM sums): where that moves a row's max
// |a|, the row's per-token scale moves and all its codes round anew, E4M3 noise of a few % of the MLP's
// output in that row. On an H100 that was 0.1% to 17% of the elements outside the GEMM's own bound (the
// dtype's tolerance + sum_k |a w| / 1024) depending on the draw, by up to ~0.15 on outputs ~1. So the check
// is per row: the RMS error under 10% of the RMS of the MLP's output, every element finite. A wrong scale,
// row or bias is off by about the value itself in every row.
TEST_F(Fp8LinearTest, MlpBlockWithUnscaledGateUp) {
  use_dtype(DType::kBF16);
  const int h = 512, inter = 384;
  Fp8Weight wgu = weight(2 * inter, h), wd = weight(h, inter);
  const auto g = rand_vec(h, 0.5f, 1.5f, act_);
  const auto bgu = rand_vec(2 * inter, -0.5f, 0.5f, act_);
  cuda::CublasLtGemm gemm;
  auto view = [](const std::vector<float>& v, std::vector<int64_t> shape) {
    return Tensor(const_cast<float*>(v.data()), DType::kF32, std::move(shape));
  };
  for (bool with_bias : {false, true}) {
    for (int n : {9, 100, 301}) {
      SCOPED_TRACE("N " + std::to_string(n) + (with_bias ? " gate_up bias" : ""));
      const auto x = rand_vec(size_t(n) * h, -1.f, 1.f, act_);
      // The host chain.
      Tensor xn = cpu_poisoned({n, h});
      cpu_->rms_norm({view(x, {n, h}), view(g, {h}), xn, Tensor(), 1e-6f});
      const auto y = product(rounded(to_host(xn)), n, h, wgu, 2 * inter, with_bias ? &bgu : nullptr);
      Tensor a = cpu_poisoned({n, inter});
      cpu_->silu_and_mul({view(y, {n, 2 * inter}), a});
      const auto d = product(rounded(to_host(a)), n, inter, wd, h, nullptr);
      std::vector<float> want(d.size());
      for (size_t i = 0; i < d.size(); ++i) want[i] = round_to(act_, x[i] + d[i]);
      // The GPU, in place on h.
      Tensor res = gpu_from(x, {n, h}, act_);
      MlpParams p{res, gpu_from(g, {h}, act_), 1e-6f, wgu.dev, with_bias ? gpu_from(bgu, {2 * inter}, act_) : Tensor(),
                  wd.dev, Tensor(), gpu_poisoned({n, 2 * inter}, act_), gpu_poisoned({n, inter}, act_)};
      ASSERT_TRUE(cuda::mlp_fp8_unscaled_ok(gemm, p));
      Tensor scratch = gpu_own(gpu_->alloc({int64_t{64} << 20}, DType::kU8));
      cuda::run_mlp_fp8(gemm, p, [&](size_t b) {
        EXPECT_LE(b, scratch.nbytes());
        return scratch.data;
      }, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the default stream, not the backend's
      const std::vector<float> got = to_host(res);
      for (int r = 0; r < n; ++r) {
        double err2 = 0, d2 = 0;
        for (int c = 0; c < h; ++c) {
          const size_t i = size_t(r) * h + c;
          ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
          err2 += double(got[i] - want[i]) * (got[i] - want[i]);
          d2 += double(d[i]) * d[i];
        }
        EXPECT_LE(std::sqrt(err2 / d2), 0.1) << "row " << r << " (seed " << seed_ << ")";
      }
    }
  }
  // What the path does not take: decode rows (the GEMV forms), f16 activations (unscaled sums overflow).
  MlpParams small{gpu_poisoned({8, h}, act_), gpu_from(g, {h}, act_), 1e-6f, wgu.dev, Tensor(), wd.dev, Tensor(),
                  gpu_poisoned({8, 2 * inter}, act_), gpu_poisoned({8, inter}, act_)};
  EXPECT_FALSE(cuda::mlp_fp8_unscaled_ok(gemm, small));
  MlpParams f16 = small;
  f16.residual = gpu_poisoned({64, h}, DType::kF16);
  f16.norm_w = gpu_from(g, {h}, DType::kF16);
  EXPECT_FALSE(cuda::mlp_fp8_unscaled_ok(gemm, f16));
}

}  // namespace
}  // namespace vireo::testing
