// tokenizers' BPE model: vocab, ranked merges, byte_fallback, unk/fuse_unk, ignore_merges, and a
// per-word cache (a server tokenizes the same words over and over).
#pragma once
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeModel {
 public:
  using VocabList = std::vector<std::pair<std::string, int32_t>>;
  using MergeList = std::vector<std::pair<std::string, std::string>>;
  // j: tokenizer.json's "model" object; its vocab/merges, unless given (already streamed out by
  // load_tokenizer_json). Throws vireo::Error naming `what` on a bad model.
  BpeModel(const nlohmann::json& j, const std::string& what, VocabList* vocab = nullptr, MergeList* merges = nullptr);

  // Appends the ids of one pre-token word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when unknown
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  void clear_unk_token() { unk_id_.reset(); }

 private:
  struct MergeValue {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void tokenize_uncached(std::string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, MergeValue> merges_;
  std::optional<int32_t> unk_id_;
  std::string continuing_prefix_, end_suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xNN> ids for byte_fallback, -1 if absent

  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace vireo
