// Llama family: pre-norm, fused [q;k;v] and [gate;up], optional biases from config, neox RoPE.
#include "model/arch_spec.h"

namespace vireo {
void register_llama_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "LlamaForCausalLM"});
  out.push_back({.name = "MistralForCausalLM"});
}
}  // namespace vireo
