// DecoderModel::forward_sample: the step's logits rows never leave the device; the backend's
// sample op picks the tokens and only ids and logprobs come back.
#include "core/error.h"
#include "model/decoder_model.h"

namespace vireo {

void DecoderModel::forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("forward_sample: one sampling row per logits row expected");
  Tensor stats;
  const Tensor logits = run_step(in, kv, nullptr, &stats);  // empty only when there are no rows
  sample_on_backend(*be_, logits, batch, out, sampling_, stats);
}

int DecoderModel::launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("launch_sample: one sampling row per logits row expected");
  launch_forward(in, kv, tokens_from_last);
  return launch_sampling(batch);
}

void DecoderModel::launch_forward(const StepInput& in, KvCache& kv, bool tokens_from_last) {
  if (forward_pending_) throw Error("launch_forward: the previous forward's sampling was not launched");
  IdsOnDevice last;
  if (tokens_from_last) {
    const int64_t T = static_cast<int64_t>(in.token_ids.size());
    const Tensor& prev = sampling_.out[sampling_.last_out];
    if (sampling_.pending.empty() || sampling_.pending.back().rows != T || prev.empty())
      throw Error("launch_sample: tokens_from_last needs the previous launch to sample one row per token");
    last.tokens = Tensor(prev.data, DType::kI32, {T}, prev.device);  // its tokens come first
    last.mirror = sampling_.pending.back().mirror;
  }
  forwarded_ = run_step(in, kv, tokens_from_last ? &last : nullptr, &forwarded_stats_);
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
