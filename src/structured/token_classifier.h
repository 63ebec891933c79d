// Classifies every token of the vocabulary for a set of stack tops whose stack is cut short at
// kBaseParent (xgrammar's context-independent / context-dependent split): a token is accepted if
// the partial stack consumes it whatever lies below, rejected if it dies without ever reaching the
// cut, and uncertain if it reaches the cut and then needs the real stack. One depth-first walk of
// the vocabulary trie, pruning every branch the tops cannot follow.
#pragma once
#include <vector>

#include "structured/grammar_stack.h"
#include "structured/vocab_index.h"

namespace vireo::structured {

// `start`'s return nodes live in `stack` (rolled back to where they were afterwards).
TokenClassification classify_tokens(GrammarStack& stack, const std::vector<StackTop>& start, const VocabIndex& vocab);

}  // namespace vireo::structured
