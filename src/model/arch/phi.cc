// Phi-3 / Phi-3.5 / Phi-4-mini (Phi3ForCausalLM): Llama's layer with q/k/v and gate/up fused in the
// checkpoint (self_attn.qkv_proj = [q; k; v] rows, mlp.gate_up_proj = [gate; up] rows: the layout the
// decoder keeps, read as they are), partial rotary (Phi-4-mini), a sliding window on every layer where
// the config sets one (Phi-3-mini-4k: 2047), and LongRoPE (rope.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_phi_family(std::vector<ArchSpec>& out) { out.push_back({.name = "Phi3ForCausalLM"}); }
}  // namespace vireo
