// Shared by the scheduler tests: a small configuration (4 sequences, 16-token budget, 4-token blocks)
// and requests made from a prompt and max_tokens.
#pragma once
#include <map>
#include <memory>
#include <optional>
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

// One scheduled step where every request that completes its prefill samples `token`: the tokens each
// request ran; total (if given): the step's total_num_scheduled_tokens.
inline std::map<std::string, int> step_tokens(Scheduler& s, int* total = nullptr, int32_t token = 7) {
  auto out = s.schedule();
  std::map<std::string, int> n;
  std::vector<std::optional<int32_t>> sampled;
  for (auto& r : out.scheduled) {
    n[r.req->request_id] = r.num_new_tokens;
    const bool done = r.req->num_computed_tokens + r.num_new_tokens == r.req->num_tokens();
    sampled.push_back(done ? std::optional<int32_t>(token) : std::nullopt);
  }
  if (total) *total = out.total_num_scheduled_tokens;
  s.update_from_output(out, sampled);
  return n;
}

}  // namespace vireo::testing
