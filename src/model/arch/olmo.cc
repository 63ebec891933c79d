// OLMo-2: post-norm blocks (post_attention_layernorm / post_feedforward_layernorm on the branch
// outputs) and q_norm/k_norm over the full projection width before RoPE.
#include "model/arch_spec.h"

namespace vireo {
void register_olmo_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "Olmo2ForCausalLM", .qk_norm = QkNorm::kFullWidth, .post_norm = true});
}
}  // namespace vireo
