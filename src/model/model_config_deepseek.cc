// DeepSeek-V2/V3 config.json fields (transformers' DeepseekV2Config / DeepseekV3Config): MLA dims, the
// router (V3: noaux_tc, sigmoid scores, e_score_correction_bias, n_group / topk_group; V2: greedy
// softmax), routed_scaling_factor, shared experts and the first_k_dense_replace dense layers. Errors
// name the field. Where transformers' two models differ (V2: RoPE always on GPT-J pairs, no mscale in
// the softmax scale, q_a / kv_a norms with eps 1e-6, weights never renormalised), this follows them.
#include <cmath>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

namespace {
double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }
}  // namespace

void parse_deepseek(const json& j, const std::string& source, ModelConfig& c) {
  const bool v2 = c.architecture == "DeepseekV2ForCausalLM" || (c.architecture.empty() && c.model_type == "deepseek_v2");
  ModelConfig::Mla& m = c.mla;
  auto q_lora = j.find("q_lora_rank");
  m.q_lora_rank = (q_lora == j.end() || q_lora->is_null()) ? 0 : get_int(j, source, "q_lora_rank");
  if (q_lora != j.end() && !q_lora->is_null() && m.q_lora_rank <= 0) fail(source, "q_lora_rank", "must be > 0 or null");
  m.kv_lora_rank = get_int(j, source, "kv_lora_rank");
  if (m.kv_lora_rank <= 0) fail(source, "kv_lora_rank", "must be > 0");
  m.qk_nope_head_dim = get_int(j, source, "qk_nope_head_dim");
  if (m.qk_nope_head_dim < 0) fail(source, "qk_nope_head_dim", "must be >= 0");
  m.qk_rope_head_dim = get_int(j, source, "qk_rope_head_dim");
  if (m.qk_rope_head_dim <= 0 || m.qk_rope_head_dim % 2 != 0) fail(source, "qk_rope_head_dim", "must be a positive even number");
  m.v_head_dim = get_int(j, source, "v_head_dim");
  const int D = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (m.v_head_dim <= 0 || m.v_head_dim > D)
    fail(source, "v_head_dim", "must be in [1, qk_nope_head_dim + qk_rope_head_dim] (V is padded to the key width)");
  m.rope_interleave = v2 ? true : get_bool(j, source, "rope_interleave", true);
  m.norm_eps = v2 ? 1e-6f : c.rms_norm_eps;
  // MLA has no GQA: K and V are per head. HF repeats them num_attention_heads / num_key_value_heads
  // times, which only works when the two are equal.
  if (get_int(j, source, "num_key_value_heads", c.num_attention_heads) != c.num_attention_heads)
    fail(source, "num_key_value_heads", "must equal num_attention_heads for MLA attention");
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = D;
  c.rope_dim = m.qk_rope_head_dim;
  c.partial_rotary_factor = 1.0f;
  if (c.attention_bias) fail(source, "attention_bias", "true is not supported for DeepSeek MLA");
  if (c.mlp_bias) fail(source, "mlp_bias", "true is not supported for DeepSeek");
  // Softmax scale: qk_head_dim^-0.5, times mscale^2 for scaled RoPE with mscale_all_dim (HF's rule,
  // with the factor as written, not the one yarn derives from the two lengths).
  double scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (!v2 && c.rope_scaling.type != "default" && c.rope_scaling.mscale_all_dim && *c.rope_scaling.mscale_all_dim != 0) {
    const double ms = yarn_mscale(c.rope_scaling.factor, *c.rope_scaling.mscale_all_dim);
    scale *= ms * ms;
  }
  c.attention_scale = static_cast<float>(scale);

  // Routed experts (noaux_tc router) and the shared expert.
  c.num_experts = get_int(j, source, "n_routed_experts");
  if (c.num_experts <= 0) fail(source, "n_routed_experts", "must be > 0");
  c.num_experts_per_tok = get_int(j, source, "num_experts_per_tok");
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)
    fail(source, "num_experts_per_tok", "must be in [1, n_routed_experts]");
  c.moe_intermediate_size = get_int(j, source, "moe_intermediate_size");
  if (c.moe_intermediate_size <= 0) fail(source, "moe_intermediate_size", "must be > 0");
  const std::string scoring = v2 ? "softmax" : "sigmoid", method = v2 ? "greedy" : "noaux_tc";
  if (j.contains("scoring_func") && j["scoring_func"].is_string() && j["scoring_func"] != scoring)
    fail(source, "scoring_func", "'" + j["scoring_func"].get<std::string>() + "' is not supported (" + scoring + ")");
  // DeepSeek-V2's group_limited_greedy (group score: max) is not implemented (transformers 5 fails on it too).
  if (j.contains("topk_method") && j["topk_method"].is_string() && j["topk_method"] != method)
    fail(source, "topk_method", "'" + j["topk_method"].get<std::string>() + "' is not supported (" + method + ")");
  // transformers' V2 gate never renormalises (norm_topk_prob is ignored there).
  c.norm_topk_prob = v2 ? false : get_bool(j, source, "norm_topk_prob", true);
  c.moe_sigmoid = !v2;
  c.moe_softmax_fp32 = v2;
  parse_deepseek_router(j, source, c, /*groups=*/!v2, /*default_shared=*/0, /*default_dense=*/0);
  if (get_int(j, source, "moe_layer_freq", 1) != 1) fail(source, "moe_layer_freq", "must be 1 (as in transformers)");
}

void parse_deepseek_router(const json& j, const std::string& source, ModelConfig& c, bool groups, int default_shared,
                           int default_dense) {
  c.moe_n_group = groups ? get_int(j, source, "n_group", 1) : 1;
  if (c.moe_n_group < 1 || c.moe_n_group > 32 || c.num_experts % c.moe_n_group != 0 ||
      (c.moe_n_group > 1 && c.num_experts / c.moe_n_group < 2))
    fail(source, "n_group", "must be in [1, 32] and divide n_routed_experts into groups of >= 2");
  c.moe_topk_group = groups ? get_int(j, source, "topk_group", 1) : 1;
  if (c.moe_topk_group < 1 || c.moe_topk_group > c.moe_n_group ||
      c.moe_topk_group * (c.num_experts / c.moe_n_group) < c.num_experts_per_tok)
    fail(source, "topk_group", "must be in [1, n_group] and its groups must hold >= num_experts_per_tok experts");
  c.routed_scaling_factor = get_float(j, source, "routed_scaling_factor", 1.0f);
  if (!(c.routed_scaling_factor > 0)) fail(source, "routed_scaling_factor", "must be > 0");
  c.n_shared_experts = get_int(j, source, "n_shared_experts", default_shared);
  if (c.n_shared_experts < 0) fail(source, "n_shared_experts", "must be >= 0");
  c.first_k_dense_replace = get_int(j, source, "first_k_dense_replace", default_dense);
  if (c.first_k_dense_replace < 0) fail(source, "first_k_dense_replace", "must be >= 0");
  // transformers' DeepSeek-V2/V3 (and GLM-4.5) make every layer from first_k_dense_replace on sparse.
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
}

}  // namespace vireo::config_json
