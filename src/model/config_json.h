// JSON field readers shared by the config.json parsers: errors name the source (a path) and the field.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace vireo::config_json {

using nlohmann::json;

[[noreturn]] inline void fail(const std::string& source, const std::string& field, const std::string& why) {
  throw Error(source + ": field '" + field + "' " + why);
}

inline int get_int(const json& j, const std::string& source, const std::string& key, std::optional<int> def = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (def) return *def;
    fail(source, key, "is missing");
  }
  if (!it->is_number_integer()) fail(source, key, "must be an integer, got " + it->dump());
  return it->get<int>();
}

inline float get_float(const json& j, const std::string& source, const std::string& key, float def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number()) fail(source, key, "must be a number, got " + it->dump());
  return it->get<float>();
}

inline std::optional<float> opt_float(const json& j, const std::string& source, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail(source, key, "must be a number, got " + it->dump());
  return it->get<float>();
}

inline bool get_bool(const json& j, const std::string& source, const std::string& key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) fail(source, key, "must be true or false, got " + it->dump());
  return it->get<bool>();
}

inline bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A multimodal wrapper's config (Qwen3.5, Gemma 3): its text model's text_config, with the wrapper's own
// fields winning where it has them (architectures, lm_head tying, dtype, token ids); other configs as they are.
inline json lift_text_config(const json& in, const std::string& source) {
  auto tc = in.find("text_config");
  if (tc == in.end() || tc->is_null()) return in;
  if (!tc->is_object()) fail(source, "text_config", "must be an object");
  json j = *tc;
  for (const char* key : {"architectures", "tie_word_embeddings", "dtype", "torch_dtype", "eos_token_id", "bos_token_id"})
    if (has(in, key)) j[key] = in[key];
  return j;
}

}  // namespace vireo::config_json

namespace vireo {
struct ModelConfig;
namespace config_json {
// LFM2 (model_config_lfm2.cc). lfm2_normalize: before the generic parse, maps the original config
// names onto HF's (block_ff_dim, norm_eps, tie_embedding, theta) and sets LFM2's defaults (norm_eps
// 1e-5, rope_theta 1e6). parse_lfm2: after it, the layer kinds, the conv fields and the MLP width.
json lfm2_normalize(const json& j, const std::string& source);
void parse_lfm2(const json& j, const std::string& source, ModelConfig& c);
bool is_lfm2_moe(const std::string& architecture, const std::string& model_type);
// DeepSeek-V2/V3 (model_config_deepseek.cc), after the generic parse: MLA dims, routing, dense layers.
void parse_deepseek(const json& j, const std::string& source, ModelConfig& c);
// Qwen3-Next / Qwen3.5 (model_config_qwen3_next.cc): is_qwen3_next by architecture or model_type;
// normalize lifts a multimodal wrapper's text_config and fills the family's defaults.
bool is_qwen3_next(const std::string& architecture, const std::string& model_type);
json qwen3_next_normalize(const json& in, const std::string& source);
void parse_qwen3_next(const json& j, const std::string& source, ModelConfig& c);
// Gemma 3 (model_config_gemma.cc): normalize lifts a multimodal wrapper's text_config, fills the
// family's defaults and flattens per-layer-type RoPE; parse_gemma3 sets the attention scale and the
// local RoPE layers.
bool is_gemma3(const std::string& architecture, const std::string& model_type);
json gemma3_normalize(const json& in, const std::string& source);
void parse_gemma3(const json& j, const std::string& source, ModelConfig& c);
// Gemma 2 (model_config_gemma.cc): normalize fills Gemma2Config's defaults (soft-capping 50 / 30, a
// window of 4096 on every other layer); parse_gemma2 sets the attention scale and the soft-capping.
bool is_gemma2(const std::string& architecture, const std::string& model_type);
// Gemma (1) (model_config_gemma.cc): normalize fills GemmaConfig's defaults and the MLP's activation
// (hidden_activation, else GELU-tanh: GemmaMLP ignores hidden_act).
bool is_gemma1(const std::string& architecture, const std::string& model_type);
json gemma1_normalize(const json& in, const std::string& source);
// SmolLM3 (model_config_smollm3.cc): NoPE layers from no_rope_layers / no_rope_layer_interval.
bool is_smollm3(const std::string& architecture, const std::string& model_type);
// OLMo 3 (model_config_olmo3.cc): Olmo3Config's layer_types / sliding_window defaults, before the generic parse.
// GLM-4.5 (model_config_glm.cc): Glm4MoeConfig's defaults, then the DeepSeek-style router fields.
bool is_glm4_moe(const std::string& architecture, const std::string& model_type);
json glm4_moe_normalize(const json& in, const std::string& source);
void parse_glm4_moe(const json& j, const std::string& source, ModelConfig& c);
// DeepSeek-V3's router fields (model_config_deepseek.cc), shared with GLM-4.5: n_group / topk_group (when
// groups), routed_scaling_factor, n_shared_experts, first_k_dense_replace (with the family's defaults);
// every layer from first_k_dense_replace on is sparse.
// ERNIE 4.5 dense and MoE (model_config_ernie.cc): use_bias onto attention_bias / mlp_bias, their config
// classes' defaults; the MoE's moe_* fields onto the generic MoE keys and its softmax router with a bias.
bool is_ernie4_5(const std::string& architecture, const std::string& model_type);
json ernie4_5_normalize(const json& in, const std::string& source);
void parse_ernie4_5(const json& j, const std::string& source, ModelConfig& c);
void parse_deepseek_router(const json& j, const std::string& source, ModelConfig& c, bool groups, int default_shared,
                           int default_dense);
// Qwen3-VL, Qwen2-VL / Qwen2.5-VL and Mistral 3 (model_config_text_wrappers.cc): the text model's config
// lifted out of text_config (Qwen2-VL's M-RoPE type read as default).
bool is_qwen3_vl(const std::string& architecture, const std::string& model_type);
json qwen3_vl_normalize(const json& in, const std::string& source);
bool is_qwen2_vl(const std::string& architecture, const std::string& model_type);
json qwen2_vl_normalize(const json& in, const std::string& source);
bool is_mistral3(const std::string& architecture, const std::string& model_type);
json mistral3_normalize(const json& in, const std::string& source);
// EXAONE 4.0 (model_config_exaone4.cc): layer_types from sliding_window_pattern; NoPE global layers.
bool is_exaone4(const std::string& architecture, const std::string& model_type);
json exaone4_normalize(const json& in, const std::string& source);
void parse_exaone4(const json& j, const std::string& source, ModelConfig& c);
bool is_olmo3(const std::string& architecture, const std::string& model_type);
json olmo3_normalize(const json& in, const std::string& source);
void parse_olmo3(const json& j, const std::string& source, ModelConfig& c);
// HunYuan v1 dense and MoE (model_config_hunyuan.cc): their defaults; the MoE's fields (per-layer lists,
// moe_topk, num_shared_expert) onto the generic MoE keys.
bool is_hunyuan(const std::string& architecture, const std::string& model_type);
json hunyuan_normalize(const json& in, const std::string& source);
void parse_hunyuan(const json& j, const std::string& source, ModelConfig& c);
// OLMoE (model_config_olmo3.cc): OlmoeConfig's defaults.
bool is_olmoe(const std::string& architecture, const std::string& model_type);
json olmoe_normalize(const json& in, const std::string& source);
// GLM / GLM-4 (model_config_glm.cc): GlmConfig's defaults (head_dim 128, attention_bias, partial rotary 0.5).
bool is_glm(const std::string& architecture, const std::string& model_type);
json glm_normalize(const json& in, const std::string& source);
json smollm3_normalize(const json& in, const std::string& source);
void parse_smollm3(const json& j, const std::string& source, ModelConfig& c);
json gemma2_normalize(const json& in, const std::string& source);
void parse_gemma2(const json& j, const std::string& source, ModelConfig& c);
// Granite (model_config_granite.cc): GraniteConfig's multipliers.
bool is_granite(const std::string& architecture, const std::string& model_type);  // dense or MoE
bool is_granite_moe(const std::string& architecture, const std::string& model_type);
void parse_granite(const json& j, const std::string& source, ModelConfig& c);
// GPT-OSS (model_config_gpt_oss.cc): GptOssConfig's defaults; attention sinks and the clamped SwiGLU.
bool is_gpt_oss(const std::string& architecture, const std::string& model_type);
json gpt_oss_normalize(const json& in, const std::string& source);
void parse_gpt_oss(const json& j, const std::string& source, ModelConfig& c);
}  // namespace config_json
}  // namespace vireo
