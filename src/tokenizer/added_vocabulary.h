// tokenizer.json "added_tokens": matched in the text before normalization (normalized=false) or in
// each normalized piece (normalized=true), leftmost-longest, honoring lstrip/rstrip/single_word.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

class Normalizer;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// One piece of text: either plain text or an added token.
struct TextSplit {
  size_t begin, end;
  int32_t token_id = -1;  // -1: plain text
};

class AddedVocabulary {
 public:
  void add(AddedToken t);
  // After all add() calls. Like tokenizers, normalized=true tokens are matched in their normalized
  // form (`normalizer` may be null).
  void build(const Normalizer* normalizer);

  // Splits `text` at the tokens whose `normalized` flag equals `normalized`.
  std::vector<TextSplit> split(std::string_view text, bool normalized) const;
  bool has_normalized_tokens() const { return tries_[1].nodes.size() > 1; }

  const AddedToken* by_id(int32_t id) const;
  // transformers also treats the tokens its config names (bos, eos, pad, mask, ...) as special.
  void mark_special(std::string_view content);
  std::optional<int32_t> by_content(std::string_view content) const;
  int32_t max_id() const { return max_id_; }

 private:
  // A byte trie over token contents (few thousand tokens at most).
  struct Trie {
    struct Node {
      std::unordered_map<unsigned char, int32_t> next;
      int32_t token = -1;  // index into tokens_
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
  };
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  Trie tries_[2];  // [0]: normalized=false, [1]: normalized=true
  int32_t max_id_ = -1;
};

}  // namespace vireo
