// The CPU reference of the sample op (moved from engine/sampler.cc; the math is unchanged).
#include "backend/cpu/cpu_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kGreedyEps = 1e-5f;
constexpr int kMaxTopLogprobs = 20;
constexpr int kRowWords = static_cast<int>(sizeof(SamplingRow) / 4);
}  // namespace

void apply_penalties(std::span<float> logits, const SamplingRow& row, std::span<const int32_t> pairs,
                     std::span<const int32_t> mask_ids) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  for (size_t e = 0; e + 1 < pairs.size(); e += 2) {
    const int32_t t = pairs[e], count = pairs[e + 1];
    if (t < 0 || t >= vocab) continue;
    float l = logits[t];
    if (row.repetition_penalty != 1.0f) l = l > 0 ? l / row.repetition_penalty : l * row.repetition_penalty;
    if (count > 0) l -= row.frequency_penalty * static_cast<float>(count) + row.presence_penalty;
    logits[t] = l;
  }
  for (int32_t t : mask_ids)
    if (t >= 0 && t < vocab) logits[t] = kNegInf;
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

std::vector<float> sampling_probs(std::span<const float> logits, const SamplingRow& row) {
  const size_t vocab = logits.size();
  std::vector<float> probs(vocab);
  // Temperature, then softmax.
  const float inv_t = 1.0f / row.temperature;
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
  if (row.min_p > 0.0f) {
    float pmax = *std::max_element(probs.begin(), probs.end());
    float thr = row.min_p * pmax;
    for (auto& x : probs)
      if (x < thr) x = 0.0f;
  }
  const bool use_top_k = row.top_k > 0 && static_cast<size_t>(row.top_k) < vocab;
  const bool use_top_p = row.top_p < 1.0f;
  if (use_top_k || use_top_p) {
    // Candidates sorted by probability (desc), ties by lower id.
    std::vector<int32_t> idx;
    idx.reserve(vocab);
    for (size_t i = 0; i < vocab; ++i)
      if (probs[i] > 0.0f) idx.push_back(static_cast<int32_t>(i));
    auto better = [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); };
    size_t keep = idx.size();
    if (use_top_k && static_cast<size_t>(row.top_k) < idx.size()) {
      std::nth_element(idx.begin(), idx.begin() + row.top_k, idx.end(), better);
      keep = row.top_k;
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
        if (cum >= row.top_p) break;
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

int32_t draw(std::span<const float> probs, double uniform) {
  double cum = 0.0;
  int32_t last_nonzero = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(probs.size()); ++i) {
    if (probs[i] <= 0.0f) continue;
    last_nonzero = i;
    cum += probs[i];
    if (uniform < cum) return i;
  }
  return last_nonzero;  // rounding: uniform beyond the summed mass
}

int32_t select_token(std::span<const float> raw_logits, const SamplingRow& row, std::span<const int32_t> pairs,
                     std::span<const int32_t> mask_ids) {
  if (row.forced_token >= 0) return row.forced_token;
  std::vector<float> logits;
  std::span<const float> use = raw_logits;
  if (!pairs.empty() || !mask_ids.empty()) {
    logits.assign(raw_logits.begin(), raw_logits.end());
    apply_penalties(logits, row, pairs, mask_ids);
    use = logits;
  }
  if (row.temperature < kGreedyEps) return argmax(use);
  return draw(sampling_probs(use, row), row.uniform);
}

float log_sum_exp(std::span<const float> logits) {
  float mx = kNegInf;
  for (float l : logits) mx = std::max(mx, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  return mx + static_cast<float>(std::log(sum));
}

void top_logprobs(std::span<const float> logits, float lse, int n, int32_t* ids, float* logprobs) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  n = std::min(n, vocab);
  if (n <= 0) return;
  std::vector<int32_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), better);
  for (int i = 0; i < n; ++i) {
    ids[i] = idx[i];
    logprobs[i] = logits[idx[i]] - lse;
  }
}

void sample(ThreadPool& pool, const SampleParams& p) {
  require_float(p.logits, "sample: logits");
  if (p.logits.ndim() != 2) throw Error("sample: logits must be [M, V], got " + p.logits.shape_str());
  const int64_t m = p.logits.dim(0), vocab = p.logits.dim(1);
  const int n = p.num_top_logprobs;
  if (n < 0 || n > kMaxTopLogprobs || n > vocab)
    throw Error("sample: num_top_logprobs " + std::to_string(n) + " outside [0, min(20, V)]");
  require_i32(p.rows, "sample: rows");
  if (p.rows.numel() != m * kRowWords) throw Error("sample: rows must hold M * 14 words, got " + p.rows.shape_str());
  int64_t num_pairs = 0, num_masks = 0;
  if (!p.penalty_tokens.empty()) {
    require_i32(p.penalty_tokens, "sample: penalty_tokens");
    if (p.penalty_tokens.ndim() != 2 || p.penalty_tokens.dim(1) != 2)
      throw Error("sample: penalty_tokens must be [E, 2], got " + p.penalty_tokens.shape_str());
    num_pairs = p.penalty_tokens.dim(0);
  }
  if (!p.mask_tokens.empty()) {
    require_i32(p.mask_tokens, "sample: mask_tokens");
    num_masks = p.mask_tokens.numel();
  }
  require_i32(p.out_tokens, "sample: out_tokens");
  if (p.out_tokens.numel() != m) throw Error("sample: out_tokens must be [M], got " + p.out_tokens.shape_str());
  if (!p.out_tokens_mirror.empty()) {
    require_i32(p.out_tokens_mirror, "sample: out_tokens_mirror");
    if (p.out_tokens_mirror.numel() < m) throw Error("sample: out_tokens_mirror must hold M tokens");
  }
  require_f32(p.out_logprobs, "sample: out_logprobs");
  if (p.out_logprobs.numel() != m * (1 + n))
    throw Error("sample: out_logprobs must be [M, 1 + N], got " + p.out_logprobs.shape_str());
  if (n > 0) {
    require_i32(p.out_top_ids, "sample: out_top_ids");
    if (p.out_top_ids.numel() != m * n) throw Error("sample: out_top_ids must be [M, N], got " + p.out_top_ids.shape_str());
  }
  if (!p.out_ranks.empty()) {
    require_i32(p.out_ranks, "sample: out_ranks");
    if (p.out_ranks.numel() != m) throw Error("sample: out_ranks must be [M], got " + p.out_ranks.shape_str());
  }
  // Validate every row on the calling thread, so a bad request throws before anything is written.
  std::vector<SamplingRow> rows(m);
  if (m > 0) std::memcpy(rows.data(), p.rows.data, rows.size() * sizeof(SamplingRow));
  for (int64_t r = 0; r < m; ++r) {
    const SamplingRow& s = rows[r];
    if (s.penalty_begin < 0 || s.penalty_end < s.penalty_begin || s.penalty_end > num_pairs)
      throw Error("sample: row " + std::to_string(r) + " penalty range outside penalty_tokens");
    if (s.mask_begin < 0 || s.mask_end < s.mask_begin || s.mask_end > num_masks)
      throw Error("sample: row " + std::to_string(r) + " mask range outside mask_tokens");
    if (s.forced_token >= vocab) throw Error("sample: row " + std::to_string(r) + " forced_token past the vocabulary");
  }
  const int32_t* pairs = p.penalty_tokens.empty() ? nullptr : p.penalty_tokens.ptr<int32_t>();
  const int32_t* masks = p.mask_tokens.empty() ? nullptr : p.mask_tokens.ptr<int32_t>();
  pool.parallel_for(m, [&](int64_t b, int64_t e) {
    std::vector<float> raw(vocab);
    for (int64_t r = b; r < e; ++r) {
      const SamplingRow& s = rows[r];
      convert_to_f32(static_cast<const char*>(p.logits.data) + r * vocab * dtype_size(p.logits.dtype), p.logits.dtype,
                     raw.data(), vocab);
      std::span<const int32_t> row_pairs, row_masks;
      if (pairs) row_pairs = {pairs + 2 * int64_t{s.penalty_begin}, size_t(2) * (s.penalty_end - s.penalty_begin)};
      if (masks) row_masks = {masks + s.mask_begin, size_t(s.mask_end - s.mask_begin)};
      const int32_t token = select_token(raw, s, row_pairs, row_masks);
      const float lse = log_sum_exp(raw);
      p.out_tokens.ptr<int32_t>()[r] = token;
      if (!p.out_tokens_mirror.empty()) p.out_tokens_mirror.ptr<int32_t>()[r] = token;
      float* lp = p.out_logprobs.ptr<float>() + r * (1 + n);
      lp[0] = raw[token] - lse;
      if (n > 0) top_logprobs(raw, lse, n, p.out_top_ids.ptr<int32_t>() + r * n, lp + 1);
      if (!p.out_ranks.empty())
        p.out_ranks.ptr<int32_t>()[r] =
            static_cast<int32_t>(std::count_if(raw.begin(), raw.end(), [&](float x) { return x >= raw[token]; }));
    }
  });
}

void add_logit_bias(const LogitBiasParams& p) {
  if (p.entries.empty()) return;
  if (p.logits.dtype != DType::kF32 || p.logits.ndim() != 2) throw Error("add_logit_bias: logits must be F32 [M, V]");
  if (p.entries.dtype != DType::kI32 || p.entries.numel() % 3 != 0)
    throw Error("add_logit_bias: entries must be I32 [E, 3]");
  const int64_t m = p.logits.dim(0), v = p.logits.dim(1);
  const int32_t* e = p.entries.ptr<int32_t>();
  float* logits = p.logits.ptr<float>();
  for (int64_t i = 0; i < p.entries.numel(); i += 3) {
    const int32_t row = e[i], tok = e[i + 1];
    if (row < 0 || row >= m || tok < 0 || tok >= v)
      throw Error("add_logit_bias: entry (" + std::to_string(row) + ", " + std::to_string(tok) + ") outside the logits");
    float bias;
    std::memcpy(&bias, &e[i + 2], sizeof(bias));
    logits[row * v + tok] += bias;
  }
}

void apply_token_bitmask(const TokenBitmaskParams& p) {
  if (p.rows.empty()) return;
  if (p.logits.dtype != DType::kF32 || p.logits.ndim() != 2) throw Error("apply_token_bitmask: logits must be F32 [M, V]");
  const int64_t m = p.logits.dim(0), v = p.logits.dim(1), words = (v + 31) / 32, g = p.rows.numel();
  if (p.rows.dtype != DType::kI32 || p.bitmask.dtype != DType::kI32 || p.bitmask.numel() != g * words)
    throw Error("apply_token_bitmask: rows must be I32 [G] and bitmask I32 [G, ceil(V / 32)]");
  const int32_t* rows = p.rows.ptr<int32_t>();
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(p.bitmask.ptr<int32_t>());
  for (int64_t i = 0; i < g; ++i) {
    if (rows[i] < 0 || rows[i] >= m) throw Error("apply_token_bitmask: row " + std::to_string(rows[i]) + " outside the logits");
    float* x = p.logits.ptr<float>() + rows[i] * v;
    const uint32_t* w = bits + i * words;
    for (int64_t t = 0; t < v; ++t)
      if (!((w[t >> 5] >> (t & 31)) & 1u)) x[t] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace vireo::cpu
