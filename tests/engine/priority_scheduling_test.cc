// --scheduling-policy priority (vLLM): admission by (priority, arrival), the least important running
// request preempted when KV blocks run out, never one more important than the request needing room;
// fcfs unchanged. Scheduler alone on tiny KV caches, then AsyncEngine over the fake model.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "engine/async_engine_impl.h"
#include "engine/llm.h"
#include "engine/scheduler.h"
#include "fakes.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::seq;

SchedulerConfig config(SchedulingPolicy policy, int num_usable_blocks) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_blocks = num_usable_blocks + 1;  // + the null block
  c.enable_prefix_caching = false;
  c.eos_token_ids = {99};
  c.policy = policy;
  return c;
}

std::shared_ptr<Request> make(const std::string& id, std::vector<int32_t> prompt, int64_t priority,
                              int max_tokens = 20) {
  SamplingParams sp;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  sp.priority = priority;
  return std::make_shared<Request>(id, std::move(prompt), sp, 0.0);  // equal arrival times: added order decides
}

std::vector<std::string> ids(const SchedulerOutput& out) {
  std::vector<std::string> v;
  for (const auto& s : out.scheduled) v.push_back(s.req->request_id);
  return v;
}

// Runs `out`, every request whose prefill completes sampling token 7.
void run(Scheduler& s, const SchedulerOutput& out) {
  std::vector<std::optional<int32_t>> sampled;
  for (const auto& r : out.scheduled) {
    const bool done = r.req->num_computed_tokens + r.num_new_tokens == r.req->num_tokens();
    sampled.push_back(done ? std::optional<int32_t>(7) : std::nullopt);
  }
  s.update_from_output(out, sampled);
}

SchedulerOutput step(Scheduler& s) {
  auto out = s.schedule();
  run(s, out);
  return out;
}

TEST(PriorityScheduling, ParsesPolicyNames) {
  EXPECT_EQ(parse_scheduling_policy("fcfs"), SchedulingPolicy::kFcfs);
  EXPECT_EQ(parse_scheduling_policy("priority"), SchedulingPolicy::kPriority);
  EXPECT_THROW(parse_scheduling_policy("lifo"), Error);
}

TEST(PriorityScheduling, AdmitsByPriorityThenArrival) {
  auto cfg = config(SchedulingPolicy::kPriority, 32);
  cfg.max_num_batched_tokens = 12;  // three 4-token prompts a step
  Scheduler s(cfg);
  s.add_request(make("a", seq(4), 0));
  s.add_request(make("b", seq(4, 10), -1));
  s.add_request(make("c", seq(4, 20), 5));
  s.add_request(make("d", seq(4, 30), -1));
  s.add_request(make("e", seq(4, 40), 0));
  EXPECT_EQ(s.unfinished_ids(), (std::vector<std::string>{"b", "d", "a", "e", "c"}));  // all waiting
  EXPECT_EQ(ids(step(s)), (std::vector<std::string>{"b", "d", "a"}));
  // Running requests keep their order and go first; the rest are admitted by priority.
  EXPECT_EQ(ids(s.schedule()), (std::vector<std::string>{"b", "d", "a", "e", "c"}));
}

TEST(PriorityScheduling, FcfsIgnoresPriority) {
  auto cfg = config(SchedulingPolicy::kFcfs, 32);
  cfg.max_num_batched_tokens = 12;
  Scheduler s(cfg);
  s.add_request(make("a", seq(4), 0));
  s.add_request(make("b", seq(4, 10), -1));
  s.add_request(make("c", seq(4, 20), 5));
  s.add_request(make("d", seq(4, 30), -1));
  EXPECT_EQ(ids(step(s)), (std::vector<std::string>{"a", "b", "c"}));
}

// Three running requests fill the cache; the first needs a new block. fcfs preempts the newest (c),
// priority the least important (b), whose blocks then also fit c's next one.
TEST(PriorityScheduling, RunningRequestPreemptsTheLeastImportant) {
  for (auto policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
    SCOPED_TRACE(policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority");
    Scheduler s(config(policy, 6));
    s.add_request(make("a", seq(4), 0));
    s.add_request(make("b", seq(4, 10), 2));
    s.add_request(make("c", seq(4, 20), 1));
    for (int i = 0; i < 5; ++i) step(s);  // 9 tokens each in 2 blocks; none free
    ASSERT_EQ(s.kv().num_free_blocks(), 0);
    ASSERT_EQ(s.num_preemptions(), 0u);
    auto out = s.schedule();  // position 8 needs a third block each
    if (policy == SchedulingPolicy::kFcfs) {
      EXPECT_EQ(out.preempted, std::vector<std::string>{"c"});
      EXPECT_EQ(ids(out), (std::vector<std::string>{"a", "b"}));
    } else {
      EXPECT_EQ(out.preempted, std::vector<std::string>{"b"});
      EXPECT_EQ(ids(out), (std::vector<std::string>{"a", "c"}));
    }
    EXPECT_EQ(s.kv().num_free_blocks(), 0);
    EXPECT_EQ(s.num_waiting(), 1);
  }
}

// The victim was scheduled earlier in the same step (it needed no new block): it is taken out of the
// step and its token goes back to the budget.
TEST(PriorityScheduling, VictimScheduledEarlierInTheStepIsUnscheduled) {
  Scheduler s(config(SchedulingPolicy::kPriority, 7));
  s.add_request(make("a", seq(6), 2));  // 2 blocks for its prompt: needs its third block two steps early
  s.add_request(make("b", seq(4, 10), 0));
  s.add_request(make("c", seq(4, 20), 1));
  for (int i = 0; i < 5; ++i) step(s);
  ASSERT_EQ(s.kv().num_free_blocks(), 0);
  auto out = s.schedule();  // a fits position 10 in its third block; b and c need one for position 8
  EXPECT_EQ(out.preempted, std::vector<std::string>{"a"});
  EXPECT_EQ(ids(out), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(out.total_num_scheduled_tokens, 2);
  auto a = s.find("a");
  EXPECT_EQ(a->status, RequestStatus::kPreempted);
  EXPECT_TRUE(a->block_ids.empty());
  EXPECT_EQ(s.kv().num_free_blocks(), 1);
  run(s, out);
  EXPECT_EQ(s.find("b")->num_output_tokens(), 6);
}

// A request that is the least important running one preempts itself (vLLM: then nothing after it runs).
TEST(PriorityScheduling, LeastImportantPreemptsItself) {
  Scheduler s(config(SchedulingPolicy::kPriority, 4));
  s.add_request(make("a", seq(4), 1));
  step(s);
  s.add_request(make("b", seq(4, 10), 0));  // after a in running order
  for (int i = 0; i < 4; ++i) step(s);      // a 2 blocks, 8 computed; b 2 blocks, 7 computed
  ASSERT_EQ(s.kv().num_free_blocks(), 0);
  auto out = s.schedule();  // a, first in running order, needs a block: it is the least important
  EXPECT_EQ(out.preempted, std::vector<std::string>{"a"});
  EXPECT_TRUE(out.scheduled.empty());
  EXPECT_EQ(ids(s.schedule()), std::vector<std::string>{"b"});  // a may not take b's blocks back
}

TEST(PriorityScheduling, WaitingRequestPreemptsALessImportantRunningOne) {
  Scheduler s(config(SchedulingPolicy::kPriority, 3));
  s.add_request(make("low", seq(8), 5));
  step(s);  // 8 computed tokens in 2 blocks: position 8 takes the last free block
  s.add_request(make("high", seq(8, 10), 0));
  auto out = s.schedule();
  EXPECT_EQ(out.preempted, std::vector<std::string>{"low"});
  EXPECT_EQ(ids(out), std::vector<std::string>{"high"});  // low's decode token taken out of the step
  EXPECT_EQ(out.total_num_scheduled_tokens, 8);
  EXPECT_EQ(s.find("low")->status, RequestStatus::kPreempted);
  EXPECT_EQ(s.num_waiting(), 1);
  run(s, out);
  EXPECT_EQ(s.find("high")->num_output_tokens(), 1);
}

TEST(PriorityScheduling, WaitingRequestNeverPreemptsAMoreImportantOrEarlierOne) {
  for (int64_t priority : {1, 0}) {  // 0: same priority, later arrival
    SCOPED_TRACE(priority);
    Scheduler s(config(SchedulingPolicy::kPriority, 3));
    s.add_request(make("first", seq(8), 0));
    step(s);
    s.add_request(make("second", seq(8, 10), priority));
    auto out = s.schedule();
    EXPECT_TRUE(out.preempted.empty());
    EXPECT_EQ(ids(out), std::vector<std::string>{"first"});
    EXPECT_EQ(s.num_waiting(), 1);
  }
}

// Preempting every less important request would still not fit it: nobody is preempted for nothing.
TEST(PriorityScheduling, NoPreemptionThatWouldNotMakeRoom) {
  for (int num_prompt : {12, 8}) {  // 3 blocks: more than low frees; 2 blocks: fits after low
    SCOPED_TRACE(num_prompt);
    Scheduler s(config(SchedulingPolicy::kPriority, 3));
    s.add_request(make("top", seq(2), 0));
    s.add_request(make("low", seq(2, 10), 5));
    step(s);  // a block each, 3 tokens each: no new block for a while
    s.add_request(make("mid", seq(num_prompt, 20), 1));
    auto out = s.schedule();
    if (num_prompt == 12) {
      EXPECT_TRUE(out.preempted.empty());
      EXPECT_EQ(ids(out), (std::vector<std::string>{"top", "low"}));
    } else {
      EXPECT_EQ(out.preempted, std::vector<std::string>{"low"});
      EXPECT_EQ(ids(out), (std::vector<std::string>{"top", "mid"}));
    }
  }
}

TEST(PriorityScheduling, PreemptedRequestWaitsInPriorityOrder) {
  Scheduler s(config(SchedulingPolicy::kPriority, 4));
  s.add_request(make("a", seq(4), 3));
  s.add_request(make("b", seq(4, 10), 0));
  for (int i = 0; i < 5; ++i) step(s);
  s.add_request(make("c", seq(4, 20), 1));  // c and d arrive while the cache is full
  s.add_request(make("d", seq(4, 30), 4));
  auto out = s.schedule();  // a preempts itself; fcfs would put it first in the queue
  ASSERT_EQ(out.preempted, std::vector<std::string>{"a"});
  EXPECT_EQ(s.unfinished_ids(), (std::vector<std::string>{"b", "c", "a", "d"}));
}

// --- AsyncEngine over the fake model ---

std::unique_ptr<AsyncEngineImpl> make_engine(const std::string& policy, int num_blocks) {
  EngineParts parts;
  parts.config.block_size = 4;
  parts.config.max_num_seqs = 32;
  parts.config.max_num_batched_tokens = 128;
  parts.config.scheduling_policy = policy;
  parts.tokenizer = std::make_unique<testing::FakeTokenizer>();
  parts.model = std::make_unique<testing::FakeModel>(nullptr, -1);
  parts.max_model_len = 128;
  parts.num_kv_blocks = num_blocks;
  parts.eos_token_ids = {testing::kFakeEos};
  return std::make_unique<AsyncEngineImpl>(std::move(parts));
}

SamplingParams greedy(int max_tokens, int64_t priority) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  sp.priority = priority;
  return sp;
}

std::vector<int32_t> drain(RequestStream& s) {
  RequestOutput agg;
  while (auto d = s.next(std::chrono::milliseconds(5000))) {
    const bool fin = d->finished;
    accumulate_output(agg, std::move(*d));
    if (fin) break;
  }
  return agg.token_ids;
}

TEST(PriorityScheduling, FcfsEngineRefusesNonZeroPriority) {
  auto eng = make_engine("fcfs", 1024);
  try {
    eng->add_request("p", {1, 2}, greedy(4, 3));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Got priority 3 but Priority scheduling is not enabled.");
  }
  auto s = eng->add_request("zero", {1, 2}, greedy(4, 0));
  EXPECT_EQ(drain(*s), testing::fake_greedy({1, 2}, 4));
}

TEST(PriorityScheduling, OutputsUnchangedUnderPreemptionByPriority) {
  auto eng = make_engine("priority", 40);  // 39 blocks of 4 tokens for 32 requests of up to ~27 tokens
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 32; ++i) {
    prompts.push_back({i, 1, 2, 3, 4, 5, i % 7});
    streams.push_back(eng->add_request("p" + std::to_string(i), prompts.back(), greedy(20, (i * 5) % 3 - 1)));
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(drain(*streams[i]), testing::fake_greedy(prompts[i], 20)) << i;
  auto st = eng->stats();
  EXPECT_GT(st.num_preemptions_total, 0u);
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
}

}  // namespace
}  // namespace vireo
