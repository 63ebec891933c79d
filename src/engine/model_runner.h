// Owns the model and its paged KV cache; runs one scheduled step and returns its sampled tokens.
#pragma once
#include <memory>
#include <vector>

#include "engine/engine_config.h"
#include "engine/step_input_builder.h"
#include "model/model.h"

namespace vireo {

// Number of KV blocks (including the null block 0) for this model and config:
// kv_cache_memory_bytes if set, else free device memory * gpu_memory_utilization
// (CPU: at most 4 GiB and at most max_num_seqs * max_model_len tokens' worth).
int compute_num_kv_blocks(const EngineConfig& cfg, Model& model, int max_model_len);

// The start-up profile step (vLLM's memory profiling): the largest step the scheduler can make,
// min(max_num_batched_tokens, max_num_seqs * max_model_len) prompt tokens over up to max_num_seqs sequences,
// each in its own blocks from block 1; num_blocks: the scratch cache it needs (the null block included).
StepInput make_profile_step(const EngineConfig& cfg, int max_model_len, int num_state_slots, int& num_blocks);

class ModelRunner {
 public:
  ModelRunner(std::unique_ptr<Model> model, int num_blocks, int block_size);
  ~ModelRunner();

  // Runs the step and samples its logits rows (batch: one SamplingRow per built.rows entry), in two
  // halves (Model::launch_sample / finish_sample): launch returns a ticket without waiting; finish, in
  // launch order, fills out. tokens_from_last: a continuation step (async scheduling).
  int launch(const BuiltStep& built, const SamplingBatch& batch, bool tokens_from_last);
  void finish(int ticket, const BuiltStep& built, SampledRows& out);
  // launch in two halves (Model::launch_forward / launch_sampling): a continuation whose structured-output
  // masks need the previous step's tokens.
  void launch_forward(const BuiltStep& built, bool tokens_from_last) {
    model_->launch_forward(built.input, kv_, tokens_from_last);
  }
  int launch_sampling(const SamplingBatch& batch) { return model_->launch_sampling(batch); }
  void discard_launched() { model_->discard_pending_samples(); }
  Model& model() { return *model_; }
  // Pooling steps: the final hidden states of built.input.logits_indices rows ([M, hidden] F32).
  void forward_hidden(const BuiltStep& built, std::vector<float>& hidden) { model_->forward_hidden(built.input, kv_, hidden); }
  int vocab_size() const { return model_->config().vocab_size; }

 private:
  std::unique_ptr<Model> model_;
  KvCache kv_;
};

}  // namespace vireo
