// The token classifications of one grammar's positions (token_classifier.h), shared by every
// matcher of that grammar: a request whose grammar was seen before (grammar_cache.h) finds the
// positions earlier requests walked already classified. Masks are filled on several threads at
// once, so lookups and inserts take a lock; classifying happens outside it (two threads may compute
// the same position; the first result stays, and both are equal).
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "structured/vocab_index.h"

namespace vireo::structured {

// Dense classifications are ~19 KB on a 151k vocabulary and a bounded string makes one per
// character: at this many bytes a grammar's classifications are dropped and made again as needed.
inline constexpr size_t kMaxGrammarClassificationBytes = size_t{64} << 20;

class ClassificationCache {
 public:
  explicit ClassificationCache(size_t max_bytes = kMaxGrammarClassificationBytes) : max_bytes_(max_bytes) {}

  // key: what GrammarMatcher makes of a group of tops, prefixed with the vocabulary's id.
  std::shared_ptr<const TokenClassification> find(const std::string& key) const;
  // Stores `c` unless another thread stored one first; returns the stored one.
  std::shared_ptr<const TokenClassification> insert(const std::string& key, std::shared_ptr<const TokenClassification> c);
  // Bytes held now (the grammar cache counts them against its budget).
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  const size_t max_bytes_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const TokenClassification>> map_;
  std::atomic<size_t> bytes_{0};
};

// What one classification stored under `key` costs in memory (approximately).
size_t classification_bytes(const std::string& key, const TokenClassification& c);

}  // namespace vireo::structured
