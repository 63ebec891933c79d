#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace vireo {

StepInput make_profile_step(const EngineConfig& cfg, int max_model_len, int num_state_slots, int& num_blocks) {
  const int bs = cfg.block_size;
  // The largest step the scheduler can make: the budget, spread over up to max_num_seqs sequences of at most
  // max_model_len tokens each (a budget past max_model_len is reached with several sequences).
  const int64_t most = static_cast<int64_t>(std::max(1, cfg.max_num_seqs)) * std::max(1, max_model_len);
  const int num_tokens = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(cfg.max_num_batched_tokens, most)));
  const int num_seqs = std::max(1, std::min(cfg.max_num_seqs, num_tokens));
  StepInput in;
  const int blocks_per_seq = (num_tokens / num_seqs + 1 + bs - 1) / bs + 1;
  in.max_blocks_per_seq = blocks_per_seq;
  in.query_start.push_back(0);
  int next_block = 1;  // block 0 is the null block
  for (int s = 0; s < num_seqs; ++s) {
    const int len = num_tokens / num_seqs + (s < num_tokens % num_seqs ? 1 : 0);
    for (int b = 0; b < blocks_per_seq; ++b) in.block_tables.push_back(next_block + b);
    for (int t = 0; t < len; ++t) {
      in.token_ids.push_back(0);
      in.positions.push_back(t);
      in.slot_mapping.push_back((next_block + t / bs) * bs + t % bs);
    }
    next_block += blocks_per_seq;
    in.query_start.push_back(in.query_start.back() + len);
    in.seq_lens.push_back(len);
    if (num_state_slots > 0) in.state_slots.push_back(s % num_state_slots);
    in.logits_indices.push_back(in.query_start.back() - 1);
  }
  num_blocks = next_block;
  return in;
}

namespace {

// vLLM's memory profiling: one forward of the largest step the scheduler can make (make_profile_step) on a
// scratch KV cache, so the model's activation buffers, logits and attention workspace are allocated (and
// stay cached) before the KV cache takes what is left.
void profile_largest_step(const EngineConfig& cfg, Model& model, int max_model_len) {
  int num_blocks = 0;
  const StepInput in = make_profile_step(cfg, max_model_len, model.num_state_slots(), num_blocks);
  KvCache kv = model.allocate_kv_cache(num_blocks, cfg.block_size);
  std::vector<float> logits;
  try {
    model.forward(in, kv, logits);
  } catch (...) {
    model.free_kv_cache(kv);
    throw;
  }
  model.free_kv_cache(kv);
}

}  // namespace

int compute_num_kv_blocks(const EngineConfig& cfg, Model& model, int max_model_len) {
  const size_t block_bytes = model.kv_block_bytes(cfg.block_size);
  if (block_bytes == 0) throw Error("model reports 0 bytes per KV block");
  if (cfg.num_gpu_blocks_override) {
    if (*cfg.num_gpu_blocks_override < 1) throw Error("--num-gpu-blocks-override must be at least 1");
    return *cfg.num_gpu_blocks_override + 1;  // + the null block
  }
  size_t budget;
  if (cfg.kv_cache_memory_bytes) {
    budget = *cfg.kv_cache_memory_bytes;
  } else {
    if (model.backend().kind() != DeviceKind::kCPU) {
      profile_largest_step(cfg, model, max_model_len);
      // The profile step's linear shapes, at the row buckets of chunked steps from 1,024 rows to the
      // budget (64 rows apart to 4,096, then 512: past it a step has more waves and its last one matters
      // less). All of them now: the run path does not time once this ran.
      std::vector<int> rows;
      for (int b = 1024; b <= cfg.max_num_batched_tokens; b += b < 4096 ? 64 : 512) rows.push_back(b);
      if (!rows.empty() && rows.back() < cfg.max_num_batched_tokens) rows.push_back(cfg.max_num_batched_tokens);
      model.backend().tune_gemms(rows);
    }
    // Headroom past the profiled step: attention split workspaces grow with context length.
    const size_t reserve = model.backend().kind() == DeviceKind::kCPU ? 0 : (size_t{2} << 30);
    const size_t free_b = model.backend().free_memory_bytes();
    budget = static_cast<size_t>(static_cast<double>(free_b > reserve ? free_b - reserve : 0) *
                                 cfg.gpu_memory_utilization);
    if (model.backend().kind() == DeviceKind::kCPU) {
      const size_t max_tokens = static_cast<size_t>(cfg.max_num_seqs) * static_cast<size_t>(max_model_len);
      const size_t want = (max_tokens + cfg.block_size - 1) / cfg.block_size * block_bytes;
      budget = std::min({budget, want, size_t{4} << 30});
    }
  }
  const size_t n = budget / block_bytes;
  return static_cast<int>(std::min<size_t>(n + 1, 1u << 30));  // + the null block
}

ModelRunner::ModelRunner(std::unique_ptr<Model> model, int num_blocks, int block_size) : model_(std::move(model)) {
  kv_ = model_->allocate_kv_cache(num_blocks, block_size);
  model_->capture_graphs(kv_);  // before the first request, as vLLM does (a capture mid-serving stalls the GPU)
}

ModelRunner::~ModelRunner() {
  if (model_) model_->free_kv_cache(kv_);
}

int ModelRunner::launch(const BuiltStep& built, const SamplingBatch& batch, bool tokens_from_last) {
  return model_->launch_sample(built.input, kv_, batch, tokens_from_last);
}

void ModelRunner::finish(int ticket, const BuiltStep& built, SampledRows& out) {
  model_->finish_sample(ticket, out);
  if (out.tokens.size() != built.rows.size())
    throw Error("model returned " + std::to_string(out.tokens.size()) + " sampled rows, expected " +
                std::to_string(built.rows.size()));
}

}  // namespace vireo
