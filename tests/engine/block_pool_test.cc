#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vireo {
namespace {

TEST(FreeBlockQueue, PopAppendRemoveKeepOrder) {
  std::vector<KvBlock> blocks(5);
  FreeBlockQueue q;
  for (int i = 0; i < 5; ++i) {
    blocks[i].block_id = i;
    q.append(&blocks[i]);
  }
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  q.remove(&blocks[2]);  // O(1) from the middle
  q.remove(&blocks[4]);  // the tail
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(q.pop_front()->block_id, 0);
  q.append(&blocks[2]);
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{1, 3, 2}));
  EXPECT_EQ(q.size(), 3);
  EXPECT_THROW(q.remove(&blocks[0]), Error);  // not in the queue
}

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(4, true);
  EXPECT_EQ(pool.num_usable_blocks(), 3);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  auto ids = pool.get_new_blocks(3);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
  EXPECT_THROW(pool.get_new_blocks(1), Error);
  pool.free_blocks(ids);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_THROW(pool.free_blocks(std::vector<int32_t>{1}), Error);  // double free
}

TEST(BlockPool, RefCountsAndCachedHits) {
  BlockPool pool(4, true);
  auto ids = pool.get_new_blocks(1);
  std::vector<int32_t> toks{1, 2, 3, 4};
  uint64_t h = hash_block_tokens(0, toks);
  pool.cache_block(ids[0], h, 0, toks);
  ASSERT_EQ(pool.get_cached_block(h, 0, toks), ids[0]);
  std::vector<int32_t> other{1, 2, 3, 5};
  EXPECT_FALSE(pool.get_cached_block(h, 0, other).has_value());  // tokens verified
  EXPECT_FALSE(pool.get_cached_block(h, 7, toks).has_value());   // parent verified
  pool.touch(ids);  // shared by a second request
  EXPECT_EQ(pool.block(ids[0]).ref_cnt, 2);
  pool.free_blocks(ids);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  pool.free_blocks(ids);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  // Still cached while free; a hit takes it out of the free queue.
  ASSERT_EQ(pool.get_cached_block(h, 0, toks), ids[0]);
  pool.touch(ids);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  pool.free_blocks(ids);
  // Reusing it for new data evicts the hash.
  pool.get_new_blocks(3);
  EXPECT_FALSE(pool.get_cached_block(h, 0, toks).has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 0u);
}

TEST(BlockPool, HashChainsOnParent) {
  std::vector<int32_t> toks{9, 8, 7};
  EXPECT_NE(hash_block_tokens(0, toks), hash_block_tokens(1, toks));
  EXPECT_EQ(hash_block_tokens(5, toks), hash_block_tokens(5, toks));
  std::vector<int32_t> toks2{9, 8, 6};
  EXPECT_NE(hash_block_tokens(0, toks), hash_block_tokens(0, toks2));
}

TEST(BlockPool, CachingOffNeverHits) {
  BlockPool pool(3, false);
  auto ids = pool.get_new_blocks(1);
  std::vector<int32_t> toks{1};
  uint64_t h = hash_block_tokens(0, toks);
  pool.cache_block(ids[0], h, 0, toks);
  EXPECT_FALSE(pool.get_cached_block(h, 0, toks).has_value());
}

}  // namespace
}  // namespace vireo
