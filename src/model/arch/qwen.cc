// Qwen2: q/k/v biases always. Qwen3: per-head RMSNorm of q and k (self_attn.q_norm/k_norm) before RoPE.
#include "model/arch_spec.h"

namespace vireo {
void register_qwen_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "Qwen2ForCausalLM", .qkv_bias = true});
  out.push_back({.name = "Qwen3ForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope});
}
}  // namespace vireo
