// Qwen2: q/k/v biases always. Qwen3: per-head RMSNorm of q and k (self_attn.q_norm/k_norm) before RoPE.
// Qwen3-MoE: Qwen3 attention, sparse MoE MLPs (router mlp.gate, experts mlp.experts.<e>.*; no shared
// expert) except on config.mlp_only_layers.
#include "model/arch_spec.h"

namespace vireo {
void register_qwen_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "Qwen2ForCausalLM", .qkv_bias = true});
  out.push_back({.name = "Qwen3ForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope});
  out.push_back({.name = "Qwen3MoeForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope, .moe = true});
}
}  // namespace vireo
