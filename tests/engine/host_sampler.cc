// Thin wrappers over the CPU reference of the sample op (backend/cpu/cpu_sampling.h): the request's
// prompt/output/EOS ids become the op's (id, count) penalty pairs and mask ids.
#include "host_sampler.h"

#include <map>

#include "backend/cpu/cpu_sampling.h"

namespace vireo {

namespace {
constexpr float kGreedyEps = 1e-5f;

SamplingRow row_of(const SamplingParams& p) {
  SamplingRow r;
  r.temperature = p.temperature;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.top_k = p.top_k;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  return r;
}

bool needs_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// (id, output count) for every distinct in-vocabulary id of prompt + output; ids ascending.
std::vector<int32_t> penalty_pairs(const SamplingContext& ctx, int64_t vocab) {
  std::map<int32_t, int32_t> counts;
  for (int32_t t : ctx.prompt_token_ids)
    if (t >= 0 && t < vocab) counts.emplace(t, 0);
  for (int32_t t : ctx.output_token_ids)
    if (t >= 0 && t < vocab) ++counts[t];
  std::vector<int32_t> pairs;
  pairs.reserve(2 * counts.size());
  for (auto [t, c] : counts) {
    pairs.push_back(t);
    pairs.push_back(c);
  }
  return pairs;
}

// EOS (unless ignore_eos) and stop ids while fewer than min_tokens were generated.
std::vector<int32_t> mask_ids(const SamplingContext& ctx) {
  const SamplingParams& p = *ctx.params;
  std::vector<int32_t> ids;
  if (static_cast<int>(ctx.output_token_ids.size()) >= p.min_tokens) return ids;
  if (!p.ignore_eos) ids.assign(ctx.eos_token_ids.begin(), ctx.eos_token_ids.end());
  ids.insert(ids.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
  return ids;
}
}  // namespace

void apply_penalties(std::span<float> logits, const SamplingContext& ctx) {
  const SamplingParams& p = *ctx.params;
  std::vector<int32_t> pairs;
  if (needs_penalties(p)) pairs = penalty_pairs(ctx, static_cast<int64_t>(logits.size()));
  cpu::apply_penalties(logits, row_of(p), pairs, mask_ids(ctx));
}

int32_t argmax(std::span<const float> logits) { return cpu::argmax(logits); }

std::vector<float> sampling_probs(std::span<const float> logits, const SamplingParams& p) {
  return cpu::sampling_probs(logits, row_of(p));
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
  if (p.temperature < kGreedyEps) return cpu::argmax(use);
  std::vector<float> probs = cpu::sampling_probs(use, row_of(p));
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  return cpu::draw(probs, unif(*ctx.rng));
}

TokenLogprob compute_logprobs(std::span<const float> raw_logits, int32_t token_id, int top_n) {
  const float lse = cpu::log_sum_exp(raw_logits);
  TokenLogprob out;
  out.token_id = token_id;
  out.logprob = raw_logits[token_id] - lse;
  const int n = std::min<int64_t>(std::max(top_n, 0), static_cast<int64_t>(raw_logits.size()));
  if (n > 0) {
    std::vector<int32_t> ids(n);
    std::vector<float> lps(n);
    cpu::top_logprobs(raw_logits, lse, n, ids.data(), lps.data());
    for (int i = 0; i < n; ++i) out.top.emplace_back(ids[i], lps[i]);
  }
  return out;
}

}  // namespace vireo
