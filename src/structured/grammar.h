// A byte-level context-free grammar, flattened for a pushdown matcher: every alternative of every
// rule is a run of elements in one array, closed by kEnd. A matcher position is an index into that
// array; a stack of return positions says where to go when a rule's alternative ends.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vireo::structured {

// 256 bits: byte b is in the set when bit b % 64 of word b / 64 is set.
using ByteSet = std::array<uint64_t, 4>;

inline bool byte_set_has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

struct GrammarElement {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = kEnd;
  int32_t arg = 0;  // kBytes: index into byte_sets; kRule: rule id
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
};

}  // namespace vireo::structured
