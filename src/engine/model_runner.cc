#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace vireo {

int compute_num_kv_blocks(const EngineConfig& cfg, Model& model, int max_model_len) {
  const size_t block_bytes = model.kv_block_bytes(cfg.block_size);
  if (block_bytes == 0) throw Error("model reports 0 bytes per KV block");
  size_t budget;
  if (cfg.kv_cache_memory_bytes) {
    budget = *cfg.kv_cache_memory_bytes;
  } else {
    budget = static_cast<size_t>(static_cast<double>(model.backend().free_memory_bytes()) * cfg.gpu_memory_utilization);
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
}

ModelRunner::~ModelRunner() {
  if (model_) model_->free_kv_cache(kv_);
}

void ModelRunner::execute(const BuiltStep& built, std::vector<float>& logits) {
  model_->forward(built.input, kv_, logits);
  const size_t want = built.rows.size() * static_cast<size_t>(vocab_size());
  if (logits.size() < want)
    throw Error("model forward returned " + std::to_string(logits.size()) + " logits, expected " + std::to_string(want));
}

}  // namespace vireo
