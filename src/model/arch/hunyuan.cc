// HunYuan dense v1: Llama layout plus per-head query_layernorm/key_layernorm applied after RoPE;
// RoPE may be dynamic NTK-alpha (handled in rope.cc from rope_scaling.alpha).
#include "model/arch_spec.h"

namespace vireo {
void register_hunyuan_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "HunYuanDenseV1ForCausalLM",
                 .qk_norm = QkNorm::kPerHeadAfterRope,
                 .q_norm_name = "query_layernorm",
                 .k_norm_name = "key_layernorm"});
}
}  // namespace vireo
