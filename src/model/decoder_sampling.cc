// DecoderModel::forward_sample: the step's logits rows never leave the device; the backend's
// sample op picks the tokens and only ids and logprobs come back.
#include "core/error.h"
#include "model/decoder_model.h"

namespace vireo {

void DecoderModel::forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("forward_sample: one sampling row per logits row expected");
  const Tensor logits = run_step(in, kv);  // empty only when there are no rows
  sample_on_backend(*be_, logits, batch, out, sampling_);
}

int DecoderModel::launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last) {
  if (batch.rows.size() != in.logits_indices.size())
    throw Error("launch_sample: one sampling row per logits row expected");
  Tensor last;
  if (tokens_from_last) {
    const int64_t T = static_cast<int64_t>(in.token_ids.size());
    if (sampling_.pending.empty() || sampling_.pending.back().rows != T || sampling_.out.empty())
      throw Error("launch_sample: tokens_from_last needs the previous launch to sample one row per token");
    last = Tensor(sampling_.out.data, DType::kI32, {T}, sampling_.out.device);  // its tokens come first
  }
  const Tensor logits = run_step(in, kv, tokens_from_last ? &last : nullptr);
  return sample_on_backend_launch(*be_, logits, batch, sampling_);
}

void DecoderModel::finish_sample(int ticket, SampledRows& out) { sample_on_backend_finish(*be_, ticket, out, sampling_); }

}  // namespace vireo
