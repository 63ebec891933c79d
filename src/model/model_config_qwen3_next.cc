// Qwen3-Next / Qwen3.5 / Qwen3.5-MoE config.json (transformers' Qwen3NextConfig, Qwen3_5TextConfig,
// Qwen3_5MoeTextConfig, and the multimodal Qwen3_5Config / Qwen3_5MoeConfig whose text model sits in
// text_config): the per-layer choice between Gated DeltaNet and gated attention, the DeltaNet dims,
// the shared expert's width, and the family's defaults (head_dim 256, partial_rotary_factor 0.25,
// norm_topk_prob true).
#include <cstdint>
#include <string>
#include <vector>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_qwen3_next(const std::string& a, const std::string& t) {
  return a == "Qwen3NextForCausalLM" || a == "Qwen3_5ForCausalLM" || a == "Qwen3_5MoeForCausalLM" ||
         a == "Qwen3_5ForConditionalGeneration" || a == "Qwen3_5MoeForConditionalGeneration" || t == "qwen3_next" ||
         t == "qwen3_5_text" || t == "qwen3_5_moe_text" || t == "qwen3_5" || t == "qwen3_5_moe";
}

json qwen3_next_normalize(const json& in, const std::string& source) {
  json j = lift_text_config(in, source);
  const bool moe_35 = j.value("model_type", "") == "qwen3_5_moe_text" || in.value("model_type", "") == "qwen3_5_moe" ||
                      (in.contains("architectures") && in["architectures"].dump().find("Qwen3_5Moe") != std::string::npos);
  if (!has(j, "head_dim")) j["head_dim"] = 256;
  bool rotary_given = has(j, "partial_rotary_factor");
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (has(j, key) && j[key].is_object() && j[key].contains("partial_rotary_factor")) rotary_given = true;
  if (!rotary_given) j["partial_rotary_factor"] = 0.25;  // Qwen3NextConfig's default
  // Qwen3.5-MoE has no dense MLPs (no intermediate_size) and always renormalises its top-k.
  if (!has(j, "intermediate_size") && has(j, "moe_intermediate_size")) j["intermediate_size"] = j["moe_intermediate_size"];
  if (moe_35 || !has(j, "norm_topk_prob")) j["norm_topk_prob"] = true;
  return j;
}

namespace {

std::vector<uint8_t> linear_layer_kinds(const json& j, const std::string& source, int num_layers) {
  std::vector<uint8_t> linear(num_layers, 0);
  if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
    if (!lt->is_array() || static_cast<int>(lt->size()) != num_layers)
      fail(source, "layer_types", "must be a list of num_hidden_layers (" + std::to_string(num_layers) + ") names");
    for (int l = 0; l < num_layers; ++l) {
      const json& t = (*lt)[l];
      const std::string name = t.is_string() ? t.get<std::string>() : t.dump();
      if (name != "linear_attention" && name != "full_attention")
        fail(source, "layer_types",
             "entry " + std::to_string(l) + " '" + name + "' is not supported (linear_attention, full_attention)");
      linear[l] = name == "linear_attention";
    }
    return linear;
  }
  const int interval = get_int(j, source, "full_attention_interval", 4);
  if (interval <= 0) fail(source, "full_attention_interval", "must be > 0");
  for (int l = 0; l < num_layers; ++l) linear[l] = (l + 1) % interval != 0;
  return linear;
}

}  // namespace

void parse_qwen3_next(const json& j, const std::string& source, ModelConfig& c) {
  c.linear_layers = linear_layer_kinds(j, source, c.num_hidden_layers);
  ModelConfig::LinearAttn& a = c.linear_attn;
  a.num_k_heads = get_int(j, source, "linear_num_key_heads", 16);
  a.num_v_heads = get_int(j, source, "linear_num_value_heads", 32);
  a.head_k_dim = get_int(j, source, "linear_key_head_dim", 128);
  a.head_v_dim = get_int(j, source, "linear_value_head_dim", 128);
  a.conv_kernel = get_int(j, source, "linear_conv_kernel_dim", 4);
  if (a.num_k_heads <= 0 || a.num_v_heads <= 0 || a.num_v_heads % a.num_k_heads != 0)
    fail(source, "linear_num_value_heads", "must be a positive multiple of linear_num_key_heads");
  if (a.head_k_dim <= 0 || a.head_v_dim <= 0) fail(source, "linear_key_head_dim", "head dims must be > 0");
  if (a.conv_kernel < 1) fail(source, "linear_conv_kernel_dim", "must be > 0");
  if (c.num_experts > 0) {
    c.shared_expert_intermediate_size = get_int(j, source, "shared_expert_intermediate_size", 0);
    if (c.shared_expert_intermediate_size < 0) fail(source, "shared_expert_intermediate_size", "must be >= 0");
  }
  if (c.attention_bias) fail(source, "attention_bias", "true is not supported for this architecture");
}

}  // namespace vireo::config_json
