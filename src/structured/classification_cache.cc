#include "structured/classification_cache.h"

#include <mutex>

namespace vireo::structured {

size_t classification_bytes(const std::string& key, const TokenClassification& c) {
  constexpr size_t kOverhead = 128;  // map node, shared_ptr control block, vector headers
  return kOverhead + key.capacity() + 4 * (c.accepted_ids.capacity() + c.accepted_words.capacity() + c.uncertain.capacity());
}

std::shared_ptr<const TokenClassification> ClassificationCache::find(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

std::shared_ptr<const TokenClassification> ClassificationCache::insert(const std::string& key,
                                                                       std::shared_ptr<const TokenClassification> c) {
  const size_t add = classification_bytes(key, *c);
  std::unique_lock lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) return it->second;
  // Matchers hold the classifications they use by shared_ptr, so dropping them all is safe.
  if (bytes_.load(std::memory_order_relaxed) + add > max_bytes_) {
    map_.clear();
    bytes_.store(0, std::memory_order_relaxed);
  }
  map_.emplace(key, c);
  bytes_.fetch_add(add, std::memory_order_relaxed);
  return c;
}

}  // namespace vireo::structured
