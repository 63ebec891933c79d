// The KV blocks themselves: ref counts, an LRU free queue, and the prefix-cache hash -> block map.
// Policy (which blocks a request gets) lives in KvCacheManager; this is storage bookkeeping only.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace vireo {

struct KvBlock {
  int32_t block_id = 0;
  int ref_cnt = 0;
  // Set while the block is registered in the prefix cache (full block, K/V computed).
  bool has_hash = false;
  uint64_t hash = 0;
  uint64_t parent_hash = 0;
  std::vector<int32_t> tokens;  // the block's token ids, checked on a hit (64-bit hashes)
  // Intrusive free-queue links (valid while ref_cnt == 0 and not the null block).
  KvBlock* prev_free = nullptr;
  KvBlock* next_free = nullptr;
};

// Doubly linked list of free blocks through KvBlock's links: O(1) pop from the front
// (least recently freed = first to evict), append to the back, and removal from the middle
// (a prefix hit revives a free cached block).
class FreeBlockQueue {
 public:
  FreeBlockQueue();
  FreeBlockQueue(const FreeBlockQueue&) = delete;
  FreeBlockQueue& operator=(const FreeBlockQueue&) = delete;
  KvBlock* pop_front();
  void append(KvBlock* b);
  void remove(KvBlock* b);
  int size() const { return size_; }
  // Front-to-back block ids (tests).
  std::vector<int32_t> ids() const;

 private:
  KvBlock head_, tail_;  // sentinels
  int size_ = 0;
};

// Chained block hash: hash(parent_hash, block token ids).
uint64_t hash_block_tokens(uint64_t parent_hash, std::span<const int32_t> tokens);

class BlockPool {
 public:
  // Block 0 is the null block (padding in block tables); blocks 1..num_blocks-1 are usable.
  BlockPool(int num_blocks, bool enable_caching);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_usable_blocks() const { return num_blocks() - 1; }
  int num_free_blocks() const { return free_.size(); }
  double usage() const;  // fraction of usable blocks in use (ref_cnt > 0)
  bool caching_enabled() const { return enable_caching_; }

  KvBlock& block(int32_t id) { return blocks_[id]; }
  const KvBlock& block(int32_t id) const { return blocks_[id]; }

  // Takes n blocks from the front of the free queue (evicting their cached hashes); ref_cnt = 1.
  // The caller checks num_free_blocks() first.
  std::vector<int32_t> get_new_blocks(int n);
  // The cached block for `hash` whose parent and tokens match, if any.
  std::optional<int32_t> get_cached_block(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;
  // ref_cnt++ on each (taking free ones out of the free queue): a prefix hit.
  void touch(std::span<const int32_t> ids);
  // ref_cnt-- on each in the given order; blocks reaching 0 go to the back of the free queue.
  void free_blocks(std::span<const int32_t> ids);
  // Registers block `id` under `hash` (no-op if that hash is already cached by another block).
  void cache_block(int32_t id, uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens);

  std::vector<int32_t> free_queue_ids() const { return free_.ids(); }
  size_t num_cached_blocks() const { return cached_.size(); }

 private:
  void evict(KvBlock& b);

  bool enable_caching_;
  std::vector<KvBlock> blocks_;
  FreeBlockQueue free_;
  std::unordered_map<uint64_t, int32_t> cached_;
};

}  // namespace vireo
