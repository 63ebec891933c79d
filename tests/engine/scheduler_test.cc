#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "scheduler_util.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::make;
using testing::seq;
using testing::small_config;

// One step where every request that completes its prefill samples `token`.
std::map<std::string, int> step(Scheduler& s, int32_t token = 7, std::vector<RequestUpdate>* ups = nullptr) {
  auto out = s.schedule();
  std::map<std::string, int> n;
  std::vector<std::optional<int32_t>> sampled;
  for (auto& r : out.scheduled) {
    n[r.req->request_id] = r.num_new_tokens;
    bool done = r.req->num_computed_tokens + r.num_new_tokens == r.req->num_tokens();
    sampled.push_back(done ? std::optional<int32_t>(token) : std::nullopt);
  }
  auto u = s.update_from_output(out, sampled);
  if (ups) *ups = u;
  return n;
}

TEST(Scheduler, BudgetSplitsOverRequestsAndChunksPrefill) {
  Scheduler s(small_config());
  s.add_request(make("a", seq(6)));
  s.add_request(make("b", seq(6, 10)));
  s.add_request(make("c", seq(6, 20)));
  auto n = step(s);
  EXPECT_EQ(n, (std::map<std::string, int>{{"a", 6}, {"b", 6}, {"c", 4}}));  // c chunked: 16 - 12
  EXPECT_EQ(s.find("a")->num_output_tokens(), 1);
  EXPECT_EQ(s.find("c")->num_output_tokens(), 0);
  EXPECT_EQ(s.find("c")->num_computed_tokens, 4);
  n = step(s);
  EXPECT_EQ(n, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 2}}));  // decodes are 1 token
  EXPECT_EQ(s.find("c")->num_output_tokens(), 1);
}

TEST(Scheduler, LongPromptIsChunkedAcrossSteps) {
  auto cfg = small_config();
  cfg.max_num_batched_tokens = 10;
  Scheduler s(cfg);
  s.add_request(make("a", seq(25)));
  EXPECT_EQ(step(s)["a"], 10);
  EXPECT_EQ(step(s)["a"], 10);
  EXPECT_EQ(s.find("a")->num_output_tokens(), 0);
  EXPECT_EQ(step(s)["a"], 5);
  EXPECT_EQ(s.find("a")->num_output_tokens(), 1);
  EXPECT_EQ(step(s)["a"], 1);
}

TEST(Scheduler, MaxNumSeqsLimitsAdmission) {
  Scheduler s(small_config());
  for (int i = 0; i < 6; ++i) s.add_request(make("r" + std::to_string(i), seq(2, i)));
  auto n = step(s);
  EXPECT_EQ(n.size(), 4u);
  EXPECT_EQ(s.num_running(), 4);
  EXPECT_EQ(s.num_waiting(), 2);
}

TEST(Scheduler, SecondIdenticalPromptSkipsCachedBlocks) {
  Scheduler s(small_config());
  s.add_request(make("a", seq(10)));
  step(s);
  s.add_request(make("b", seq(10)));
  auto n = step(s);
  EXPECT_EQ(n["b"], 2);  // 8 of 10 tokens from the cache
  EXPECT_EQ(s.find("b")->num_cached_tokens, 8);
  EXPECT_EQ(s.kv().prefix_cache_queries(), 20u);
  EXPECT_EQ(s.kv().prefix_cache_hits(), 8u);
}

TEST(Scheduler, StopConditions) {
  auto cfg = small_config();
  cfg.max_model_len = 12;
  Scheduler s(cfg);
  SamplingParams ignore;
  ignore.ignore_eos = true;
  SamplingParams stop_ids;
  stop_ids.stop_token_ids = {99, 5};
  SamplingParams min_tok;
  min_tok.min_tokens = 2;
  s.add_request(make("eos", seq(3), 5));
  s.add_request(make("ignore", seq(3, 5), 3, ignore));
  s.add_request(make("min", seq(3, 9), 5, min_tok));
  std::vector<RequestUpdate> ups;
  step(s, 99, &ups);  // everyone samples EOS
  std::map<std::string, bool> fin;
  for (auto& u : ups) fin[u.req->request_id] = u.finished;
  EXPECT_TRUE(fin["eos"]);
  EXPECT_FALSE(fin["ignore"]);
  EXPECT_FALSE(fin["min"]);  // EOS before min_tokens does not stop
  auto eos = s.find("eos");
  EXPECT_EQ(eos, nullptr);  // finished requests leave the scheduler
  step(s, 99, &ups);
  for (auto& u : ups) fin[u.req->request_id] = u.finished;
  EXPECT_TRUE(fin["min"]);
  EXPECT_EQ(ups.back().req->finish_reason, FinishReason::kStop);
  step(s, 99, &ups);
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].finished);
  EXPECT_EQ(ups[0].req->finish_reason, FinishReason::kLength);  // max_tokens 3
  EXPECT_EQ(ups[0].req->num_output_tokens(), 3);

  s.add_request(make("stopid", seq(3), 5, stop_ids));
  step(s, 5, &ups);
  EXPECT_TRUE(ups[0].finished);
  EXPECT_EQ(ups[0].req->stop_token_id, 5);

  // max_model_len: 10 prompt tokens + 2 generated = 12.
  s.add_request(make("long", seq(10), 50, ignore));
  step(s, 1, &ups);
  EXPECT_FALSE(ups[0].finished);
  step(s, 1, &ups);
  EXPECT_TRUE(ups[0].finished);
  EXPECT_EQ(ups[0].req->finish_reason, FinishReason::kLength);
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().num_total_blocks());
}

TEST(Scheduler, PreemptsNewestAndResumesByRecompute) {
  auto cfg = small_config();
  cfg.num_blocks = 5;  // 4 usable blocks of 4 tokens
  cfg.max_num_batched_tokens = 32;
  cfg.enable_prefix_caching = false;  // the resume recomputes everything
  Scheduler s(cfg);
  SamplingParams sp;
  sp.ignore_eos = true;
  s.add_request(make("a", seq(4), 6, sp));
  s.add_request(make("b", seq(4, 10), 6, sp));
  step(s);  // prompts: 1 block each; 5 tokens each now
  EXPECT_EQ(s.kv().num_free_blocks(), 2);
  step(s);  // position 4 needs a second block each
  EXPECT_EQ(s.kv().num_free_blocks(), 0);
  step(s);
  step(s);
  step(s);  // positions 5..7 fit; 9 tokens each, 5 generated
  EXPECT_EQ(s.num_preemptions(), 0u);
  // Position 8 needs a third block each: b (newest) is preempted for a.
  auto out = s.schedule();
  ASSERT_EQ(out.preempted, std::vector<std::string>{"b"});
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].req->request_id, "a");
  EXPECT_EQ(s.num_preemptions(), 1u);
  auto b = s.find("b");
  EXPECT_EQ(b->status, RequestStatus::kPreempted);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(b->num_output_tokens(), 5);  // kept
  EXPECT_TRUE(b->block_ids.empty());
  EXPECT_EQ(s.num_waiting(), 1);
  auto ups = s.update_from_output(out, {std::optional<int32_t>(7)});
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].finished);  // a reached max_tokens and freed its blocks
  // b resumes: prompt + its 5 outputs run again as one prefill, then it samples its 6th token.
  auto n = step(s);
  EXPECT_EQ(n["b"], 9);
  EXPECT_TRUE(b->is_finished());
  EXPECT_EQ(b->num_output_tokens(), 6);
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().num_total_blocks());
  EXPECT_FALSE(s.has_unfinished());
}

TEST(Scheduler, ResumeAfterPreemptionReusesItsCachedBlocks) {
  auto cfg = small_config();
  cfg.num_blocks = 5;
  cfg.max_num_batched_tokens = 32;
  Scheduler s(cfg);
  SamplingParams sp;
  sp.ignore_eos = true;
  s.add_request(make("a", seq(4), 6, sp));
  s.add_request(make("b", seq(4, 10), 6, sp));
  for (int i = 0; i < 5; ++i) step(s);
  auto out = s.schedule();
  ASSERT_EQ(out.preempted.size(), 1u);
  s.update_from_output(out, {std::optional<int32_t>(7)});
  // One of b's two cached blocks was reused by a; the other is still a prefix hit.
  auto n = step(s);
  EXPECT_EQ(n["b"], 5);
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().num_total_blocks());
}

TEST(Scheduler, PreemptsItselfWhenItIsTheNewest) {
  auto cfg = small_config();
  cfg.num_blocks = 3;  // 2 usable blocks
  Scheduler s(cfg);
  SamplingParams sp;
  sp.ignore_eos = true;
  s.add_request(make("a", seq(8), 10, sp));
  step(s);  // 8 computed tokens in 2 blocks; the 9th needs a third
  auto out = s.schedule();  // needs a third block: only itself to preempt
  EXPECT_TRUE(out.scheduled.empty());
  EXPECT_EQ(out.preempted, std::vector<std::string>{"a"});
  EXPECT_EQ(s.kv().num_free_blocks(), 2);
}

TEST(Scheduler, AbortFreesBlocksAnywhere) {
  Scheduler s(small_config());
  s.add_request(make("a", seq(9)));
  s.add_request(make("b", seq(9, 3)));
  for (int i = 0; i < 5; ++i) s.add_request(make("w" + std::to_string(i), seq(3, i)));
  step(s);
  EXPECT_LT(s.kv().num_free_blocks(), s.kv().num_total_blocks());
  auto a = s.finish_request("a", FinishReason::kAbort);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(a->block_ids.empty());
  EXPECT_EQ(s.finish_request("a", FinishReason::kAbort), nullptr);  // unknown now
  EXPECT_NE(s.finish_request("w4", FinishReason::kAbort), nullptr);  // waiting
  for (auto& id : s.unfinished_ids()) s.finish_request(id, FinishReason::kAbort);
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(s.num_waiting(), 0);
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().num_total_blocks());
}

TEST(Scheduler, AbortBetweenScheduleAndUpdateIsIgnoredByUpdate) {
  Scheduler s(small_config());
  s.add_request(make("a", seq(3)));
  auto out = s.schedule();
  s.finish_request("a", FinishReason::kAbort);
  auto ups = s.update_from_output(out, {std::optional<int32_t>(1)});
  EXPECT_TRUE(ups.empty());
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().num_total_blocks());
}

TEST(Scheduler, DuplicateIdRejected) {
  Scheduler s(small_config());
  s.add_request(make("a", seq(3)));
  EXPECT_ANY_THROW(s.add_request(make("a", seq(3))));
}

}  // namespace
}  // namespace vireo

namespace vireo {
namespace {

TEST(Scheduler, LengthCapWinsOverEosOnTheLastToken) {  // vLLM v1's check_stop order
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 9;
  c.eos_token_ids = {99};
  Scheduler s(c);
  SamplingParams sp;
  sp.max_tokens = 1;
  s.add_request(std::make_shared<Request>("a", std::vector<int32_t>{1, 2}, sp, 0.0));
  auto out = s.schedule();
  auto ups = s.update_from_output(out, {std::optional<int32_t>(99)});
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].finished);
  EXPECT_EQ(ups[0].req->finish_reason, FinishReason::kLength);
}

}  // namespace
}  // namespace vireo
