#include "structured/grammar_cache.h"

#include <algorithm>
#include <cstdlib>

#include "structured/classification_cache.h"

namespace vireo::structured {
namespace {

void append_size(std::string& key, size_t n) { key.append(reinterpret_cast<const char*>(&n), sizeof(n)); }

size_t classifications_bytes(const Grammar& g) { return g.classifications ? g.classifications->bytes() : 0; }

}  // namespace

std::string grammar_cache_key(const StructuredOutputSpec& spec) {
  using Kind = StructuredOutputSpec::Kind;
  switch (spec.kind) {
    case Kind::kJsonObject:
      return "o";
    case Kind::kJsonSchema:
      return "s" + spec.schema.dump();
    case Kind::kRegex:
      return "r" + spec.regex;
    case Kind::kChoice: {
      std::string key = "c";
      for (const std::string& c : spec.choices) {  // length-prefixed: choices may hold any byte
        append_size(key, c.size());
        key += c;
      }
      return key;
    }
  }
  return "?";
}

size_t grammar_bytes(const Grammar& g) {
  size_t n = sizeof(Grammar) + g.elements.capacity() * sizeof(GrammarElement) + g.byte_sets.capacity() * sizeof(ByteSet) +
             g.prelude_key.capacity() + g.string_budgets.size() * (sizeof(StringBudget) + 32);
  for (const auto& alts : g.rule_alts) n += sizeof(alts) + alts.capacity() * sizeof(int32_t);
  for (const auto& name : g.rule_names) n += sizeof(name) + name.capacity();
  return n;
}

std::shared_ptr<const Grammar> GrammarCache::get(const StructuredOutputSpec& spec) {
  std::string key = grammar_cache_key(spec);
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    ++misses_;
  }
  std::shared_ptr<const Grammar> g = compile_structured_output(spec);
  const size_t own = key.capacity() + grammar_bytes(*g) + 128;  // the index holds a view of the key, not a copy
  if (own > max_bytes_) return g;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->grammar;  // another thread was first
  // Classifications grow after their grammar is added, so the total is counted afresh here.
  size_t total = count_bytes_locked();
  while (!lru_.empty() && total + own > max_bytes_) {
    const Entry& last = lru_.back();
    total -= std::min(total, last.own_bytes + classifications_bytes(*last.grammar));  // they may have grown since
    index_.erase(last.key);
    lru_.pop_back();  // requests using it keep it alive
  }
  lru_.push_front({std::move(key), g, own});
  index_.emplace(lru_.front().key, lru_.begin());
  return g;
}

size_t GrammarCache::count_bytes_locked() const {
  size_t total = 0;
  for (const Entry& e : lru_) total += e.own_bytes + classifications_bytes(*e.grammar);
  return total;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mu_);
  return {lru_.size(), count_bytes_locked(), hits_, misses_};
}

GrammarCache& GrammarCache::global() {
  static GrammarCache cache([] {
    size_t mb = kDefaultGrammarCacheMb;
    if (const char* env = std::getenv("VIREO_GRAMMAR_CACHE_MB"); env && *env) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 10);
      if (*end == '\0') mb = static_cast<size_t>(v);
    }
    return mb << 20;
  }());
  return cache;
}

}  // namespace vireo::structured
