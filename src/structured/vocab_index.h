// The vocabulary as byte strings, arranged once per tokenizer for mask computation: a byte trie in
// depth-first order (node i's subtree is [i, subtree_end[i]), so a walk skips a dead branch in one
// jump, and the tokens of a subtree are one contiguous run of `tokens`). Shared by every request;
// it also holds the token classifications of the JSON prelude, which every grammar shares.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace vireo::structured {

// Which tokens a set of stack tops accepts without looking below its partial stack
// (token_classifier.h). accepted_ids or accepted_words is used, whichever is smaller.
struct TokenClassification {
  std::vector<int32_t> accepted_ids;
  std::vector<uint32_t> accepted_words;  // [ceil(V / 32)] when many are accepted, else empty
  std::vector<int32_t> uncertain;        // need the full stack to decide
};

class VocabIndex {
 public:
  // token_bytes[id]: what token id decodes to; "" for ids that structured output never produces
  // (special tokens, unused ids).
  explicit VocabIndex(std::vector<std::string> token_bytes);

  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }

  int32_t num_nodes() const { return static_cast<int32_t>(node_byte_.size()); }
  uint8_t node_byte(int32_t i) const { return node_byte_[i]; }
  int32_t node_depth(int32_t i) const { return node_depth_[i]; }
  int32_t subtree_end(int32_t i) const { return subtree_end_[i]; }
  // Tokens ending at nodes [i, j) are tokens()[tok_begin(i), tok_begin(j)).
  int32_t tok_begin(int32_t i) const { return tok_off_[i]; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t max_depth() const { return max_depth_; }
  // Unique in the process (unlike an address, never reused): grammars' shared classification
  // caches key their entries by it, so one grammar can serve several vocabularies.
  uint64_t id() const { return id_; }

  // Classifications of prelude-only stacks, keyed by the grammar's prelude_key and the stack's key.
  std::shared_ptr<const TokenClassification> find_prelude(const std::string& key) const;
  void store_prelude(const std::string& key, std::shared_ptr<const TokenClassification> c) const;
  // Any other value computed once per vocabulary under `key` (made by `make` on first use).
  std::shared_ptr<const void> memo(const std::string& key, const std::function<std::shared_ptr<const void>()>& make) const;

 private:
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> node_byte_;
  std::vector<int32_t> node_depth_;
  std::vector<int32_t> subtree_end_;
  std::vector<int32_t> tok_off_;  // [num_nodes + 1]
  std::vector<int32_t> tokens_;
  int32_t max_depth_ = 0;
  uint64_t id_ = 0;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenClassification>> prelude_cache_;
  mutable std::unordered_map<std::string, std::shared_ptr<const void>> memo_;
};

}  // namespace vireo::structured
