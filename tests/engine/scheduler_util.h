// Shared by the scheduler tests: a small configuration (4 sequences, 16-token budget, 4-token blocks)
// and requests made from a prompt and max_tokens.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"

namespace vireo::testing {

inline SchedulerConfig small_config(int max_num_seqs = 4) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_blocks = 33;
  c.eos_token_ids = {99};
  return c;
}

inline std::shared_ptr<Request> make(const std::string& id, std::vector<int32_t> prompt, int max_tokens = 4,
                                     SamplingParams sp = {}) {
  sp.max_tokens = max_tokens;
  return std::make_shared<Request>(id, std::move(prompt), sp, 0.0);
}

}  // namespace vireo::testing
