// vLLM's bad_words: the strings a request must not generate, as token sequences.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {

// The "bad_words" field: absent, null or a list of strings (400 otherwise).
std::vector<std::string> parse_bad_words(const Json& body);

// As vLLM's SamplingParams.update_from_tokenizer: each word, left-stripped, encoded without special
// tokens as is and with a leading space; the spaced form is kept too when it is as many tokens and
// starts with another one (a word-initial token). Words that encode to nothing are dropped; an id
// outside the vocabulary is a 400.
std::vector<std::vector<int32_t>> tokenize_bad_words(const std::vector<std::string>& words, const Tokenizer& tok,
                                                     int32_t vocab_size);

}  // namespace vireo::server
