// GLM / GLM-4 config.json (transformers' GlmConfig / Glm4Config): their defaults where a field is absent
// (head_dim 128, q/k/v biases, RoPE over half of each head).
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_glm(const std::string& a, const std::string& t) {
  return a == "GlmForCausalLM" || a == "Glm4ForCausalLM" || t == "glm" || t == "glm4";
}

json glm_normalize(const json& in, const std::string& source) {
  (void)source;
  json j = in;
  if (!has(j, "head_dim")) j["head_dim"] = 128;
  if (!has(j, "attention_bias")) j["attention_bias"] = true;
  const bool in_rope = j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
                       j["rope_parameters"].contains("partial_rotary_factor");
  if (!in_rope && !has(j, "partial_rotary_factor")) j["partial_rotary_factor"] = 0.5;
  return j;
}

}  // namespace vireo::config_json
