// The parts of an HF config.json the engine and layers need, plus the raw JSON for arch files.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vireo {

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  std::string torch_dtype = "float32";  // checkpoint dtype ("dtype" in newer configs)
  std::vector<int32_t> eos_token_ids;   // config.json eos_token_id (int or list)
  std::optional<int32_t> bos_token_id;
  nlohmann::json raw;                   // the whole config.json

  // Parses and validates; errors name `source` (a path) and the field.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  static ModelConfig from_file(const std::string& config_json_path);
};

// generation_config.json: defaults vLLM applies with --generation-config auto.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  static GenerationConfig from_dir(const std::string& model_dir);  // missing file -> empty
};

}  // namespace vireo
