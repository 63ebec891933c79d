// BPE merges of a SentencePiece vocabulary, which has piece scores instead of merges: every way
// to split a piece into two pieces of the vocabulary is a merge, ranked by the piece's score
// (transformers' SentencePieceExtractor, which made the merges of Llama-2-style tokenizer.json).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace vireo {

// pieces[id] with scores[id]; returns the merges, best first.
std::vector<std::pair<std::string, std::string>> spm_merges(const std::vector<std::string>& pieces,
                                                            const std::vector<float>& scores);

}  // namespace vireo
