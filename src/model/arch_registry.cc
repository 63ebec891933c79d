#include "core/error.h"
#include "model/arch_spec.h"

namespace vireo {

const std::vector<ArchSpec>& arch_specs() {
  static const std::vector<ArchSpec> specs = [] {
    std::vector<ArchSpec> v;
    register_llama_family(v);
    register_qwen_family(v);
    register_olmo_family(v);
    register_hunyuan_family(v);
    register_lfm2_family(v);
    register_deepseek_family(v);
    register_qwen3_next_family(v);
    register_gemma_family(v);
    register_phi_family(v);
    register_glm_family(v);
    register_gpt_oss_family(v);
    return v;
  }();
  return specs;
}

const ArchSpec& find_arch_spec(const std::string& name, const std::string& source) {
  std::string names;
  for (const auto& s : arch_specs()) {
    if (s.name == name) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  // A base model without its head (AutoModel's "Qwen2Model", "MistralModel": embedding checkpoints) is its
  // causal LM's decoder.
  if (name.size() > 5 && name.ends_with("Model") && !name.ends_with("ForCausalLM"))
    for (const auto& s : arch_specs())
      if (s.name == name.substr(0, name.size() - 5) + "ForCausalLM") return s;
  // A sequence classifier ("Qwen3ForSequenceClassification": reward models, rerankers) is its causal LM's
  // decoder with score.weight instead of lm_head (applied by the pooling runner).
  const std::string cls = "ForSequenceClassification";
  if (name.size() > cls.size() && name.ends_with(cls))
    for (const auto& s : arch_specs())
      if (s.name == name.substr(0, name.size() - cls.size()) + "ForCausalLM") return s;
  throw Error(source + ": architecture '" + name + "' is not supported (supported: " + names + ")");
}

}  // namespace vireo
