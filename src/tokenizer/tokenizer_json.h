// Fast loading of tokenizer.json: a SAX pass that streams model.vocab and model.merges straight
// into vectors (hundreds of thousands of entries) and builds a JSON DOM only for the rest.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

struct TokenizerJson {
  nlohmann::json doc;  // everything, with model.vocab = {} and model.merges = [] when captured
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // "a b" strings split at the space
  bool captured = false;                                     // vocab/merges came via the vectors
};

// Throws vireo::Error naming `path` when unreadable or malformed.
TokenizerJson load_tokenizer_json(const std::string& path);

// Whole file as a string; throws vireo::Error naming `path`.
std::string read_whole_file(const std::string& path);

}  // namespace vireo
