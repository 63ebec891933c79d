// DecoderModel::forward_sample: the step's logits rows never leave the device; the backend's
// sample op picks the tokens and only ids and logprobs come back. A batch-1 decode step whose row
// qualifies (sampleable_in_graph) samples inside its graph (cuda_graph_step.cc).
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "model/decoder_model.h"

namespace vireo {
namespace {

// VIREO_GRAPH_SAMPLE=0: batch-1 graphs never sample inside (A/B).
bool graph_sample_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_GRAPH_SAMPLE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

}  // namespace

bool IdsOnDevice::in_place() const {
  if (num_ids() != tokens.numel()) return false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] != static_cast<int32_t>(i)) return false;
  return true;
}

void copy_ids_on_device(Backend& be, const IdsOnDevice& from, const Tensor& ids) {
  const auto* src = static_cast<const int32_t*>(from.tokens.data);
  auto* dst = static_cast<int32_t*>(ids.data);
  for (size_t i = 0; i < from.rows.size();) {
    size_t j = i + 1;
    while (j < from.rows.size() && from.rows[j] == from.rows[j - 1] + 1) ++j;
    const int64_t n = static_cast<int64_t>(j - i);
    Tensor out(dst + i, DType::kI32, {n}, ids.device);
    be.copy(Tensor(const_cast<int32_t*>(src) + from.rows[i], DType::kI32, {n}, from.tokens.device), out);
    i = j;
  }
}

GraphSample* DecoderModel::graph_sample_for(const SamplingBatch& batch, GraphSample& gs) const {
  if (!graph_sampling_ || !graph_sample_enabled() || !sampleable_in_graph(batch)) return nullptr;
  gs.row = batch.rows.data();
  gs.num_top = batch.num_top_logprobs;
  return &gs;
}

void DecoderModel::forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("forward_sample: one sampling row per logits row expected");
  Tensor stats;
  GraphSample gs;
  const Tensor logits = run_step(in, kv, nullptr, &stats, graph_sample_for(batch, gs));  // empty only with no rows
  if (gs.sampled) {
    const int ticket = sample_on_backend_collect(*be_, sampling_, gs.out, gs.out_id, 1, gs.num_top, gs.mirror);
    sample_on_backend_finish(*be_, ticket, out, sampling_);
    return;
  }
  sample_on_backend(*be_, logits, batch, out, sampling_, stats);
}

int DecoderModel::launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("launch_sample: one sampling row per logits row expected");
  GraphSample gs;
  launch_forward_step(in, kv, tokens_from_last, graph_sample_for(batch, gs));
  if (gs.sampled) return sample_on_backend_collect(*be_, sampling_, gs.out, gs.out_id, 1, gs.num_top, gs.mirror);
  return launch_sampling(batch);
}

void DecoderModel::launch_forward(const StepInput& in, KvCache& kv, bool tokens_from_last) {
  launch_forward_step(in, kv, tokens_from_last, nullptr);
}

void DecoderModel::launch_forward_step(const StepInput& in, KvCache& kv, bool tokens_from_last, GraphSample* gs) {
  if (forward_pending_) throw Error("launch_forward: the previous forward's sampling was not launched");
  IdsOnDevice last;
  if (tokens_from_last) {
    const int64_t T = static_cast<int64_t>(in.token_ids.size());
    const Tensor& prev = sampling_.last_tokens;
    if (sampling_.pending.empty() || prev.empty())
      throw Error("launch_sample: tokens_from_last needs a previous launch that samples");
    const int64_t R = sampling_.pending.back().rows;
    if (in.ids_from_last.empty()) {
      if (R != T) throw Error("launch_sample: tokens_from_last needs the previous launch to sample one row per token");
      for (int32_t i = 0; i < R; ++i) last.rows.push_back(i);
    } else {
      last.rows = in.ids_from_last;
      if (last.num_ids() > T) throw Error("launch_sample: more ids from the previous step than tokens");
      for (int32_t r : last.rows)
        if (r < 0 || r >= R) throw Error("launch_sample: ids_from_last names a row the previous step did not sample");
    }
    last.tokens = Tensor(prev.data, DType::kI32, {R}, prev.device);  // its tokens come first
    last.mirror = sampling_.pending.back().mirror;
  }
  forwarded_ = run_step(in, kv, tokens_from_last ? &last : nullptr, &forwarded_stats_, gs);
  if (gs && gs->sampled) {  // nothing waits for launch_sampling
    forwarded_ = forwarded_stats_ = Tensor();
    return;
  }
  forwarded_rows_ = static_cast<int64_t>(in.logits_indices.size());
  forward_pending_ = true;
}

int DecoderModel::launch_sampling(const SamplingBatch& batch) {
  if (!forward_pending_) throw Error("launch_sampling: no forward launched");
  if (static_cast<int64_t>(batch.rows.size()) != forwarded_rows_)
    throw Error("launch_sampling: one sampling row per logits row expected");
  forward_pending_ = false;
  const Tensor logits = forwarded_, stats = forwarded_stats_;
  forwarded_ = forwarded_stats_ = Tensor();
  return sample_on_backend_launch(*be_, logits, batch, sampling_, stats);
}

void DecoderModel::finish_sample(int ticket, SampledRows& out) { sample_on_backend_finish(*be_, ticket, out, sampling_); }

}  // namespace vireo
