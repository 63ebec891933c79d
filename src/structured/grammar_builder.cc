#include "structured/grammar_builder.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "structured/classification_cache.h"
#include "structured/grammar_stack.h"

namespace vireo::structured {

int32_t GrammarBuilder::new_rule(std::string name) {
  names_.push_back(std::move(name));
  alts_.emplace_back();
  return static_cast<int32_t>(alts_.size()) - 1;
}

void GrammarBuilder::add_alt(int32_t rule, std::vector<Symbol> seq) {
  num_symbols_ += seq.size() + 1;
  alts_.at(rule).push_back(std::move(seq));
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
  auto it = set_ids_.find(set);
  if (it != set_ids_.end()) return {false, it->second};
  const int32_t id = static_cast<int32_t>(sets_.size());
  sets_.push_back(set);
  set_ids_.emplace(set, id);
  return {false, id};
}

Symbol GrammarBuilder::byte(uint8_t b) { return range(b, b); }

Symbol GrammarBuilder::range(uint8_t lo, uint8_t hi) {
  ByteSet s{};
  for (int b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
  return bytes(s);
}

void GrammarBuilder::append_literal(std::vector<Symbol>& seq, std::string_view s) {
  for (unsigned char c : s) seq.push_back(byte(c));
}

int32_t GrammarBuilder::literal_set_rule(std::string name, std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  const int32_t rule = new_rule(name);
  size_t i = 0;
  if (!words.empty() && words[0].empty()) {
    add_alt(rule, {});
    i = 1;
  }
  while (i < words.size()) {
    size_t j = i;
    while (j < words.size() && words[j][0] == words[i][0]) ++j;
    std::vector<Symbol> seq;
    if (j - i == 1) {  // one word left with this first byte: spell it out
      append_literal(seq, words[i]);
    } else {
      std::vector<std::string> rest;
      for (size_t k = i; k < j; ++k) rest.push_back(words[k].substr(1));
      seq.push_back(byte(static_cast<uint8_t>(words[i][0])));
      seq.push_back(ref(literal_set_rule(name, std::move(rest))));
    }
    add_alt(rule, std::move(seq));
    i = j;
  }
  return rule;
}

void GrammarBuilder::end_prelude(std::string key) {
  prelude_rules_ = num_rules();
  prelude_key_ = std::move(key);
}

namespace {

// A rule that can call itself before consuming a byte (`a ::= a "x"`, or a schema whose $ref points
// at itself) would send the matcher's expansion round forever: refused when the grammar is built, as
// are chains of rules deeper than the matcher follows (kMaxExpandDepth).
void check_left_recursion(const Grammar& g) {
  const size_t n = g.rule_alts.size();
  // Nullable rules, to a fixed point.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t pos : g.rule_alts[r]) {
        while (g.elements[pos].kind == GrammarElement::kRule && nullable[g.elements[pos].arg]) ++pos;
        if (g.elements[pos].kind == GrammarElement::kEnd) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Rules reachable at the left edge, searched depth-first for a cycle (0 new, 1 on the path, 2 done).
  std::vector<std::vector<int32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (int32_t pos : g.rule_alts[r])
      for (; g.elements[pos].kind == GrammarElement::kRule; ++pos) {
        left[r].push_back(g.elements[pos].arg);
        if (!nullable[g.elements[pos].arg]) break;
      }
  std::vector<char> state(n, 0);
  std::vector<int32_t> chain(n, 0);
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t start = 0; start < n; ++start) {
    if (state[start]) continue;
    path.push_back({static_cast<int32_t>(start), 0});
    state[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) {
        // The longest chain of rules entered before a byte is consumed: the matcher follows it
        // recursively, so a chain past its depth limit (a $ref chain, deeply nested regex groups) is
        // refused here, as a bad request, rather than failing every request that reaches it.
        for (int32_t callee : left[r]) chain[r] = std::max(chain[r], chain[callee] + 1);
        if (chain[r] > kMaxExpandDepth)
          throw Error("structured output: grammar rule '" + g.rule_names[r] + "' nests more than " +
                      std::to_string(kMaxExpandDepth) + " rules before its first byte");
        state[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t callee = left[r][next++];
      if (state[callee] == 1) throw Error("structured output: grammar rule '" + g.rule_names[callee] + "' is left-recursive");
      if (state[callee] == 0) {
        state[callee] = 1;
        path.push_back({callee, 0});
      }
    }
  }
}

}  // namespace

Grammar GrammarBuilder::build(int32_t root) const {
  Grammar g;
  g.byte_sets = sets_;
  g.rule_names = names_;
  g.root_rule = root;
  g.prelude_key = prelude_key_;
  g.char_rule = string_rules_[0];
  g.chars_rule = string_rules_[1];
  g.string_rule = string_rules_[2];
  g.string_budgets = budgets_;
  g.rule_alts.resize(alts_.size());
  g.elements.reserve(num_symbols_);
  // Rules in id order, so the prelude's rules (declared first) take the same positions in every grammar.
  for (size_t r = 0; r < alts_.size(); ++r) {
    if (alts_[r].empty()) throw Error("structured output: grammar rule '" + names_[r] + "' matches nothing");
    for (const auto& seq : alts_[r]) {
      g.rule_alts[r].push_back(static_cast<int32_t>(g.elements.size()));
      for (const Symbol& s : seq)
        g.elements.push_back({s.is_rule ? GrammarElement::kRule : GrammarElement::kBytes, s.id});
      g.elements.push_back({GrammarElement::kEnd, 0});
    }
    if (static_cast<int32_t>(r) + 1 == prelude_rules_) g.num_prelude_elements = static_cast<int32_t>(g.elements.size());
  }
  check_left_recursion(g);
  g.classifications = std::make_shared<ClassificationCache>();
  return g;
}

}  // namespace vireo::structured
