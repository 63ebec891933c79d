// Where the built-in default model's tokenizer (Qwen3) lives.
#pragma once
#include <string>

namespace vireo {

// <dir of executable>/../models/qwen3 (or ../../models/qwen3), else ./models/qwen3: the first that
// holds a tokenizer.json; "models/qwen3" when none does (loading it then names the missing file).
std::string default_tokenizer_dir();

}  // namespace vireo
