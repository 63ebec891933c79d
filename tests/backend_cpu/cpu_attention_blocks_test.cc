// paged_attention on the CPU with query chunks longer than its 64-row GEMM blocks (cpu_attention.cc):
// a chunked-prefill chunk over a cached prefix and a fresh prompt, both spanning several blocks, plus a
// decode row, over scattered KV blocks; checked against a naive double-precision causal softmax, with
// full attention and with sliding windows (1 key, a window inside a GEMM block, one past several blocks),
// with and without attention sinks (GPT-OSS: one more softmax logit per head, without a value).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace vireo {
namespace {

TEST(CpuAttentionBlocks, LongChunksMatchNaiveCausalAndSlidingWindows) {
  auto be = create_backend("cpu");
  std::mt19937 rng{7};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // D 12: the decode row's dot products have a tail past their 8 partial sums.
  for (auto [cache_t, D] : {std::pair{DType::kF32, 16}, std::pair{DType::kBF16, 16}, std::pair{DType::kBF16, 12}})
  for (int window : {0, 1, 37, 100})
  for (bool with_sinks : {false, true}) {
    SCOPED_TRACE(std::string(dtype_name(cache_t)) + " D " + std::to_string(D) + " window " + std::to_string(window) +
                 (with_sinks ? " sinks" : ""));
    const int H = 6, Hkv = 2, bs = 16, mb = 16;
    const std::vector<int32_t> q_lens{150, 1, 130}, seq_lens{220, 97, 130};
    const int S = 3, num_blocks = S * mb;
    // Block ids: a fixed shuffle of all blocks, mb per sequence.
    std::vector<int32_t> tables(num_blocks);
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), rng);
    std::vector<int32_t> qs{0};
    for (int s = 0; s < S; ++s) qs.push_back(qs.back() + q_lens[s]);
    const int T = qs.back();
    std::vector<float> q(size_t(T) * H * D), out(size_t(T) * H * D, std::numeric_limits<float>::quiet_NaN());
    for (auto& x : q) x = nd(rng);
    const size_t cache_n = size_t(num_blocks) * bs * Hkv * D;
    std::vector<float> k32(cache_n), v32(cache_n);
    std::vector<uint16_t> k16(cache_n), v16(cache_n);
    for (size_t i = 0; i < cache_n; ++i) {
      k32[i] = nd(rng), v32[i] = nd(rng);
      k16[i] = f32_to_bf16(k32[i]), v16[i] = f32_to_bf16(v32[i]);
      if (cache_t == DType::kBF16) k32[i] = bf16_to_f32(k16[i]), v32[i] = bf16_to_f32(v16[i]);
    }
    const std::vector<int64_t> cshape{num_blocks, bs, Hkv, D};
    AttentionParams p;
    p.q = Tensor(q.data(), DType::kF32, {T, H, D});
    p.k_cache = cache_t == DType::kF32 ? Tensor(k32.data(), DType::kF32, cshape) : Tensor(k16.data(), cache_t, cshape);
    p.v_cache = cache_t == DType::kF32 ? Tensor(v32.data(), DType::kF32, cshape) : Tensor(v16.data(), cache_t, cshape);
    p.out = Tensor(out.data(), DType::kF32, {T, H, D});
    std::vector<int32_t> qs_v = qs, lens_v = seq_lens;
    p.query_start = Tensor(qs_v.data(), DType::kI32, {S + 1});
    p.seq_lens = Tensor(lens_v.data(), DType::kI32, {S});
    p.block_tables = Tensor(tables.data(), DType::kI32, {S, mb});
    p.num_seqs = S;
    p.max_blocks_per_seq = mb;
    p.block_size = bs;
    p.num_heads = H;
    p.num_kv_heads = Hkv;
    p.head_dim = D;
    p.scale = 0.25f;
    p.window = window;
    std::vector<float> sinks(H);
    for (auto& v : sinks) v = 2.0f * nd(rng) + 1.0f;  // some above the scores' max, so they matter
    if (with_sinks) p.sinks = Tensor(sinks.data(), DType::kF32, {H});
    p.max_query_len = 150;
    p.max_seq_len = 220;
    be->paged_attention(p);

    for (int s = 0; s < S; ++s) {
      const int L = seq_lens[s];
      auto kv_at = [&](const std::vector<float>& c, int i, int kvh, int d) {
        const int blk = tables[s * mb + i / bs];
        return double(c[((size_t(blk) * bs + i % bs) * Hkv + kvh) * D + d]);
      };
      for (int j = 0; j < q_lens[s]; ++j) {
        const int t = qs[s] + j, qpos = L - q_lens[s] + j;
        const int lo = window > 0 ? std::max(0, qpos - window + 1) : 0;  // keys [lo, qpos]
        for (int h = 0; h < H; ++h) {
          const int kvh = h / (H / Hkv);
          std::vector<double> sc(qpos + 1);
          double mx = -1e300;
          for (int i = lo; i <= qpos; ++i) {
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += q[(size_t(t) * H + h) * D + d] * kv_at(k32, i, kvh, d);
            sc[i] = dot * 0.25;
            mx = std::max(mx, sc[i]);
          }
          if (with_sinks) mx = std::max(mx, double(sinks[h]));
          double z = with_sinks ? std::exp(sinks[h] - mx) : 0.0;
          for (int i = lo; i <= qpos; ++i) z += (sc[i] = std::exp(sc[i] - mx));
          for (int d = 0; d < D; ++d) {
            double o = 0;
            for (int i = lo; i <= qpos; ++i) o += sc[i] / z * kv_at(v32, i, kvh, d);
            const float got = out[(size_t(t) * H + h) * D + d];
            ASSERT_FALSE(std::isnan(got)) << "seq " << s << " row " << j << " head " << h << " not written";
            ASSERT_NEAR(got, o, 1e-5 * (1 + std::abs(o))) << "seq " << s << " row " << j << " head " << h << " d " << d;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace vireo
