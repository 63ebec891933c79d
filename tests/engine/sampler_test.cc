#include "host_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace vireo {
namespace {

SamplingContext ctx_for(const SamplingParams& p, std::mt19937_64& rng, const std::vector<int32_t>& prompt = {},
                        const std::vector<int32_t>& output = {}, const std::vector<int32_t>& eos = {}) {
  return SamplingContext{&p, prompt, output, eos, &rng};
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  std::vector<float> lg{0.1f, 3.0f, -1.0f, 3.0f, 2.9f};
  SamplingParams p;
  p.temperature = 0.0f;
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(lg, ctx_for(p, rng)), 1);
  lg[3] = 3.5f;
  EXPECT_EQ(sample_token(lg, ctx_for(p, rng)), 3);
}

TEST(Sampler, SeededDrawsRepeat) {
  std::vector<float> lg(50);
  for (int i = 0; i < 50; ++i) lg[i] = std::sin(i * 0.7f);
  SamplingParams p;
  p.temperature = 1.0f;
  std::mt19937_64 a(1234), b(1234), c(99);
  std::vector<int32_t> sa, sb, sc;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(sample_token(lg, ctx_for(p, a)));
    sb.push_back(sample_token(lg, ctx_for(p, b)));
    sc.push_back(sample_token(lg, ctx_for(p, c)));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Sampler, TemperatureSamplingMatchesSoftmax) {
  // 5 tokens; at temperature 0.7 the draw frequencies must match softmax(logits / 0.7).
  std::vector<float> lg{1.0f, 0.5f, 0.0f, -0.5f, 2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  std::vector<double> expect(5);
  double z = 0;
  for (int i = 0; i < 5; ++i) z += expect[i] = std::exp(lg[i] / 0.7);
  for (auto& e : expect) e /= z;
  std::mt19937_64 rng(7);
  const int n = 200000;
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) ++counts[sample_token(lg, ctx_for(p, rng))];
  double chi2 = 0;
  for (int i = 0; i < 5; ++i) {
    double e = expect[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  // 4 degrees of freedom: P(chi2 > 18.5) ~ 0.001.
  EXPECT_LT(chi2, 18.5) << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3] << " " << counts[4];
}

std::set<int32_t> support(const std::vector<float>& lg, const SamplingParams& p) {
  auto probs = sampling_probs(lg, p);
  std::set<int32_t> s;
  double sum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0) s.insert(static_cast<int32_t>(i));
    sum += probs[i];
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
  return s;
}

TEST(Sampler, TopKTopPMinPSupports) {
  // probs at T=1: softmax of log(p) = p
  std::vector<double> pr{0.05, 0.4, 0.1, 0.3, 0.15};
  std::vector<float> lg;
  for (double x : pr) lg.push_back(static_cast<float>(std::log(x)));
  SamplingParams p;
  p.top_k = 2;
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1, 3}));
  p = {};
  p.top_p = 0.7f;  // 0.4 + 0.3 reaches 0.7
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1, 3}));
  p.top_p = 0.71f;
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1, 3, 4}));
  p.top_p = 0.01f;  // always at least one token
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1}));
  p = {};
  p.min_p = 0.3f;  // threshold 0.12
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1, 3, 4}));
  p.top_k = 2;
  EXPECT_EQ(support(lg, p), (std::set<int32_t>{1, 3}));
  // Renormalised: top-2 gives 0.4/0.7 and 0.3/0.7.
  p = {};
  p.top_k = 2;
  auto probs = sampling_probs(lg, p);
  EXPECT_NEAR(probs[1], 0.4 / 0.7, 1e-5);
  EXPECT_NEAR(probs[3], 0.3 / 0.7, 1e-5);
  // Sampling never leaves the support.
  std::mt19937_64 rng(3);
  p.top_k = 0;
  p.top_p = 0.7f;
  for (int i = 0; i < 2000; ++i) {
    int32_t t = sample_token(lg, ctx_for(p, rng));
    EXPECT_TRUE(t == 1 || t == 3);
  }
}

TEST(Sampler, RepetitionPenaltyHfSemantics) {
  std::vector<float> lg{2.0f, -2.0f, 1.0f, -1.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::mt19937_64 rng(0);
  std::vector<int32_t> prompt{0, 1, 1}, output{3};
  apply_penalties(lg, ctx_for(p, rng, prompt, output));
  EXPECT_FLOAT_EQ(lg[0], 1.0f);   // positive: divided
  EXPECT_FLOAT_EQ(lg[1], -4.0f);  // negative: multiplied (once, despite two occurrences)
  EXPECT_FLOAT_EQ(lg[2], 1.0f);   // unseen
  EXPECT_FLOAT_EQ(lg[3], -2.0f);  // output tokens count too
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseOutputOnly) {
  std::vector<float> lg{1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::mt19937_64 rng(0);
  std::vector<int32_t> prompt{2, 2}, output{0, 0, 0, 1};
  apply_penalties(lg, ctx_for(p, rng, prompt, output));
  EXPECT_FLOAT_EQ(lg[0], 1.0f - 0.5f - 0.75f);
  EXPECT_FLOAT_EQ(lg[1], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(lg[2], 1.0f);
}

TEST(Sampler, MinTokensMasksEosAndStopIds) {
  std::vector<float> lg{0.0f, 5.0f, 4.0f, 1.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  std::mt19937_64 rng(0);
  std::vector<int32_t> eos{1}, out1{3}, out2{3, 3};
  EXPECT_EQ(sample_token(lg, ctx_for(p, rng, {}, out1, eos)), 3);
  EXPECT_EQ(sample_token(lg, ctx_for(p, rng, {}, out2, eos)), 1);  // mask lifted
  // With ignore_eos the EOS is not masked (it is just a token), stop ids still are.
  p.ignore_eos = true;
  EXPECT_EQ(sample_token(lg, ctx_for(p, rng, {}, out1, eos)), 1);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  std::vector<float> lg{1.0f, 2.0f, 3.0f, 3.0f};
  double z = std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0);
  auto lp = compute_logprobs(lg, 1, 3);
  EXPECT_EQ(lp.token_id, 1);
  EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 2);  // tie -> lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 1);
  EXPECT_NEAR(lp.top[0].second, 3.0 - std::log(z), 1e-5);
  EXPECT_TRUE(compute_logprobs(lg, 0, 0).top.empty());
}

}  // namespace
}  // namespace vireo
