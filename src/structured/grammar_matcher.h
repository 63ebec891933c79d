// One request's position in its grammar: which tokens may come next (a bitmask over the model's
// vocabulary) and the move past each sampled token. Masks come from token classifications of the
// state's top frames (token_classifier.h), cached per grammar position and shared by every matcher
// of the grammar (classification_cache.h), plus a direct check of the few tokens whose acceptance
// depends on the frames further down; whole masks of recurring states (inside a long string) are
// kept in a small cache of the matcher's own.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "structured/classification_cache.h"
#include "structured/grammar.h"
#include "structured/grammar_stack.h"
#include "structured/vocab_index.h"

namespace vireo::structured {

class GrammarMatcher {
 public:
  // stop_token_ids: the tokens that end the output (EOS); allowed once the grammar is complete.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab,
                 std::vector<int32_t> stop_token_ids);

  // Moves past token `id`; false (state unchanged) when the grammar does not allow it here.
  bool accept_token(int32_t id);
  // Moves past raw bytes (tests); false (state unchanged) when they do not fit.
  bool accept_bytes(std::string_view bytes);
  // The output so far is complete: a stop token may end it.
  bool can_terminate() const { return accept_; }
  // Nothing but a stop token can follow (or one was accepted): the request is done.
  bool is_terminated() const { return terminated_ || tops_.empty(); }
  // words: [ceil(V / 32)], V >= the vocabulary's size; bit v set = token v allowed. Overwrites all of it.
  void fill_next_token_bitmask(std::span<uint32_t> words);
  // Token v allowed next (tests: the mask's oracle).
  bool is_allowed(int32_t id);

 private:
  // Tops after `bytes` from `from` (nodes made stay in stack_); false when the bytes die.
  bool run_bytes(const std::vector<StackTop>& from, std::string_view bytes, std::vector<StackTop>& out, bool& accept);
  std::shared_ptr<const TokenClassification> classification(const std::vector<StackTop>& group);
  std::string state_key() const;
  bool is_stop(int32_t id) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  std::vector<int32_t> stop_ids_;
  GrammarStack stack_;
  std::vector<StackTop> tops_;
  bool accept_ = false;
  bool terminated_ = false;
  std::vector<StackTop> scratch_a_, scratch_b_;
  // Classifications of non-prelude groups, by vocabulary id and group key: the grammar's shared ones.
  std::shared_ptr<ClassificationCache> classes_;
  // Whole masks of recent states, by state key (oldest first).
  std::deque<std::pair<std::string, std::vector<uint32_t>>> recent_masks_;
};

}  // namespace vireo::structured
