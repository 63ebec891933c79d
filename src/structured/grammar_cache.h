// Compiled grammars by the canonical form of their spec, for the life of the server: clients send
// the same response format on every request, so all but the first skip the compilation and, since a
// Grammar carries its matchers' shared token classifications (classification_cache.h), the trie
// walks of the positions earlier requests reached (xgrammar's compiled-grammar cache and adaptive
// token mask cache). Bounded in bytes, grammars and their classifications together; least recently
// used first out. Thread-safe; compilation happens outside the lock.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "structured/grammar.h"
#include "structured/structured_output.h"

namespace vireo::structured {

// The default budget of GrammarCache::global() in MiB (vLLM's VLLM_XGRAMMAR_CACHE_MB is 512 too);
// the environment variable VIREO_GRAMMAR_CACHE_MB overrides it (0: no caching).
inline constexpr size_t kDefaultGrammarCacheMb = 512;

// Equal for specs that compile to the same grammar: the kind, then the schema as compact JSON (its
// key order kept, since properties are generated in schema order), the regex, or the choices.
std::string grammar_cache_key(const StructuredOutputSpec& spec);

// A compiled grammar's own size, without its classifications (approximately).
size_t grammar_bytes(const Grammar& g);

class GrammarCache {
 public:
  explicit GrammarCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The grammar of `spec`: the cached one, or compiled (compile_structured_output, which throws for
  // an unusable spec; failures are not cached) and kept.
  std::shared_ptr<const Grammar> get(const StructuredOutputSpec& spec);

  struct Stats {
    size_t entries = 0;
    size_t bytes = 0;  // grammars, keys and their classifications
    size_t hits = 0;
    size_t misses = 0;
  };
  Stats stats() const;

  // The server's cache, of VIREO_GRAMMAR_CACHE_MB (default kDefaultGrammarCacheMb) MiB.
  static GrammarCache& global();

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Grammar> grammar;
    size_t own_bytes = 0;  // key and grammar; its classifications grow later and are read when counting
  };
  size_t count_bytes_locked() const;

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views of the entries' keys
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace vireo::structured
