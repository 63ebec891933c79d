// ERNIE 4.5 config.json fields (transformers' Ernie4_5Config / Ernie4_5_MoeConfig): use_bias onto
// attention_bias / mlp_bias, head_dim 128, tied embeddings, rms_norm_eps 1e-5 and rope_theta 500000 when
// absent. The MoE config (ERNIE-4.5-21B-A3B, -300B-A47B) names its fields its own way; they are read into
// the generic MoE keys:
//   moe_num_experts (64) -> num_experts, moe_k (6) -> num_experts_per_tok, moe_intermediate_size (1536),
//   moe_num_shared_experts (2) -> one shared MLP moe_intermediate_size * that wide (mlp.shared_experts),
//   layer l sparse when (l + 1) % moe_layer_interval == 0 and moe_layer_start_index <= l <=
//   moe_layer_end_index (-1: the last layer) -> decoder_sparse_step and mlp_only_layers.
// Routing (Ernie4_5_MoeSparseMoeBlock): fp32 softmax over fp32 logits, the top-k chosen on probs +
// moe_statics.e_score_correction_bias, weighted by the unbiased probs divided by max(their sum,
// moe_norm_min): MoeScoring::kSoftmaxFp32 with the score bias and renorm_eps = moe_norm_min (the same to
// within moe_norm_min / sum, ~1e-12 relative).
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_ernie4_5_moe(const std::string& a, const std::string& t) {
  return a == "Ernie4_5_MoeForCausalLM" || t == "ernie4_5_moe";
}

bool is_ernie4_5(const std::string& a, const std::string& t) {
  return a == "Ernie4_5ForCausalLM" || t == "ernie4_5" || is_ernie4_5_moe(a, t);
}

json ernie4_5_normalize(const json& in, const std::string& source) {
  json j = in;
  const bool bias = get_bool(j, source, "use_bias", false);
  j["attention_bias"] = bias;
  j["mlp_bias"] = bias;
  // head_dim: 128 when absent; null means hidden_size / num_attention_heads (Ernie4_5Config.__post_init__).
  if (!j.contains("head_dim")) j["head_dim"] = 128;
  else if (j["head_dim"].is_null()) j.erase("head_dim");
  if (!has(j, "tie_word_embeddings")) j["tie_word_embeddings"] = true;
  if (!has(j, "rms_norm_eps")) j["rms_norm_eps"] = 1e-5;
  if (!has(j, "rope_theta")) {
    if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {
      if (!rp->contains("rope_theta")) (*rp)["rope_theta"] = 500000.0;
    } else {
      j["rope_theta"] = 500000.0;
    }
  }
  auto archs = j.find("architectures");
  const std::string arch =
      archs != j.end() && archs->is_array() && !archs->empty() && (*archs)[0].is_string() ? (*archs)[0].get<std::string>() : "";
  const std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (!is_ernie4_5_moe(arch, type)) return j;
  // The experts and the shared MLP would carry biases too; no released MoE checkpoint has them.
  if (bias) fail(source, "use_bias", "is not supported for ERNIE 4.5 MoE (expert biases)");
  j["num_experts"] = get_int(j, source, "moe_num_experts", 64);
  j["num_experts_per_tok"] = get_int(j, source, "moe_k", 6);
  if (!has(j, "moe_intermediate_size")) j["moe_intermediate_size"] = 1536;
  j["norm_topk_prob"] = true;
  const int layers = get_int(j, source, "num_hidden_layers");
  const int interval = get_int(j, source, "moe_layer_interval", 1);
  if (interval <= 0) fail(source, "moe_layer_interval", "must be > 0");
  const int start = get_int(j, source, "moe_layer_start_index", 1);
  int end = get_int(j, source, "moe_layer_end_index", -1);
  if (end == -1) end = layers - 1;
  j["decoder_sparse_step"] = interval;
  json dense = json::array();
  for (int l = 0; l < layers; ++l)
    if (l < start || l > end) dense.push_back(l);
  j["mlp_only_layers"] = dense;
  return j;
}

void parse_ernie4_5(const json& j, const std::string& source, ModelConfig& c) {
  if (!is_ernie4_5_moe(c.architecture, c.model_type) || c.num_experts <= 0) return;
  const int shared = get_int(j, source, "moe_num_shared_experts", 2);
  if (shared < 0) fail(source, "moe_num_shared_experts", "must be >= 0");
  c.shared_expert_intermediate_size = c.moe_intermediate_size * shared;
  c.moe_softmax_fp32 = true;
  c.moe_softmax_bias = true;
  c.moe_renorm_eps = get_float(j, source, "moe_norm_min", 1e-12f);
}

}  // namespace vireo::config_json
