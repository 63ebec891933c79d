// LFM2 (Liquid AI): pre-norm hybrid of attention layers (Qwen3-style per-head q_layernorm/k_layernorm
// before RoPE, out_proj) and gated short-convolution layers (conv.*), chosen per layer by
// config.layer_types / full_attn_idxs; SwiGLU MLP as feed_forward.w1/w3/w2; the final norm is
// model.embedding_norm. RMSNorm is weight * x (not 1 + weight), eps from norm_eps (model_config).
// LFM2-MoE (LFM2-8B-A1B): the same layers; from num_dense_layers on the feed_forward is sparse:
// feed_forward.gate (router), feed_forward.expert_bias, experts.<e>.w1 / w3 / w2 (model_config_lfm2.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_lfm2_family(std::vector<ArchSpec>& out) {
  const ModuleNames names{.input_norm = "operator_norm",
                          .post_attn_norm = "ffn_norm",
                          .o_proj = "out_proj",
                          .mlp = "feed_forward",
                          .gate_proj = "w1",
                          .up_proj = "w3",
                          .down_proj = "w2",
                          .router_bias = "expert_bias",
                          .final_norm = "model.embedding_norm"};
  for (const bool moe : {false, true})
    out.push_back({.name = moe ? "Lfm2MoeForCausalLM" : "Lfm2ForCausalLM",
                   .qk_norm = QkNorm::kPerHeadBeforeRope,
                   .q_norm_name = "q_layernorm",
                   .k_norm_name = "k_layernorm",
                   .moe = moe,
                   .short_conv = true,
                   .names = names});
}
}  // namespace vireo
