// Prompt-lookup drafts (vLLM's ngram method): the tokens that followed an earlier occurrence of the
// context's last n tokens, for the longest n in [min_n, max_n] that occurs (the most recent occurrence
// followed by k tokens, else the one followed by most).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace vireo {

// Up to k drafts continuing `tokens` (prompt + output); empty when no suffix of min_n..max_n tokens
// occurs earlier. The search walks back from the end, so a repetitive context is answered in a few
// comparisons.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k);

}  // namespace vireo
