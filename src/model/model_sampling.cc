// Model::forward_sample's default: logits to the host, then the CPU backend's sample op (the
// reference). Test models use it; DecoderModel samples where its logits are.
#include "core/error.h"
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

int Model::launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last) {
  if (tokens_from_last) throw Error("launch_sample: this model cannot take tokens from the previous step");
  SampledRows out;
  forward_sample(in, kv, batch, out);
  finished_.push_back(std::move(out));
  return 0;
}

void Model::launch_forward(const StepInput&, KvCache&, bool) {
  throw Error("launch_forward: this model cannot launch a step apart from its sampling");
}

int Model::launch_sampling(const SamplingBatch&) {
  throw Error("launch_sampling: this model cannot launch a step apart from its sampling");
}

void Model::finish_sample(int /*ticket*/, SampledRows& out) {
  if (finished_.empty()) throw Error("finish_sample: no launched step");
  out = std::move(finished_.front());
  finished_.erase(finished_.begin());
}

void Model::add_lora(int32_t, const LoraAdapter&) {
  throw Error(config().architecture + ": this model takes no LoRA adapters");
}

void Model::remove_lora(int32_t) {}

void Model::forward_hidden(const StepInput&, KvCache&, std::vector<float>&) {
  throw Error(config().architecture + ": this model has no pooling (hidden-state) output");
}

}  // namespace vireo
