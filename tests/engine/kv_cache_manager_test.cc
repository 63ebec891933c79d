#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include "token_seq.h"

namespace vireo {
namespace {

using testing::seq;

// Admits a request the way the scheduler does and marks its whole prompt computed.
void run_prefill(KvCacheManager& kv, Request& r) {
  auto c = kv.get_computed_blocks(r);
  ASSERT_TRUE(kv.allocate_slots(r, r.num_tokens() - c.num_tokens, c));
  r.num_computed_tokens = r.num_tokens();
  kv.cache_computed_blocks(r);
}

TEST(KvCacheManager, AllocatesCeilBlocks) {
  KvCacheManager kv(11, 4, true);
  Request r("a", seq(9), {}, 0);
  ASSERT_TRUE(kv.allocate_slots(r, 9));
  EXPECT_EQ(r.block_ids.size(), 3u);
  r.num_computed_tokens = 9;
  ASSERT_TRUE(kv.allocate_slots(r, 3));  // 12 tokens still fit in 3 blocks
  EXPECT_EQ(r.block_ids.size(), 3u);
  r.num_computed_tokens = 12;
  ASSERT_TRUE(kv.allocate_slots(r, 1));
  EXPECT_EQ(r.block_ids.size(), 4u);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_FALSE(kv.allocate_slots(r, 40));  // would need 13 blocks
  EXPECT_EQ(r.block_ids.size(), 4u);       // unchanged on failure
  kv.free(r);
  EXPECT_EQ(kv.num_free_blocks(), kv.num_total_blocks());
}

TEST(KvCacheManager, SecondIdenticalPromptHitsFullBlocks) {
  KvCacheManager kv(20, 4, true);
  Request a("a", seq(10), {}, 0);
  run_prefill(kv, a);
  Request b("b", seq(10), {}, 0);
  auto c = kv.get_computed_blocks(b);
  EXPECT_EQ(c.num_tokens, 8);  // two full blocks; the partial third is not cached
  EXPECT_EQ(c.block_ids, (std::vector<int32_t>(a.block_ids.begin(), a.block_ids.begin() + 2)));
  ASSERT_TRUE(kv.allocate_slots(b, 2, c));
  EXPECT_EQ(kv.pool().block(a.block_ids[0]).ref_cnt, 2);
  EXPECT_NE(b.block_ids[2], a.block_ids[2]);
  // A different prompt sharing only the first block.
  auto p = seq(10);
  p[5] = 49;
  Request d("d", p, {}, 0);
  EXPECT_EQ(kv.get_computed_blocks(d).num_tokens, 4);
  kv.free(a);
  kv.free(b);
  EXPECT_EQ(kv.num_free_blocks(), kv.num_total_blocks());
}

TEST(KvCacheManager, FullPromptHitLeavesOneTokenToCompute) {
  KvCacheManager kv(20, 4, true);
  Request a("a", seq(8), {}, 0);
  run_prefill(kv, a);
  Request b("b", seq(8), {}, 0);
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 4);  // not 8
}

TEST(KvCacheManager, PromptLogprobsAndCachingOffSkipTheCache) {
  KvCacheManager kv(20, 4, true);
  Request a("a", seq(10), {}, 0);
  run_prefill(kv, a);
  SamplingParams sp;
  sp.prompt_logprobs = 1;
  Request b("b", seq(10), sp, 0);
  EXPECT_EQ(kv.get_computed_blocks(b).num_tokens, 0);

  KvCacheManager off(20, 4, false);
  Request c("c", seq(10), {}, 0);
  run_prefill(off, c);
  Request d("d", seq(10), {}, 0);
  EXPECT_EQ(off.get_computed_blocks(d).num_tokens, 0);
}

TEST(KvCacheManager, FreeIsReverseOrderSoTailBlocksAreEvictedFirst) {
  KvCacheManager kv(7, 4, true);  // 6 usable blocks
  Request a("a", seq(12), {}, 0);
  run_prefill(kv, a);  // blocks 1,2,3 (all full, all cached)
  kv.free(a);
  auto q = kv.pool().free_queue_ids();
  // Never-used blocks first, then a's blocks last-first.
  EXPECT_EQ(q, (std::vector<int32_t>{4, 5, 6, 3, 2, 1}));
  // Take 4 blocks: the 3 never-used ones and then a's last block (3), evicting its hash.
  Request b("b", seq(16, 20), {}, 0);
  ASSERT_TRUE(kv.allocate_slots(b, 16));
  EXPECT_EQ(b.block_ids, (std::vector<int32_t>{4, 5, 6, 3}));
  // a's prefix now hits only its first two blocks.
  Request c("c", seq(13), {}, 0);
  auto hit = kv.get_computed_blocks(c);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.block_ids, (std::vector<int32_t>{1, 2}));
  // Taking the hit blocks removes them from the free queue (they are free: ref 0).
  kv.free(b);
  ASSERT_TRUE(kv.allocate_slots(c, 5, hit));
  EXPECT_EQ(kv.num_free_blocks(), 2);
  EXPECT_EQ(kv.pool().block(1).ref_cnt, 1);
  kv.free(c);
  EXPECT_EQ(kv.num_free_blocks(), 6);
}

TEST(KvCacheManager, HitBlocksInFreeQueueCountAgainstFreeSpace) {
  KvCacheManager kv(4, 4, true);  // 3 usable
  Request a("a", seq(8), {}, 0);
  run_prefill(kv, a);
  kv.free(a);  // both cached, free
  Request b("b", seq(13), {}, 0);
  auto hit = kv.get_computed_blocks(b);
  ASSERT_EQ(hit.num_tokens, 8);
  // Needs 4 blocks total: 2 hits (taken from the free queue) + 2 new; only 1 left after the hits.
  EXPECT_FALSE(kv.allocate_slots(b, 5, hit));
  EXPECT_EQ(kv.num_free_blocks(), 3);
  EXPECT_TRUE(b.block_ids.empty());
}

TEST(KvCacheManager, UsageAndCounters) {
  KvCacheManager kv(5, 4, true);
  Request a("a", seq(8), {}, 0);
  ASSERT_TRUE(kv.allocate_slots(a, 8));
  EXPECT_DOUBLE_EQ(kv.usage(), 0.5);
  kv.record_prefix_stats(8, 4);
  kv.record_prefix_stats(10, 0);
  EXPECT_EQ(kv.prefix_cache_queries(), 18u);
  EXPECT_EQ(kv.prefix_cache_hits(), 4u);
}

}  // namespace
}  // namespace vireo
