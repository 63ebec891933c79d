#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace vireo {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kGreedyEps = 1e-5f;

bool needs_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}
}  // namespace

void apply_penalties(std::span<float> logits, const SamplingContext& ctx) {
  const SamplingParams& p = *ctx.params;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (p.repetition_penalty != 1.0f) {
    // HF semantics: every token seen in prompt or output, once.
    std::vector<char> seen(vocab, 0);
    for (auto ids : {ctx.prompt_token_ids, ctx.output_token_ids})
      for (int32_t t : ids)
        if (t >= 0 && t < vocab) seen[t] = 1;
    for (int32_t t = 0; t < vocab; ++t) {
      if (!seen[t]) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : ctx.output_token_ids)
      if (t >= 0 && t < vocab) ++counts[t];
    for (auto [t, c] : counts) logits[t] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
  }
  if (static_cast<int>(ctx.output_token_ids.size()) < p.min_tokens) {
    for (int32_t t : ctx.eos_token_ids)
      if (!p.ignore_eos && t >= 0 && t < vocab) logits[t] = kNegInf;
    for (int32_t t : p.stop_token_ids)
      if (t >= 0 && t < vocab) logits[t] = kNegInf;
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

std::vector<float> sampling_probs(std::span<const float> logits, const SamplingParams& p) {
  const size_t vocab = logits.size();
  std::vector<float> probs(vocab);
  // Temperature, then softmax.
  const float inv_t = 1.0f / p.temperature;
  float mx = kNegInf;
  for (float l : logits) mx = std::max(mx, l);
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    float e = logits[i] == kNegInf ? 0.0f : std::exp((logits[i] - mx) * inv_t);
    probs[i] = e;
    sum += e;
  }
  for (auto& x : probs) x = static_cast<float>(x / sum);
  // min-p: drop tokens below min_p * p_max (of the tempered distribution).
  if (p.min_p > 0.0f) {
    float pmax = *std::max_element(probs.begin(), probs.end());
    float thr = p.min_p * pmax;
    for (auto& x : probs)
      if (x < thr) x = 0.0f;
  }
  const bool use_top_k = p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab;
  const bool use_top_p = p.top_p < 1.0f;
  if (use_top_k || use_top_p) {
    // Candidates sorted by probability (desc), ties by lower id.
    std::vector<int32_t> idx;
    idx.reserve(vocab);
    for (size_t i = 0; i < vocab; ++i)
      if (probs[i] > 0.0f) idx.push_back(static_cast<int32_t>(i));
    auto better = [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); };
    size_t keep = idx.size();
    if (use_top_k && static_cast<size_t>(p.top_k) < idx.size()) {
      std::nth_element(idx.begin(), idx.begin() + p.top_k, idx.end(), better);
      keep = p.top_k;
    }
    std::sort(idx.begin(), idx.begin() + keep, better);
    if (use_top_p) {
      double total = 0.0;
      for (size_t j = 0; j < keep; ++j) total += probs[idx[j]];
      // Keep the smallest prefix whose mass reaches top_p (always at least one token).
      double cum = 0.0;
      size_t n = 0;
      while (n < keep) {
        cum += probs[idx[n]] / total;
        ++n;
        if (cum >= p.top_p) break;
      }
      keep = n;
    }
    std::vector<float> kept(vocab, 0.0f);
    for (size_t j = 0; j < keep; ++j) kept[idx[j]] = probs[idx[j]];
    probs.swap(kept);
  }
  double s = 0.0;
  for (float x : probs) s += x;
  if (s > 0)
    for (auto& x : probs) x = static_cast<float>(x / s);
  return probs;
}

int32_t sample_token(std::span<const float> raw_logits, const SamplingContext& ctx) {
  const SamplingParams& p = *ctx.params;
  const bool masked = static_cast<int>(ctx.output_token_ids.size()) < p.min_tokens;
  std::vector<float> logits;
  std::span<const float> use = raw_logits;
  if (needs_penalties(p) || masked) {
    logits.assign(raw_logits.begin(), raw_logits.end());
    apply_penalties(logits, ctx);
    use = logits;
  }
  if (p.temperature < kGreedyEps) return argmax(use);
  std::vector<float> probs = sampling_probs(use, p);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  double u = unif(*ctx.rng);
  double cum = 0.0;
  int32_t last_nonzero = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(probs.size()); ++i) {
    if (probs[i] <= 0.0f) continue;
    last_nonzero = i;
    cum += probs[i];
    if (u < cum) return i;
  }
  return last_nonzero;  // rounding: u beyond the summed mass
}

TokenLogprob compute_logprobs(std::span<const float> raw_logits, int32_t token_id, int top_n) {
  const int32_t vocab = static_cast<int32_t>(raw_logits.size());
  float mx = kNegInf;
  for (float l : raw_logits) mx = std::max(mx, l);
  double sum = 0.0;
  for (float l : raw_logits) sum += std::exp(static_cast<double>(l - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  TokenLogprob out;
  out.token_id = token_id;
  out.logprob = raw_logits[token_id] - lse;
  if (top_n > 0) {
    int n = std::min(top_n, vocab);
    std::vector<int32_t> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    auto better = [&](int32_t a, int32_t b) {
      return raw_logits[a] > raw_logits[b] || (raw_logits[a] == raw_logits[b] && a < b);
    };
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), better);
    for (int i = 0; i < n; ++i) out.top.emplace_back(idx[i], raw_logits[idx[i]] - lse);
  }
  return out;
}

}  // namespace vireo
