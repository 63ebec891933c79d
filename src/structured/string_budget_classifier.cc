#include "structured/string_budget_classifier.h"

#include <algorithm>
#include <climits>

namespace vireo::structured {
namespace {

enum ProfileKind : uint8_t { kNotString, kInString, kCloses, kClosesThenMore };

struct StringTokenProfile {
  ProfileKind kind = kNotString;
  int32_t chars = 0;  // characters started before the end or the closing quote
};

std::vector<int32_t> char_starts(const Grammar& g) {
  std::vector<int32_t> s = g.rule_alts[g.char_rule];
  std::sort(s.begin(), s.end());
  return s;
}

// Every token run from the start of a character of an unbounded string (the prelude's char, chars
// loop and closing quote, cut below the quote). The string text automaton is deterministic: at most
// one top takes each byte.
std::vector<StringTokenProfile> profile_tokens(const Grammar& g, const VocabIndex& vocab) {
  GrammarStack stack(g);
  const std::vector<int32_t> starts = char_starts(g);
  const int32_t close_pos = g.rule_alts[g.string_rule][0] + 2;   // '"' chars '"'
  const int32_t loop_pos = g.rule_alts[g.chars_rule][1] + 1;      // chars ::= char chars
  const int32_t parent = stack.push(loop_pos, stack.push(close_pos, kBaseParent));
  std::vector<StackTop> start;
  for (int32_t p : starts) start.push_back({p, parent});
  const size_t mark = stack.mark();
  std::vector<StringTokenProfile> out(vocab.vocab_size());
  std::vector<StackTop> cur, next;
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    const std::string& bytes = vocab.token_bytes(id);
    if (bytes.empty()) continue;
    stack.rollback(mark);
    cur = start;
    StringTokenProfile p;
    p.kind = kInString;
    for (size_t i = 0; i < bytes.size(); ++i) {
      const uint8_t b = static_cast<uint8_t>(bytes[i]);
      bool starts_char = false, closes = false;
      for (const StackTop& t : cur) {
        if (!byte_set_has(g.byte_sets[g.elements[t.pos].arg], b)) continue;
        starts_char |= std::binary_search(starts.begin(), starts.end(), t.pos);
        closes |= t.pos == close_pos;
      }
      next.clear();
      ExpandFlags flags;
      stack.advance(cur, b, next, flags);
      p.chars += starts_char;
      if (closes) {
        p.kind = i + 1 == bytes.size() ? kCloses : kClosesThenMore;
        break;
      }
      if (next.empty()) {
        p.kind = kNotString;
        break;
      }
      std::swap(cur, next);
    }
    out[id] = p;
  }
  return out;
}

}  // namespace

std::optional<TokenClassification> classify_bounded_string(const GrammarStack& stack, const std::vector<StackTop>& group,
                                                           const VocabIndex& vocab) {
  const Grammar& g = stack.grammar();
  if (g.char_rule < 0 || g.string_budgets.empty()) return std::nullopt;
  const int32_t parent = group[0].parent;
  if (parent < 0) return std::nullopt;
  // The group: every character start (sorted by position, as the matcher sorts groups), returning to
  // `chr c_{k+1}`'s tail reference, whose caller returns to the bounded string's closing quote.
  const std::vector<int32_t> starts = char_starts(g);
  if (group.size() != starts.size()) return std::nullopt;
  for (size_t i = 0; i < group.size(); ++i)
    if (group[i].pos != starts[i]) return std::nullopt;
  const StackNode& ret = stack.node(parent);
  const GrammarElement& tail = g.elements[ret.pos];
  if (tail.kind != GrammarElement::kRule || g.elements[ret.pos + 1].kind != GrammarElement::kEnd) return std::nullopt;
  auto budget = g.string_budgets.find(tail.arg);
  if (budget == g.string_budgets.end() || ret.parent < 0) return std::nullopt;
  const StackNode& close = stack.node(ret.parent);
  if (g.elements[close.pos].kind != GrammarElement::kBytes || g.elements[close.pos + 1].kind != GrammarElement::kEnd ||
      !byte_set_has(g.byte_sets[g.elements[close.pos].arg], '"'))
    return std::nullopt;
  const bool at_root = close.parent == kRootParent;  // nothing may follow the string

  auto profiles = std::static_pointer_cast<const std::vector<StringTokenProfile>>(
      vocab.memo(g.prelude_key + "\0string-profiles", [&] {
        return std::make_shared<const std::vector<StringTokenProfile>>(profile_tokens(g, vocab));
      }));
  // This character and then between min_more and max_more more.
  const int64_t lo = int64_t{budget->second.min_more} + 1, hi = int64_t{budget->second.max_more} + 1;
  TokenClassification c;
  c.accepted_words.assign((vocab.vocab_size() + 31) / 32, 0);
  auto accept = [&](int32_t id) { c.accepted_words[id >> 5] |= uint32_t{1} << (id & 31); };
  for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
    const StringTokenProfile& p = (*profiles)[id];
    switch (p.kind) {
      case kNotString: break;
      case kInString:
        if (p.chars <= hi) accept(id);
        break;
      case kCloses:
        if (p.chars >= lo && p.chars <= hi) accept(id);
        break;
      case kClosesThenMore:
        if (p.chars >= lo && p.chars <= hi && !at_root) c.uncertain.push_back(id);
        break;
    }
  }
  return c;
}

}  // namespace vireo::structured
