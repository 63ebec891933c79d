// The fused decode forms of linear (input_norm, silu_mul_input, residual) on the CPU backend against
// the unfused op sequence (rms_norm / silu_and_mul, linear, add): bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "cpu_op_fixture.h"
#include "core/error.h"

namespace vireo {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct FusedLinear : CpuOpFixture<7> {};

void expect_bits_equal(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " not written";
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

enum class Pro { kNone, kNorm, kSilu };

TEST_F(FusedLinear, EqualsUnfusedSequence) {
  for (Pro pro : {Pro::kNone, Pro::kNorm, Pro::kSilu})
    for (bool res : {false, true})
      for (bool bias : {false, true})
        for (auto [n, k, m] : std::vector<std::tuple<int, int, int>>{{1, 64, 40}, {3, 48, 17}, {7, 128, 96}, {64, 40, 24}}) {
          if (pro == Pro::kNone && !res) continue;  // the plain op
          SCOPED_TRACE("pro " + std::to_string(int(pro)) + " res " + std::to_string(res) + " bias " +
                       std::to_string(bias) + " N " + std::to_string(n) + " K " + std::to_string(k) + " M " +
                       std::to_string(m));
          const int in_k = pro == Pro::kSilu ? 2 * k : k;
          auto x = randn(size_t(n) * in_k), w = randn(size_t(m) * k, 0.1f), b = randn(m), g = randn(k);
          auto r = randn(size_t(n) * m);
          // Unfused reference.
          std::vector<float> xs(size_t(n) * k), y(size_t(n) * m), want(size_t(n) * m, kNaN);
          Tensor xin = view(x, {n, in_k});
          if (pro == Pro::kNorm) be->rms_norm({xin, view(g, {k}), view(xs, {n, k}), Tensor(), 1e-5f});
          else if (pro == Pro::kSilu) be->silu_and_mul({xin, view(xs, {n, k})});
          else xs = x;
          be->linear({view(xs, {n, k}), view(w, {m, k}), bias ? view(b, {m}) : Tensor(), view(y, {n, m})});
          if (res) be->add({view(r, {n, m}), view(y, {n, m}), view(want, {n, m})});
          else want = y;
          // Fused, into a poisoned out.
          std::vector<float> out(size_t(n) * m, kNaN);
          LinearParams p{xin, view(w, {m, k}), bias ? view(b, {m}) : Tensor(), view(out, {n, m})};
          if (pro == Pro::kNorm) p.input_norm = view(g, {k}), p.norm_eps = 1e-5f;
          p.silu_mul_input = pro == Pro::kSilu;
          if (res) p.residual = view(r, {n, m});
          be->linear(p);
          expect_bits_equal(out, want);
          if (res) {  // out aliasing residual: the in-place residual stream of a decoder layer
            std::vector<float> rr = r;
            p.residual = view(rr, {n, m});
            p.out = view(rr, {n, m});
            be->linear(p);
            expect_bits_equal(rr, want);
          }
        }
}

// silu_mul_output: linear (with input_norm or not, bias or not) into [N, 2I], then silu_and_mul with the
// gate activation (SiLU, or Gemma's GELU-tanh).
TEST_F(FusedLinear, SiluMulOutputEqualsUnfusedSequence) {
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh})
  for (bool norm : {false, true})
    for (bool bias : {false, true})
      for (auto [n, k, i] : std::vector<std::tuple<int, int, int>>{{1, 64, 20}, {3, 48, 9}, {7, 128, 48}}) {
        SCOPED_TRACE("norm " + std::to_string(norm) + " bias " + std::to_string(bias) + " N " + std::to_string(n) +
                     " gelu " + std::to_string(act == Activation::kGeluTanh));
        const int m = 2 * i;
        auto x = randn(size_t(n) * k), w = randn(size_t(m) * k, 0.1f), b = randn(m), g = randn(k);
        std::vector<float> xs = x, y(size_t(n) * m), want(size_t(n) * i, kNaN), out(size_t(n) * i, kNaN);
        if (norm) be->rms_norm({view(x, {n, k}), view(g, {k}), view(xs, {n, k}), Tensor(), 1e-5f});
        be->linear({view(xs, {n, k}), view(w, {m, k}), bias ? view(b, {m}) : Tensor(), view(y, {n, m})});
        be->silu_and_mul({view(y, {n, m}), view(want, {n, i}), act});
        LinearParams p{view(x, {n, k}), view(w, {m, k}), bias ? view(b, {m}) : Tensor(), view(out, {n, i})};
        if (norm) p.input_norm = view(g, {k}), p.norm_eps = 1e-5f;
        p.silu_mul_output = true;
        p.act = act;
        be->linear(p);
        expect_bits_equal(out, want);
      }
}

TEST_F(FusedLinear, HalfPrecisionWeights) {
  const int n = 2, k = 32, m = 24;
  auto x = randn(size_t(n) * k), w = randn(size_t(m) * k, 0.1f), g = randn(k), r = randn(size_t(n) * m);
  Tensor wb = be->upload(view(w, {m, k}), DType::kBF16), gb = be->upload(view(g, {k}), DType::kBF16);
  std::vector<float> xs(size_t(n) * k), y(size_t(n) * m), want(size_t(n) * m), out(size_t(n) * m, kNaN);
  be->rms_norm({view(x, {n, k}), gb, view(xs, {n, k}), Tensor(), 1e-6f});
  be->linear({view(xs, {n, k}), wb, Tensor(), view(y, {n, m})});
  be->add({view(r, {n, m}), view(y, {n, m}), view(want, {n, m})});
  LinearParams p{view(x, {n, k}), wb, Tensor(), view(out, {n, m})};
  p.input_norm = gb;
  p.residual = view(r, {n, m});
  be->linear(p);
  expect_bits_equal(out, want);
  be->free(wb);
  be->free(gb);
}

TEST_F(FusedLinear, RejectsBadCombinations) {
  const int n = 2, k = 16, m = 8;
  std::vector<float> x(n * 2 * k, 1.f), w(m * k, 1.f), g(k, 1.f), out(n * m), r(n * m);
  LinearParams p{view(x, {n, 2 * k}), view(w, {m, k}), Tensor(), view(out, {n, m})};
  p.silu_mul_input = true;
  p.input_norm = view(g, {k});
  EXPECT_THROW(be->linear(p), Error);  // input_norm with silu_mul_input
  p.input_norm = Tensor();
  p.x = view(x, {n * 2, k});  // silu input must be [N, 2K]
  EXPECT_THROW(be->linear(p), Error);
  p.silu_mul_input = false;
  p.x = view(x, {n, k});
  p.residual = view(r, {n, m - 1});
  EXPECT_THROW(be->linear(p), Error);  // residual not [N, M]
  p.residual = Tensor();
  p.silu_mul_output = true;
  EXPECT_THROW(be->linear(p), Error);  // out must be [N, M / 2]
  p.out = view(out, {n, m / 2});
  p.residual = view(r, {n, m / 2});
  EXPECT_THROW(be->linear(p), Error);  // silu_mul_output with residual
}

}  // namespace
}  // namespace vireo
