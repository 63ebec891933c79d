// ModelConfig of a GGUF file: llama.cpp's `<arch>.*` metadata mapped onto the HF config.json
// fields (an HF-style JSON is built and parsed by ModelConfig::from_json, so both paths share
// one validation).
#pragma once
#include <string>

#include "gguf/gguf_shards.h"
#include "model/model_config.h"

namespace vireo {

// HF architecture name of a GGUF general.architecture ("llama" -> "LlamaForCausalLM"); throws
// vireo::Error naming the file and listing the supported names.
std::string gguf_hf_architecture(const GgufFile& f);

// Throws vireo::Error naming the file and the metadata key at fault.
ModelConfig gguf_model_config(const GgufShards& model);

}  // namespace vireo
