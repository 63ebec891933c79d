// Scheduler::schedule_continuation with prefill chunks and admissions (async scheduling of mixed
// steps): the step after `prev`, scheduled before `prev`'s tokens are back, and its input
// (build_continuation_input): which tokens run, at which positions, and which of `prev`'s sampled rows
// give the ids still in flight.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"
#include "scheduler_util.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::seq;

// Requests run up to 8 tokens here.
std::shared_ptr<Request> make(const std::string& id, std::vector<int32_t> prompt, int max_tokens = 8,
                              SamplingParams sp = {}) {
  return testing::make(id, std::move(prompt), max_tokens, std::move(sp));
}

SchedulerConfig config(int max_num_seqs = 4) { return testing::small_config(max_num_seqs); }

// `token` for every request whose tokens in `out` end its prefill (after any token in flight).
std::vector<std::optional<int32_t>> sampled_for(const SchedulerOutput& out, int32_t token) {
  std::vector<std::optional<int32_t>> v;
  for (const auto& s : out.scheduled) {
    const bool done = s.start() + s.num_new_tokens == s.req->num_tokens() + (s.token_in_flight ? 1 : 0);
    v.push_back(done ? std::optional<int32_t>(token) : std::nullopt);
  }
  return v;
}

TEST(ContinuationScheduling, DecodesPrefillChunksAndAdmissionsInOneStep) {
  Scheduler s(config());
  s.add_request(make("a", seq(6)));
  s.add_request(make("b", seq(20, 10)));
  SchedulerOutput prev = s.schedule();  // a 6, b 10 of 20 (budget 16)
  s.add_request(make("c", seq(7, 40)));  // arrives while prev runs
  ASSERT_EQ(prev.scheduled.size(), 2u);
  const BuiltStep prev_built = build_step_input(prev, 4);

  auto next = s.schedule_continuation(prev);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->scheduled.size(), 3u);
  const ScheduledRequest& a = next->scheduled[0];
  const ScheduledRequest& b = next->scheduled[1];
  const ScheduledRequest& c = next->scheduled[2];
  EXPECT_EQ(a.req->request_id, "a");  // decodes the token prev samples
  EXPECT_TRUE(a.token_in_flight);
  EXPECT_EQ(a.num_new_tokens, 1);
  EXPECT_EQ(a.start(), 6);
  EXPECT_EQ(b.req->request_id, "b");  // its last 10 prompt tokens
  EXPECT_FALSE(b.token_in_flight);
  EXPECT_EQ(b.start(), 10);
  EXPECT_EQ(b.num_new_tokens, 10);
  EXPECT_EQ(c.req->request_id, "c");  // admitted with the 5 tokens left of the budget
  EXPECT_EQ(c.start(), 0);
  EXPECT_EQ(c.num_new_tokens, 5);
  EXPECT_EQ(next->total_num_scheduled_tokens, 16);
  EXPECT_EQ(s.num_running(), 3);

  const BuiltStep built = build_continuation_input(*next, prev, prev_built, 4);
  const StepInput& in = built.input;
  EXPECT_EQ(in.ids_from_last, (std::vector<int32_t>{0}));  // a's row in prev
  ASSERT_EQ(in.token_ids.size(), 16u);
  EXPECT_EQ(in.token_ids[0], 0);  // in flight
  EXPECT_EQ(in.positions[0], 6);
  EXPECT_EQ(in.token_ids[1], 20);  // b's prompt token 10 (seq(20, 10): 10, 11, ...)
  EXPECT_EQ(in.positions[1], 10);
  EXPECT_EQ(in.token_ids[11], 40);
  EXPECT_EQ(in.seq_lens, (std::vector<int32_t>{7, 20, 5}));
  EXPECT_EQ(in.query_start, (std::vector<int32_t>{0, 1, 11, 16}));
  EXPECT_EQ(in.logits_indices, (std::vector<int32_t>{0, 10}));  // a's next token, b's first; c mid-prefill

  // prev's tokens come back, then the continuation's.
  s.update_from_output(prev, sampled_for(prev, 7));
  EXPECT_EQ(s.find("a")->output_token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(s.find("b")->num_computed_tokens, 10);
  // A continuation of the continuation, scheduled before its tokens come back: a and b decode (b's first
  // token in flight now), c finishes its prompt.
  auto third = s.schedule_continuation(*next);
  ASSERT_TRUE(third.has_value());
  ASSERT_EQ(third->scheduled.size(), 3u);
  EXPECT_TRUE(third->scheduled[0].token_in_flight && third->scheduled[1].token_in_flight);
  EXPECT_EQ(third->scheduled[1].start(), 20);
  EXPECT_EQ(third->scheduled[2].start(), 5);
  EXPECT_EQ(third->scheduled[2].num_new_tokens, 2);
  const BuiltStep third_built = build_continuation_input(*third, *next, built, 4);
  EXPECT_EQ(third_built.input.ids_from_last, (std::vector<int32_t>{0, 1}));

  auto ups = s.update_from_output(*next, {8, 9, std::nullopt});
  EXPECT_EQ(s.find("a")->output_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(s.find("a")->num_computed_tokens, 7);
  EXPECT_EQ(s.find("b")->output_token_ids, (std::vector<int32_t>{9}));
  EXPECT_EQ(s.find("b")->num_computed_tokens, 20);
  EXPECT_EQ(s.find("c")->num_computed_tokens, 5);
  EXPECT_EQ(ups.size(), 2u);
  s.update_from_output(*third, {10, 11, 12});
  EXPECT_EQ(s.find("b")->output_token_ids, (std::vector<int32_t>{9, 11}));
  EXPECT_EQ(s.find("c")->output_token_ids, (std::vector<int32_t>{12}));
  EXPECT_EQ(s.find("c")->num_computed_tokens, 7);
}

TEST(ContinuationScheduling, RequestStoppingByLengthIsLeftOutAndItsSeatAdmitsAnother) {
  Scheduler s(config(/*max_num_seqs=*/2));
  s.add_request(make("a", seq(4), /*max_tokens=*/1));
  s.add_request(make("b", seq(4, 50)));
  s.add_request(make("c", seq(4, 80)));
  SchedulerOutput prev = s.schedule();  // a and b; c waits for a seat
  ASSERT_EQ(prev.scheduled.size(), 2u);
  const BuiltStep prev_built = build_step_input(prev, 4);
  auto next = s.schedule_continuation(prev);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->scheduled.size(), 2u);
  EXPECT_EQ(next->scheduled[0].req->request_id, "b");  // a stops after its one token
  EXPECT_EQ(next->scheduled[1].req->request_id, "c");  // in a's seat, as schedule() would after prev
  const BuiltStep built = build_continuation_input(*next, prev, prev_built, 4);
  EXPECT_EQ(built.input.ids_from_last, (std::vector<int32_t>{1}));  // b's row in prev
  s.update_from_output(prev, sampled_for(prev, 7));
  EXPECT_TRUE(s.find("a") == nullptr);  // finished
  s.update_from_output(*next, {8, 9});
  EXPECT_EQ(s.find("b")->output_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(s.find("c")->output_token_ids, (std::vector<int32_t>{9}));
}

TEST(ContinuationScheduling, AbortedAndStoppedRowsAreSkippedInTheRowMap) {
  Scheduler s(config());
  for (const char* id : {"a", "b", "c"}) s.add_request(make(id, seq(4, id[0] * 10)));
  SchedulerOutput prev = s.schedule();
  const BuiltStep prev_built = build_step_input(prev, 4);
  s.finish_request("b", FinishReason::kAbort);  // between schedule and the continuation
  auto next = s.schedule_continuation(prev);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->scheduled.size(), 2u);
  const BuiltStep built = build_continuation_input(*next, prev, prev_built, 4);
  EXPECT_EQ(built.input.ids_from_last, (std::vector<int32_t>{0, 2}));
}

TEST(ContinuationScheduling, NoneWhenPrevPreemptedOrAPenaltyNeedsTheTokenInFlight) {
  SamplingParams pen;
  pen.presence_penalty = 0.5f;
  {
    Scheduler s(config());
    s.add_request(make("a", seq(4), 8, pen));
    SchedulerOutput prev = s.schedule();
    EXPECT_FALSE(s.schedule_continuation(prev).has_value());
  }
  {
    // A penalised request mid-prefill does not sample in prev: its next chunk's ids are on the host.
    Scheduler s(config());
    s.add_request(make("a", seq(30), 8, pen));
    SchedulerOutput prev = s.schedule();
    auto next = s.schedule_continuation(prev);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->scheduled[0].start(), 16);
    EXPECT_EQ(next->scheduled[0].num_new_tokens, 14);
  }
  {
    Scheduler s(config());
    s.add_request(make("a", seq(4)));
    SchedulerOutput prev = s.schedule();
    prev.preempted.push_back("x");
    EXPECT_FALSE(s.schedule_continuation(prev).has_value());
  }
}

TEST(ContinuationScheduling, NoneWhenARunningRequestsBlocksDoNotFit) {
  SchedulerConfig c = config();
  c.num_blocks = 3;  // the null block and two: a's prompt fills both
  Scheduler s(c);
  s.add_request(make("a", seq(8)));
  SchedulerOutput prev = s.schedule();
  ASSERT_EQ(prev.scheduled.size(), 1u);
  EXPECT_FALSE(s.schedule_continuation(prev).has_value());  // its 9th position needs a third block
}

}  // namespace
}  // namespace vireo
