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

bool is_glm4_moe(const std::string& a, const std::string& t) { return a == "Glm4MoeForCausalLM" || t == "glm4_moe"; }

// Glm4MoeConfig's defaults and its names for the expert count (n_routed_experts; num_local_experts in
// transformers 5's attribute map), read before the generic parse.
json glm4_moe_normalize(const json& in, const std::string& source) {
  json j = in;
  if (!has(j, "head_dim")) j["head_dim"] = 128;
  const bool in_rope = j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
                       j["rope_parameters"].contains("partial_rotary_factor");
  if (!in_rope && !has(j, "partial_rotary_factor")) j["partial_rotary_factor"] = 0.5;
  if (!has(j, "num_experts")) j["num_experts"] = get_int(j, source, has(j, "n_routed_experts") ? "n_routed_experts" : "num_local_experts", 128);
  if (!has(j, "num_experts_per_tok")) j["num_experts_per_tok"] = 8;
  if (!has(j, "moe_intermediate_size")) j["moe_intermediate_size"] = 1408;
  if (!has(j, "norm_topk_prob")) j["norm_topk_prob"] = true;
  if (!has(j, "rms_norm_eps")) j["rms_norm_eps"] = 1e-5;
  return j;
}

// The DeepSeek-V3 router fields (Glm4MoeTopkRouter is DeepseekV3TopkRouter) and the layer kinds.
void parse_glm4_moe(const json& j, const std::string& source, ModelConfig& c) {
  c.qk_norm_off = !get_bool(j, source, "use_qk_norm", false);
  c.moe_sigmoid = true;
  parse_deepseek_router(j, source, c, /*groups=*/true, /*default_shared=*/1, /*default_dense=*/1);
}

}  // namespace vireo::config_json
