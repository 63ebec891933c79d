// Sparse MoE MLP (moe.cu and the grouped path, moe.h) vs the CPU backend: fresh random inputs, poisoned
// outputs, every element; each case through both expert paths (forced with set_moe_path), plus a decode
// grid (T 1..15, E 8 / 128, k 1 / 2 / 8) through the per-slot decode kernels (moe_decode.cu), and
// GPT-OSS's form (router and expert biases, the clamped SwiGLU) on both paths.
// The GPU rounds router logits to the activation dtype (as HF's bf16 router does) and the CPU does not,
// so a token whose k-th and (k+1)-th logits can round to one value could route differently: such
// tokens (a few percent in bf16 with 128 experts, top-8) are left out and counted.
// Scales: every weight uniform in +-3 / sqrt(fan_in), so logits, gate / up and y are O(1) whatever the
// width, and the tolerances (a few roundings of O(1) values) do not depend on the shape.
#include <array>
#include <cstring>
#include <numeric>

#include "backend/cuda/moe.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

using cuda::MoePath;

struct MoeCase {
  int T, hidden, inter, E, k;
  bool renorm;
  bool dead = false;  // experts 0 and E / 2 unreachable (logit -30): experts with no tokens, first and inside
  std::string name() const {
    return "T " + std::to_string(T) + " hidden " + std::to_string(hidden) + " I " + std::to_string(inter) + " E " +
           std::to_string(E) + " k " + std::to_string(k) + (renorm ? " renorm" : "") + (dead ? " dead experts" : "");
  }
};

// T in {1, 3, 17, 100, 600, 4101}, E in {8, 60, 128}, k in {1, 2, 8}; hidden and inter multiples of 8 but not
// of the grouped tiles (64-wide k, 64 / 128 columns), except the one with inter % 8 != 0, which the
// grouped path hands to the per-slot kernels.
const std::vector<MoeCase>& cases() {
  static const std::vector<MoeCase> c{
      {1, 64, 48, 8, 2, true},         {1, 200, 136, 128, 8, true},    {3, 128, 96, 60, 4, true},
      {3, 264, 72, 128, 8, false},     {17, 200, 136, 8, 1, false},    {17, 136, 200, 60, 2, true, true},
      {37, 64, 20, 6, 3, false},       {100, 264, 200, 60, 8, true},   {100, 72, 40, 128, 1, false, true},
      {600, 136, 72, 8, 2, false, true}, {600, 520, 392, 128, 8, true},
      {int(cuda::kMoeGroupedChunkTokens) + 5, 64, 48, 8, 2, true}};  // the grouped path in two passes
  return c;
}

class MoeTest : public CudaOpsTest {
 protected:
  void SetUp() override {
    CudaOpsTest::SetUp();
    saved_path_ = cuda::moe_path();
  }
  void TearDown() override {
    cuda::set_moe_path(saved_path_);
    CudaOpsTest::TearDown();
  }

  struct Inputs {
    std::vector<float> x, router, gu, down;
  };
  Inputs make_inputs(const MoeCase& c, DType act) {
    const float wx = 3.f / std::sqrt(float(c.hidden)), wi = 3.f / std::sqrt(float(c.inter));
    Inputs in{rand_vec(size_t(c.T) * c.hidden, -1, 1, act), rand_vec(size_t(c.E) * c.hidden, -wx, wx, act),
              rand_vec(size_t(c.E) * 2 * c.inter * c.hidden, -wx, wx, act),
              rand_vec(size_t(c.E) * c.hidden * c.inter, -wi, wi, act)};
    if (c.dead) {
      for (int t = 0; t < c.T; ++t) in.x[size_t(t) * c.hidden + c.hidden - 1] = 1.f;
      for (int e : {0, c.E / 2}) {
        std::fill_n(in.router.begin() + size_t(e) * c.hidden, c.hidden, 0.f);
        in.router[size_t(e) * c.hidden + c.hidden - 1] = -30.f;
      }
    }
    return in;
  }
  MoeParams gpu_params(const MoeCase& c, const Inputs& in, DType act, Tensor out) {
    return {gpu_from(in.x, {c.T, c.hidden}, act), gpu_from(in.router, {c.E, c.hidden}, act),
            gpu_from(in.gu, {c.E, 2 * c.inter, c.hidden}, act), gpu_from(in.down, {c.E, c.hidden, c.inter}, act),
            out, c.k, c.renorm};
  }
  std::vector<float> cpu_moe(const MoeCase& c, const Inputs& in) {
    Tensor ref = cpu_poisoned({c.T, c.hidden});
    cpu_->moe({cpu_f32(in.x, {c.T, c.hidden}), cpu_f32(in.router, {c.E, c.hidden}),
               cpu_f32(in.gu, {c.E, 2 * c.inter, c.hidden}), cpu_f32(in.down, {c.E, c.hidden, c.inter}), ref, c.k,
               c.renorm});
    return to_host(ref);
  }
  // Tokens whose top-k set cannot depend on the GPU's rounding of the logits to `act`: rounding is
  // monotonic, so the sets differ only where the k-th and (k+1)-th logits can round to one value (a
  // tie the GPU breaks by lowest id); eps covers the fp32 sums' order (GPU vs this double sum).
  // router_b [E] (GPT-OSS) or empty: added to each logit before the rounding, as both backends do.
  std::vector<bool> clear_tokens(const MoeCase& c, const Inputs& in, DType act,
                                 const std::vector<float>& router_b = {}) {
    std::vector<bool> keep(c.T);
    std::vector<float> l(c.E);
    for (int t = 0; t < c.T; ++t) {
      for (int e = 0; e < c.E; ++e) {
        double s = router_b.empty() ? 0.0 : router_b[e];
        for (int h = 0; h < c.hidden; ++h) s += double(in.x[size_t(t) * c.hidden + h]) * in.router[size_t(e) * c.hidden + h];
        l[e] = float(s);
      }
      std::sort(l.begin(), l.end(), std::greater<float>());
      if (c.k == c.E) {
        keep[t] = true;
        continue;
      }
      const float eps = 1e-4f * (1.f + std::fabs(l[c.k - 1]));
      keep[t] = round_to(act, l[c.k - 1] - eps) > round_to(act, l[c.k] + eps);
    }
    return keep;
  }
  std::vector<uint8_t> raw(const Tensor& t) {
    std::vector<uint8_t> b(t.nbytes());
    gpu_->copy_to_host(t, b.data());
    return b;
  }

  // One case through `path`: NaN-poisoned output, every element written, kept tokens within tol of the
  // CPU. Counts the compared / skipped (near-tied routing) tokens.
  void check_case(const MoeCase& c, DType act, MoePath path, Tolerance tol, int& compared, int& skipped) {
    const Inputs in = make_inputs(c, act);
    const std::vector<float> want = cpu_moe(c, in);
    const std::vector<bool> keep = clear_tokens(c, in, act);
    for (int t = 0; t < c.T; ++t) ++(keep[t] ? compared : skipped);
    cuda::set_moe_path(path);
    Tensor out = gpu_poisoned({c.T, c.hidden}, act);
    gpu_->moe(gpu_params(c, in, act, out));
    expect_kept_close(c, to_host(out), want, keep, tol);
  }

  // Every element of got written (no NaN left of the poison); the kept tokens' rows within tol of want.
  void expect_kept_close(const MoeCase& c, const std::vector<float>& got, const std::vector<float>& want,
                         const std::vector<bool>& keep, Tolerance tol) {
    for (float v : got) ASSERT_FALSE(std::isnan(v)) << "moe left an output element unwritten";
    std::vector<float> got_kept, want_kept;
    for (int t = 0; t < c.T; ++t)
      if (keep[t]) {
        got_kept.insert(got_kept.end(), got.begin() + size_t(t) * c.hidden, got.begin() + size_t(t + 1) * c.hidden);
        want_kept.insert(want_kept.end(), want.begin() + size_t(t) * c.hidden, want.begin() + size_t(t + 1) * c.hidden);
      }
    expect_close(got_kept, want_kept, tol, "moe");
  }

  // The op twice on the same inputs gives the same bits; so does a CUDA graph of it, replayed after x
  // changed in place (routing, and for the grouped path sort and tile count, are found on the device).
  void check_deterministic_and_graph(const MoeCase& c, DType act, MoePath path) {
    cuda::set_moe_path(path);
    const Inputs in = make_inputs(c, act);
    Tensor out = gpu_poisoned({c.T, c.hidden}, act);
    MoeParams p = gpu_params(c, in, act, out);
    gpu_->moe(p);
    const std::vector<uint8_t> first = raw(out);
    for (int rep = 0; rep < 3; ++rep) {
      Tensor again = gpu_poisoned({c.T, c.hidden}, act);
      MoeParams q = p;
      q.out = again;
      gpu_->moe(q);
      ASSERT_TRUE(raw(again) == first) << "moe differs between runs (rep " << rep << ")";
    }
    if (!gpu_->supports_graphs()) return;
    Tensor graph_out = gpu_poisoned({c.T, c.hidden}, act);
    MoeParams g = p;
    g.out = graph_out;
    gpu_->begin_capture();
    try {
      gpu_->moe(g);
    } catch (...) {
      gpu_->abort_capture();
      throw;
    }
    const int graph = gpu_->end_capture();
    for (int rep = 0; rep < 2; ++rep) {
      // New tokens in the same buffer: the graph must route them afresh.
      const std::vector<float> x2 = rand_vec(size_t(c.T) * c.hidden, -1, 1, act);
      gpu_->copy(gpu_from(x2, {c.T, c.hidden}, act), g.x);
      gpu_->replay_graph(graph);
      Tensor eager = gpu_poisoned({c.T, c.hidden}, act);
      MoeParams e = g;
      e.out = eager;
      gpu_->moe(e);
      ASSERT_TRUE(raw(graph_out) == raw(eager)) << "graph replay " << rep << " differs from the eager op";
    }
    gpu_->destroy_graph(graph);
  }

  // GPT-OSS's extras (MoeParams router_b, gate_up_b, down_b, swiglu_limit).
  struct Extras {
    std::vector<float> router_b, gu_b, down_b;  // [E], [E, 2I], [E, hidden]
    float limit;
  };
  // GPT-OSS's form of c (E, k, renorm from c; c.dead unused): x uniform in +-x_scale (the weights as
  // make_inputs', so gate / up are ~N(0, x_scale^2) plus their bias).
  Inputs make_gpt_oss_inputs(const MoeCase& c, DType act, float x_scale) {
    Inputs in = make_inputs(c, act);
    in.x = rand_vec(size_t(c.T) * c.hidden, -x_scale, x_scale, act);
    return in;
  }
  // Biases uniform in +-1 (router, gate / up) and +-4 (down: a missing or misplaced down bias must move
  // outputs by more than the bf16 tolerance, a few percent of outputs up to ~50).
  Extras make_extras(const MoeCase& c, DType act, float limit) {
    return {rand_vec(c.E, -1, 1, act), rand_vec(size_t(c.E) * 2 * c.inter, -1, 1, act),
            rand_vec(size_t(c.E) * c.hidden, -4, 4, act), limit};
  }
  // p plus the extras: on the CPU (F32) when cpu, else on the GPU in act.
  MoeParams with_extras(MoeParams p, const MoeCase& c, const Extras& ex, DType act, bool cpu) {
    auto put = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
      return cpu ? cpu_f32(v, std::move(shape)) : gpu_from(v, std::move(shape), act);
    };
    p.router_b = put(ex.router_b, {c.E});
    p.gate_up_b = put(ex.gu_b, {c.E, 2 * c.inter});
    p.down_b = put(ex.down_b, {c.E, c.hidden});
    p.swiglu_limit = ex.limit;
    return p;
  }

  // One GPT-OSS case through `path` against the CPU op on the same (act-rounded) inputs; tolerance
  // rel * max |want| (the output's scale: a few roundings of values up to that size), every element of
  // the kept tokens.
  void check_gpt_oss(const MoeCase& c, const Inputs& in, const Extras& ex, DType act, MoePath path, float rel,
                     int& compared, int& skipped) {
    Tensor ref = cpu_poisoned({c.T, c.hidden});
    cpu_->moe(with_extras({cpu_f32(in.x, {c.T, c.hidden}), cpu_f32(in.router, {c.E, c.hidden}),
                           cpu_f32(in.gu, {c.E, 2 * c.inter, c.hidden}), cpu_f32(in.down, {c.E, c.hidden, c.inter}),
                           ref, c.k, c.renorm},
                          c, ex, act, true));
    const std::vector<float> want = to_host(ref);
    const std::vector<bool> keep = clear_tokens(c, in, act, ex.router_b);
    for (int t = 0; t < c.T; ++t) ++(keep[t] ? compared : skipped);
    cuda::set_moe_path(path);
    Tensor out = gpu_poisoned({c.T, c.hidden}, act);
    gpu_->moe(with_extras(gpu_params(c, in, act, out), c, ex, act, false));
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    expect_kept_close(c, to_host(out), want, keep, Tolerance{rel * scale, rel});
  }

  // How many (token, expert, i) have g > limit, u > limit, u < -limit (fp32, every expert, not only the
  // routed ones): the inputs must reach all three clamps for the test to exercise them.
  std::array<int, 3> clamp_counts(const MoeCase& c, const Inputs& in, const Extras& ex) {
    std::array<int, 3> n{};
    for (int t = 0; t < c.T; ++t)
      for (int e = 0; e < c.E; ++e)
        for (int r = 0; r < 2 * c.inter; ++r) {
          const size_t row = size_t(e) * 2 * c.inter + r;
          const float v = std::inner_product(in.x.begin() + size_t(t) * c.hidden, in.x.begin() + size_t(t + 1) * c.hidden,
                                             in.gu.begin() + row * c.hidden, 0.f) + ex.gu_b[row];
          if (r < c.inter) n[0] += v > ex.limit;
          else n[1] += v > ex.limit, n[2] += v < -ex.limit;
        }
    return n;
  }

  MoePath saved_path_ = MoePath::kAuto;
};

Tolerance moe_tol(DType act) {
  // Six roundings to the activation dtype along the expert path (gate, up, act, y, y * w, the sum).
  return act == DType::kBF16 ? Tolerance{3e-2f, 3e-2f} : act == DType::kF16 ? Tolerance{6e-3f, 1e-2f} : tol_for(act);
}

TEST_F(MoeTest, BothPathsMatchCpu) {
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_dtype(act);
    int compared = 0, skipped = 0;
    for (const MoeCase& c : cases())
      for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
        if (act == DType::kF32 && path == MoePath::kGrouped) continue;  // f32 always takes the per-slot kernels
        SCOPED_TRACE(std::string(dtype_name(act)) + " " + c.name() +
                     (path == MoePath::kGrouped ? " grouped" : " per-slot"));
        int cmp = 0, skp = 0;
        check_case(c, act, path, moe_tol(act), cmp, skp);
        if (path == MoePath::kPerSlot) compared += cmp, skipped += skp;
      }
    EXPECT_GT(compared, 5 * skipped) << "too many near-tied routings to check";
  }
}

// The decode kernels (moe_decode.cu) on the token counts decode sees: T in {1, 2, 3, 8, 15} x E in
// {8, 128} x k in {1, 2, 8}, bf16 and f16; hidden / inter multiples of 8 but not of 64 (ragged vector
// passes: 25 / 33 / 17 / 9 vectors a row), dead experts in some. With E = 8, k = 8 every token takes all
// experts (each expert's rows shared by all T tokens, more than a warp's 4 per pass at T 8 and 15).
TEST_F(MoeTest, DecodeKernelsMatchCpu) {
  const int dims[][2] = {{200, 136}, {264, 72}, {136, 200}};
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    int compared = 0, skipped = 0, n = 0;
    for (int T : {1, 2, 3, 8, 15})
      for (int E : {8, 128})
        for (int k : {1, 2, 8}) {
          const int* d = dims[n % 3];
          const MoeCase c{T, d[0], d[1], E, k, n % 2 == 0, n % 5 == 4};
          ++n;
          SCOPED_TRACE(std::string(dtype_name(act)) + " " + c.name() + " decode");
          check_case(c, act, MoePath::kPerSlot, moe_tol(act), compared, skipped);
        }
    EXPECT_GT(compared, 5 * skipped) << "too many near-tied routings to check";
  }
}

// Decode kernels at the real shapes (hidden 2048: 8 vectors a lane, inter 768: 3; the launch picks the
// per-block rows / columns from the SM count, 6 or 8 down columns here, a partial last block at 6), T = 1
// (the one-token kernels) and T = 8 over 16 experts (most shared by several tokens): against the CPU,
// deterministic and graph-capturable.
TEST_F(MoeTest, DecodeIsDeterministicAndGraphCapturable) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    int compared = 0, skipped = 0;
    for (const MoeCase& c : {MoeCase{1, 2048, 768, 16, 8, true}, MoeCase{8, 2048, 768, 16, 8, true},
                             MoeCase{15, 264, 200, 8, 8, false}}) {
      use_dtype(act);
      SCOPED_TRACE(std::string(dtype_name(act)) + " " + c.name());
      check_case(c, act, MoePath::kPerSlot, moe_tol(act), compared, skipped);
      check_deterministic_and_graph(c, act, MoePath::kPerSlot);
    }
    EXPECT_GT(compared, 0);
  }
}

// The grouped path: deterministic and graph-capturable (check_deterministic_and_graph).
TEST_F(MoeTest, GroupedIsDeterministicAndGraphCapturable) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    const MoeCase c{600, 264, 200, 60, 8, true};
    SCOPED_TRACE(std::string(dtype_name(act)) + " " + c.name());
    check_deterministic_and_graph(c, act, MoePath::kGrouped);
  }
}

// GPT-OSS's MoE (MoeParams router_b, gate_up_b, down_b, swiglu_limit 7): E 8, top-2, renormalised, on
// both expert paths (forced), T in {1, 3, 40, 300}, hidden / inter multiples of 8 but not of 64. x in
// +-3 makes gate / up ~N(0, 9) plus their bias (|g| past 10 in most cases), so all three clamps (g above,
// u above and below) are taken (clamp_counts). Also the biases with limit 0 (silu(g) * u). The output
// reaches ~50 here: tolerance relative to its max |value| (bf16: the roundings of y and of the weighted
// sum; measured on the H200 up to 1.9% of the max at T = 1, hence 3%, as moe_tol; f32: ~1e-6).
TEST_F(MoeTest, GptOssFormMatchesCpu) {
  const int dims[][2] = {{200, 136}, {264, 72}, {136, 200}, {200, 136}};
  const int Ts[] = {1, 3, 40, 300};
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    const float rel = act == DType::kBF16 ? 3e-2f : 1e-4f;
    int compared = 0, skipped = 0;
    for (int n = 0; n < 4; ++n) {
      const MoeCase c{Ts[n], dims[n][0], dims[n][1], 8, 2, true};
      const Inputs in = make_gpt_oss_inputs(c, act, 3.f);
      for (float limit : {7.f, 0.f}) {
        const Extras ex = make_extras(c, act, limit);
        if (limit > 0) {
          const std::array<int, 3> clamps = clamp_counts(c, in, ex);
          EXPECT_TRUE(clamps[0] > 0 && clamps[1] > 0 && clamps[2] > 0)
              << c.name() << ": inputs miss a clamp (g > limit " << clamps[0] << ", u > limit " << clamps[1]
              << ", u < -limit " << clamps[2] << ")";
        }
        for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
          if (act == DType::kF32 && path == MoePath::kGrouped) continue;  // f32 always takes the per-slot kernels
          SCOPED_TRACE(std::string(dtype_name(act)) + " " + c.name() + " limit " + std::to_string(limit) +
                       (path == MoePath::kGrouped ? " grouped" : " per-slot"));
          int cmp = 0, skp = 0;
          check_gpt_oss(c, in, ex, act, path, rel, cmp, skp);
          if (path == MoePath::kPerSlot) compared += cmp, skipped += skp;
        }
      }
    }
    EXPECT_GT(compared, 5 * skipped) << "too many near-tied routings to check";
  }
}

// The biased, clamped form keeps both paths' guarantees: the same bits run to run and from a replayed
// CUDA graph (the extras ride in the captured kernels' parameters).
TEST_F(MoeTest, GptOssFormIsDeterministic) {
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
    use_dtype(DType::kBF16);
    cuda::set_moe_path(path);
    const MoeCase c{40, 264, 72, 8, 2, true};
    const Inputs in = make_gpt_oss_inputs(c, DType::kBF16, 3.f);
    const Extras ex = make_extras(c, DType::kBF16, 7.f);
    SCOPED_TRACE(c.name() + (path == MoePath::kGrouped ? " grouped" : " per-slot"));
    Tensor out = gpu_poisoned({c.T, c.hidden}, DType::kBF16);
    const MoeParams p = with_extras(gpu_params(c, in, DType::kBF16, out), c, ex, DType::kBF16, false);
    gpu_->moe(p);
    const std::vector<uint8_t> first = raw(out);
    for (int rep = 0; rep < 2; ++rep) {
      MoeParams q = p;
      q.out = gpu_poisoned({c.T, c.hidden}, DType::kBF16);
      gpu_->moe(q);
      ASSERT_TRUE(raw(q.out) == first) << "moe differs between runs (rep " << rep << ")";
    }
    if (!gpu_->supports_graphs()) continue;
    MoeParams g = p;
    g.out = gpu_poisoned({c.T, c.hidden}, DType::kBF16);
    gpu_->begin_capture();
    try {
      gpu_->moe(g);
    } catch (...) {
      gpu_->abort_capture();
      throw;
    }
    const int graph = gpu_->end_capture();
    gpu_->replay_graph(graph);
    EXPECT_TRUE(raw(g.out) == first) << "graph replay differs from the eager op";
    gpu_->destroy_graph(graph);
  }
}

// Bad GPT-OSS biases are refused on both paths: wrong size, wrong shape, wrong dtype.
TEST_F(MoeTest, RejectsBadBiases) {
  use_dtype(DType::kBF16);
  const MoeCase c{8, 64, 16, 8, 2, true};
  const Inputs in = make_inputs(c, DType::kBF16);
  const Extras ex = make_extras(c, DType::kBF16, 7.f);
  Tensor out = gpu_poisoned({c.T, c.hidden}, DType::kBF16);
  const MoeParams good = with_extras(gpu_params(c, in, DType::kBF16, out), c, ex, DType::kBF16, false);
  auto v = rand_vec(size_t(c.E) * 2 * c.hidden, -1, 1, DType::kBF16);
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
    cuda::set_moe_path(path);
    EXPECT_NO_THROW(gpu_->moe(good));
    MoeParams p = good;
    p.router_b = gpu_from(v, {c.E - 1}, DType::kBF16);  // [E - 1]
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.router_b = gpu_from(v, {c.E}, DType::kF32);  // not the weight dtype
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.gate_up_b = gpu_from(v, {c.E, c.inter}, DType::kBF16);  // [E, I], not [E, 2I]
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.gate_up_b = gpu_from(v, {c.E * 2 * c.inter}, DType::kBF16);  // flat
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.down_b = gpu_from(v, {c.E, c.inter}, DType::kBF16);  // [E, I], not [E, hidden]
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.down_b = gpu_from(v, {c.E, c.hidden}, DType::kF32);
    EXPECT_THROW(gpu_->moe(p), Error);
  }
}

TEST_F(MoeTest, RejectsBadShapes) {
  use_dtype(DType::kBF16);
  auto v = rand_vec(64 * 8, -1, 1, DType::kBF16);
  Tensor x = gpu_from(v, {8, 64}, DType::kBF16), router = gpu_from(v, {8, 64}, DType::kBF16);
  auto w = rand_vec(8 * 2 * 16 * 64, -1, 1, DType::kBF16);
  Tensor gu = gpu_from(w, {8, 32, 64}, DType::kBF16), down = gpu_from(w, {8, 64, 16}, DType::kBF16);
  Tensor out = gpu_poisoned({8, 64}, DType::kBF16);
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
    cuda::set_moe_path(path);
    EXPECT_THROW(gpu_->moe({x, router, gu, down, out, 9, true}), Error);  // top_k > E
    EXPECT_THROW(gpu_->moe({x, router, gu, down, x, 2, true}), Error);    // out aliases x
    EXPECT_THROW(gpu_->moe({x, router, down, gu, out, 2, true}), Error);  // swapped expert tensors
  }
}

// Path choice and tile bound: host code, no GPU needed.
TEST(MoePlan, PathChoiceAndTileBound) {
  using cuda::moe_use_grouped;
  EXPECT_FALSE(moe_use_grouped(MoePath::kAuto, 1, 8, true));  // decode: per-slot
  EXPECT_FALSE(moe_use_grouped(MoePath::kAuto, 15, 8, true));
  EXPECT_TRUE(moe_use_grouped(MoePath::kAuto, 16, 8, true));  // 128 slots
  EXPECT_TRUE(moe_use_grouped(MoePath::kGrouped, 1, 1, true));
  EXPECT_FALSE(moe_use_grouped(MoePath::kPerSlot, 4096, 8, true));
  EXPECT_FALSE(moe_use_grouped(MoePath::kGrouped, 4096, 8, false));  // unsupported: per-slot
  EXPECT_TRUE(cuda::moe_grouped_supported(DType::kBF16, 2048, 768, true));
  EXPECT_FALSE(cuda::moe_grouped_supported(DType::kF32, 2048, 768, true));
  EXPECT_FALSE(cuda::moe_grouped_supported(DType::kF16, 2048, 20, true));
  EXPECT_FALSE(cuda::moe_grouped_supported(DType::kBF16, 2048, 768, false));
  // Worst case for the tile count: every expert one row short of a multiple of the tile.
  for (int64_t e : {1, 8, 60, 128})
    for (int64_t per : {1, 2, 127, 128, 129, 255, 300}) {
      const int64_t slots = e * per, tiles = e * ((per + cuda::kMoeTileRows - 1) / cuda::kMoeTileRows);
      EXPECT_LE(tiles, cuda::moe_max_tiles(slots, e)) << e << " experts x " << per;
    }
  EXPECT_EQ(cuda::moe_max_tiles(8, 128), 1 + 8);  // 8 slots: at most 8 experts hold any
}

}  // namespace
}  // namespace vireo::testing
