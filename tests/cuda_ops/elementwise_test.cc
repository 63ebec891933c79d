// Embedding (plain and scaled), RMSNorm (plain, fused residual, aliased), SiLU- and GELU-tanh-and-mul, add,
// gather_rows vs the CPU backend.
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

const DType kDtypes[] = {DType::kBF16, DType::kF16, DType::kF32};

TEST_F(CudaOpsTest, Embedding) {
  for (DType act : kDtypes) {
    use_dtype(act);
    for (auto [vocab, hidden, t, table_dt] : std::vector<std::tuple<int, int, int, DType>>{
             {1000, 4096, 1, act}, {1000, 4096, 37, act}, {517, 100, 9, act}, {300, 64, 5, DType::kF32}, {300, 72, 5, DType::kBF16}}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " table " + std::string(dtype_name(table_dt)) + " hidden " + std::to_string(hidden) + " T " + std::to_string(t));
      const DType round_dt = table_dt == DType::kF32 ? act : table_dt;  // values exact in both dtypes
      auto table = rand_vec(size_t(vocab) * hidden, -1, 1, round_dt);
      std::vector<int> ids(t);
      for (auto& i : ids) i = rand_int(0, vocab - 1);
      Tensor out = gpu_poisoned({t, hidden}, act);
      gpu_->embedding({gpu_from(table, {vocab, hidden}, table_dt), gpu_i32(ids, {t}), out});
      Tensor ref = cpu_poisoned({t, hidden});
      cpu_->embedding({cpu_f32(table, {vocab, hidden}), cpu_i32(ids, {t}), ref});
      expect_close(to_host(out), to_host(ref), {1e-4f, 0}, "embedding");
      // Gemma's scaled embedding: the factor as the activation dtype holds it, one rounding.
      const float scale = rand_vec(1, 2, 60, act)[0];
      Tensor scaled = gpu_poisoned({t, hidden}, act);
      gpu_->embedding({gpu_from(table, {vocab, hidden}, table_dt), gpu_i32(ids, {t}), scaled, scale});
      Tensor scaled_ref = cpu_poisoned({t, hidden});
      cpu_->embedding({cpu_f32(table, {vocab, hidden}), cpu_i32(ids, {t}), scaled_ref, scale});
      expect_close(to_host(scaled), to_host(scaled_ref), tol_for(act), "scaled embedding");
    }
  }
}

TEST_F(CudaOpsTest, RmsNorm) {
  for (DType act : kDtypes) {
    use_dtype(act);
    const Tolerance tol = tol_for(act);
    for (auto [n, c] : std::vector<std::pair<int, int>>{{1, 4096}, {7, 4096}, {33, 5120}, {3, 100}, {5, 37}}) {
      // 0 plain, 1 fused residual, 2 fused residual with out aliasing x, 3 add_after_norm into a new
      // tensor, 4 add_after_norm with out aliasing the residual (post-norm / sandwich blocks).
      for (int mode = 0; mode < 5; ++mode) {
        SCOPED_TRACE(std::string(dtype_name(act)) + " N " + std::to_string(n) + " C " + std::to_string(c) + " mode " + std::to_string(mode));
        auto x = rand_vec(size_t(n) * c, -2, 2, act);
        auto w = rand_vec(c, 0.5f, 1.5f, act);
        auto r = rand_vec(size_t(n) * c, -2, 2, act);
        Tensor gx = gpu_from(x, {n, c}, act);
        Tensor gr = mode ? gpu_from(r, {n, c}, act) : Tensor();
        Tensor gout = mode == 2 ? gx : mode == 4 ? gr : gpu_poisoned({n, c}, act);
        RmsNormParams gp{gx, gpu_from(w, {c}, act), gout, gr, 1e-6f};
        gp.add_after_norm = mode >= 3;
        gpu_->rms_norm(gp);
        Tensor cx = cpu_f32(x, {n, c});
        Tensor cr = mode ? cpu_f32(r, {n, c}) : Tensor();
        Tensor cout = cpu_poisoned({n, c});
        if (mode >= 3) {  // the unfused ops: norm (rounded), then add (rounded)
          cpu_->rms_norm({cx, cpu_f32(w, {c}), cout, Tensor(), 1e-6f});
          auto nv = to_host(cout);
          for (auto& v : nv) v = round_to(act, v);
          Tensor normed = cpu_f32(nv, {n, c});
          cpu_->add({cr, normed, cout});
        } else {
          cpu_->rms_norm({cx, cpu_f32(w, {c}), cout, cr, 1e-6f});
        }
        expect_close(to_host(gout), to_host(cout), tol, "rms_norm out");
        if (mode == 1 || mode == 2) expect_close(to_host(gr), to_host(cr), tol, "rms_norm residual");
        if (mode == 3) expect_close(to_host(gr), r, {0, 0}, "rms_norm residual (read only)");
      }
    }
  }
}

TEST_F(CudaOpsTest, SiluAndMul) {
  for (Activation fn : {Activation::kSilu, Activation::kGeluTanh}) {
    for (DType act : kDtypes) {
      use_dtype(act);
      for (auto [n, i] : std::vector<std::pair<int, int>>{{1, 12288}, {17, 1024}, {3, 37}, {4, 100}}) {
        SCOPED_TRACE(std::string(dtype_name(act)) + " N " + std::to_string(n) + " I " + std::to_string(i) +
                     (fn == Activation::kGeluTanh ? " gelu_tanh" : " silu"));
        auto x = rand_vec(size_t(n) * 2 * i, -6, 6, act);
        Tensor out = gpu_poisoned({n, i}, act);
        gpu_->silu_and_mul({gpu_from(x, {n, 2 * i}, act), out, fn});
        Tensor ref = cpu_poisoned({n, i});
        cpu_->silu_and_mul({cpu_f32(x, {n, 2 * i}), ref, fn});
        expect_close(to_host(out), to_host(ref), tol_for(act), "silu_and_mul");
      }
    }
  }
}

TEST_F(CudaOpsTest, Add) {
  for (DType act : kDtypes) {
    use_dtype(act);
    for (int n : {1, 8, 4096 * 3, 1001}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " n " + std::to_string(n));
      auto a = rand_vec(n, -3, 3, act), b = rand_vec(n, -3, 3, act);
      Tensor out = gpu_poisoned({n}, act);
      gpu_->add({gpu_from(a, {n}, act), gpu_from(b, {n}, act), out});
      Tensor ref = cpu_poisoned({n});
      cpu_->add({cpu_f32(a, {n}), cpu_f32(b, {n}), ref});
      expect_close(to_host(out), to_host(ref), tol_for(act), "add");
    }
  }
}

TEST_F(CudaOpsTest, GatherRows) {
  for (DType act : kDtypes) {
    use_dtype(act);
    for (auto [n, c, m] : std::vector<std::tuple<int, int, int>>{{40, 4096, 7}, {5, 3, 9}, {64, 1, 64}, {100, 152, 1}}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " N " + std::to_string(n) + " C " + std::to_string(c));
      auto x = rand_vec(size_t(n) * c, -1, 1, act);
      std::vector<int> idx(m);
      for (auto& i : idx) i = rand_int(0, n - 1);  // duplicates allowed
      Tensor out = gpu_poisoned({m, c}, act);
      gpu_->gather_rows({gpu_from(x, {n, c}, act), gpu_i32(idx, {m}), out});
      Tensor ref = cpu_poisoned({m, c});
      cpu_->gather_rows({cpu_f32(x, {n, c}), cpu_i32(idx, {m}), ref});
      expect_close(to_host(out), to_host(ref), {0, 0}, "gather_rows");
    }
  }
}

TEST_F(CudaOpsTest, MemoryRoundTrip) {
  use_dtype(DType::kBF16);
  // upload converts F32 -> BF16 with round-to-nearest-even, like the host conversion.
  auto v = rand_vec(3001, -100, 100, DType::kF32);
  Tensor g = gpu_from(v, {3001}, DType::kBF16);
  auto back = to_host(g);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(back[i], round_to(DType::kBF16, v[i])) << i;
  // Large copy_from_host (past the pinned staging buffer) and small ones reuse staging safely.
  std::vector<float> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i % 1000);
  Tensor gb = gpu_own(gpu_->alloc({int64_t(big.size())}, DType::kF32));
  gpu_->copy_from_host(big.data(), gb);
  std::vector<float> small1(10, 1.f), small2(10, 2.f);
  Tensor s1 = gpu_own(gpu_->alloc({10}, DType::kF32)), s2 = gpu_own(gpu_->alloc({10}, DType::kF32));
  gpu_->copy_from_host(small1.data(), s1);
  gpu_->copy_from_host(small2.data(), s2);
  EXPECT_EQ(to_host(gb), big);
  EXPECT_EQ(to_host(s1), small1);
  EXPECT_EQ(to_host(s2), small2);
  EXPECT_GT(gpu_->free_memory_bytes(), size_t{1} << 30);
  EXPECT_EQ(gpu_->kind(), DeviceKind::kCUDA);
}

}  // namespace
}  // namespace vireo::testing
