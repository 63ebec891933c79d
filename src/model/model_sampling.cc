// Model::forward_sample's default: logits to the host, then the CPU backend's sample op (the
// reference). Test models use it; DecoderModel samples where its logits are.
#include "model/model.h"
#include "model/sample_on_backend.h"

namespace vireo {

void Model::forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out) {
  std::vector<float> logits;
  forward(in, kv, logits);
  const int64_t M = static_cast<int64_t>(in.logits_indices.size());
  const int64_t V = config().vocab_size;
  auto cpu = create_backend("cpu");
  SamplingWorkspace ws;
  sample_on_backend(*cpu, Tensor(logits.data(), DType::kF32, {M, V}), batch, out, ws);
  free_sampling_workspace(*cpu, ws);
}

}  // namespace vireo
