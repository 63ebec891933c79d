// Builds a Grammar rule by rule: rules are declared first (so they can refer to each other and to
// themselves), alternatives added as sequences of symbols, then flattened by build().
#pragma once
#include <cstdint>
#include <array>
#include <map>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"

namespace vireo::structured {

struct Symbol {
  bool is_rule = false;
  int32_t id = 0;  // byte-set index or rule id
};

class GrammarBuilder {
 public:
  int32_t new_rule(std::string name);
  void add_alt(int32_t rule, std::vector<Symbol> seq);
  Symbol bytes(const ByteSet& set);
  Symbol byte(uint8_t b);
  Symbol range(uint8_t lo, uint8_t hi);
  static Symbol ref(int32_t rule) { return {true, rule}; }
  // Appends the bytes of `s` to `seq`, one element per byte.
  void append_literal(std::vector<Symbol>& seq, std::string_view s);
  // A rule matching exactly one of `words` (deduplicated), as a byte trie so that alternatives
  // sharing a prefix do not run in parallel; the empty word makes the rule nullable.
  int32_t literal_set_rule(std::string name, std::vector<std::string> words);
  int32_t num_rules() const { return static_cast<int32_t>(alts_.size()); }
  size_t num_symbols() const { return num_symbols_; }
  // Marks everything added so far as the prelude (grammar.h).
  void end_prelude(std::string key);
  // Throws vireo::Error when a rule has no alternative.
  Grammar build(int32_t root) const;
  // Metadata copied into the built grammar (grammar.h).
  void set_string_rules(int32_t chr, int32_t chars, int32_t string) { string_rules_ = {chr, chars, string}; }
  void set_string_budget(int32_t rule, StringBudget b) { budgets_[rule] = b; }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<Symbol>>> alts_;
  std::vector<ByteSet> sets_;
  std::map<ByteSet, int32_t> set_ids_;
  size_t num_symbols_ = 0;
  int32_t prelude_rules_ = 0;
  std::string prelude_key_;
  std::array<int32_t, 3> string_rules_{-1, -1, -1};
  std::unordered_map<int32_t, StringBudget> budgets_;
};

}  // namespace vireo::structured
