// EngineCore's pooling steps (--runner pooling, /v1/embeddings): a request runs its prompt, in chunks
// like any prefill, and finishes with one embedding made from the final hidden states of its tokens:
// the last one (LAST: decoder embedding models such as Qwen3-Embedding), the first (CLS), or the mean of
// all (MEAN, summed chunk by chunk in double); L2-normalised when the pooler says so.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/step_input_builder.h"

namespace vireo {

void EngineCore::step_pooling(SchedulerOutput sched, std::vector<RequestOutput>& outputs) {
  const double t_sched = monotonic_seconds();
  for (auto& s : sched.scheduled)
    if (s.req->first_scheduled_time < 0) s.req->first_scheduled_time = t_sched;
  BuiltStep built = build_step_input(sched, scheduler_.config().block_size);
  // The rows each request pools this step, replacing the sampling rows.
  StepInput& in = built.input;
  in.logits_indices.clear();
  std::vector<size_t> row_owner;  // scheduled index of each row
  const PoolingSpec& pool = cfg_.pooling;
  for (size_t i = 0, row0 = 0; i < sched.scheduled.size(); ++i) {
    const Request& req = *sched.scheduled[i].req;
    const int n = sched.scheduled[i].num_new_tokens, start = req.num_computed_tokens;
    for (int k = 0; k < n; ++k) {
      const int pos = start + k;
      const bool take = pool.type == PoolingSpec::Type::kMean ||
                        (pool.type == PoolingSpec::Type::kCls ? pos == 0 : pos == req.num_tokens() - 1);
      if (!take) continue;
      in.logits_indices.push_back(static_cast<int32_t>(row0 + k));
      row_owner.push_back(i);
    }
    row0 += static_cast<size_t>(n);
  }
  std::vector<float> hidden;
  try {
    runner_.forward_hidden(built, hidden);
  } catch (const std::exception& e) {
    fail_step(sched, e, outputs);
    return;
  }
  const size_t H = static_cast<size_t>(runner_.model().config().hidden_size);
  for (size_t r = 0; r < row_owner.size(); ++r) {
    Request& req = *sched.scheduled[row_owner[r]].req;
    if (req.pooled.empty()) req.pooled.assign(H, 0.0);
    for (size_t h = 0; h < H; ++h) req.pooled[h] += hidden[r * H + h];
    ++req.num_pooled;
  }
  // Advance the requests (no tokens); those whose prompt is complete finish with their embedding.
  scheduler_.update_from_output(sched, std::vector<std::optional<int32_t>>(sched.scheduled.size()));
  const double now = monotonic_seconds();
  for (auto& s : sched.scheduled) {
    Request& req = *s.req;
    if (req.is_finished() || req.num_computed_tokens < req.num_tokens()) continue;
    RequestOutput out;
    out.request_id = req.request_id;
    out.num_prompt_tokens = req.num_prompt_tokens();
    out.num_cached_tokens = std::max(req.num_cached_tokens, 0);
    out.embedding.resize(H);
    double norm = 0;
    const double count = req.num_pooled > 0 ? req.num_pooled : 1;
    for (size_t h = 0; h < H && !req.pooled.empty(); ++h) norm += (req.pooled[h] / count) * (req.pooled[h] / count);
    const double scale = pool.normalize ? 1.0 / std::max(std::sqrt(norm), 1e-12) : 1.0;  // torch's F.normalize eps
    for (size_t h = 0; h < H && !req.pooled.empty(); ++h) out.embedding[h] = static_cast<float>(req.pooled[h] / count * scale);
    if (pool.classifies()) {  // the classifier's logits: score.weight [labels, H] @ pooled
      std::vector<float> logits(pool.labels.size());
      for (size_t c = 0; c < logits.size(); ++c) {
        double v = 0;
        for (size_t h = 0; h < H; ++h) v += static_cast<double>(pool.classifier[c * H + h]) * out.embedding[h];
        logits[c] = static_cast<float>(v);
      }
      out.embedding = std::move(logits);
    }
    scheduler_.finish_request(req.request_id, FinishReason::kStop);
    req.first_token_time = now;
    metrics_.prompt_tokens_total += req.num_prompt_tokens();
    metrics_.ttft.observe(now - req.arrival_time);
    on_finished(req, now);
    states_.erase(req.request_id);
    out.finished = true;
    out.finish_reason = "stop";
    outputs.push_back(std::move(out));
  }
}

}  // namespace vireo
