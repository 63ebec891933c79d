// Shared helpers of the tokenizer tests: paths and cached tokenizers (loading gemma3 costs ~1 s).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace vireo::test {

inline std::string source_path(const std::string& rel) { return std::string(VIREO_SOURCE_DIR) + "/" + rel; }

inline const Tokenizer& cached_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;  // test-only memo
  auto& t = cache[name];
  if (!t) t = Tokenizer::from_dir(source_path("models/" + name));
  return *t;
}

}  // namespace vireo::test
