// A regular expression -> grammar rule matching exactly the whole text (as vLLM's guided_regex and
// xgrammar's JSON-schema `pattern`: the match is anchored at both ends). Subset: literals (UTF-8
// included), `.`, classes `[a-z_]` / `[^...]` (ASCII ranges, single non-ASCII characters),
// escapes \d \w \s \D \W \S \n \t \r \f \v \xHH \uHHHH and escaped punctuation, groups `(...)`,
// `(?:...)`, named groups, alternation, quantifiers * + ? {n} {n,} {n,m} (lazy `?` accepted, same
// language), `^` at the start and `$` at the end. Refused (RegexError): backreferences, lookaround,
// word boundaries, anchors elsewhere, non-ASCII ranges, repeats above 1000, groups nested deeper than 250.
#pragma once
#include <string>
#include <string_view>

#include "core/error.h"
#include "structured/grammar_builder.h"

namespace vireo::structured {

struct RegexError : Error {
  using Error::Error;
};

// The rule for `pattern`. json_string: the text sits inside a JSON string, so bytes that would need
// escaping there ('"', '\', control characters) are left out of every character set.
int32_t add_regex_rule(GrammarBuilder& b, std::string_view pattern, bool json_string = false);

}  // namespace vireo::structured
