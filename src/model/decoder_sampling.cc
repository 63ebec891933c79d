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

}  // namespace vireo
