// align_step_tokens (step_align.h): a step trimmed to whole tiles of `align` tokens takes the excess off the
// newest prefill chunk only; decode rows, drafts and tokens in flight stay; the trimmed tokens run next step.
#include "engine/step_align.h"

#include <gtest/gtest.h>

#include <map>

#include "scheduler_util.h"
#include "token_seq.h"

namespace vireo {
namespace {

using testing::make;
using testing::seq;
using testing::small_config;

SchedulerConfig aligned_config(int align) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 32;
  c.step_align_tokens = align;
  return c;
}

std::map<std::string, int> step(Scheduler& s, int* total = nullptr) { return testing::step_tokens(s, total); }

TEST(StepAlign, TrimsTheNewestPrefillChunkToWholeTiles) {
  Scheduler s(aligned_config(4));
  s.add_request(make("a", seq(6)));
  s.add_request(make("b", seq(13, 10)));
  int total = 0;
  EXPECT_EQ(step(s, &total), (std::map<std::string, int>{{"a", 6}, {"b", 10}}));  // 19 -> 16: b gives back 3
  EXPECT_EQ(total, 16);
  EXPECT_EQ(s.find("a")->num_output_tokens(), 1);
  EXPECT_EQ(s.find("b")->num_output_tokens(), 0);
  // Under 4 tiles (16 tokens) nothing is trimmed: b's last 3 run with a's decode.
  EXPECT_EQ(step(s, &total), (std::map<std::string, int>{{"a", 1}, {"b", 3}}));
  EXPECT_EQ(total, 4);
  EXPECT_EQ(s.find("b")->num_output_tokens(), 1);
}

TEST(StepAlign, OffAlignedOrNothingLongEnoughLeavesTheStep) {
  {
    Scheduler s(aligned_config(0));
    s.add_request(make("a", seq(6)));
    s.add_request(make("b", seq(13, 10)));
    EXPECT_EQ(step(s), (std::map<std::string, int>{{"a", 6}, {"b", 13}}));
  }
  {
    Scheduler s(aligned_config(4));
    s.add_request(make("a", seq(8)));
    s.add_request(make("b", seq(12, 10)));
    EXPECT_EQ(step(s), (std::map<std::string, int>{{"a", 8}, {"b", 12}}));  // 20: whole tiles already
  }
  {
    Scheduler s(aligned_config(8));
    s.add_request(make("a", seq(15)));
    s.add_request(make("b", seq(2, 20)));
    s.add_request(make("c", seq(2, 30)));
    s.add_request(make("d", seq(14, 40)));
    // 33 tokens would be > 32: the budget chunks d to 13 (32 tokens, whole tiles of 8).
    EXPECT_EQ(step(s), (std::map<std::string, int>{{"a", 15}, {"b", 2}, {"c", 2}, {"d", 13}}));
  }
}

TEST(StepAlign, SkipsDecodeRowsDraftsAndTokensInFlight) {
  auto r = [](const char* id, int n) { return make(id, seq(n)); };
  SchedulerOutput out;
  out.scheduled.push_back({r("a", 30), 20});        // a prefill chunk: trimmable
  out.scheduled.push_back({r("b", 4), 1, 0, 0, true});  // a decode token in flight
  out.scheduled.push_back({r("c", 4), 3, 2});       // a decode with two drafts
  out.scheduled.push_back({r("d", 4), 2});          // a chunk shorter than the excess
  // 26 tokens, align 8: excess 2 is not below d's 2 tokens; c has drafts, b a token in flight: a gives 2.
  EXPECT_EQ(align_step_tokens(out, 8, 1), 2);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 18);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[2].num_new_tokens, 3);
  EXPECT_EQ(out.scheduled[3].num_new_tokens, 2);
  EXPECT_EQ(align_step_tokens(out, 8, 1), 0);   // 24: aligned now
  EXPECT_EQ(align_step_tokens(out, 8, 4), 0);   // under 4 tiles
  EXPECT_EQ(align_step_tokens(out, 0), 0);
}

}  // namespace
}  // namespace vireo
