// Decode rows of paged_attention on the CPU (cpu_attention_decode.cc reads K/V block by block from the
// paged cache): context lengths that end inside a block, F32/BF16/F16 caches, GQA groups of 1 to 8 (a
// group of 8 over one KV head is split in head ranges across threads), head dims 64, 128 and 12 (a dot
// tail past the 8 partial sums). Checked against a naive double-precision softmax, and each row must be
// bitwise the same alone, in a batch of decode rows, and beside a prefill chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace vireo {
namespace {

struct DecodeCase {
  DType cache_t;
  int H, Hkv, D, bs;
};

std::string case_name(const DecodeCase& c) {
  return std::string(dtype_name(c.cache_t)) + " H " + std::to_string(c.H) + " Hkv " + std::to_string(c.Hkv) + " D " +
         std::to_string(c.D) + " bs " + std::to_string(c.bs);
}

// A paged cache [num_blocks, bs, Hkv, D] in cache_t with its values as floats (exactly representable).
struct Cache {
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;
  Tensor k, v;
  Cache(const DecodeCase& c, int num_blocks, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t n = size_t(num_blocks) * c.bs * c.Hkv * c.D;
    k32.resize(n), v32.resize(n), k16.resize(n), v16.resize(n);
    for (size_t i = 0; i < n; ++i) {
      k32[i] = nd(rng), v32[i] = nd(rng);
      if (c.cache_t == DType::kBF16) {
        k16[i] = f32_to_bf16(k32[i]), v16[i] = f32_to_bf16(v32[i]);
        k32[i] = bf16_to_f32(k16[i]), v32[i] = bf16_to_f32(v16[i]);
      } else if (c.cache_t == DType::kF16) {
        k16[i] = f32_to_f16(k32[i]), v16[i] = f32_to_f16(v32[i]);
        k32[i] = f16_to_f32(k16[i]), v32[i] = f16_to_f32(v16[i]);
      }
    }
    const std::vector<int64_t> shape{num_blocks, c.bs, c.Hkv, c.D};
    const bool f32 = c.cache_t == DType::kF32;
    k = f32 ? Tensor(k32.data(), DType::kF32, shape) : Tensor(k16.data(), c.cache_t, shape);
    v = f32 ? Tensor(v32.data(), DType::kF32, shape) : Tensor(v16.data(), c.cache_t, shape);
  }
};

// paged_attention over sequences with query lengths q_lens and context lengths lens; q: [sum q_lens, H, D],
// tables: [S, mb]. Returns out [sum q_lens, H, D].
std::vector<float> attend(Backend& be, const DecodeCase& c, const Cache& cache, std::vector<float> q,
                          std::vector<int32_t> q_lens, std::vector<int32_t> lens, std::vector<int32_t> tables,
                          int mb) {
  const int S = static_cast<int>(lens.size());
  std::vector<int32_t> qs{0};
  for (int s = 0; s < S; ++s) qs.push_back(qs.back() + q_lens[s]);
  const int T = qs.back();
  std::vector<float> out(size_t(T) * c.H * c.D, std::numeric_limits<float>::quiet_NaN());
  AttentionParams p;
  p.q = Tensor(q.data(), DType::kF32, {T, c.H, c.D});
  p.k_cache = cache.k;
  p.v_cache = cache.v;
  p.out = Tensor(out.data(), DType::kF32, {T, c.H, c.D});
  p.query_start = Tensor(qs.data(), DType::kI32, {S + 1});
  p.seq_lens = Tensor(lens.data(), DType::kI32, {S});
  p.block_tables = Tensor(tables.data(), DType::kI32, {S, mb});
  p.num_seqs = S;
  p.max_blocks_per_seq = mb;
  p.block_size = c.bs;
  p.num_heads = c.H;
  p.num_kv_heads = c.Hkv;
  p.head_dim = c.D;
  p.scale = 1.0f / std::sqrt(float(c.D));
  p.max_query_len = *std::max_element(q_lens.begin(), q_lens.end());
  p.max_seq_len = *std::max_element(lens.begin(), lens.end());
  be.paged_attention(p);
  return out;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(CpuAttentionDecode, MatchesNaiveAndIsBatchInvariant) {
  auto be = create_backend("cpu");
  std::mt19937 rng{11};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const DecodeCase cases[] = {
      {DType::kBF16, 16, 8, 128, 16},  // Qwen3-0.6B's attention
      {DType::kF32, 8, 2, 64, 16},     {DType::kF16, 8, 2, 64, 16},  {DType::kBF16, 8, 1, 64, 16},
      {DType::kBF16, 4, 4, 12, 5},     {DType::kF32, 6, 2, 12, 16},  {DType::kBF16, 8, 1, 128, 32},
  };
  for (const DecodeCase& c : cases) {
    SCOPED_TRACE(case_name(c));
    const std::vector<int32_t> lens{1, 5, 16, 33, 100, 257};  // ends inside a block, on its edge, one past
    const int S = static_cast<int>(lens.size()), mb = (257 + c.bs - 1) / c.bs, num_blocks = S * mb + 8;
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const std::vector<int32_t> tables(ids.begin(), ids.begin() + S * mb);  // [S, mb], scattered blocks
    const Cache cache(c, num_blocks, rng);
    const size_t row = size_t(c.H) * c.D;  // one token's q / out
    std::vector<float> q(S * row);
    for (auto& x : q) x = nd(rng);

    const std::vector<float> out = attend(*be, c, cache, q, std::vector<int32_t>(S, 1), lens, tables, mb);
    const double scale = 1.0 / std::sqrt(double(c.D));
    for (int s = 0; s < S; ++s) {
      auto kv_at = [&](const std::vector<float>& v, int i, int kvh, int d) {
        const int blk = tables[s * mb + i / c.bs];
        return double(v[((size_t(blk) * c.bs + i % c.bs) * c.Hkv + kvh) * c.D + d]);
      };
      for (int h = 0; h < c.H; ++h) {
        const int kvh = h / (c.H / c.Hkv);
        std::vector<double> sc(lens[s]);
        double mx = -1e300, z = 0;
        for (int i = 0; i < lens[s]; ++i) {
          double dot = 0;
          for (int d = 0; d < c.D; ++d) dot += q[s * row + h * c.D + d] * kv_at(cache.k32, i, kvh, d);
          mx = std::max(mx, sc[i] = dot * scale);
        }
        for (double& x : sc) z += (x = std::exp(x - mx));
        for (int d = 0; d < c.D; ++d) {
          double o = 0;
          for (int i = 0; i < lens[s]; ++i) o += sc[i] / z * kv_at(cache.v32, i, kvh, d);
          const float got = out[s * row + h * c.D + d];
          ASSERT_NEAR(got, o, 1e-5 * (1 + std::abs(o))) << "seq " << s << " head " << h << " d " << d;
        }
      }
    }

    // Each row alone: the same bits as in the batch.
    for (int s = 0; s < S; ++s) {
      const std::vector<float> q1(q.begin() + s * row, q.begin() + (s + 1) * row);
      const std::vector<int32_t> t1(tables.begin() + s * mb, tables.begin() + (s + 1) * mb);
      const std::vector<float> alone = attend(*be, c, cache, q1, {1}, {lens[s]}, t1, mb);
      EXPECT_TRUE(same_bits(alone.data(), out.data() + s * row, row)) << "seq " << s << " alone";
    }
    // Beside a prefill chunk (7 query rows over 40 keys, its own blocks), in reversed order: same bits.
    const int pre_len = 40, pre_q = 7;
    std::vector<float> q2(size_t(pre_q) * row);
    for (auto& x : q2) x = nd(rng);
    std::vector<int32_t> q_lens2{pre_q}, lens2{pre_len}, tables2(ids.end() - 8, ids.end());
    tables2.resize(mb, 0);
    for (int s = S - 1; s >= 0; --s) {
      q2.insert(q2.end(), q.begin() + s * row, q.begin() + (s + 1) * row);
      q_lens2.push_back(1);
      lens2.push_back(lens[s]);
      tables2.insert(tables2.end(), tables.begin() + s * mb, tables.begin() + (s + 1) * mb);
    }
    ASSERT_LE((pre_len + c.bs - 1) / c.bs, 8);
    const std::vector<float> mixed = attend(*be, c, cache, q2, q_lens2, lens2, tables2, mb);
    for (int s = 0; s < S; ++s)
      EXPECT_TRUE(same_bits(mixed.data() + (pre_q + S - 1 - s) * row, out.data() + s * row, row))
          << "seq " << s << " beside a prefill chunk";
  }
}

}  // namespace
}  // namespace vireo
