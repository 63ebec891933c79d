// The grammar rules every JSON grammar shares (whitespace, strings, numbers, any value), declared
// first so they sit at the same positions in every grammar (grammar.h, num_prelude_elements).
#pragma once
#include <cstdint>

#include "structured/grammar_builder.h"

namespace vireo::structured {

// At most this many whitespace bytes between two JSON tokens: enough for pretty-printed output,
// few enough that a model cannot stall on whitespace forever.
inline constexpr int kMaxJsonWhitespace = 16;

struct JsonPrelude {
  int32_t ws = 0;        // 0 to kMaxJsonWhitespace of [ \t\n\r]
  int32_t chr = 0;       // one JSON string character: unescaped UTF-8 (well-formed) or an escape
  int32_t chars = 0;     // chr*
  int32_t string = 0;    // '"' chars '"'
  int32_t number = 0;    // JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  int32_t unsigned_number = 0;  // the same without the sign
  int32_t integer = 0;          // -?(0|[1-9][0-9]*)
  int32_t unsigned_integer = 0;
  int32_t positive_integer = 0;  // [1-9][0-9]*
  int32_t boolean = 0;
  int32_t null = 0;
  int32_t value = 0;   // any JSON value
  int32_t object = 0;  // any JSON object
  int32_t array = 0;   // any JSON array
};

// Adds the prelude to an empty builder and marks its end (GrammarBuilder::end_prelude).
JsonPrelude add_json_prelude(GrammarBuilder& b);

}  // namespace vireo::structured
