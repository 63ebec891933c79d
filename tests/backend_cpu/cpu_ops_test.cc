// CPU backend ops vs naive formulas written independently of the implementation: fresh random
// inputs, outputs poisoned with NaN, every element checked.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "cpu_op_fixture.h"
#include "core/error.h"

namespace vireo {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Fx : CpuOpFixture<42> {};

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " not written";
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST_F(Fx, RmsNormWithoutAndWithResidual) {
  const int n = 5, c = 48;
  auto x = randn(n * c), w = randn(c), res = randn(n * c);
  std::vector<float> out(n * c, kNaN);
  be->rms_norm({view(x, {n, c}), view(w, {c}), view(out, {n, c}), Tensor(), 1e-5f});
  std::vector<double> want(n * c);
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < c; ++i) ss += double(x[r * c + i]) * x[r * c + i];
    for (int i = 0; i < c; ++i) want[r * c + i] = x[r * c + i] / std::sqrt(ss / c + 1e-5) * w[i];
  }
  expect_close(out, want, 1e-5);

  // Fused: residual += x; out = norm(residual) * w, with out aliasing x.
  std::vector<double> res_want(n * c);
  for (int i = 0; i < n * c; ++i) res_want[i] = double(res[i]) + x[i];
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < c; ++i) ss += res_want[r * c + i] * res_want[r * c + i];
    for (int i = 0; i < c; ++i) want[r * c + i] = res_want[r * c + i] / std::sqrt(ss / c + 1e-5) * w[i];
  }
  be->rms_norm({view(x, {n, c}), view(w, {c}), view(x, {n, c}), view(res, {n, c}), 1e-5f});
  expect_close(res, res_want, 1e-6);
  expect_close(x, want, 1e-5);

  // add_after_norm (post-norm / sandwich blocks): out = residual + norm(x) * w, out aliasing residual.
  auto y = randn(n * c);
  std::vector<double> after(n * c);
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < c; ++i) ss += double(y[r * c + i]) * y[r * c + i];
    for (int i = 0; i < c; ++i) after[r * c + i] = double(res[r * c + i]) + y[r * c + i] / std::sqrt(ss / c + 1e-5) * w[i];
  }
  RmsNormParams pa{view(y, {n, c}), view(w, {c}), view(res, {n, c}), view(res, {n, c}), 1e-5f};
  pa.add_after_norm = true;
  be->rms_norm(pa);
  expect_close(res, after, 1e-5);
  pa.residual = Tensor();
  EXPECT_THROW(be->rms_norm(pa), Error);  // add_after_norm needs a residual
}

TEST_F(Fx, LinearF32AndHalfWeightsWithBias) {
  const int n = 3, k = 40, m = 24;
  auto x = randn(n * k), w = randn(m * k), b = randn(m);
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(dtype_name(wt)));
    Tensor wdev = be->upload(view(w, {m, k}), wt);
    Tensor bdev = be->upload(view(b, {m}), wt);
    std::vector<float> wq(m * k), bq(m);  // the values the op actually sees
    convert_to_f32(wdev.data, wt, wq.data(), m * k);
    convert_to_f32(bdev.data, wt, bq.data(), m);
    std::vector<float> out(n * m, kNaN);
    be->linear({view(x, {n, k}), wdev, bdev, view(out, {n, m})});
    std::vector<double> want(n * m);
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < m; ++j) {
        double s = bq[j];
        for (int i = 0; i < k; ++i) s += double(x[r * k + i]) * wq[j * k + i];
        want[r * m + j] = s;
      }
    expect_close(out, want, 1e-5);
    be->free(wdev);
    be->free(bdev);
  }
}

TEST_F(Fx, SiluAndMulAddGatherEmbedding) {
  const int n = 4, inter = 10;
  auto x = randn(n * 2 * inter);
  std::vector<float> out(n * inter, kNaN);
  be->silu_and_mul({view(x, {n, 2 * inter}), view(out, {n, inter})});
  std::vector<double> want(n * inter);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < inter; ++i) {
      double g = x[r * 2 * inter + i], u = x[r * 2 * inter + inter + i];
      want[r * inter + i] = g / (1 + std::exp(-g)) * u;
    }
  expect_close(out, want, 1e-6);

  // GELU with the tanh approximation (Gemma's gelu_pytorch_tanh), double-precision formula.
  std::vector<float> gout(n * inter, kNaN);
  be->silu_and_mul({view(x, {n, 2 * inter}), view(gout, {n, inter}), Activation::kGeluTanh});
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < inter; ++i) {
      double g = x[r * 2 * inter + i], u = x[r * 2 * inter + inter + i];
      want[r * inter + i] = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
    }
  expect_close(gout, want, 1e-6);

  auto a = randn(37), b = randn(37);
  std::vector<float> sum(37, kNaN);
  be->add({view(a, {37}), view(b, {37}), view(sum, {37})});
  std::vector<double> sw(37);
  for (int i = 0; i < 37; ++i) sw[i] = double(a[i]) + b[i];
  expect_close(sum, sw, 1e-7);

  auto rows = randn(6 * 5);
  std::vector<int32_t> idx{5, 0, 5, 2};
  std::vector<float> g(4 * 5, kNaN);
  be->gather_rows({view(rows, {6, 5}), view(idx, {4}), view(g, {4, 5})});
  std::vector<double> gw;
  for (int i : idx)
    for (int j = 0; j < 5; ++j) gw.push_back(rows[i * 5 + j]);
  expect_close(g, gw, 0);

  // Embedding from a BF16 table.
  auto table = randn(9 * 6);
  std::vector<uint16_t> tb(table.size());
  for (size_t i = 0; i < table.size(); ++i) tb[i] = f32_to_bf16(table[i]);
  std::vector<int32_t> ids{8, 1, 1};
  std::vector<float> emb(3 * 6, kNaN);
  be->embedding({view16(tb, DType::kBF16, {9, 6}), view(ids, {3}), view(emb, {3, 6})});
  std::vector<double> ew;
  for (int id : ids)
    for (int j = 0; j < 6; ++j) ew.push_back(bf16_to_f32(tb[id * 6 + j]));
  expect_close(emb, ew, 0);
  std::vector<float> scaled(3 * 6, kNaN);  // Gemma's sqrt(hidden) factor
  be->embedding({view16(tb, DType::kBF16, {9, 6}), view(ids, {3}), view(scaled, {3, 6}), 2.5f});
  for (double& v : ew) v *= 2.5;
  expect_close(scaled, ew, 1e-7);
  std::vector<int32_t> bad{9};
  EXPECT_THROW(be->embedding({view16(tb, DType::kBF16, {9, 6}), view(bad, {1}), view(emb, {1, 6})}), Error);
}

// ---- qkv_prepare ----

struct QkvCase {
  QkNorm norm;
  bool neox;
  int rotary_dim;  // of head_dim 16
};

class QkvPrepare : public Fx, public ::testing::WithParamInterface<QkvCase> {};

// Naive per-token reference: RMSNorm as a formula, RoPE as an explicit 2x2 rotation of the pair
// (i, i + rd/2) for neox or (2i, 2i+1) for GPT-J by angle pos * inv_freq[i].
TEST_P(QkvPrepare, MatchesNaiveAndWritesCacheSlots) {
  const QkvCase cs = GetParam();
  const int T = 6, H = 4, Hkv = 2, D = 16, rd = cs.rotary_dim, bs = 4, num_blocks = 5, max_pos = 64;
  const int W = (H + 2 * Hkv) * D;
  auto qkv = randn(T * W);
  std::vector<int32_t> pos{0, 3, 7, 31, 12, 63};
  std::vector<int32_t> slots{0, 5, -1, 19, 4 * 4 + 3, -7};  // two tokens without a KV write
  std::vector<double> inv_freq(rd / 2);
  for (int i = 0; i < rd / 2; ++i) inv_freq[i] = std::pow(1000.0, -2.0 * i / rd);
  std::vector<float> table(max_pos * rd);
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < rd / 2; ++i) {
      table[p * rd + i] = std::cos(p * inv_freq[i]);
      table[p * rd + rd / 2 + i] = std::sin(p * inv_freq[i]);
    }
  const bool full = cs.norm == QkNorm::kFullWidth;
  auto qn = randn(full ? H * D : D, 0.3f), kn = randn(full ? Hkv * D : D, 0.3f);
  for (auto& v : qn) v += 1;
  for (auto& v : kn) v += 1;
  std::vector<float> q_out(T * H * D, kNaN), kc(num_blocks * bs * Hkv * D, kNaN), vc(kc.size(), kNaN);

  QkvPrepareParams p;
  p.qkv = view(qkv, {T, W});
  p.positions = view(pos, {T});
  p.rope_cos_sin = view(table, {max_pos, rd});
  p.rotary_dim = rd;
  p.neox = cs.neox;
  p.qk_norm = cs.norm;
  if (cs.norm != QkNorm::kNone) {
    p.q_norm = view(qn, {static_cast<int64_t>(qn.size())});
    p.k_norm = view(kn, {static_cast<int64_t>(kn.size())});
  }
  p.norm_eps = 1e-6f;
  p.q_out = view(q_out, {T, H, D});
  p.k_cache = view(kc, {num_blocks, bs, Hkv, D});
  p.v_cache = view(vc, {num_blocks, bs, Hkv, D});
  p.slot_mapping = view(slots, {T});
  p.num_heads = H;
  p.num_kv_heads = Hkv;
  p.head_dim = D;
  p.block_size = bs;
  be->qkv_prepare(p);

  auto norm = [](std::vector<double>& x, size_t off, size_t n, const std::vector<float>& w) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double inv = 1 / std::sqrt(ss / n + 1e-6);
    for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * inv * w[i];
  };
  auto rotate = [&](std::vector<double>& x, size_t off, int p_) {
    for (int i = 0; i < rd / 2; ++i) {
      const int a = cs.neox ? i : 2 * i, b = cs.neox ? i + rd / 2 : 2 * i + 1;
      const double th = p_ * inv_freq[i], xa = x[off + a], xb = x[off + b];
      x[off + a] = std::cos(th) * xa - std::sin(th) * xb;
      x[off + b] = std::sin(th) * xa + std::cos(th) * xb;
    }
  };
  std::vector<double> q_want, kc_want(kc.size(), std::nan("")), vc_want(kc.size(), std::nan(""));
  for (int t = 0; t < T; ++t) {
    std::vector<double> q(qkv.begin() + t * W, qkv.begin() + t * W + H * D);
    std::vector<double> k(qkv.begin() + t * W + H * D, qkv.begin() + t * W + (H + Hkv) * D);
    if (full) {
      norm(q, 0, H * D, qn);
      norm(k, 0, Hkv * D, kn);
    }
    if (cs.norm == QkNorm::kPerHeadBeforeRope) {
      for (int h = 0; h < H; ++h) norm(q, h * D, D, qn);
      for (int h = 0; h < Hkv; ++h) norm(k, h * D, D, kn);
    }
    for (int h = 0; h < H; ++h) rotate(q, h * D, pos[t]);
    for (int h = 0; h < Hkv; ++h) rotate(k, h * D, pos[t]);
    if (cs.norm == QkNorm::kPerHeadAfterRope) {
      for (int h = 0; h < H; ++h) norm(q, h * D, D, qn);
      for (int h = 0; h < Hkv; ++h) norm(k, h * D, D, kn);
    }
    q_want.insert(q_want.end(), q.begin(), q.end());
    if (slots[t] < 0) continue;
    for (int i = 0; i < Hkv * D; ++i) {
      kc_want[slots[t] * Hkv * D + i] = k[i];
      vc_want[slots[t] * Hkv * D + i] = qkv[t * W + (H + Hkv) * D + i];
    }
  }
  expect_close(q_out, q_want, 2e-5);
  for (size_t i = 0; i < kc.size(); ++i) {
    if (std::isnan(kc_want[i])) {
      ASSERT_TRUE(std::isnan(kc[i]) && std::isnan(vc[i])) << "slot element " << i << " written";
    } else {
      ASSERT_NEAR(kc[i], kc_want[i], 2e-5 * (1 + std::abs(kc_want[i]))) << i;
      ASSERT_EQ(vc[i], static_cast<float>(vc_want[i])) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, QkvPrepare,
                         ::testing::Values(QkvCase{QkNorm::kNone, true, 16}, QkvCase{QkNorm::kNone, false, 16},
                                           QkvCase{QkNorm::kNone, true, 8}, QkvCase{QkNorm::kNone, false, 8},
                                           QkvCase{QkNorm::kPerHeadBeforeRope, true, 16},
                                           QkvCase{QkNorm::kPerHeadAfterRope, true, 16},
                                           QkvCase{QkNorm::kFullWidth, true, 16},
                                           QkvCase{QkNorm::kPerHeadAfterRope, false, 8}));

// ---- paged attention ----

// Three sequences (a decode row, a chunked-prefill chunk over a cached prefix, a fresh prompt) over
// scattered blocks of size 4; the reference attends over contiguous K/V with an explicit mask.
// With softcap > 0 (Gemma 2) each scaled score s becomes softcap * tanh(s / softcap) before the softmax.
TEST_F(Fx, PagedAttentionMatchesNaiveCausal) {
  for (DType cache_t : {DType::kF32, DType::kBF16})
  for (float softcap : {0.0f, 0.8f}) {
    SCOPED_TRACE(std::string(dtype_name(cache_t)) + " softcap " + std::to_string(softcap));
    const int H = 4, Hkv = 2, D = 8, bs = 4, num_blocks = 12, mb = 4;
    std::vector<int32_t> q_lens{1, 5, 9}, seq_lens{11, 13, 9};
    std::vector<int32_t> tables{7, 2, 10, 0, /**/ 3, 11, 5, 1, /**/ 9, 4, 6, 8};
    const int S = 3;
    std::vector<int32_t> qs{0};
    for (int s = 0; s < S; ++s) qs.push_back(qs.back() + q_lens[s]);
    const int T = qs.back();
    auto q = randn(T * H * D);
    const size_t cache_n = size_t(num_blocks) * bs * Hkv * D;
    auto k32 = randn(cache_n), v32 = randn(cache_n);
    std::vector<uint16_t> k16(cache_n), v16(cache_n);
    for (size_t i = 0; i < cache_n; ++i) {
      k16[i] = f32_to_bf16(k32[i]);
      v16[i] = f32_to_bf16(v32[i]);
      if (cache_t == DType::kBF16) {
        k32[i] = bf16_to_f32(k16[i]);
        v32[i] = bf16_to_f32(v16[i]);
      }
    }
    std::vector<float> out(T * H * D, kNaN);
    AttentionParams p;
    p.q = view(q, {T, H, D});
    p.k_cache = cache_t == DType::kF32 ? view(k32, {num_blocks, bs, Hkv, D}) : view16(k16, cache_t, {num_blocks, bs, Hkv, D});
    p.v_cache = cache_t == DType::kF32 ? view(v32, {num_blocks, bs, Hkv, D}) : view16(v16, cache_t, {num_blocks, bs, Hkv, D});
    p.out = view(out, {T, H, D});
    p.query_start = view(qs, {S + 1});
    p.seq_lens = view(seq_lens, {S});
    p.block_tables = view(tables, {S, mb});
    p.num_seqs = S;
    p.max_blocks_per_seq = mb;
    p.block_size = bs;
    p.num_heads = H;
    p.num_kv_heads = Hkv;
    p.head_dim = D;
    p.scale = 0.37f;
    p.softcap = softcap;
    p.max_query_len = 9;
    p.max_seq_len = 13;
    be->paged_attention(p);

    std::vector<double> want;
    for (int s = 0; s < S; ++s) {
      const int L = seq_lens[s];
      auto kv_at = [&](const std::vector<float>& c, int i, int kvh, int d) {
        const int blk = tables[s * mb + i / bs];
        return double(c[((size_t(blk) * bs + i % bs) * Hkv + kvh) * D + d]);
      };
      for (int j = 0; j < q_lens[s]; ++j) {
        const int t = qs[s] + j, qpos = L - q_lens[s] + j;
        for (int h = 0; h < H; ++h) {
          const int kvh = h / (H / Hkv);
          std::vector<double> sc(L);
          double mx = -1e300;
          for (int i = 0; i < L; ++i) {
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += q[(t * H + h) * D + d] * kv_at(k32, i, kvh, d);
            const double scaled = softcap > 0 ? softcap * std::tanh(dot * 0.37 / softcap) : dot * 0.37;
            sc[i] = i <= qpos ? scaled : -INFINITY;  // causal mask
            mx = std::max(mx, sc[i]);
          }
          double z = 0;
          for (int i = 0; i < L; ++i) z += std::exp(sc[i] - mx);
          for (int d = 0; d < D; ++d) {
            double o = 0;
            for (int i = 0; i < L; ++i) o += std::exp(sc[i] - mx) / z * kv_at(v32, i, kvh, d);
            want.push_back(o);
          }
        }
      }
    }
    expect_close(out, want, 1e-5);
  }
}

TEST_F(Fx, PagedAttentionRejectsBadBlockIds) {
  const int H = 2, D = 4, bs = 4;
  auto q = randn(H * D), kc = randn(2 * bs * H * D), vc = randn(2 * bs * H * D);
  std::vector<float> out(H * D);
  std::vector<int32_t> qs{0, 1}, lens{6}, tables{1, 2};  // block 2 does not exist
  AttentionParams p;
  p.q = view(q, {1, H, D});
  p.k_cache = view(kc, {2, bs, H, D});
  p.v_cache = view(vc, {2, bs, H, D});
  p.out = view(out, {1, H, D});
  p.query_start = view(qs, {2});
  p.seq_lens = view(lens, {1});
  p.block_tables = view(tables, {1, 2});
  p.num_seqs = 1;
  p.max_blocks_per_seq = 2;
  p.block_size = bs;
  p.num_heads = H;
  p.num_kv_heads = H;
  p.head_dim = D;
  EXPECT_THROW(be->paged_attention(p), Error);
}

TEST_F(Fx, UploadConvertsAndFreesOnlyOwnedMemory) {
  auto host = randn(10);
  Tensor same = be->upload(view(host, {10}), DType::kF32);
  EXPECT_EQ(same.data, host.data());  // F32 -> F32 is a view
  be->free(same);                     // no-op for views
  EXPECT_EQ(host.size(), 10u);
  Tensor bf = be->upload(view(host, {10}), DType::kBF16);
  ASSERT_NE(bf.data, host.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(bf.ptr<uint16_t>()[i], f32_to_bf16(host[i]));
  Tensor back = be->upload(bf, DType::kF32);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(back.ptr<float>()[i], bf16_to_f32(f32_to_bf16(host[i])));
  be->free(bf);
  be->free(back);
  EXPECT_EQ(be->activation_dtype(), DType::kF32);
}

}  // namespace
}  // namespace vireo
