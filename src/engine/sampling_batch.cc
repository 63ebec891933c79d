#include "engine/sampling_batch.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <future>
#include <thread>
#include <vector>

#include "core/error.h"
#include "structured/grammar_matcher.h"

namespace vireo {
namespace {

constexpr float kGreedyEps = 1e-5f;
constexpr size_t kMaxBitmaskThreads = 8;

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// Each matcher's mask into its row of `words`. A mask costs from ~1 us (a state seen before) to a few ms
// (a new string or number position on a 150k vocabulary), so a step with many constrained rows spreads
// them over threads: matchers are independent (their shared vocabulary caches take a lock). On the H200
// host at 128 constrained requests the serial fill was ~40 ms a step.
// A row's allowed_token_ids (vLLM; sorted, distinct) on top of what `row` allows: ANDed with a
// grammar's mask. Should nothing be left (the grammar wants only tokens outside the list), the request's
// two constraints contradict: it fails as its own fault (the caller's catch, a 400 at the server), since
// any token sampled then would be one the grammar refuses. In place, one pass over the row's words: this
// runs for every such row on every step.
void apply_allowed_ids(const std::vector<int32_t>& ids, std::span<uint32_t> row, bool grammar) {
  const size_t bits = row.size() * 32;
  auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < bits; };
  auto row_allows = [&](int32_t id) { return in_range(id) && ((row[id >> 5] >> (id & 31)) & 1u); };
  if (grammar && !std::any_of(ids.begin(), ids.end(), row_allows))
    throw Error("allowed_token_ids and the structured output constraint leave no token in common");
  auto k = std::lower_bound(ids.begin(), ids.end(), 0);
  for (size_t w = 0; w < row.size(); ++w) {
    uint32_t allowed = 0;
    for (; k != ids.end() && static_cast<size_t>(*k >> 5) == w; ++k) allowed |= uint32_t{1} << (*k & 31);
    row[w] = grammar ? row[w] & allowed : allowed;
  }
}

// vLLM's bad words on top of what `row` allows (`masked`: a grammar or allowed_token_ids already wrote
// it; else every token is allowed first): a word's last token is banned where the output ends with
// the word's other tokens. Should that leave nothing allowed, the bans are dropped for this step.
void apply_bad_words(const std::vector<std::vector<int32_t>>& words, const std::vector<int32_t>& output,
                     std::span<uint32_t> row, bool masked) {
  if (!masked) std::fill(row.begin(), row.end(), ~0u);
  // (word, bits) as they were; per thread and reused: this runs for such a row on every step.
  thread_local std::vector<std::pair<size_t, uint32_t>> cleared;
  cleared.clear();
  for (const std::vector<int32_t>& w : words) {
    const size_t prefix = w.size() - 1;  // words are never empty
    if (prefix > output.size() || !std::equal(w.begin(), w.end() - 1, output.end() - prefix)) continue;
    const int32_t id = w.back();
    if (id < 0 || static_cast<size_t>(id) >= row.size() * 32) continue;
    cleared.emplace_back(static_cast<size_t>(id >> 5), row[id >> 5]);
    row[id >> 5] &= ~(uint32_t{1} << (id & 31));
  }
  if (cleared.empty() || std::any_of(row.begin(), row.end(), [](uint32_t x) { return x != 0; })) return;
  for (auto it = cleared.rbegin(); it != cleared.rend(); ++it) row[it->first] = it->second;
}

// A masked row's request and whether its grammar applies (decided when the batch is built).
struct MaskedRow {
  Request* req;
  bool grammar;
};

void fill_bitmasks(const std::vector<MaskedRow>& reqs, uint32_t* words, size_t row_words,
                   const std::vector<int32_t>& eos_token_ids) {
  auto fill = [&](size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) {
      std::span<uint32_t> row(words + g * row_words, row_words);
      Request& req = *reqs[g].req;
      const bool grammar = reqs[g].grammar;
      try {
        if (grammar) req.matcher->fill_next_token_bitmask(row);
        if (!req.params.allowed_token_ids.empty()) apply_allowed_ids(req.params.allowed_token_ids, row, grammar);
        if (!req.params.bad_words_token_ids.empty())
          apply_bad_words(req.params.bad_words_token_ids, req.output_token_ids, row,
                          grammar || !req.params.allowed_token_ids.empty());
      } catch (const std::exception& e) {
        // This request alone fails (its grammar's mask cannot be made, or its allowed_token_ids leave the
        // grammar nothing): its row allows the stop tokens, and the scheduler finishes it with the error after
        // the step. The other rows are unaffected.
        req.grammar_error = e.what();
        std::fill(row.begin(), row.end(), 0u);
        for (int32_t id : eos_token_ids)
          if (id >= 0 && static_cast<size_t>(id) < row_words * 32) row[id >> 5] |= uint32_t{1} << (id & 31);
        if (eos_token_ids.empty()) std::fill(row.begin(), row.end(), ~0u);
      }
    }
  };
  const size_t n = reqs.size();
  if (n <= 1) return fill(0, n);  // every step passes here: no system call on this path
  // hardware_concurrency() reads /sys on each call: once per process.
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({n, kMaxBitmaskThreads, cores});
  if (threads <= 1) return fill(0, n);
  std::vector<std::future<void>> parts;
  for (size_t t = 1; t < threads; ++t) parts.push_back(std::async(std::launch::async, fill, n * t / threads, n * (t + 1) / threads));
  std::exception_ptr first;
  try {
    fill(0, n / threads);
  } catch (...) {
    first = std::current_exception();
  }
  for (auto& f : parts) {  // every thread joins before the error (if any) leaves
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace

SamplingBatch build_sampling_batch(const SchedulerOutput& sched, const BuiltStep& built,
                                   std::span<const int32_t> eos_token_ids, std::mt19937_64& engine_rng,
                                   int pending_tokens, int32_t logits_width, bool defer_masks) {
  SamplingBatch b;
  std::vector<MaskedRow> constrained;  // of b.bitmask_rows, in order (a grammar, allowed ids, bad words)
  const size_t bitmask_words = (static_cast<size_t>(std::max(logits_width, 0)) + 31) / 32;
  b.rows.resize(built.rows.size());
  for (size_t r = 0; r < built.rows.size(); ++r) {
    const LogitsRowInfo& info = built.rows[r];
    Request& req = *sched.scheduled[info.sched_index].req;
    const SamplingParams& p = req.params;
    SamplingRow& row = b.rows[r];
    if (info.prompt_pos >= 0) {
      row.forced_token = req.prompt_token_ids[info.prompt_pos + 1];
      b.num_top_logprobs = std::max(b.num_top_logprobs, p.prompt_logprobs.value_or(0));
      continue;
    }
    b.num_top_logprobs = std::max(b.num_top_logprobs, p.logprobs.value_or(0));
    row.temperature = p.temperature;
    row.top_p = p.top_p;
    row.top_k = p.top_k;
    row.min_p = p.min_p;
    if (has_penalties(p)) {
      row.repetition_penalty = p.repetition_penalty;
      row.presence_penalty = p.presence_penalty;
      row.frequency_penalty = p.frequency_penalty;
      row.penalty_begin = static_cast<int32_t>(b.penalty_tokens.size() / 2);
      // Kept per request and updated with the new output tokens only (engine/penalty_entries.h).
      req.penalty_entries.sync(req.prompt_token_ids, req.output_token_ids);
      const std::vector<int32_t>& pairs = req.penalty_entries.pairs();
      b.penalty_tokens.insert(b.penalty_tokens.end(), pairs.begin(), pairs.end());
      row.penalty_end = static_cast<int32_t>(b.penalty_tokens.size() / 2);
    }
    const int pending = sched.scheduled[info.sched_index].token_in_flight ? pending_tokens : 0;
    if (req.num_output_tokens() + pending + info.spec_index < p.min_tokens) {
      row.mask_begin = static_cast<int32_t>(b.mask_tokens.size());
      if (!p.ignore_eos) b.mask_tokens.insert(b.mask_tokens.end(), eos_token_ids.begin(), eos_token_ids.end());
      b.mask_tokens.insert(b.mask_tokens.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
      row.mask_end = static_cast<int32_t>(b.mask_tokens.size());
    }
    for (const auto& [id, bias] : p.logit_bias) {
      int32_t bits = 0;
      std::memcpy(&bits, &bias, sizeof(bits));
      b.bias_entries.insert(b.bias_entries.end(), {static_cast<int32_t>(r), id, bits});
    }
    const bool grammar = req.matcher && req.grammar_active;
    if (grammar || !p.allowed_token_ids.empty() || !p.bad_words_token_ids.empty()) {
      if (bitmask_words == 0) throw Error("build_sampling_batch: a masked row needs the logits width");
      b.bitmask_rows.push_back(static_cast<int32_t>(r));
      constrained.push_back({&req, grammar});
    }
    if (p.temperature >= kGreedyEps) {
      std::uniform_real_distribution<double> unif(0.0, 1.0);
      row.uniform = static_cast<float>(unif(req.generator ? *req.generator : engine_rng));
    }
  }
  if (constrained.empty()) return b;
  if (defer_masks) {
    b.fill_token_bitmask = [constrained = std::move(constrained), bitmask_words,
                            eos = std::vector<int32_t>(eos_token_ids.begin(), eos_token_ids.end())](uint32_t* words) {
      fill_bitmasks(constrained, words, bitmask_words, eos);
    };
    return b;
  }
  b.token_bitmask.resize(constrained.size() * bitmask_words);
  fill_bitmasks(constrained, b.token_bitmask.data(), bitmask_words,
                std::vector<int32_t>(eos_token_ids.begin(), eos_token_ids.end()));
  return b;
}

TokenLogprob sampled_logprob(const SampledRows& s, size_t r, int top_n) {
  const int N = s.num_top_logprobs;
  const float* lp = s.logprobs.data() + r * (1 + N);
  TokenLogprob out;
  out.token_id = s.tokens[r];
  out.logprob = lp[0];
  if (r < s.ranks.size()) out.rank = s.ranks[r];
  const int n = std::min(top_n, N);
  for (int i = 0; i < n; ++i) out.top.emplace_back(s.top_ids[r * N + i], lp[1 + i]);
  return out;
}

}  // namespace vireo
