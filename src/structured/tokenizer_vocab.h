// The byte string of every token id of a tokenizer, as VocabIndex takes them.
#pragma once
#include <string>
#include <vector>

namespace vireo {
class Tokenizer;
}

namespace vireo::structured {

// By id, [0, tok.vocab_size()); special tokens give "" (never produced by a grammar). Each id is
// decoded alone; for SentencePiece-style vocabularies, whose decoder drops a leading "▁" of the
// first token, the space is put back, and byte-fallback pieces "<0xHH>" give their byte.
std::vector<std::string> token_byte_strings(const Tokenizer& tok);

}  // namespace vireo::structured
