#include "structured/vocab_index.h"

#include <algorithm>
#include <atomic>
#include <numeric>

namespace vireo::structured {

VocabIndex::VocabIndex(std::vector<std::string> token_bytes) : token_bytes_(std::move(token_bytes)) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_size(); ++id)
    if (!token_bytes_[id].empty()) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return token_bytes_[a] < token_bytes_[b]; });
  // Sorted strings give the trie in depth-first order: each string adds the nodes past its common
  // prefix with the previous one. open[d] is the node at depth d + 1 on the current path.
  std::vector<int32_t> open;
  const std::string* prev = nullptr;
  std::vector<int32_t> node_of_token(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string& s = token_bytes_[ids[k]];
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (open.size() > lcp) {  // close the nodes the new string leaves
      subtree_end_[open.back()] = num_nodes();
      open.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      open.push_back(num_nodes());
      node_byte_.push_back(static_cast<uint8_t>(s[d]));
      node_depth_.push_back(static_cast<int32_t>(d) + 1);
      subtree_end_.push_back(0);
    }
    node_of_token[k] = open.back();
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
    prev = &s;
  }
  while (!open.empty()) {
    subtree_end_[open.back()] = num_nodes();
    open.pop_back();
  }
  // Tokens in node order (sorted strings already are; equal strings share a node).
  tok_off_.assign(num_nodes() + 1, 0);
  for (size_t k = 0; k < ids.size(); ++k) ++tok_off_[node_of_token[k] + 1];
  std::partial_sum(tok_off_.begin(), tok_off_.end(), tok_off_.begin());
  tokens_ = ids;
}

std::shared_ptr<const TokenClassification> VocabIndex::find_prelude(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = prelude_cache_.find(key);
  return it == prelude_cache_.end() ? nullptr : it->second;
}

void VocabIndex::store_prelude(const std::string& key, std::shared_ptr<const TokenClassification> c) const {
  std::lock_guard lock(mu_);
  prelude_cache_.emplace(key, std::move(c));
}

std::shared_ptr<const void> VocabIndex::memo(const std::string& key,
                                             const std::function<std::shared_ptr<const void>()>& make) const {
  std::lock_guard lock(mu_);
  auto& slot = memo_[key];
  if (!slot) slot = make();
  return slot;
}

}  // namespace vireo::structured
