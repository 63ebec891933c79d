// Which KV blocks a request holds: prefix-cache lookups, slot allocation, freeing.
// Hides the BlockPool from the scheduler (vLLM v1's KVCacheManager).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/block_pool.h"
#include "engine/request.h"

namespace vireo {

struct ComputedBlocks {
  std::vector<int32_t> block_ids;  // leading full blocks found in the prefix cache
  int num_tokens = 0;              // block_ids.size() * block_size
};

class KvCacheManager {
 public:
  KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching);

  int block_size() const { return block_size_; }
  // Longest cached prefix of the request's tokens, in full blocks. A full hit still leaves at
  // least one token to compute (its logits are needed). Empty when caching is off or the
  // request wants prompt logprobs (every prompt position must run).
  ComputedBlocks get_computed_blocks(Request& req);
  // Makes room for num_new_tokens more tokens after req.num_computed_tokens (+ the computed
  // blocks, which are taken for the request). false (nothing changed) if not enough free blocks.
  bool allocate_slots(Request& req, int num_new_tokens, const ComputedBlocks& computed = {});
  // How many more free blocks allocate_slots(req, num_new_tokens, computed) would need (0: it succeeds).
  int num_blocks_short(const Request& req, int num_new_tokens, const ComputedBlocks& computed) const;
  // How many of `candidates`, freed in this order, release num_blocks blocks that a request taking
  // `computed` could use; nullopt if all of them do not. A block is released once all its holders are
  // freed (prefix sharing), and one of `computed` is taken again, so neither counts until then.
  std::optional<int> num_requests_to_free(std::span<const Request* const> candidates, int num_blocks,
                                          const ComputedBlocks& computed) const;
  // Registers the request's full, computed blocks (first req.num_computed_tokens tokens) in the
  // prefix cache.
  void cache_computed_blocks(Request& req);
  // Releases all the request's blocks, last block first to the free queue (evicted first).
  void free(Request& req);

  int num_free_blocks() const { return pool_.num_free_blocks(); }
  int num_total_blocks() const { return pool_.num_usable_blocks(); }
  double usage() const { return pool_.usage(); }
  // Prefix-cache counters, in tokens (vLLM's prefix_cache_queries / hits).
  void record_prefix_stats(int num_query_tokens, int num_hit_tokens);
  uint64_t prefix_cache_queries() const { return queries_; }
  uint64_t prefix_cache_hits() const { return hits_; }
  BlockPool& pool() { return pool_; }

 private:
  void update_block_hashes(Request& req);
  int num_new_blocks(const Request& req, int num_new_tokens, const ComputedBlocks& computed) const;
  int num_blocks_available(const ComputedBlocks& computed) const;  // free, less computed ones in the free queue

  int block_size_;
  BlockPool pool_;
  uint64_t queries_ = 0, hits_ = 0;
};

}  // namespace vireo
