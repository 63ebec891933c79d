// The fused decode forms of linear (input_norm, silu_mul_input, residual) vs the CPU backend's
// unfused ops with the GPU's roundings to the activation dtype in between; both paths (N <= 4: fused
// GEMV; N > 4: rms_norm / silu_and_mul, cuBLASLt, add through scratch). Then a chain of dependent
// kernels (PDL) eagerly, and the same chain captured in a CUDA graph and replayed.
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

enum class Pro { kNone, kNorm, kSilu };

class FusedLinearTest : public CudaOpsTest {
 protected:
  // A view of host data that outlives the call (no copy: the weights are up to 600 MB as floats).
  static Tensor view(const std::vector<float>& v, std::vector<int64_t> shape) {
    return Tensor(const_cast<float*>(v.data()), DType::kF32, std::move(shape));
  }
  // Refill an existing GPU tensor with NaN.
  void poison(Tensor& t) {
    Tensor fresh = gpu_poisoned(t.shape, t.dtype);
    std::vector<uint8_t> bytes(t.nbytes());
    gpu_->copy_to_host(fresh, bytes.data());
    gpu_->copy_from_host(bytes.data(), t);
  }
  std::vector<float> rounded(std::vector<float> v) {
    for (auto& x : v) x = round_to(act_, x);
    return v;
  }
  // The unfused sequence on the CPU, rounding every op's output to the GPU's activation dtype.
  std::vector<float> ref(const std::vector<float>& x, int n, int k, int m, Pro pro, const std::vector<float>& w,
                         const std::vector<float>* bias, const std::vector<float>* g, const std::vector<float>* res) {
    std::vector<float> xs = x;
    if (pro != Pro::kNone) {
      Tensor o = cpu_poisoned({n, k});
      if (pro == Pro::kNorm)
        cpu_->rms_norm({view(x, {n, k}), view(*g, {k}), o, Tensor(), 1e-6f});
      else
        cpu_->silu_and_mul({view(x, {n, 2 * k}), o});
      xs = rounded(to_host(o));
    }
    Tensor y = cpu_poisoned({n, m});
    cpu_->linear({view(xs, {n, k}), view(w, {m, k}), bias ? view(*bias, {m}) : Tensor(), y});
    auto yv = rounded(to_host(y));
    if (!res) return yv;
    Tensor o = cpu_poisoned({n, m});
    cpu_->add({view(*res, {n, m}), view(yv, {n, m}), o});
    return rounded(to_host(o));
  }

  // One fused call on the GPU (out poisoned; with a residual also in place: out == residual).
  void check(int n, int k, int m, Pro pro, bool with_res, bool with_bias, const std::vector<float>& w, const Tensor& wg,
             const std::vector<float>& b, const Tensor& bg, const std::vector<float>& g, const Tensor& gg) {
    SCOPED_TRACE("N " + std::to_string(n) + " K " + std::to_string(k) + " M " + std::to_string(m) + " pro " +
                 std::to_string(int(pro)) + (with_res ? " residual" : "") + (with_bias ? " bias" : ""));
    const int in_k = pro == Pro::kSilu ? 2 * k : k;
    auto x = rand_vec(size_t(n) * in_k, pro == Pro::kSilu ? -3.f : -1.f, pro == Pro::kSilu ? 3.f : 1.f, act_);
    auto r = rand_vec(size_t(n) * m, -1, 1, act_);
    const auto want = ref(x, n, k, m, pro, w, with_bias ? &b : nullptr, pro == Pro::kNorm ? &g : nullptr,
                          with_res ? &r : nullptr);
    Tensor out = gpu_poisoned({n, m}, act_);
    LinearParams p{gpu_from(x, {n, in_k}, act_), wg, with_bias ? bg : Tensor(), out};
    if (pro == Pro::kNorm) p.input_norm = gg;
    p.silu_mul_input = pro == Pro::kSilu;
    if (with_res) p.residual = gpu_from(r, {n, m}, act_);
    gpu_->linear(p);
    expect_close(to_host(out), want, tol_for(act_), "fused linear");
    if (with_res) {
      Tensor inplace = gpu_from(r, {n, m}, act_);
      p.residual = inplace;
      p.out = inplace;
      gpu_->linear(p);
      expect_close(to_host(inplace), want, tol_for(act_), "fused linear, out aliasing residual");
    }
  }

  // silu_mul_output on the GPU (w [2I, K]) vs the CPU's linear (+ input norm) -> rounded -> silu_and_mul.
  void check_silu_out(int n, int k, int i, bool norm, bool with_bias, Activation act = Activation::kSilu) {
    SCOPED_TRACE("silu_out N " + std::to_string(n) + " K " + std::to_string(k) + " I " + std::to_string(i) +
                 (norm ? " norm" : "") + (with_bias ? " bias" : "") + (act == Activation::kGeluTanh ? " gelu" : ""));
    const int m = 2 * i;
    const float ws = 1.f / std::sqrt(float(k));
    auto w = rand_vec(size_t(m) * k, -ws, ws, act_);
    auto b = rand_vec(m, -1, 1, act_);
    auto g = rand_vec(k, 0.5f, 1.5f, act_);
    auto x = rand_vec(size_t(n) * k, -1.f, 1.f, act_);
    const auto y = ref(x, n, k, m, norm ? Pro::kNorm : Pro::kNone, w, with_bias ? &b : nullptr, &g, nullptr);
    Tensor o = cpu_poisoned({n, i});
    cpu_->silu_and_mul({view(y, {n, m}), o, act});
    const auto want = rounded(to_host(o));
    Tensor out = gpu_poisoned({n, i}, act_);
    LinearParams p{gpu_from(x, {n, k}, act_), gpu_from(w, {m, k}, act_), with_bias ? gpu_from(b, {m}, act_) : Tensor(), out};
    if (norm) p.input_norm = gpu_from(g, {k}, act_);
    p.silu_mul_output = true;
    p.act = act;
    gpu_->linear(p);
    expect_close(to_host(out), want, tol_for(act_), "linear silu_mul_output");
  }

  void shape(int k, int m, const std::vector<int>& ns, bool all_forms) {
    const float ws = 1.f / std::sqrt(float(k));
    auto w = rand_vec(size_t(m) * k, -ws, ws, act_);
    auto b = rand_vec(m, -1, 1, act_);
    auto g = rand_vec(k, 0.5f, 1.5f, act_);
    Tensor wg = gpu_from(w, {m, k}, act_), bg = gpu_from(b, {m}, act_), gg = gpu_from(g, {k}, act_);
    for (int n : ns) {
      check(n, k, m, Pro::kNorm, false, true, w, wg, b, bg, g, gg);
      check(n, k, m, Pro::kSilu, true, false, w, wg, b, bg, g, gg);
      if (!all_forms) continue;
      check(n, k, m, Pro::kNone, true, true, w, wg, b, bg, g, gg);
      check(n, k, m, Pro::kNorm, true, false, w, wg, b, bg, g, gg);
      check(n, k, m, Pro::kSilu, false, true, w, wg, b, bg, g, gg);
    }
  }
};

TEST_F(FusedLinearTest, OddAndSmallShapes) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    SCOPED_TRACE(dtype_name(act));
    for (auto [k, m] : std::vector<std::pair<int, int>>{{64, 40}, {520, 77}, {200, 96}, {2056, 33}, {8, 5}, {100, 16}})
      shape(k, m, {1, 2, 3, 4, 7, 64}, true);
  }
  use_dtype(DType::kF32);  // no GEMV for F32: every N takes the unfused path
  shape(256, 48, {1, 3, 7}, true);
}

TEST_F(FusedLinearTest, Qwen3_0_6BShapes) {
  use_dtype(DType::kBF16);
  for (auto [m, k] : std::vector<std::pair<int, int>>{{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}})
    shape(k, m, {1, 2, 3, 4, 7, 64}, true);
  shape(1024, 151936, {1, 4, 7}, false);  // lm_head (with the final norm fused)
}

// The one-pass register-resident GEMV (K = 1024/2048/3072/4096 in bf16, rows fitting one wave): rows
// not a multiple of the warp split, 1 and 2 blocks an SM, the largest K, f16; and shapes just past it
// (the streaming kernel).
TEST_F(FusedLinearTest, ResidentGemvShapes) {
  use_dtype(DType::kBF16);
  for (auto [m, k] : std::vector<std::pair<int, int>>{{3001, 1024}, {33, 2048}, {1999, 4096}, {5, 3072}, {8449, 1024}, {9000, 1024}})
    shape(k, m, {1, 2, 3, 4}, true);
  use_dtype(DType::kF16);
  shape(1024, 4096, {1, 4}, true);
}

// The bulk-copy streaming kernel (gemv_stream.cuh): >= 2 rows a warp over the grid, rows of >= 1024
// elements in chunks of 64, 128 or 256 16-byte vectors; M not a multiple of the warp count (uneven row
// runs), K = 3072 (128-vector chunks, 3 a row), K = 3584 (64-vector chunks, 7 a row), K = 1024 / 1536
// (one 128-vector chunk / three 64-vector chunks a row), x' large enough (K 12288, N 4) to cut the ring to
// fewer stages. At batch 1, K = 1024 / 2048 take the rows kernel (gemv_stream_rows.cuh): groups of 4 / 2
// rows, the last group of a warp partial (M = 20001: 18-19 rows a warp), bf16 and f16.
TEST_F(FusedLinearTest, StreamGemvShapes) {
  use_dtype(DType::kBF16);
  for (auto [m, k] : std::vector<std::pair<int, int>>{
           {2113, 3072}, {4099, 2048}, {2200, 12288}, {2500, 3584}, {20001, 1024}, {9001, 1536}})
    shape(k, m, {1, 2, 3, 4}, true);
  use_dtype(DType::kF16);
  shape(4096, 3000, {1, 3}, true);
  shape(1024, 20001, {1, 2}, true);  // batch 1: the rows kernel (gemv_stream_rows.cuh), 2 KiB rows
  shape(2048, 4099, {1}, true);      // and 4 KiB rows
}

// gate_up with its activation in the epilogue: the resident kernel (K 1024, pairs as adjacent rows),
// the streaming kernel (K 4096 / 2048, pairs as units), the grid-stride kernel (K 1536: neither), and
// the unfused path (N 7: rms_norm, cuBLASLt, silu_and_mul).
TEST_F(FusedLinearTest, SiluMulOutput) {
  use_dtype(DType::kBF16);
  for (auto [k, i] : std::vector<std::pair<int, int>>{{1024, 3072}, {1024, 1001}, {4096, 12288}, {2048, 2113}, {1536, 700}, {4096, 4099}})
    for (int n : {1, 2, 4, 7}) check_silu_out(n, k, i, true, n == 2);
  check_silu_out(1, 1024, 3072, false, true);
  use_dtype(DType::kF16);
  check_silu_out(3, 4096, 6000, true, false);
  check_silu_out(1, 1024, 3072, true, true);
}

// The same with Gemma's GELU-tanh gate (the generic kernels take it): Gemma 3 1B's gate_up (K 1152,
// I 6912), the resident, streaming and grid-stride shapes above, the unfused path, f16.
TEST_F(FusedLinearTest, GeluMulOutput) {
  use_dtype(DType::kBF16);
  for (auto [k, i] : std::vector<std::pair<int, int>>{{1152, 6912}, {1024, 1001}, {4096, 4099}, {1536, 700}})
    for (int n : {1, 2, 4, 7}) check_silu_out(n, k, i, true, n == 2, Activation::kGeluTanh);
  use_dtype(DType::kF16);
  check_silu_out(1, 1152, 6912, true, false, Activation::kGeluTanh);
  use_dtype(DType::kF32);  // the unfused path at every N
  check_silu_out(2, 256, 96, true, true, Activation::kGeluTanh);
}

TEST_F(FusedLinearTest, Qwen3_8BShapes) {
  use_dtype(DType::kBF16);
  for (auto [m, k] : std::vector<std::pair<int, int>>{{4096, 4096}, {6144, 4096}, {24576, 4096}, {4096, 12288}})
    shape(k, m, {1, 4, 7}, false);
}

TEST_F(FusedLinearTest, RejectsNormWithSilu) {
  use_dtype(DType::kBF16);
  Tensor x = gpu_own(gpu_->alloc({2, 64}, DType::kBF16));
  Tensor w = gpu_own(gpu_->alloc({8, 32}, DType::kBF16));
  Tensor g = gpu_own(gpu_->alloc({32}, DType::kBF16));
  Tensor out = gpu_own(gpu_->alloc({2, 8}, DType::kBF16));
  LinearParams p{x, w, Tensor(), out};
  p.input_norm = g;
  p.silu_mul_input = true;
  EXPECT_THROW(gpu_->linear(p), Error);
  p.input_norm = Tensor();
  p.residual = gpu_own(gpu_->alloc({2, 7}, DType::kBF16));
  EXPECT_THROW(gpu_->linear(p), Error);  // residual not [N, M]
}

// Two decoder-like layers of dependent kernels: embedding -> [norm+qkv-ish GEMV -> o GEMV + residual
// (in place) -> norm+gate_up GEMV -> silu+down GEMV + residual (in place)] x 2 -> rms_norm(+residual)
// -> gather_rows: 12 kernels, each reading the previous one's output.
class PdlChainTest : public FusedLinearTest {
 protected:
  struct Layer {
    std::vector<float> wa, wo, wgu, wd, g1, g2;
    Tensor wa_g, wo_g, wgu_g, wd_g, g1_g, g2_g;
  };
  static constexpr int kHidden = 1024, kInter = 1536, kVocab = 300;

  void run_gpu(const Tensor& table, const Tensor& ids, const std::vector<Layer>& layers, const Tensor& fnorm,
               const Tensor& idx, Tensor& h, Tensor& t, Tensor& gu, Tensor& fin, Tensor& out) {
    gpu_->embedding({table, ids, h});
    for (const Layer& l : layers) {
      LinearParams a{h, l.wa_g, Tensor(), t};
      a.input_norm = l.g1_g;
      gpu_->linear(a);
      LinearParams o{t, l.wo_g, Tensor(), h};
      o.residual = h;
      gpu_->linear(o);
      LinearParams up{h, l.wgu_g, Tensor(), gu};
      up.input_norm = l.g2_g;
      gpu_->linear(up);
      LinearParams d{gu, l.wd_g, Tensor(), h};
      d.silu_mul_input = true;
      d.residual = h;
      gpu_->linear(d);
    }
    gpu_->rms_norm({t, fnorm, fin, h, 1e-6f});  // h += t; fin = norm(h) * fnorm
    gpu_->gather_rows({fin, idx, out});
  }

  void run(int n) {
    SCOPED_TRACE("N " + std::to_string(n) + (cuda::pdl_enabled() ? " PDL" : " no PDL"));
    use_dtype(DType::kBF16);
    const int H = kHidden, I = kInter;
    auto table = rand_vec(size_t(kVocab) * H, -1, 1, act_);
    std::vector<int> ids(n), idx(n);
    for (int i = 0; i < n; ++i) ids[i] = rand_int(0, kVocab - 1), idx[i] = n - 1 - i;
    std::vector<Layer> layers(2);
    auto mk = [&](int m, int k, std::vector<float>& v, Tensor& g) {
      const float s = 1.f / std::sqrt(float(k));
      v = rand_vec(size_t(m) * k, -s, s, act_);
      g = gpu_from(v, {m, k}, act_);
    };
    for (Layer& l : layers) {
      mk(H, H, l.wa, l.wa_g);
      mk(H, H, l.wo, l.wo_g);
      mk(2 * I, H, l.wgu, l.wgu_g);
      mk(H, I, l.wd, l.wd_g);
      l.g1 = rand_vec(H, 0.5f, 1.5f, act_);
      l.g2 = rand_vec(H, 0.5f, 1.5f, act_);
      l.g1_g = gpu_from(l.g1, {H}, act_);
      l.g2_g = gpu_from(l.g2, {H}, act_);
    }
    auto fn = rand_vec(H, 0.5f, 1.5f, act_);

    // CPU: the same chain, rounding each op's output.
    std::vector<float> h(size_t(n) * H);
    for (int i = 0; i < n; ++i) std::copy_n(&table[size_t(ids[i]) * H], H, &h[size_t(i) * H]);
    for (const Layer& l : layers) {
      auto t = ref(h, n, H, H, Pro::kNorm, l.wa, nullptr, &l.g1, nullptr);
      h = ref(t, n, H, H, Pro::kNone, l.wo, nullptr, nullptr, &h);
      auto gu = ref(h, n, H, 2 * I, Pro::kNorm, l.wgu, nullptr, &l.g2, nullptr);
      h = ref(gu, n, I, H, Pro::kSilu, l.wd, nullptr, nullptr, &h);
      if (&l == &layers.back()) {
        for (size_t i = 0; i < h.size(); ++i) h[i] = round_to(act_, h[i] + t[i]);
        Tensor f = cpu_poisoned({n, H});
        cpu_->rms_norm({view(h, {n, H}), view(fn, {H}), f, Tensor(), 1e-6f});
        auto fv = rounded(to_host(f));
        std::vector<float> want(size_t(n) * H);
        for (int i = 0; i < n; ++i) std::copy_n(&fv[size_t(idx[i]) * H], H, &want[size_t(i) * H]);
        h = want;
      }
    }
    const auto want = h;

    Tensor tg = gpu_from(table, {kVocab, H}, act_), idg = gpu_i32(ids, {n}), ixg = gpu_i32(idx, {n});
    Tensor fg = gpu_from(fn, {H}, act_);
    Tensor hg = gpu_poisoned({n, H}, act_), t = gpu_poisoned({n, H}, act_), gu = gpu_poisoned({n, 2 * I}, act_);
    Tensor fin = gpu_poisoned({n, H}, act_), out = gpu_poisoned({n, H}, act_);
    // Ten dependent bf16 ops: where the GPU's fp32 sums round to the other neighbour of a bf16 value
    // (cuBLASLt's order at N > 4), later ops carry that ulp on; the final norm makes outputs O(1), so an
    // absolute bound of a few bf16 ulps at 1 is the chain's tolerance. A stale read (a PDL wait in the
    // wrong place) gives errors of O(1) or NaN, far outside it.
    const Tolerance chain_tol{0.05f, 0.02f};
    run_gpu(tg, idg, layers, fg, ixg, hg, t, gu, fin, out);  // eager (also the warm-up before capture)
    expect_close(to_host(out), want, chain_tol, "eager chain");

    gpu_->begin_capture();
    try {
      run_gpu(tg, idg, layers, fg, ixg, hg, t, gu, fin, out);
    } catch (...) {
      gpu_->abort_capture();
      throw;
    }
    const int graph = gpu_->end_capture();
    for (int rep = 0; rep < 2; ++rep) {
      for (Tensor* p : {&hg, &t, &gu, &fin, &out}) poison(*p);  // everything the graph writes
      gpu_->replay_graph(graph);
      expect_close(to_host(out), want, chain_tol, "graph replay " + std::to_string(rep));
    }
    gpu_->destroy_graph(graph);
  }
};

TEST_F(PdlChainTest, EagerAndGraphMatchCpu) {
  for (bool pdl : {true, false}) {
    cuda::set_pdl_enabled(pdl);
    for (int n : {1, 3, 4, 7, 64}) run(n);
  }
  cuda::set_pdl_enabled(true);
}

}  // namespace
}  // namespace vireo::testing
