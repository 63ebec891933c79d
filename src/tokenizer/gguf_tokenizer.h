// The tokenizer of a GGUF file's tokenizer.ggml.* metadata, built as the tokenizer.json and
// tokenizer_config.json it came from and run by HfTokenizer, so GGUF and HF checkpoints of one
// model tokenize alike: byte-level BPE ("gpt2": Llama-3, Qwen) and SentencePiece BPE ("llama":
// Llama-2, Mistral), whose merges are rebuilt from the piece scores.
#pragma once
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace vireo {

// Throws vireo::Error naming the file and the metadata key at fault.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& f);

// True when `path` names a GGUF file (by magic), for Tokenizer::from_dir.
bool is_gguf_tokenizer_path(const std::string& path);

}  // namespace vireo
