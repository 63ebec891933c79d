// The real Qwen3 vocabulary (151k tokens) as the structured tests use it, loaded once per process.
#pragma once
#include <memory>
#include <string>

#include "structured/tokenizer_vocab.h"
#include "structured/vocab_index.h"
#include "tokenizer/tokenizer.h"

namespace vireo::structured {

struct Qwen3 {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const VocabIndex> vocab;
  int32_t eos = 0;
};

inline const Qwen3& qwen3() {
  static Qwen3 q = [] {
    Qwen3 q;
    q.tok = Tokenizer::from_dir(std::string(VIREO_SOURCE_DIR) + "/models/qwen3");
    q.vocab = std::make_shared<const VocabIndex>(token_byte_strings(*q.tok));
    q.eos = q.tok->token_to_id("<|im_end|>").value();
    return q;
  }();
  return q;
}

}  // namespace vireo::structured
