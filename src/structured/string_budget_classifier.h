// Classification of a bounded string's characters (minLength / maxLength) without a trie walk per
// position. Each character position of such a string is a rule of its own (json_schema_compiler.cc),
// so the general classifier would walk the whole vocabulary trie at every position (~18 ms on Qwen3).
// Instead every token is profiled once per vocabulary from the start of a string character: how many
// characters it starts, and whether it stays in the string, ends it with its last byte, ends it and
// goes on, or is not string text. A position's classification is then a comparison with its budget.
#pragma once
#include <optional>
#include <vector>

#include "structured/grammar_stack.h"
#include "structured/vocab_index.h"

namespace vireo::structured {

// nullopt unless `group` is exactly the start of a prelude string character inside a bounded
// string's chain; otherwise what classify_tokens would give for it (same cut: accepted tokens stay
// in the string or end it with their last byte; uncertain ones go on past the closing quote).
std::optional<TokenClassification> classify_bounded_string(const GrammarStack& stack, const std::vector<StackTop>& group,
                                                           const VocabIndex& vocab);

}  // namespace vireo::structured
