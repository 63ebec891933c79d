// The scheduler's LoRA rules: --max-loras bounds the distinct adapters among running requests (a
// waiting request of another adapter waits while the ones behind it go first), and prefix-cache blocks
// are shared only between requests of the same adapter and cache_salt.
#include <gtest/gtest.h>

#include <map>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::seq;

SchedulerConfig config(int max_loras) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_blocks = 65;
  c.max_loras = max_loras;
  return c;
}

std::shared_ptr<Request> make(const std::string& id, std::vector<int32_t> prompt, int32_t lora,
                              const std::string& salt = "") {
  SamplingParams sp;
  sp.max_tokens = 3;
  sp.lora_id = lora;
  sp.cache_salt = salt;
  return std::make_shared<Request>(id, std::move(prompt), sp, 0.0);
}

// One step; every request that completes its prefill samples 7. Returns the scheduled ids and counts;
// lora_ids, when set, receives the step's StepInput::lora_ids (built before the update).
std::map<std::string, int> step(Scheduler& s, std::vector<int32_t>* lora_ids = nullptr) {
  auto out = s.schedule();
  if (lora_ids) *lora_ids = build_step_input(out, 4).input.lora_ids;
  std::map<std::string, int> n;
  std::vector<std::optional<int32_t>> sampled;
  for (auto& r : out.scheduled) {
    n[r.req->request_id] = r.num_new_tokens;
    const bool done = r.req->num_computed_tokens + r.num_new_tokens == r.req->num_tokens();
    sampled.push_back(done ? std::optional<int32_t>(7) : std::nullopt);
  }
  s.update_from_output(out, sampled);
  return n;
}

TEST(LoraScheduling, MaxLorasHoldsBackOtherAdaptersOnly) {
  Scheduler s(config(1));
  s.add_request(make("a1", seq(5), 1));
  s.add_request(make("b2", seq(5, 10), 2));  // another adapter: waits while adapter 1 runs
  s.add_request(make("base", seq(5, 20), 0));  // the base model needs no adapter slot
  s.add_request(make("c1", seq(5, 30), 1));
  auto n = step(s);
  EXPECT_EQ(n, (std::map<std::string, int>{{"a1", 5}, {"base", 5}, {"c1", 5}}));
  EXPECT_EQ(s.num_waiting(), 1);
  step(s);
  step(s);  // a1, base, c1 finish (3 tokens)
  n = step(s);
  EXPECT_EQ(n, (std::map<std::string, int>{{"b2", 5}}));
}

TEST(LoraScheduling, MaxLorasTwoAdmitsTwoAdapters) {
  Scheduler s(config(2));
  s.add_request(make("a1", seq(5), 1));
  s.add_request(make("b2", seq(5, 10), 2));
  s.add_request(make("c3", seq(5, 20), 3));
  auto n = step(s);
  EXPECT_EQ(n, (std::map<std::string, int>{{"a1", 5}, {"b2", 5}}));
}

TEST(LoraScheduling, StepInputCarriesAdapterIdsOnlyWhenUsed) {
  Scheduler s(config(0));
  s.add_request(make("a", seq(5), 0));
  std::vector<int32_t> ids = {-1};
  step(s, &ids);
  EXPECT_TRUE(ids.empty());  // base rows only: no list
  s.add_request(make("b", seq(6, 10), 3));
  step(s, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 3}));
}

TEST(LoraScheduling, PrefixCacheIsPerAdapterAndSalt) {
  Scheduler s(config(0));
  const auto prompt = seq(13);  // three full blocks of 4
  s.add_request(make("base", prompt, 0));
  step(s);
  s.add_request(make("base_again", prompt, 0));
  s.add_request(make("lora", prompt, 1));
  s.add_request(make("salted", prompt, 0, "tenant-a"));
  auto n = step(s);
  EXPECT_EQ(n["base_again"], 1);  // 12 tokens from the cache
  EXPECT_EQ(n["lora"], 13);      // another adapter: nothing shared
  EXPECT_EQ(n["salted"], 13);    // another salt: nothing shared
  s.add_request(make("lora_again", prompt, 1));
  s.add_request(make("lora2", prompt, 2));
  s.add_request(make("salted_again", prompt, 0, "tenant-a"));
  n = step(s);
  EXPECT_EQ(n["lora_again"], 1);
  EXPECT_EQ(n["lora2"], 13);
  EXPECT_EQ(n["salted_again"], 1);
}

}  // namespace
}  // namespace vireo
