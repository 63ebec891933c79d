// A tiny LFM2 (conv, attention, conv, attention; GQA; conv biases) with deterministic random weights of
// the fixture script's magnitudes (normal(0, 0.1) matrices, norms 1 + 0.2 r, biases 0.1 r), built
// without a checkpoint: for the hybrid-layer tests of model/ and engine/ before the transformers fixture.
#pragma once
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/decoder_model.h"
#include "model/weight_source.h"
#include "named_random_weights.h"

namespace vireo::testing {

inline nlohmann::json tiny_lfm2_json() {
  return {{"architectures", {"Lfm2ForCausalLM"}},
          {"model_type", "lfm2"},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 200},  // Lfm2MLP: int(2 * 200 / 3) = 133, * 1.25 -> 166, up to 32s -> 192
          {"block_auto_adjust_ff_dim", true},
          {"block_ffn_dim_multiplier", 1.25},
          {"block_multiple_of", 32},
          {"num_hidden_layers", 4},
          {"layer_types", {"conv", "full_attention", "conv", "full_attention"}},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 512},
          {"norm_eps", 1e-5},
          {"conv_L_cache", 3},
          {"conv_bias", true},
          {"eos_token_id", 2},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
}

// Norms 1 + 0.2 r, conv taps 0.4 r, biases and matrices 0.1 r (named_random_weights.h).
inline std::unique_ptr<WeightSource> lfm2_random_weights() {
  return std::make_unique<NamedRandomWeights>([](const std::string& name) {
    if (name.find("norm") != std::string::npos) return std::pair{1.f, 0.2f};
    const bool bias = name.find(".bias") != std::string::npos;
    const bool conv = name.find("conv.conv.weight") != std::string::npos;
    return std::pair{0.f, bias ? 0.1f : conv ? 0.4f : 0.1f};
  });
}

inline std::unique_ptr<DecoderModel> tiny_lfm2(std::unique_ptr<Backend> be, const LoadOptions& opts = {},
                                               nlohmann::json j = tiny_lfm2_json()) {
  ModelConfig c = ModelConfig::from_json(j, "tiny-lfm2/config.json");
  return std::make_unique<DecoderModel>(c, find_arch_spec(c.architecture), std::move(be),
                                        lfm2_random_weights(), opts);
}

}  // namespace vireo::testing
