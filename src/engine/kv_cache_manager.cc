#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace vireo {

namespace {

// The parent hash of a request's first block: 0 for the base model without a cache salt, so such
// requests share blocks; the adapter id and the salt seed the chain otherwise (vLLM's extra keys).
uint64_t root_hash(const Request& req) {
  const SamplingParams& p = req.params;
  if (p.lora_id == 0 && p.cache_salt.empty()) return 0;
  std::vector<int32_t> key = {p.lora_id, static_cast<int32_t>(p.cache_salt.size())};
  for (unsigned char c : p.cache_salt) key.push_back(c);
  return hash_block_tokens(0x6c6f7261ull, key);
}

}  // namespace

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), pool_(num_blocks, enable_prefix_caching) {}

void KvCacheManager::update_block_hashes(Request& req) {
  const int num_full = req.num_tokens() / block_size_;
  for (int i = static_cast<int>(req.block_hashes.size()); i < num_full; ++i) {
    uint64_t parent = i == 0 ? root_hash(req) : req.block_hashes[i - 1];
    std::span<const int32_t> toks(req.all_token_ids.data() + i * block_size_, block_size_);
    req.block_hashes.push_back(hash_block_tokens(parent, toks));
  }
}

ComputedBlocks KvCacheManager::get_computed_blocks(Request& req) {
  ComputedBlocks out;
  if (!pool_.caching_enabled() || req.params.prompt_logprobs) return out;
  update_block_hashes(req);
  // At most num_tokens - 1 tokens can come from the cache: the last one must run for logits.
  const int max_blocks = (req.num_tokens() - 1) / block_size_;
  for (int i = 0; i < max_blocks; ++i) {
    uint64_t parent = i == 0 ? root_hash(req) : req.block_hashes[i - 1];
    std::span<const int32_t> toks(req.all_token_ids.data() + i * block_size_, block_size_);
    auto hit = pool_.get_cached_block(req.block_hashes[i], parent, toks);
    if (!hit) break;
    out.block_ids.push_back(*hit);
  }
  out.num_tokens = static_cast<int>(out.block_ids.size()) * block_size_;
  return out;
}

int KvCacheManager::num_new_blocks(const Request& req, int num_new_tokens, const ComputedBlocks& computed) const {
  const int num_total = req.num_computed_tokens + computed.num_tokens + num_new_tokens;
  const int num_needed_blocks = (num_total + block_size_ - 1) / block_size_;
  const int num_have = static_cast<int>(req.block_ids.size() + computed.block_ids.size());
  return std::max(0, num_needed_blocks - num_have);
}

int KvCacheManager::num_blocks_available(const ComputedBlocks& computed) const {
  // Computed blocks sitting in the free queue stop being free once taken.
  int num_evictable_computed = 0;
  for (int32_t id : computed.block_ids)
    if (pool_.block(id).ref_cnt == 0) ++num_evictable_computed;
  return pool_.num_free_blocks() - num_evictable_computed;
}

int KvCacheManager::num_blocks_short(const Request& req, int num_new_tokens, const ComputedBlocks& computed) const {
  return std::max(0, num_new_blocks(req, num_new_tokens, computed) - num_blocks_available(computed));
}

std::optional<int> KvCacheManager::num_requests_to_free(std::span<const Request* const> candidates, int num_blocks,
                                                        const ComputedBlocks& computed) const {
  if (num_blocks <= 0) return 0;
  const std::unordered_set<int32_t> taken(computed.block_ids.begin(), computed.block_ids.end());
  std::unordered_map<int32_t, int> num_released_refs;  // block id -> holders among the candidates so far
  int num_released = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (int32_t id : candidates[i]->block_ids)
      if (++num_released_refs[id] == pool_.block(id).ref_cnt && !taken.count(id)) ++num_released;
    if (num_released >= num_blocks) return static_cast<int>(i + 1);
  }
  return std::nullopt;
}

bool KvCacheManager::allocate_slots(Request& req, int num_new_tokens, const ComputedBlocks& computed) {
  const int num_fresh = num_new_blocks(req, num_new_tokens, computed);
  if (num_fresh > num_blocks_available(computed)) return false;

  pool_.touch(computed.block_ids);
  req.block_ids.insert(req.block_ids.end(), computed.block_ids.begin(), computed.block_ids.end());
  // Computed blocks are already registered in the cache.
  req.num_hashed_cached_blocks = static_cast<int>(req.block_ids.size());
  if (num_fresh > 0) {
    auto fresh = pool_.get_new_blocks(num_fresh);
    req.block_ids.insert(req.block_ids.end(), fresh.begin(), fresh.end());
  }
  return true;
}

void KvCacheManager::cache_computed_blocks(Request& req) {
  if (!pool_.caching_enabled()) return;
  update_block_hashes(req);
  const int num_full = std::min<int>({req.num_computed_tokens / block_size_, static_cast<int>(req.block_ids.size()),
                                      static_cast<int>(req.block_hashes.size())});
  for (int i = req.num_hashed_cached_blocks; i < num_full; ++i) {
    uint64_t parent = i == 0 ? root_hash(req) : req.block_hashes[i - 1];
    std::span<const int32_t> toks(req.all_token_ids.data() + i * block_size_, block_size_);
    pool_.cache_block(req.block_ids[i], req.block_hashes[i], parent, toks);
  }
  req.num_hashed_cached_blocks = std::max(req.num_hashed_cached_blocks, num_full);
}

void KvCacheManager::free(Request& req) {
  std::vector<int32_t> rev(req.block_ids.rbegin(), req.block_ids.rend());
  pool_.free_blocks(rev);
  req.block_ids.clear();
  req.num_hashed_cached_blocks = 0;
}

void KvCacheManager::record_prefix_stats(int num_query_tokens, int num_hit_tokens) {
  queries_ += static_cast<uint64_t>(num_query_tokens);
  hits_ += static_cast<uint64_t>(num_hit_tokens);
}

}  // namespace vireo
