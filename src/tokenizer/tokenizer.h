// A Hugging Face tokenizer.json (+ tokenizer_config.json) reimplemented to give the same ids.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vireo {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // `path`: a directory holding tokenizer.json (and optionally tokenizer_config.json), or a GGUF
  // file (its tokenizer.ggml.* metadata).
  // Throws vireo::Error naming the file on a missing or malformed file.
  static std::unique_ptr<Tokenizer> from_dir(const std::string& path);

  // As tokenizers' encode(text, add_special_tokens): added/special tokens matched first,
  // then normalizer, pre-tokenizer, model, and (if add_special_tokens) the post-processor
  // (e.g. the BOS of Llama-2/Gemma-3).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // As tokenizers' decode(ids, skip_special_tokens). Unknown ids are skipped.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;

  // Number of ids (model vocab + added tokens, i.e. max id + 1).
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;  // "" when unknown
  virtual bool is_special(int32_t id) const = 0;

  // From tokenizer_config.json (bos_token / eos_token may be strings or AddedToken objects).
  virtual std::optional<std::string> bos_token() const = 0;
  virtual std::optional<std::string> eos_token() const = 0;
  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;
  virtual const std::string& chat_template() const = 0;  // "" when none
};

// Streams text from ids without ever emitting a broken UTF-8 sequence (vLLM's approach:
// decode a window of prefix + new ids, emit only the new, complete text).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, std::span<const int32_t> prompt_ids, bool skip_special_tokens);
  // Adds one generated id; returns the newly completed text (possibly "").
  std::string add(int32_t id);
  // Whatever is still held back (e.g. an incomplete byte sequence at the end), as decode() would give.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
};

}  // namespace vireo
