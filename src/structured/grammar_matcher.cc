#include "structured/grammar_matcher.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "structured/string_budget_classifier.h"
#include "structured/token_classifier.h"

namespace vireo::structured {
namespace {

// Ancestors copied above the cut when classifying a group of tops: two keep a string's character
// loop and its closing quote inside the classified frames, so only tokens running past the string
// need the real stack.
constexpr int kContextDepth = 2;
constexpr size_t kMaxRecentMasks = 8;
// Parser configurations one token mask may visit (classification walks included). The heaviest real
// masks (a string's first character: a walk of nearly the whole 150k-token trie) visit a few million;
// ~50M a second on one core. VIREO_MAX_MASK_WORK overrides it (tests).
uint64_t max_mask_work() {
  const char* e = std::getenv("VIREO_MAX_MASK_WORK");
  return e && *e ? std::strtoull(e, nullptr, 10) : uint64_t{64} << 20;
}

void append_int(std::string& key, int32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab,
                               std::vector<int32_t> stop_token_ids)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), stop_ids_(std::move(stop_token_ids)), stack_(*grammar_),
      classes_(grammar_->classifications ? grammar_->classifications : std::make_shared<ClassificationCache>()) {
  ExpandFlags flags;
  stack_.expand_rule(grammar_->root_rule, kRootParent, tops_, flags);
  accept_ = flags.accept;
}

bool GrammarMatcher::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

bool GrammarMatcher::run_bytes(const std::vector<StackTop>& from, std::string_view bytes, std::vector<StackTop>& out,
                               bool& accept) {
  scratch_a_ = from;
  ExpandFlags flags;
  flags.accept = accept;
  for (unsigned char b : bytes) {
    if (scratch_a_.empty()) return false;
    scratch_b_.clear();
    flags = {};
    stack_.advance(scratch_a_, b, scratch_b_, flags);
    std::swap(scratch_a_, scratch_b_);
  }
  if (scratch_a_.empty() && !flags.accept) return false;
  out = scratch_a_;
  accept = flags.accept;
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return bytes.empty();
  const size_t mark = stack_.mark();
  std::vector<StackTop> next;
  bool accept = accept_;
  if (!run_bytes(tops_, bytes, next, accept)) {
    stack_.rollback(mark);
    return false;
  }
  tops_ = std::move(next);
  accept_ = accept;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (is_stop(id)) {
    if (!accept_) return false;
    terminated_ = true;
    return true;
  }
  if (terminated_ || id < 0 || id >= vocab_->vocab_size() || vocab_->token_bytes(id).empty()) return false;
  return accept_bytes(vocab_->token_bytes(id));
}

bool GrammarMatcher::is_allowed(int32_t id) {
  if (is_stop(id)) return accept_ && !terminated_;
  if (terminated_ || id < 0 || id >= vocab_->vocab_size() || vocab_->token_bytes(id).empty()) return false;
  const size_t mark = stack_.mark();
  std::vector<StackTop> next;
  bool accept = accept_;
  const bool ok = run_bytes(tops_, vocab_->token_bytes(id), next, accept);
  stack_.rollback(mark);
  return ok;
}

std::string GrammarMatcher::state_key() const {
  std::string key;
  for (const StackTop& t : tops_) {
    append_int(key, t.pos);
    for (int32_t p = t.parent; p >= 0; p = stack_.node(p).parent) append_int(key, stack_.node(p).pos);
    append_int(key, -1);
  }
  key.push_back(accept_ ? 'A' : 'N');
  return key;
}

std::shared_ptr<const TokenClassification> GrammarMatcher::classification(const std::vector<StackTop>& group) {
  // Key: the group's positions, then up to kContextDepth ancestors and whether the chain ends there.
  std::vector<int32_t> chain;
  int32_t p = group[0].parent;
  while (p >= 0 && static_cast<int>(chain.size()) < kContextDepth) {
    chain.push_back(stack_.node(p).pos);
    p = stack_.node(p).parent;
  }
  const bool exact = p == kRootParent;
  std::string key;
  bool prelude = !grammar_->prelude_key.empty();
  for (const StackTop& t : group) {
    append_int(key, t.pos);
    prelude = prelude && t.pos < grammar_->num_prelude_elements;
  }
  key.push_back('|');
  for (int32_t pos : chain) {
    append_int(key, pos);
    prelude = prelude && pos < grammar_->num_prelude_elements;
  }
  key.push_back(exact ? 'R' : 'B');
  if (prelude) {
    key = grammar_->prelude_key + '\0' + key;
    if (auto c = vocab_->find_prelude(key)) return c;
  } else {
    const uint64_t vocab_id = vocab_->id();
    key.insert(0, reinterpret_cast<const char*>(&vocab_id), sizeof(vocab_id));
    if (auto c = classes_->find(key)) return c;
  }
  const size_t mark = stack_.mark();
  int32_t parent = exact ? kRootParent : kBaseParent;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) parent = stack_.push(*it, parent);
  std::vector<StackTop> start = group;
  for (StackTop& t : start) t.parent = parent;
  std::optional<TokenClassification> bounded = classify_bounded_string(stack_, group, *vocab_);
  auto c = std::make_shared<const TokenClassification>(bounded ? std::move(*bounded) : classify_tokens(stack_, start, *vocab_));
  stack_.rollback(mark);
  if (prelude) {
    vocab_->store_prelude(key, c);
    return c;
  }
  return classes_->insert(key, std::move(c));
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  auto set_bit = [&](int32_t id) {
    if (id >= 0 && static_cast<size_t>(id) < words.size() * 32) words[id >> 5] |= uint32_t{1} << (id & 31);
  };
  if (terminated_) return;
  const std::string key = state_key();
  for (const auto& [k, mask] : recent_masks_) {
    if (k == key) {
      std::copy_n(mask.begin(), std::min(mask.size(), words.size()), words.begin());
      return;
    }
  }
  // One mask's classification work is bounded (~1-2 s of one core): past it the mask throws and only
  // this request fails (the engine gives its row the stop tokens and finishes it with the error).
  struct Budget {
    GrammarStack& s;
    explicit Budget(GrammarStack& st) : s(st) { s.set_work_budget(max_mask_work()); }
    ~Budget() { s.set_work_budget(~uint64_t{0}); }
  } budget(stack_);
  // Tops sharing a return node form one group, classified together.
  std::vector<StackTop> sorted = tops_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const StackTop& a, const StackTop& b) { return a.parent < b.parent; });
  std::vector<StackTop> group, next;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j].parent == sorted[i].parent) ++j;
    group.assign(sorted.begin() + i, sorted.begin() + j);
    std::sort(group.begin(), group.end(), [](const StackTop& a, const StackTop& b) { return a.pos < b.pos; });
    i = j;
    auto c = classification(group);
    if (!c->accepted_words.empty()) {
      const size_t n = std::min(words.size(), c->accepted_words.size());
      for (size_t w = 0; w < n; ++w) words[w] |= c->accepted_words[w];
    }
    for (int32_t id : c->accepted_ids) set_bit(id);
    for (int32_t id : c->uncertain) {
      if ((words[id >> 5] >> (id & 31)) & 1) continue;
      const size_t mark = stack_.mark();
      bool accept = false;
      if (run_bytes(group, vocab_->token_bytes(id), next, accept)) set_bit(id);
      stack_.rollback(mark);
    }
  }
  // A state no token can continue (a character the vocabulary cannot spell) ends the output rather
  // than sampling from nothing.
  const bool none = std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; });
  if (accept_ || none)
    for (int32_t id : stop_ids_) set_bit(id);
  if (recent_masks_.size() >= kMaxRecentMasks) recent_masks_.pop_front();
  recent_masks_.emplace_back(key, std::vector<uint32_t>(words.begin(), words.end()));
}

}  // namespace vireo::structured
