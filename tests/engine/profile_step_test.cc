// make_profile_step (model_runner.h): the start-up profile step is the largest step the scheduler can make,
// so the memory it allocates and the GEMM shapes it plans (which the GEMM tuner times) cover every real step.
#include <gtest/gtest.h>

#include <set>

#include "engine/model_runner.h"

namespace vireo {
namespace {

EngineConfig config(int budget, int max_num_seqs) {
  EngineConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_num_seqs;
  c.block_size = 16;
  return c;
}

// Every sequence's tokens sit at positions 0.. in blocks of its own table, none shared, none the null block.
void expect_well_formed(const StepInput& in, int block_size, int num_blocks, int max_model_len) {
  const int num_seqs = static_cast<int>(in.seq_lens.size());
  ASSERT_EQ(in.query_start.size(), size_t(num_seqs) + 1);
  ASSERT_EQ(in.logits_indices.size(), size_t(num_seqs));
  ASSERT_EQ(in.block_tables.size(), size_t(num_seqs) * in.max_blocks_per_seq);
  std::set<int> slots;
  for (int s = 0; s < num_seqs; ++s) {
    const int len = in.query_start[s + 1] - in.query_start[s];
    EXPECT_EQ(len, in.seq_lens[s]);
    EXPECT_LE(len, max_model_len);
    EXPECT_EQ(in.logits_indices[s], in.query_start[s + 1] - 1);
    for (int t = 0; t < len; ++t) {
      const int i = in.query_start[s] + t;
      EXPECT_EQ(in.positions[i], t);
      const int block = in.block_tables[size_t(s) * in.max_blocks_per_seq + t / block_size];
      EXPECT_GE(block, 1);
      EXPECT_LT(block, num_blocks);
      EXPECT_EQ(in.slot_mapping[i], block * block_size + t % block_size);
      EXPECT_TRUE(slots.insert(in.slot_mapping[i]).second) << "slot written twice: " << in.slot_mapping[i];
    }
  }
}

TEST(ProfileStep, TakesTheWholeBudgetPastMaxModelLen) {
  // 256 clients, budget 8192, max_model_len 4096 (the 8B serving benchmark): 8,192 tokens, not 4,096.
  int num_blocks = 0;
  const StepInput in = make_profile_step(config(8192, 256), 4096, 0, num_blocks);
  EXPECT_EQ(in.token_ids.size(), 8192u);
  EXPECT_EQ(in.seq_lens.size(), 256u);
  EXPECT_TRUE(in.state_slots.empty());
  expect_well_formed(in, 16, num_blocks, 4096);
}

TEST(ProfileStep, OneSequenceStopsAtMaxModelLen) {
  int num_blocks = 0;
  const StepInput in = make_profile_step(config(8192, 1), 2048, 0, num_blocks);
  EXPECT_EQ(in.token_ids.size(), 2048u);
  EXPECT_EQ(in.seq_lens.size(), 1u);
  expect_well_formed(in, 16, num_blocks, 2048);
}

TEST(ProfileStep, FewSequencesShareTheBudgetUnevenly) {
  // 1,000 tokens over 3 sequences of at most 512: 334 + 333 + 333; and 3 x 300 = 900 caps a budget of 1,000.
  int num_blocks = 0;
  StepInput in = make_profile_step(config(1000, 3), 512, 2, num_blocks);
  EXPECT_EQ(in.token_ids.size(), 1000u);
  EXPECT_EQ(in.seq_lens, (std::vector<int>{334, 333, 333}));
  EXPECT_EQ(in.state_slots, (std::vector<int>{0, 1, 0}));
  expect_well_formed(in, 16, num_blocks, 512);
  in = make_profile_step(config(1000, 3), 300, 0, num_blocks);
  EXPECT_EQ(in.token_ids.size(), 900u);
  expect_well_formed(in, 16, num_blocks, 300);
}

TEST(ProfileStep, MoreSequencesThanTokensGiveOneTokenEach) {
  int num_blocks = 0;
  const StepInput in = make_profile_step(config(100, 256), 4096, 0, num_blocks);
  EXPECT_EQ(in.token_ids.size(), 100u);
  EXPECT_EQ(in.seq_lens.size(), 100u);
  expect_well_formed(in, 16, num_blocks, 4096);
}

}  // namespace
}  // namespace vireo
