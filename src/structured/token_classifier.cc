#include "structured/token_classifier.h"

namespace vireo::structured {
namespace {

// Below this many accepted tokens a classification keeps ids rather than a full bitmask.
constexpr size_t kMaxSparseAccepted = 2048;

}  // namespace

TokenClassification classify_tokens(GrammarStack& stack, const std::vector<StackTop>& start, const VocabIndex& vocab) {
  TokenClassification c;
  const int32_t depth_cap = vocab.max_depth() + 1;
  // levels[d]: the tops after the first d bytes of the current trie path.
  std::vector<std::vector<StackTop>> levels(depth_cap + 1);
  std::vector<char> cut_above(depth_cap + 1, 0);  // the stack reached the cut within the first d bytes
  std::vector<size_t> marks(depth_cap + 1, 0);
  levels[0] = start;
  marks[0] = stack.mark();
  const std::vector<int32_t>& toks = vocab.tokens();
  auto add_range = [&](std::vector<int32_t>& dst, int32_t node_begin, int32_t node_end) {
    dst.insert(dst.end(), toks.begin() + vocab.tok_begin(node_begin), toks.begin() + vocab.tok_begin(node_end));
  };
  const int32_t n = vocab.num_nodes();
  int32_t i = 0;
  while (i < n) {
    const int32_t d = vocab.node_depth(i);
    stack.rollback(marks[d - 1]);
    std::vector<StackTop>& here = levels[d];
    here.clear();
    ExpandFlags flags;
    stack.advance(levels[d - 1], vocab.node_byte(i), here, flags);
    const int32_t end = vocab.subtree_end(i);
    if (here.empty() && !flags.accept && !flags.base) {
      if (cut_above[d - 1]) add_range(c.uncertain, i, end);
      i = end;
      continue;
    }
    // Tokens ending here are consumed: mid-rule, at the root's end, or exactly at the cut (the
    // real stack below always has a continuation there).
    add_range(c.accepted_ids, i, i + 1);
    cut_above[d] = cut_above[d - 1] || flags.base;
    if (here.empty()) {  // nothing more can be consumed above the cut
      if (cut_above[d]) add_range(c.uncertain, i + 1, end);
      i = end;
      continue;
    }
    marks[d] = stack.mark();
    ++i;
  }
  stack.rollback(marks[0]);
  if (c.accepted_ids.size() > kMaxSparseAccepted) {
    c.accepted_words.assign((vocab.vocab_size() + 31) / 32, 0);
    for (int32_t id : c.accepted_ids) c.accepted_words[id >> 5] |= uint32_t{1} << (id & 31);
    c.accepted_ids.clear();
    c.accepted_ids.shrink_to_fit();
  }
  return c;
}

}  // namespace vireo::structured
