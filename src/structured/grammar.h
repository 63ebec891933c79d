// A byte-level context-free grammar, flattened for a pushdown matcher: every alternative of every
// rule is a run of elements in one array, closed by kEnd. A matcher position is an index into that
// array; a stack of return positions says where to go when a rule's alternative ends.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace vireo::structured {

class ClassificationCache;

// 256 bits: byte b is in the set when bit b % 64 of word b / 64 is set.
using ByteSet = std::array<uint64_t, 4>;

inline bool byte_set_has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

struct GrammarElement {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  int32_t arg = 0;  // kBytes: index into byte_sets; kRule: rule id
};

// A string's character budget at a rule of a minLength/maxLength chain (json_schema_compiler.cc):
// how many more characters must / may follow once the rule starts.
struct StringBudget {
  int32_t min_more = 0;
  int32_t max_more = 0;
};

struct Grammar {
  std::vector<GrammarElement> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<int32_t>> rule_alts;  // rule id -> start positions of its alternatives
  std::vector<std::string> rule_names;          // for error messages and debugging
  int32_t root_rule = 0;
  // Positions [0, num_prelude_elements) are the shared JSON rules (json_prelude.h), identical in
  // every grammar that has them with the same prelude_key: their token classifications can be
  // cached once per vocabulary instead of once per request.
  int32_t num_prelude_elements = 0;
  std::string prelude_key;
  // The prelude's string rules (json_prelude.h), -1 without a prelude, and the budgets of bounded
  // strings' chain rules by rule id: what string_budget_classifier.h needs to classify a bounded
  // string's characters without a trie walk per position.
  int32_t char_rule = -1;
  int32_t chars_rule = -1;
  int32_t string_rule = -1;
  std::unordered_map<int32_t, StringBudget> string_budgets;
  // The token classifications of this grammar's positions, filled by its matchers as they go and
  // shared by all of them (classification_cache.h); made by GrammarBuilder::build, null only in a
  // Grammar assembled by hand (its matchers then keep their own).
  std::shared_ptr<ClassificationCache> classifications;
};

}  // namespace vireo::structured
