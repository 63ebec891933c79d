// Built-in model configs (used with dummy weights): the default model and benchmark shapes.
#pragma once
#include <string>

#include "model/model_config.h"

namespace vireo {

// Qwen3ForCausalLM with the real Qwen3 vocabulary (151936 rows) but a tiny body, quick on 2 CPU cores.
ModelConfig default_model_config();
ModelConfig qwen3_0_6b_config();
ModelConfig qwen3_8b_config();
ModelConfig qwen3_30b_a3b_config();  // sparse MoE (Qwen3MoeForCausalLM)
ModelConfig llama3_8b_config();
ModelConfig gemma3_1b_config();  // builtin:gemma3-1b (google/gemma-3-1b-it shape)
ModelConfig gemma2_2b_config();  // builtin:gemma2-2b (google/gemma-2-2b shape)
ModelConfig gpt_oss_20b_config();  // builtin:gpt-oss-20b (openai/gpt-oss-20b shape, bf16 experts)
// "default", "qwen3-0.6b", "qwen3-8b", "qwen3-30b-a3b", "llama3-8b"; anything else throws listing these.
ModelConfig builtin_model_config(const std::string& name);

}  // namespace vireo
