// The FP8-cache mixed step's prefill share of the SMs (attention_overlap.h): host arithmetic only, so it
// runs without a GPU. The shapes are the session-46 bench's (docs/performance.md), where 50-80% and 80%
// measured best.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend/cuda/attention_overlap.h"

namespace vireo::cuda {
namespace {

// A step of num_decode one-token rows and prompts of the given lengths, Qwen3-8B's heads, contexts to kv.
AttentionParams step(int num_decode, std::vector<int> prompts, int kv) {
  AttentionParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.num_seqs = num_decode + static_cast<int>(prompts.size());
  p.num_prefill_seqs = static_cast<int>(prompts.size());
  p.max_seq_len = kv;
  p.k_cache.dtype = DType::kF8E4M3;
  return p;
}
int64_t tokens(int num_decode, std::vector<int> prompts) {
  int64_t t = num_decode;
  for (int q : prompts) t += q;
  return t;
}

TEST(PrefillSmShare, FollowsTheStepsWork) {
  if (std::getenv("VIREO_ATTN_PREFILL_SM_PCT")) GTEST_SKIP() << "a fixed share is set";
  // A serving step at a 2,048-token budget: ~54% (50-80% measured best).
  const int serving = prefill_sm_share(step(228, {1024, 796}, 1151), tokens(228, {1024, 796}));
  EXPECT_GE(serving, 45);
  EXPECT_LE(serving, 65);
  // An offline step of 7 prompts beside 240 decode rows: ~85% (80% best; 50% lost 27%).
  const int offline = prefill_sm_share(step(240, std::vector<int>(7, 1024), 1151), tokens(240, std::vector<int>(7, 1024)));
  EXPECT_GE(offline, 75);
  EXPECT_LE(offline, 90);
  // A BF16 cache: the decode rows read twice the bytes, so the prompts get a smaller share.
  AttentionParams bf16 = step(228, {1024, 796}, 1151);
  bf16.k_cache.dtype = DType::kBF16;
  EXPECT_LT(prefill_sm_share(bf16, tokens(228, {1024, 796})), serving);
  // The share does not depend on the context hint (both estimates scale with it).
  EXPECT_EQ(prefill_sm_share(step(228, {1024, 796}, 4096), tokens(228, {1024, 796})), serving);
}

TEST(PrefillSmShare, WholeChipWithoutDecodeRowsOrAList) {
  if (std::getenv("VIREO_ATTN_PREFILL_SM_PCT")) GTEST_SKIP() << "a fixed share is set";
  EXPECT_EQ(prefill_sm_share(step(0, {1024, 1024}, 1024), tokens(0, {1024, 1024})), 100);
  EXPECT_EQ(prefill_sm_share(step(2, std::vector<int>(8, 2048), 2048), tokens(2, std::vector<int>(8, 2048))), 100);
  AttentionParams unlisted = step(228, {1024}, 1151);
  unlisted.num_prefill_seqs = -1;
  EXPECT_EQ(prefill_sm_share(unlisted, tokens(228, {1024})), 100);
  // One short chunk beside many decode rows: the floor.
  EXPECT_EQ(prefill_sm_share(step(256, {32}, 2048), tokens(256, {32})), 30);
}

}  // namespace
}  // namespace vireo::cuda
