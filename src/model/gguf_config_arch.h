// Family-specific parts of gguf_model_config (gguf_config.cc) that need more than a few keys: each
// fills the HF-style JSON from its `<arch>.*` metadata, and where llama.cpp runs a family differently
// from transformers' class of that name, adjusts the parsed ModelConfig to llama.cpp's semantics (a GGUF
// file means what llama.cpp makes of it).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_shards.h"
#include "model/model_config.h"

namespace vireo {

// A metadata key that must be present and a single integer (not a per-layer array).
int64_t gguf_required_int(const GgufFile& f, const std::string& key);

// deepseek2 (DeepSeek-V2 / V2-Lite / V3 / R1, llama.cpp's DeepseekV2Model converter): MLA dims, the
// router, shared experts, leading dense layers, YaRN. Sets every field the generic code would take
// from head_count_kv / key_length / feed_forward_length.
void deepseek2_fields(const GgufShards& m, const std::string& a, nlohmann::json& j);
void deepseek2_finish(const GgufShards& m, const std::string& a, ModelConfig& c);

// qwen3next / qwen35 / qwen35moe (Qwen3-Next, Qwen3.5, Qwen3.5-MoE): the DeltaNet dims from ssm.*, which
// layers are recurrent (attention.recurrent_layers, or full_attention_interval, default 4).
void qwen3_next_fields(const GgufShards& m, const std::string& a, nlohmann::json& j);

}  // namespace vireo
