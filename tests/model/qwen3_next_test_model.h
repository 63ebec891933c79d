// The tiny Qwen3-Next / Qwen3.5 family models of the CPU model tests (qwen3_next_model_test.cc) and
// the CUDA model tests (tests/cuda_graph): a text config by architecture name and deterministic random
// weights by tensor name (HF names; "model.language_model." prefixed for the multimodal wrappers).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/decoder_model.h"
#include "model/weight_source.h"
#include "named_random_weights.h"

namespace vireo::testing {

// Vocabulary 128, hidden 64, 4 layers (DeltaNet, attention, DeltaNet, attention); moe: 8 experts top-2
// and a gated shared expert.
inline nlohmann::json text_json(const std::string& arch, bool moe) {
  nlohmann::json j = {{"architectures", {arch}},
            {"vocab_size", 128},
            {"hidden_size", 64},
            {"intermediate_size", 96},
            {"num_hidden_layers", 4},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 16},
            {"max_position_embeddings", 256},
            {"rms_norm_eps", 1e-6},
            {"tie_word_embeddings", !moe},
            {"linear_num_key_heads", 2},
            {"linear_num_value_heads", 4},
            {"linear_key_head_dim", 8},
            {"linear_value_head_dim", 8},
            {"linear_conv_kernel_dim", 4},
            {"layer_types", {"linear_attention", "full_attention", "linear_attention", "full_attention"}},
            {"rope_parameters",
             {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25},
              {"mrope_section", {1, 1, 0}}, {"mrope_interleaved", true}}}};
  if (moe) {
    j["num_experts"] = 8;
    j["num_experts_per_tok"] = 2;
    j["moe_intermediate_size"] = 32;
    j["shared_expert_intermediate_size"] = 48;
  }
  return j;
}

// Zero-centred norms 0.2 r (the model adds 1), the DeltaNet's plain norm 1 + 0.2 r, A_log / dt_bias
// 0.5 r, conv taps 0.4 r, matrices 0.1 r (named_random_weights.h).
inline std::unique_ptr<WeightSource> qwen3_next_random_weights() {
  return std::make_unique<NamedRandomWeights>([](const std::string& name) {
    auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
    if (has("linear_attn.norm")) return std::pair{1.f, 0.2f};
    if (has("norm")) return std::pair{0.f, 0.2f};
    if (has("A_log") || has("dt_bias")) return std::pair{0.f, 0.5f};
    return std::pair{0.f, has("conv1d") ? 0.4f : 0.1f};
  });
}

inline std::unique_ptr<WeightSource> qwen3_next_source(bool wrapper) {
  std::unique_ptr<WeightSource> w = qwen3_next_random_weights();
  return wrapper ? with_model_prefix(std::move(w), "model.language_model.") : std::move(w);
}

inline std::unique_ptr<DecoderModel> tiny_qwen3_next(std::unique_ptr<Backend> be, const LoadOptions& opts,
                                                     const nlohmann::json& j) {
  ModelConfig c = ModelConfig::from_json(j, "tiny/config.json");
  return std::make_unique<DecoderModel>(c, find_arch_spec(c.architecture), std::move(be), qwen3_next_source(false),
                                        opts);
}

}  // namespace vireo::testing
