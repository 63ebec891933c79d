// GPT-OSS's config.json (transformers' GptOssConfig): what the file leaves out takes the config class's
// defaults (gpt-oss-20b / 120b shapes aside): q/k/v/o biases, a window of 128 on every other layer
// (layer_types: even layers sliding), YaRN RoPE (factor 32, beta 32 / 1, truncate false, original
// context 4096, theta 150,000), rms_norm_eps 1e-5, untied embeddings. Every layer is a MoE layer whose
// experts are intermediate_size wide; the router's top-k weights are always renormalised (a softmax
// over the chosen logits); the experts' clamped SwiGLU takes swiglu_alpha / swiglu_limit (1.702 / 7).
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_gpt_oss(const std::string& a, const std::string& t) { return a == "GptOssForCausalLM" || t == "gpt_oss"; }

json gpt_oss_normalize(const json& in, const std::string& source) {
  json j = in;
  auto set_default = [&](const char* key, json v) {
    if (!has(j, key)) j[key] = std::move(v);
  };
  set_default("num_hidden_layers", 36);
  set_default("num_local_experts", 128);
  set_default("vocab_size", 201088);
  set_default("hidden_size", 2880);
  set_default("intermediate_size", 2880);
  set_default("head_dim", 64);
  set_default("num_attention_heads", 64);
  set_default("num_key_value_heads", 8);
  set_default("sliding_window", 128);
  set_default("tie_word_embeddings", false);
  set_default("max_position_embeddings", 131072);
  set_default("rms_norm_eps", 1e-5);
  set_default("num_experts_per_tok", 4);
  set_default("attention_bias", true);
  set_default("rope_theta", 150000.0);
  if (!has(j, "rope_scaling") && !has(j, "rope_parameters"))
    j["rope_parameters"] = {{"rope_type", "yarn"},  {"factor", 32.0},   {"beta_fast", 32.0},
                            {"beta_slow", 1.0},     {"truncate", false}, {"original_max_position_embeddings", 4096}};
  if (!has(j, "layer_types")) {
    const int n = get_int(j, source, "num_hidden_layers");
    json types = json::array();
    for (int l = 0; l < n; ++l) types.push_back((l + 1) % 2 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  return j;
}

void parse_gpt_oss(const json& j, const std::string& source, ModelConfig& c) {
  c.attention_sinks = true;
  c.swiglu_alpha = get_float(j, source, "swiglu_alpha", 1.702f);
  c.swiglu_limit = get_float(j, source, "swiglu_limit", 7.0f);
  if (!(c.swiglu_limit > 0)) fail(source, "swiglu_limit", "must be > 0");
  if (c.num_experts <= 0) fail(source, "num_local_experts", "must be > 0");
}

}  // namespace vireo::config_json
