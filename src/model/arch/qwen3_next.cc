// Qwen3-Next, Qwen3.5 and Qwen3.5-MoE (Qwen3.6 checkpoints use the same architectures): a hybrid of
// Gated DeltaNet layers (linear_attn) and gated attention layers (Qwen3 q/k norms before partial
// RoPE, a sigmoid output gate from q_proj), zero-centred RMSNorms; dense SwiGLU MLPs (Qwen3.5) or
// softmax top-k MoE with a gated shared expert (Qwen3-Next, Qwen3.5-MoE). The released Qwen3.5
// checkpoints are the multimodal *ForConditionalGeneration wrappers: text weights under
// model.language_model.*, the vision tower (model.visual.*) and mtp.* ignored.
#include "model/arch_spec.h"

namespace vireo {
void register_qwen3_next_family(std::vector<ArchSpec>& out) {
  auto add = [&](const char* name, bool moe, bool interleaved, bool wrapper) {
    ArchSpec s;
    s.qk_norm = QkNorm::kPerHeadBeforeRope;
    s.gated_delta_net = true;
    s.name = name;
    s.moe = moe;
    s.gated_shared_expert = moe;
    s.qkvz_interleaved = interleaved;
    s.language_model_prefix = wrapper;
    out.push_back(s);
  };
  add("Qwen3NextForCausalLM", true, true, false);
  add("Qwen3_5ForCausalLM", false, false, false);
  add("Qwen3_5MoeForCausalLM", true, false, false);
  add("Qwen3_5ForConditionalGeneration", false, false, true);
  add("Qwen3_5MoeForConditionalGeneration", true, false, true);
}
}  // namespace vireo
