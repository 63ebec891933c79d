#include "engine/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace vireo {

FreeBlockQueue::FreeBlockQueue() {
  head_.next_free = &tail_;
  tail_.prev_free = &head_;
}

KvBlock* FreeBlockQueue::pop_front() {
  if (size_ == 0) return nullptr;
  KvBlock* b = head_.next_free;
  remove(b);
  return b;
}

void FreeBlockQueue::append(KvBlock* b) {
  KvBlock* last = tail_.prev_free;
  last->next_free = b;
  b->prev_free = last;
  b->next_free = &tail_;
  tail_.prev_free = b;
  ++size_;
}

void FreeBlockQueue::remove(KvBlock* b) {
  if (!b->prev_free || !b->next_free) throw Error("FreeBlockQueue::remove: block " + std::to_string(b->block_id) + " is not free");
  b->prev_free->next_free = b->next_free;
  b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = nullptr;
  --size_;
}

std::vector<int32_t> FreeBlockQueue::ids() const {
  std::vector<int32_t> out;
  for (const KvBlock* b = head_.next_free; b != &tail_; b = b->next_free) out.push_back(b->block_id);
  return out;
}

static inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_block_tokens(uint64_t parent_hash, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent_hash ^ 0x7669726f6b766331ULL);
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t));
  return mix64(h ^ tokens.size());
}

BlockPool::BlockPool(int num_blocks, bool enable_caching) : enable_caching_(enable_caching) {
  if (num_blocks < 2) throw Error("KV cache: need at least 2 blocks (block 0 is reserved), got " + std::to_string(num_blocks));
  blocks_.resize(num_blocks);
  for (int i = 0; i < num_blocks; ++i) blocks_[i].block_id = i;
  blocks_[0].ref_cnt = 1;  // the null block is never free
  for (int i = 1; i < num_blocks; ++i) free_.append(&blocks_[i]);
}

double BlockPool::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_usable_blocks());
}

void BlockPool::evict(KvBlock& b) {
  if (!b.has_hash) return;
  auto it = cached_.find(b.hash);
  if (it != cached_.end() && it->second == b.block_id) cached_.erase(it);
  b.has_hash = false;
  b.tokens.clear();
}

std::vector<int32_t> BlockPool::get_new_blocks(int n) {
  if (n > num_free_blocks()) throw Error("BlockPool: asked for " + std::to_string(n) + " blocks, " + std::to_string(num_free_blocks()) + " free");
  std::vector<int32_t> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    KvBlock* b = free_.pop_front();
    evict(*b);
    b->ref_cnt = 1;
    out.push_back(b->block_id);
  }
  return out;
}

std::optional<int32_t> BlockPool::get_cached_block(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const {
  if (!enable_caching_) return std::nullopt;
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  const KvBlock& b = blocks_[it->second];
  if (b.parent_hash != parent_hash || !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return b.block_id;
}

void BlockPool::touch(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    KvBlock& b = blocks_[id];
    if (b.ref_cnt == 0) free_.remove(&b);
    ++b.ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id == 0) continue;
    KvBlock& b = blocks_[id];
    if (b.ref_cnt <= 0) throw Error("BlockPool: double free of block " + std::to_string(id));
    if (--b.ref_cnt == 0) free_.append(&b);
  }
}

void BlockPool::cache_block(int32_t id, uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) {
  if (!enable_caching_) return;
  KvBlock& b = blocks_[id];
  if (b.has_hash) return;
  if (cached_.count(hash)) return;  // an identical block is already cached; this one stays private
  b.has_hash = true;
  b.hash = hash;
  b.parent_hash = parent_hash;
  b.tokens.assign(tokens.begin(), tokens.end());
  cached_.emplace(hash, id);
}

}  // namespace vireo
