// Where `bench` commands find their tokenizer and the sonnet text when not told.
#pragma once
#include <string>

namespace vireo::bench {

// --tokenizer if given; else the model directory if it holds tokenizer.json; else the default
// tokenizer (models/qwen3, looked up from the working directory and from the binary's folder).
// Throws vireo::Error when nothing is found.
std::string resolve_tokenizer_dir(const std::string& tokenizer_flag, const std::string& model_flag);
// benchmarks/data/sonnet.txt, looked up the same way.
std::string default_sonnet_path();

}  // namespace vireo::bench
