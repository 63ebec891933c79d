// The Tokenizer of a Hugging Face tokenizer.json (+ tokenizer_config.json): added tokens, then
// normalizer, pre-tokenizer, BPE model and post-processor, as tokenizers/transformers 5 do it.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace vireo {

class HfTokenizer final : public Tokenizer {
 public:
  // tok: parsed tokenizer.json; config: parsed tokenizer_config.json (or null); `what` names the
  // source in errors (the tokenizer.json path, or a GGUF file's metadata).
  HfTokenizer(TokenizerJson& tok, const nlohmann::json& config, const std::string& what);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::optional<std::string> bos_token() const override { return bos_; }
  std::optional<std::string> eos_token() const override { return eos_; }
  std::optional<int32_t> bos_token_id() const override { return bos_ ? token_to_id(*bos_) : std::nullopt; }
  std::optional<int32_t> eos_token_id() const override { return eos_ ? token_to_id(*eos_) : std::nullopt; }
  const std::string& chat_template() const override { return chat_template_; }
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }

 private:
  void encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

  AddedVocabulary added_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<PostProcessor> post_;
  int32_t vocab_size_ = 0;
  std::optional<std::string> bos_, eos_;
  std::string chat_template_;
};

}  // namespace vireo
