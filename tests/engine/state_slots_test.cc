// Recurrent-state slots (Qwen3.5's Gated DeltaNet layers): every running request holds its own
// slot, slots come back on finish, abort and preemption, and prefix caching is off.
#include <gtest/gtest.h>

#include <set>

#include "engine/scheduler.h"
#include "engine/step_input_builder.h"

namespace vireo {
namespace {

SchedulerConfig slot_config() {
  SchedulerConfig c;
  c.max_num_seqs = 3;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_blocks = 33;
  c.num_state_slots = 3;
  c.eos_token_ids = {99};
  return c;
}

std::shared_ptr<Request> make(const std::string& id, int n, int max_tokens = 3) {
  std::vector<int32_t> prompt(n);
  for (int i = 0; i < n; ++i) prompt[i] = i % 40;
  SamplingParams sp;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return std::make_shared<Request>(id, std::move(prompt), sp, 0.0);
}

std::vector<std::optional<int32_t>> sample_all(const SchedulerOutput& out) {
  std::vector<std::optional<int32_t>> v;
  for (const auto& r : out.scheduled) {
    const bool done = r.req->num_computed_tokens + r.num_new_tokens == r.req->num_tokens();
    v.push_back(done ? std::optional<int32_t>(7) : std::nullopt);
  }
  return v;
}

TEST(StateSlots, EachRunningRequestHasItsOwnSlotAndTheStepNamesIt) {
  Scheduler s(slot_config());
  for (const char* id : {"a", "b", "c", "d"}) s.add_request(make(id, 5));
  auto out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 3u);  // max_num_seqs
  std::set<int32_t> slots;
  for (const auto& r : out.scheduled) {
    EXPECT_GE(r.req->state_slot, 0);
    EXPECT_LT(r.req->state_slot, 3);
    slots.insert(r.req->state_slot);
  }
  EXPECT_EQ(slots.size(), 3u);
  BuiltStep b = build_step_input(out, 4);
  ASSERT_EQ(b.input.state_slots.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(b.input.state_slots[i], out.scheduled[i].req->state_slot);
  EXPECT_EQ(s.find("d")->state_slot, -1);  // still waiting
}

TEST(StateSlots, FinishAndAbortReturnSlots) {
  Scheduler s(slot_config());
  for (const char* id : {"a", "b", "c", "d"}) s.add_request(make(id, 5, 1));
  auto out = s.schedule();
  const int32_t slot_a = s.find("a")->state_slot;
  s.update_from_output(out, sample_all(out));  // max_tokens 1: a, b, c finish
  EXPECT_EQ(s.num_running(), 0);
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_GE(out.scheduled[0].req->state_slot, 0);
  auto d = s.finish_request("d", FinishReason::kAbort);
  EXPECT_EQ(d->state_slot, -1);
  // Every slot is free again: three new requests run at once.
  for (const char* id : {"e", "f", "g"}) s.add_request(make(id, 5));
  out = s.schedule();
  EXPECT_EQ(out.scheduled.size(), 3u);
  (void)slot_a;
}

TEST(StateSlots, PreemptionReleasesTheSlotAndRecomputeGetsOne) {
  auto cfg = slot_config();
  cfg.num_blocks = 5;  // 4 usable blocks of 4 tokens
  Scheduler s(cfg);
  auto a = make("a", 4, 8), b = make("b", 4, 8);
  s.add_request(a);
  s.add_request(b);
  for (int i = 0; i < 5; ++i) {
    auto out = s.schedule();
    s.update_from_output(out, sample_all(out));
  }
  auto out = s.schedule();  // position 8 needs a third block each: b is preempted
  ASSERT_EQ(out.preempted, std::vector<std::string>{"b"});
  EXPECT_EQ(b->state_slot, -1);
  EXPECT_GE(a->state_slot, 0);
  s.update_from_output(out, sample_all(out));
  while (s.has_unfinished()) {
    out = s.schedule();
    for (const auto& r : out.scheduled) EXPECT_GE(r.req->state_slot, 0);
    BuiltStep built = build_step_input(out, cfg.block_size);
    EXPECT_EQ(built.input.state_slots.size(), out.scheduled.size());
    s.update_from_output(out, sample_all(out));
  }
  EXPECT_EQ(b->num_output_tokens(), 8);
}

TEST(StateSlots, PrefixCachingIsOff) {
  auto cfg = slot_config();
  cfg.enable_prefix_caching = true;
  Scheduler s(cfg);
  s.add_request(make("a", 12, 1));
  auto out = s.schedule();
  s.update_from_output(out, sample_all(out));
  s.add_request(make("b", 12, 1));  // same prompt: would hit 2 cached blocks with caching on
  out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 12);
  EXPECT_EQ(s.find("b")->num_computed_tokens, 0);
}

TEST(StateSlots, AttentionOnlyModelsHaveNoSlots) {
  auto cfg = slot_config();
  cfg.num_state_slots = 0;
  Scheduler s(cfg);
  s.add_request(make("a", 5));
  auto out = s.schedule();
  EXPECT_EQ(out.scheduled[0].req->state_slot, -1);
  EXPECT_TRUE(build_step_input(out, 4).input.state_slots.empty());
}

}  // namespace
}  // namespace vireo
