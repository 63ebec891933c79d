// qkv_prepare vs the CPU backend: every QkNorm mode, NeoX and GPT-J RoPE, partial rotary, GQA head
// counts, skipped slots (< 0), scattered slots; q_out and the whole K/V caches are compared. FP8 caches
// (--kv-cache-dtype fp8): every kernel writes the codes of its fp32 k (the CPU's, up to a tie's one-code
// step) and of the v values (exact).
#include <cstring>

#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct QkvCase {
  int h, hkv, d, rotary;
  bool neox;
  QkNorm norm;
  int tokens;
};

class QkvPrepareTest : public CudaOpsTest {
 protected:
  void run(const QkvCase& c, DType act, bool fp8 = false) {
    SCOPED_TRACE(std::string(fp8 ? "fp8 cache " : "") + std::string(dtype_name(act)) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                 " D " + std::to_string(c.d) + " rd " + std::to_string(c.rotary) + (c.neox ? " neox" : " gptj") +
                 " norm " + std::to_string(int(c.norm)) + " T " + std::to_string(c.tokens));
    const int t = c.tokens, bs = 16, num_blocks = std::max(9, (t + bs - 1) / bs + 1), max_pos = 4096;
    const int width = (c.h + 2 * c.hkv) * c.d;
    auto qkv = rand_vec(size_t(t) * width, -2, 2, act);
    std::vector<int> pos(t), slots(t);
    std::vector<int> perm(num_blocks * bs);
    for (int i = 0; i < int(perm.size()); ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng_);
    for (int i = 0; i < t; ++i) {
      pos[i] = rand_int(0, max_pos - 1);
      slots[i] = (i % 5 == 3) ? -1 : perm[i];  // distinct slots, some skipped
    }
    std::vector<float> cs(size_t(max_pos) * std::max(c.rotary, 1));
    const int half = c.rotary / 2;
    for (int p = 0; p < max_pos && c.rotary > 0; ++p)
      for (int i = 0; i < half; ++i) {
        const double inv_freq = std::pow(10000.0, -2.0 * i / c.rotary);
        cs[size_t(p) * c.rotary + i] = float(std::cos(p * inv_freq));
        cs[size_t(p) * c.rotary + half + i] = float(std::sin(p * inv_freq));
      }
    const bool full = c.norm == QkNorm::kFullWidth;
    auto qn = rand_vec(full ? c.h * c.d : c.d, 0.5f, 1.5f, act);
    auto kn = rand_vec(full ? c.hkv * c.d : c.d, 0.5f, 1.5f, act);
    const int64_t cache_n = int64_t(num_blocks) * bs * c.hkv * c.d;
    auto kc0 = rand_vec(cache_n, -1, 1, act), vc0 = rand_vec(cache_n, -1, 1, act);
    std::vector<int64_t> cache_shape{num_blocks, bs, c.hkv, c.d};

    QkvPrepareParams g;
    g.qkv = gpu_from(qkv, {t, width}, act);
    g.positions = gpu_i32(pos, {t});
    g.rope_cos_sin = gpu_from(cs, {max_pos, std::max(c.rotary, 1)}, DType::kF32);
    g.rotary_dim = c.rotary;
    g.neox = c.neox;
    g.qk_norm = c.norm;
    if (c.norm != QkNorm::kNone) {
      g.q_norm = gpu_from(qn, {int64_t(qn.size())}, act);
      g.k_norm = gpu_from(kn, {int64_t(kn.size())}, act);
    }
    g.norm_eps = 1e-6f;
    g.q_out = gpu_poisoned({t, c.h, c.d}, act);
    g.k_cache = fp8 ? gpu_fp8(kc0, cache_shape) : gpu_from(kc0, cache_shape, act);
    g.v_cache = fp8 ? gpu_fp8(vc0, cache_shape) : gpu_from(vc0, cache_shape, act);
    g.slot_mapping = gpu_i32(slots, {t});
    g.num_heads = c.h;
    g.num_kv_heads = c.hkv;
    g.head_dim = c.d;
    g.block_size = bs;
    gpu_->qkv_prepare(g);

    QkvPrepareParams r = g;
    r.qkv = cpu_f32(qkv, {t, width});
    r.positions = cpu_i32(pos, {t});
    r.rope_cos_sin = cpu_f32(cs, {max_pos, std::max(c.rotary, 1)});
    if (c.norm != QkNorm::kNone) {
      r.q_norm = cpu_f32(qn, {int64_t(qn.size())});
      r.k_norm = cpu_f32(kn, {int64_t(kn.size())});
    }
    r.q_out = cpu_poisoned({t, c.h, c.d});
    r.k_cache = cpu_f32(kc0, cache_shape);
    r.v_cache = cpu_f32(vc0, cache_shape);
    r.slot_mapping = cpu_i32(slots, {t});
    cpu_->qkv_prepare(r);
    const Tolerance tol = tol_for(act);
    expect_close(to_host(g.q_out), to_host(r.q_out), tol, "q_out");
    // The CPU cache is F32: round its values to the GPU cache dtype before comparing.
    auto kr = to_host(r.k_cache), vr = to_host(r.v_cache);
    if (fp8) {
      // The CPU's fp32 values as codes: v exactly; k up to one code step where the two fp32 k straddle
      // a rounding tie (a step is 1/8 of the value's power of two, 1/16 to 1/8 of the value).
      int k_exact = 0;
      for (auto* x : {&kr, &vr})
        for (float& e : *x) e = fp8_e4m3_to_f32(f32_to_fp8_e4m3(e));
      const auto kg = to_host(g.k_cache);
      for (size_t i = 0; i < kg.size(); ++i) k_exact += kg[i] == kr[i];
      expect_close(kg, kr, {1.f / 512, 0.13f}, "k_cache");
      EXPECT_GE(k_exact, int(kg.size() * 0.99)) << "k codes off by a step beyond rounding ties";
      expect_close(to_host(g.v_cache), vr, {0, 0}, "v_cache");
      return;
    }
    expect_close(to_host(g.k_cache), kr, tol, "k_cache");
    expect_close(to_host(g.v_cache), vr, {0, 0}, "v_cache");
  }
};

// FP8 caches through each kernel: warp per head (fast and generic forms), token per block (> 1024 tokens),
// the fp32 block kernel (full-width norm), the scalar path (rows not 16-byte multiples).
TEST_F(QkvPrepareTest, Fp8Cache) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (int t : {1, 3, 13}) {
      run({16, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, t}, act, true);  // Qwen3: the fast form
      run({8, 2, 64, 32, false, QkNorm::kPerHeadAfterRope, t}, act, true);     // generic form
      run({16, 16, 128, 128, true, QkNorm::kFullWidth, t}, act, true);         // block kernel
    }
    run({16, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, 1100}, act, true);  // token per block
    run({8, 2, 64, 64, true, QkNorm::kNone, 1030}, act, true);
    run({2, 1, 36, 36, true, QkNorm::kPerHeadBeforeRope, 7}, act, true);  // scalar path
  }
}

TEST_F(QkvPrepareTest, AllModes) {
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    for (QkNorm norm : {QkNorm::kNone, QkNorm::kPerHeadBeforeRope, QkNorm::kPerHeadAfterRope, QkNorm::kFullWidth})
      for (bool neox : {true, false}) {
        run({32, 8, 128, 128, neox, norm, 13}, act);
        run({4, 4, 64, 32, neox, norm, 1}, act);  // partial rotary, MHA, one token
      }
    run({16, 2, 64, 64, true, QkNorm::kPerHeadBeforeRope, 40}, act);
    run({8, 1, 128, 0, true, QkNorm::kNone, 5}, act);  // no rotary at all
    run({2, 1, 36, 36, true, QkNorm::kPerHeadBeforeRope, 7}, act);  // bf16 rows not 16-byte multiples: scalar path
    run({64, 8, 128, 128, true, QkNorm::kFullWidth, 3}, act);  // large q: > 48 KiB of smem
  }
}

// Decode-sized steps (1..4 tokens: the warp-per-head kernel) at the model shapes that use each mode:
// Qwen3 (per-head norm before NeoX RoPE), HunYuan (after RoPE), OLMo-2 (full width: the block kernel),
// GPT-J pairs, partial rotary, head dims 64 / 128 / 256, and a long step (block kernel, per-head norm).
TEST_F(QkvPrepareTest, FewTokensAndBothKernels) {
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_dtype(act);
    for (int t = 1; t <= 4; ++t) {
      run({16, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, t}, act);  // Qwen3-0.6B
      run({32, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, t}, act);  // Qwen3-8B
      run({32, 8, 128, 128, true, QkNorm::kPerHeadAfterRope, t}, act);   // HunYuan
      run({16, 16, 128, 128, true, QkNorm::kFullWidth, t}, act);         // OLMo-2
      run({16, 4, 64, 64, false, QkNorm::kNone, t}, act);                // GPT-J pairs, D 64
      run({8, 1, 128, 32, true, QkNorm::kPerHeadBeforeRope, t}, act);    // partial rotary, MQA
      run({8, 2, 128, 64, false, QkNorm::kPerHeadAfterRope, t}, act);    // partial GPT-J
      run({8, 4, 256, 256, true, QkNorm::kPerHeadBeforeRope, t}, act);   // D 256: 8 values a lane
      run({4, 2, 80, 40, true, QkNorm::kPerHeadBeforeRope, t}, act);     // D 80: lanes past d idle
    }
    run({16, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, 1100}, act);  // > 1024 tokens: block kernel
    run({8, 2, 64, 32, false, QkNorm::kPerHeadAfterRope, 1030}, act);
  }
}

// Steps over 1024 tokens take the token-per-block kernel (2-byte types, head dims 64 / 128, per-head
// norms). It must give the warp-per-head kernel's bits, so a token's q and k (and the batch-invariant
// mode) do not depend on the size of the step it is computed in: the same tokens as one long step and as
// steps of at most 1024, then q_out and both caches compared bit for bit.
TEST_F(QkvPrepareTest, LongStepsGiveShortStepsBits) {
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    size_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && ++bad <= 3)
        ADD_FAILURE() << what << " [" << i << "]: " << a[i] << " vs " << b[i];
    EXPECT_EQ(bad, 0u) << what;
  };
  const std::vector<QkvCase> cases{
      {32, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, 1100},  // Qwen3-8B
      {16, 8, 128, 128, true, QkNorm::kPerHeadAfterRope, 1030},   // HunYuan
      {16, 4, 64, 64, false, QkNorm::kNone, 1200},                // GPT-J pairs, D 64, no norm
      {8, 1, 128, 32, true, QkNorm::kPerHeadBeforeRope, 1025},    // partial rotary, MQA
      {64, 8, 128, 128, true, QkNorm::kPerHeadBeforeRope, 1040},  // 80 heads: two rounds of a warp's loads
  };
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (const QkvCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                   " D " + std::to_string(c.d) + " T " + std::to_string(c.tokens));
      const int t = c.tokens, bs = 16, num_blocks = (t + bs - 1) / bs + 2, max_pos = 4096;
      const int width = (c.h + 2 * c.hkv) * c.d;
      const auto qkv = rand_vec(size_t(t) * width, -2, 2, act);
      std::vector<int> pos(t), slots(t);
      for (int i = 0; i < t; ++i) {
        pos[i] = rand_int(0, max_pos - 1);
        slots[i] = (i % 7 == 2) ? -1 : i + bs;  // some skipped
      }
      const auto cs = rand_vec(size_t(max_pos) * c.rotary, -1, 1, DType::kF32);
      const auto qn = rand_vec(c.d, 0.5f, 1.5f, act), kn = rand_vec(c.d, 0.5f, 1.5f, act);
      const int64_t cache_n = int64_t(num_blocks) * bs * c.hkv * c.d;
      const auto kc0 = rand_vec(cache_n, -1, 1, act), vc0 = rand_vec(cache_n, -1, 1, act);
      // Runs the tokens as steps of the given sizes; returns q_out of every token, then the two caches.
      auto run_steps = [&](const std::vector<int>& sizes) {
        Tensor kc = gpu_from(kc0, {num_blocks, bs, c.hkv, c.d}, act), vc = gpu_from(vc0, {num_blocks, bs, c.hkv, c.d}, act);
        std::vector<float> q;
        int t0 = 0;
        for (int n : sizes) {
          QkvPrepareParams g;
          g.qkv = gpu_from(std::vector<float>(qkv.begin() + size_t(t0) * width, qkv.begin() + size_t(t0 + n) * width),
                           {n, width}, act);
          g.positions = gpu_i32(std::vector<int>(pos.begin() + t0, pos.begin() + t0 + n), {n});
          g.slot_mapping = gpu_i32(std::vector<int>(slots.begin() + t0, slots.begin() + t0 + n), {n});
          g.rope_cos_sin = gpu_from(cs, {max_pos, c.rotary}, DType::kF32);
          g.rotary_dim = c.rotary;
          g.neox = c.neox;
          g.qk_norm = c.norm;
          if (c.norm != QkNorm::kNone) {
            g.q_norm = gpu_from(qn, {c.d}, act);
            g.k_norm = gpu_from(kn, {c.d}, act);
          }
          g.norm_eps = 1e-6f;
          g.q_out = gpu_poisoned({n, c.h, c.d}, act);
          g.k_cache = kc;
          g.v_cache = vc;
          g.num_heads = c.h;
          g.num_kv_heads = c.hkv;
          g.head_dim = c.d;
          g.block_size = bs;
          gpu_->qkv_prepare(g);
          const auto qh = to_host(g.q_out);
          q.insert(q.end(), qh.begin(), qh.end());
          t0 += n;
        }
        return std::vector<std::vector<float>>{q, to_host(kc), to_host(vc)};
      };
      const auto one = run_steps({t});
      const auto chunks = run_steps({1024, t - 1024});
      bits_equal(one[0], chunks[0], "q_out");
      bits_equal(one[1], chunks[1], "k_cache");
      bits_equal(one[2], chunks[2], "v_cache");
    }
  }
}

// Positions outside the RoPE table (the CPU backend throws): q and k of those tokens are NaN, never
// values read past the table; tokens in range are unaffected.
TEST_F(QkvPrepareTest, PositionOutsideTableGivesNaN) {
  use_dtype(DType::kBF16);
  const int t = 3, h = 4, hkv = 2, d = 64, max_pos = 8, bs = 16;
  const int width = (h + 2 * hkv) * d;
  auto qkv = rand_vec(size_t(t) * width, -2, 2, DType::kBF16);
  std::vector<float> cs(size_t(max_pos) * d, 0.f);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < d / 2; ++i) cs[size_t(p) * d + i] = 1.f;  // cos 1, sin 0: identity
  QkvPrepareParams g;
  g.qkv = gpu_from(qkv, {t, width}, DType::kBF16);
  g.positions = gpu_i32({3, max_pos, -1}, {t});
  g.rope_cos_sin = gpu_from(cs, {max_pos, d}, DType::kF32);
  g.rotary_dim = d;
  g.neox = true;
  g.q_out = gpu_poisoned({t, h, d}, DType::kBF16);
  g.k_cache = gpu_from(std::vector<float>(size_t(bs) * hkv * d, 0.f), {1, bs, hkv, d}, DType::kBF16);
  g.v_cache = gpu_from(std::vector<float>(size_t(bs) * hkv * d, 0.f), {1, bs, hkv, d}, DType::kBF16);
  g.slot_mapping = gpu_i32({0, 1, 2}, {t});
  g.num_heads = h;
  g.num_kv_heads = hkv;
  g.head_dim = d;
  g.block_size = bs;
  gpu_->qkv_prepare(g);
  const auto q = to_host(g.q_out), k = to_host(g.k_cache), v = to_host(g.v_cache);
  for (int i = 0; i < h * d; ++i) {
    EXPECT_EQ(q[i], qkv[size_t(i / d) * d + i % d]) << "in-range token, q " << i;
    EXPECT_TRUE(std::isnan(q[h * d + i])) << "position max_pos, q " << i;
    EXPECT_TRUE(std::isnan(q[2 * h * d + i])) << "position -1, q " << i;
  }
  for (int i = 0; i < hkv * d; ++i) {
    EXPECT_EQ(k[i], qkv[h * d + i]) << "in-range token, k " << i;
    EXPECT_TRUE(std::isnan(k[hkv * d + i]) && std::isnan(k[2 * hkv * d + i])) << "out-of-range k " << i;
    EXPECT_EQ(v[hkv * d + i], qkv[size_t(width) + (h + hkv) * d + i]) << "v is written unchanged " << i;
  }
}

}  // namespace
}  // namespace vireo::testing
