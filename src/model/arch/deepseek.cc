// DeepSeek-V3: pre-norm Llama layout with multi-head latent attention (MLA) and, from layer
// first_k_dense_replace on, sparse MoE MLPs with the noaux_tc router (sigmoid scores, score-correction
// bias, group limit, routed_scaling_factor) plus a shared expert. RoPE on the qk_rope_head_dim dims of
// each head: GPT-J pairs when config.rope_interleave (HF's default), else rotate_half; the generic
// decoder picks neox from config.mla.rope_interleave.
// DeepSeek-V2 (transformers 5): the same layout; greedy softmax gate (fp32 logits, weights times
// routed_scaling_factor, never renormalised), RoPE as complex pairs (GPT-J), no mscale in the softmax scale.
#include "model/arch_spec.h"

namespace vireo {
void register_deepseek_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "DeepseekV2ForCausalLM", .moe = true, .mla = true});
  out.push_back({.name = "DeepseekV3ForCausalLM", .moe = true, .mla = true});
}
}  // namespace vireo
