// The CPU reference of the sample op: the row functions (cpu_sampling.h) against hand-computed
// values, and the op itself (rows, penalty/mask ranges, forced tokens, logprobs) through the backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_sampling.h"
#include "core/error.h"
#include "model/sample_on_backend.h"

namespace vireo {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::set<int32_t> support(const std::vector<float>& lg, const SamplingRow& row) {
  auto probs = cpu::sampling_probs(lg, row);
  std::set<int32_t> s;
  double sum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0) s.insert(static_cast<int32_t>(i));
    sum += probs[i];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
  return s;
}

TEST(CpuSampling, ArgmaxTiesToLowestId) {
  EXPECT_EQ(cpu::argmax(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}), 1);
  EXPECT_EQ(cpu::argmax(std::vector<float>{kNegInf, kNegInf}), 0);
}

TEST(CpuSampling, FiltersKeepTheRightSupport) {
  std::vector<double> pr{0.05, 0.4, 0.1, 0.3, 0.15};  // at T = 1, softmax(log p) = p
  std::vector<float> lg;
  for (double x : pr) lg.push_back(static_cast<float>(std::log(x)));
  SamplingRow r;
  r.top_k = 2;
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3}));
  r = {};
  r.top_p = 0.7f;  // 0.4 + 0.3 reaches 0.7
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3}));
  r.top_p = 0.71f;
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3, 4}));
  r.top_p = 0.01f;  // at least one token
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1}));
  r = {};
  r.min_p = 0.3f;  // threshold 0.12
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3, 4}));
  r.top_k = 2;
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3}));
  // top-p applies to the top-k survivors, renormalised: 0.4/0.7 reaches 0.55 (but not 0.6).
  r = {};
  r.top_k = 2;
  r.top_p = 0.6f;
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1, 3}));
  r.top_p = 0.55f;
  EXPECT_EQ(support(lg, r), (std::set<int32_t>{1}));
  // Ties at the top-k boundary: the lower id stays.
  std::vector<float> tied{1.0f, 2.0f, 1.0f, 1.0f};
  r = {};
  r.top_k = 2;
  EXPECT_EQ(support(tied, r), (std::set<int32_t>{0, 1}));
}

TEST(CpuSampling, DrawWalksIdsInOrder) {
  std::vector<float> probs{0.0f, 0.25f, 0.0f, 0.5f, 0.25f};
  EXPECT_EQ(cpu::draw(probs, 0.0), 1);
  EXPECT_EQ(cpu::draw(probs, 0.2499), 1);
  EXPECT_EQ(cpu::draw(probs, 0.25), 3);  // uniform < cum, strictly
  EXPECT_EQ(cpu::draw(probs, 0.7499), 3);
  EXPECT_EQ(cpu::draw(probs, 0.9999), 4);
  EXPECT_EQ(cpu::draw(probs, 1.5), 4);  // past the mass: the last nonzero
}

TEST(CpuSampling, PenaltiesPerEntryThenMasks) {
  std::vector<float> lg{2.0f, -2.0f, 1.0f, -1.0f, 3.0f};
  SamplingRow r;
  r.repetition_penalty = 2.0f;
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.25f;
  // id 0 prompt only, id 1 twice in the output, id 3 once; id 9 outside the vocabulary is ignored.
  std::vector<int32_t> pairs{0, 0, 1, 2, 3, 1, 9, 4};
  std::vector<int32_t> mask{4, 77};
  cpu::apply_penalties(lg, r, pairs, mask);
  EXPECT_FLOAT_EQ(lg[0], 1.0f);
  EXPECT_FLOAT_EQ(lg[1], -4.0f - (0.25f * 2 + 0.5f));
  EXPECT_FLOAT_EQ(lg[2], 1.0f);
  EXPECT_FLOAT_EQ(lg[3], -2.0f - (0.25f + 0.5f));
  EXPECT_EQ(lg[4], kNegInf);
}

TEST(CpuSampling, TopLogprobsBestFirstTiesByLowerId) {
  std::vector<float> lg{1.0f, 2.0f, 3.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0);
  const float lse = cpu::log_sum_exp(lg);
  EXPECT_NEAR(lse, std::log(z), 1e-6);
  int32_t ids[3];
  float lps[3];
  cpu::top_logprobs(lg, lse, 3, ids, lps);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 1);
  EXPECT_NEAR(lps[2], 2.0 - std::log(z), 1e-6);
}

// The op over a few rows, against the row functions.
struct SampleOp : ::testing::Test {
  std::unique_ptr<Backend> be = create_backend("cpu");
  static Tensor view(std::vector<float>& v, std::vector<int64_t> s) { return Tensor(v.data(), DType::kF32, s); }
  static Tensor view(std::vector<int32_t>& v, std::vector<int64_t> s) { return Tensor(v.data(), DType::kI32, s); }
  static std::vector<int32_t> raw_rows(const std::vector<SamplingRow>& rows) {
    std::vector<int32_t> w(rows.size() * 14);
    std::memcpy(w.data(), rows.data(), rows.size() * sizeof(SamplingRow));
    return w;
  }
};

TEST_F(SampleOp, RowsPenaltiesMasksForcedAndLogprobs) {
  const int m = 5, v = 300, n = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(m * v);
  for (auto& x : logits) x = nd(rng);
  std::vector<SamplingRow> rows(m);
  rows[0].temperature = 0.0f;                      // greedy
  rows[1].temperature = 0.8f, rows[1].uniform = 0.37f, rows[1].top_k = 20, rows[1].top_p = 0.9f;
  rows[2].temperature = 0.0f, rows[2].repetition_penalty = 1.5f, rows[2].presence_penalty = 1.0f;
  rows[2].penalty_begin = 0, rows[2].penalty_end = 3;  // greedy over penalised logits + masks
  rows[2].mask_begin = 0, rows[2].mask_end = 2;
  rows[3].forced_token = 17;
  rows[4].temperature = 1.3f, rows[4].uniform = 0.91f, rows[4].min_p = 0.05f, rows[4].frequency_penalty = 0.5f;
  rows[4].penalty_begin = 3, rows[4].penalty_end = 4;
  // Make the penalised rows' winners the penalised/masked ids, so the penalties matter.
  const int a2 = cpu::argmax(std::span<const float>(&logits[2 * v], v));
  std::vector<int32_t> pairs{a2, 3, 5, 0, 6, 1, 7, 2};
  std::vector<int32_t> masks{11, 12};
  logits[2 * v + 11] = 100.0f;
  logits[3 * v + 40] = logits[3 * v + 17];  // a tie with the forced token: both count in its rank
  auto words = raw_rows(rows);
  std::vector<int32_t> tokens(m, -1), top_ids(m * n, -1), ranks(m, -1);
  std::vector<float> lps(m * (1 + n), kNaN);
  SampleParams p{view(logits, {m, v}), view(words, {m * 14}), view(pairs, {4, 2}), view(masks, {2}), n,
                 view(tokens, {m}), view(lps, {m, 1 + n}), view(top_ids, {m, n})};
  p.out_ranks = view(ranks, {m});
  be->sample(p);
  for (int r = 0; r < m; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    std::span<const float> raw(&logits[r * v], v);
    std::span<const int32_t> rp(pairs.data() + 2 * rows[r].penalty_begin, 2 * (rows[r].penalty_end - rows[r].penalty_begin));
    std::span<const int32_t> rm(masks.data() + rows[r].mask_begin, rows[r].mask_end - rows[r].mask_begin);
    EXPECT_EQ(tokens[r], cpu::select_token(raw, rows[r], rp, rm));
    const float lse = cpu::log_sum_exp(raw);
    EXPECT_FLOAT_EQ(lps[r * (1 + n)], raw[tokens[r]] - lse);
    // vLLM's rank: ids whose raw logit is at least the token's (the token's own included).
    int want_rank = 0;
    for (float x : raw) want_rank += x >= raw[tokens[r]];
    EXPECT_EQ(ranks[r], want_rank);
    int32_t ids[n];
    float want[n];
    cpu::top_logprobs(raw, lse, n, ids, want);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(top_ids[r * n + i], ids[i]);
      EXPECT_FLOAT_EQ(lps[r * (1 + n) + 1 + i], want[i]);
    }
  }
  EXPECT_EQ(tokens[0], cpu::argmax(std::span<const float>(&logits[0], v)));
  EXPECT_NE(tokens[2], a2);  // penalised away
  EXPECT_NE(tokens[2], 11);  // masked despite the largest logit
  EXPECT_EQ(tokens[3], 17);
  EXPECT_EQ(ranks[0], 1);
  EXPECT_GT(ranks[2], 1);  // ranked in the raw row, where the penalised-away winner is above it
}

TEST_F(SampleOp, Bf16LogitsAndNoTopLogprobs) {
  const int m = 2, v = 64;
  std::vector<uint16_t> lg(m * v);
  std::vector<float> lf(m * v);
  for (int i = 0; i < m * v; ++i) lf[i] = bf16_to_f32(lg[i] = f32_to_bf16(std::sin(0.37f * i) * 4));
  std::vector<SamplingRow> rows(m);
  rows[0].temperature = 0.0f;
  rows[1].uniform = 0.5f;
  auto words = raw_rows(rows);
  std::vector<int32_t> tokens(m, -1);
  std::vector<float> lps(m, kNaN);
  be->sample({Tensor(lg.data(), DType::kBF16, {m, v}), view(words, {m * 14}), {}, {}, 0, view(tokens, {m}),
              view(lps, {m, 1}), {}});
  for (int r = 0; r < m; ++r) {
    std::span<const float> raw(&lf[r * v], v);
    EXPECT_EQ(tokens[r], cpu::select_token(raw, rows[r], {}, {}));
    EXPECT_FLOAT_EQ(lps[r], raw[tokens[r]] - cpu::log_sum_exp(raw));
  }
}

TEST_F(SampleOp, BadRangesThrow) {
  std::vector<float> logits(10, 0.0f);
  std::vector<SamplingRow> rows(1);
  rows[0].penalty_end = 2;  // no penalty_tokens at all
  auto words = raw_rows(rows);
  std::vector<int32_t> tokens(1);
  std::vector<float> lps(1);
  SampleParams p{view(logits, {1, 10}), view(words, {14}), {}, {}, 0, view(tokens, {1}), view(lps, {1, 1}), {}};
  EXPECT_THROW(be->sample(p), Error);
  rows[0] = {};
  rows[0].forced_token = 10;
  std::memcpy(words.data(), rows.data(), sizeof(SamplingRow));  // p.rows views `words`
  EXPECT_THROW(be->sample(p), Error);
  p.num_top_logprobs = 21;
  EXPECT_THROW(be->sample(p), Error);
}

}  // namespace
}  // namespace vireo

namespace vireo {
namespace {

// Structured outputs: SamplingBatch::token_bitmask through sample_on_backend on the CPU backend. Rows
// with a mask only ever sample allowed ids (greedy: the best allowed one); their logprobs are those of
// the masked distribution; rows without a mask are untouched.
TEST(TokenBitmask, LimitsTheMaskedRowsOnly) {
  auto be = create_backend("cpu");
  const int m = 4, v = 100, words = (v + 31) / 32;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(m * v);
    for (auto& x : logits) x = nd(rng);
    SamplingBatch b;
    b.rows.resize(m);
    for (int r = 0; r < m; ++r) {
      b.rows[r].temperature = (trial + r) % 2 ? 0.9f : 0.0f;
      b.rows[r].uniform = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
    }
    b.num_top_logprobs = 3;
    std::vector<std::set<int32_t>> allowed(m);
    allowed[1] = {5, 70, 99};  // ids in the first, third and last (partial) word
    const int best3 = cpu::argmax(std::span<const float>(&logits[3 * v], v));
    for (int32_t t = 0; t < v; ++t)
      if (t != best3) allowed[3].insert(t);
    b.bitmask_rows = {1, 3};
    b.token_bitmask.assign(2 * words, 0u);
    for (int g = 0; g < 2; ++g)
      for (int32_t t : allowed[b.bitmask_rows[g]]) b.token_bitmask[g * words + t / 32] |= 1u << (t % 32);
    b.token_bitmask[1 * words + words - 1] |= 0xF0000000u;  // bits past the vocabulary are ignored
    std::vector<float> copy = logits;
    SampledRows out;
    SamplingWorkspace ws;
    sample_on_backend(*be, Tensor(copy.data(), DType::kF32, {m, v}), b, out, ws);
    free_sampling_workspace(*be, ws);
    for (int r = 0; r < m; ++r) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " row " + std::to_string(r));
      std::vector<float> masked(logits.begin() + r * v, logits.begin() + (r + 1) * v);
      if (!allowed[r].empty())
        for (int32_t t = 0; t < v; ++t)
          if (!allowed[r].count(t)) masked[t] = kNegInf;
      const int32_t tok = out.tokens[r];
      if (!allowed[r].empty()) EXPECT_TRUE(allowed[r].count(tok));
      if (b.rows[r].temperature == 0.0f) EXPECT_EQ(tok, cpu::argmax(std::span<const float>(masked)));
      EXPECT_NEAR(out.logprobs[r * 4], masked[tok] - cpu::log_sum_exp(masked), 1e-5);
      if (r == 1) EXPECT_TRUE(allowed[1].count(out.top_ids[r * 3 + 2]));  // all three allowed ids
    }
  }
}

TEST(TokenBitmask, BadShapesThrow) {
  auto be = create_backend("cpu");
  std::vector<float> logits(2 * 40, 0.0f);
  SamplingBatch b;
  b.rows.resize(2);
  b.bitmask_rows = {1};
  b.token_bitmask = {~0u};  // 40 ids need two words
  SampledRows out;
  SamplingWorkspace ws;
  EXPECT_THROW(sample_on_backend(*be, Tensor(logits.data(), DType::kF32, {2, 40}), b, out, ws), Error);
  b.token_bitmask = {~0u, ~0u, ~0u, ~0u};
  b.bitmask_rows = {1, 0};  // not ascending
  EXPECT_THROW(sample_on_backend(*be, Tensor(logits.data(), DType::kF32, {2, 40}), b, out, ws), Error);
  b.bitmask_rows = {0, 2};  // row 2 does not exist
  EXPECT_THROW(sample_on_backend(*be, Tensor(logits.data(), DType::kF32, {2, 40}), b, out, ws), Error);
  free_sampling_workspace(*be, ws);
}

}  // namespace
}  // namespace vireo
