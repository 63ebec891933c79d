// HunYuan dense v1: Llama layout plus per-head query_layernorm/key_layernorm applied after RoPE;
// RoPE may be dynamic NTK-alpha (handled in rope.cc from rope_scaling.alpha).
// HunYuan MoE v1 (Hunyuan-A13B): the same attention; every layer's MLP is a softmax top-k router
// (mlp.gate.wg, fp32 in checkpoints, weights always renormalised) over mlp.experts.* plus an ungated
// shared MLP (mlp.shared_mlp.*) added to their sum (model_config_hunyuan.cc for the widths).
#include "model/arch_spec.h"

namespace vireo {
void register_hunyuan_family(std::vector<ArchSpec>& out) {
  ArchSpec dense{.name = "HunYuanDenseV1ForCausalLM",
                 .qk_norm = QkNorm::kPerHeadAfterRope,
                 .q_norm_name = "query_layernorm",
                 .k_norm_name = "key_layernorm"};
  out.push_back(dense);
  ArchSpec moe = dense;
  moe.name = "HunYuanMoEV1ForCausalLM";
  moe.moe = true;
  moe.names.router = "gate.wg";
  moe.names.shared_expert = "shared_mlp";
  out.push_back(moe);
}
}  // namespace vireo
