// Scheduler side of speculative decoding: drafts ride with a decoding request's token within the budget,
// max_tokens and the model length; update_from_output keeps the drafts the target's samples agree with,
// then the target's own token; stop tokens end the run of kept tokens; drafts never preempt anyone.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::seq;
using VV = std::vector<std::vector<int32_t>>;

SchedulerConfig config(int budget = 16, int num_blocks = 33) {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.eos_token_ids = {99};
  return c;
}

std::shared_ptr<Request> make(const std::string& id, int prompt_len, int max_tokens = 20) {
  SamplingParams sp;
  sp.max_tokens = max_tokens;
  return std::make_shared<Request>(id, seq(prompt_len), sp, 0.0);
}

// Runs the prefill of `r` (alone) and samples `first`.
void prefill(Scheduler& s, const std::shared_ptr<Request>& r, int32_t first = 7) {
  auto out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  s.update_from_output(out, {first});
  ASSERT_EQ(r->num_computed_tokens + 1, r->num_tokens());
}

TEST(SpecScheduling, KeepsAgreeingDraftsThenTheTargetsToken) {
  Scheduler s(config());
  auto r = make("a", 6);
  s.add_request(r);
  prefill(s, r);
  r->spec_token_ids = {5, 6, 7, 8};
  auto out = s.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 5);
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 4);
  const int computed = r->num_computed_tokens, tokens = r->num_tokens();
  // The target samples 5 after the real token, 6 after draft 5, 9 after draft 6: two drafts kept, then 9.
  auto ups = s.update_from_output(out, {5}, VV{{6, 9, 1, 2}});
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].new_token_ids, (std::vector<int32_t>{5, 6, 9}));
  EXPECT_EQ(ups[0].num_draft_tokens, 4);
  EXPECT_EQ(ups[0].num_accepted_tokens, 2);
  EXPECT_EQ(r->num_tokens(), tokens + 3);
  EXPECT_EQ(r->num_computed_tokens, computed + 3);  // the real token and two drafts
  EXPECT_EQ(r->num_computed_tokens + 1, r->num_tokens());
  EXPECT_TRUE(r->spec_token_ids.empty());

  // All kept: the target's token after the last draft comes too.
  r->spec_token_ids = {1, 2};
  out = s.schedule();
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 2);
  ups = s.update_from_output(out, {1}, VV{{2, 3}});
  EXPECT_EQ(ups[0].new_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r->num_computed_tokens + 1, r->num_tokens());

  // None kept: just the target's token.
  r->spec_token_ids = {4};
  out = s.schedule();
  ups = s.update_from_output(out, {8}, VV{{4}});
  EXPECT_EQ(ups[0].new_token_ids, (std::vector<int32_t>{8}));
  EXPECT_EQ(ups[0].num_accepted_tokens, 0);
}

TEST(SpecScheduling, DraftsFitTheBudgetMaxTokensAndModelLength) {
  Scheduler s(config(/*budget=*/3));
  auto r = make("a", 3, /*max_tokens=*/20);
  s.add_request(r);
  prefill(s, r);
  r->spec_token_ids = {1, 2, 3, 4};
  auto out = s.schedule();
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 2);  // budget 3: the token and two drafts
  s.update_from_output(out, {1}, VV{{2, 3}});

  Scheduler t(config());
  auto q = make("b", 3, /*max_tokens=*/3);
  t.add_request(q);
  prefill(t, q);  // one output token: two more allowed, so one draft
  q->spec_token_ids = {1, 2, 3, 4};
  out = t.schedule();
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 1);
  auto ups = t.update_from_output(out, {1}, VV{{2}});
  EXPECT_EQ(ups[0].new_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(ups[0].finished);  // max_tokens
  EXPECT_EQ(q->finish_reason, FinishReason::kLength);

  Scheduler u(config());
  auto l = make("c", 60, /*max_tokens=*/20);  // max_model_len 64
  u.add_request(l);
  while (l->num_computed_tokens + 1 < l->num_tokens()) {
    auto o = u.schedule();
    std::vector<std::optional<int32_t>> sampled;
    for (auto& x : o.scheduled)
      sampled.push_back(x.req->num_computed_tokens + x.num_new_tokens == x.req->num_tokens() ? std::optional<int32_t>(7)
                                                                                          : std::nullopt);
    u.update_from_output(o, sampled);
  }
  l->spec_token_ids = {1, 2, 3, 4};  // 61 tokens: drafts at 61, 62 only (positions < 63)
  out = u.schedule();
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 2);
}

TEST(SpecScheduling, AStopTokenEndsTheKeptTokens) {
  Scheduler s(config());
  auto r = make("a", 6);
  s.add_request(r);
  prefill(s, r);
  r->spec_token_ids = {5, 99, 6};
  auto out = s.schedule();
  auto ups = s.update_from_output(out, {5}, VV{{99, 6, 4}});  // every draft kept, but 99 is EOS
  EXPECT_EQ(ups[0].new_token_ids, (std::vector<int32_t>{5, 99}));
  EXPECT_TRUE(ups[0].finished);
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);
  EXPECT_EQ(r->output_token_ids, (std::vector<int32_t>{7, 5, 99}));
}

TEST(SpecScheduling, DraftsAreDroppedBeforeAnyoneIsPreempted) {
  // 4 usable blocks of 4 tokens: after the prompts a (4 tokens) and b (3) hold one each; a's decode token
  // takes a second block, its 8 drafts would need two more: only one is left without preempting b, so a
  // runs without drafts.
  Scheduler s(config(16, /*num_blocks=*/5));
  auto a = make("a", 4), b = make("b", 3);
  s.add_request(a);
  s.add_request(b);
  auto out = s.schedule();
  s.update_from_output(out, {7, 7});
  ASSERT_EQ(a->block_ids.size() + b->block_ids.size(), 2u);
  a->spec_token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  b->spec_token_ids = {};
  out = s.schedule();
  EXPECT_TRUE(out.preempted.empty());
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_spec_tokens, 0);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
}

}  // namespace
}  // namespace vireo
