// SmolLM3's config.json: NoPE layers from no_rope_layers (1 = RoPE) or every no_rope_layer_interval-th
// layer, windows only on NoPE layers when enabled, tied embeddings by default.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/model_config.h"

namespace vireo {
namespace {

using nlohmann::json;

json base() {
  return {{"architectures", {"SmolLM3ForCausalLM"}}, {"model_type", "smollm3"}, {"vocab_size", 300},
          {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 8}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 512}};
}

TEST(SmolLM3Config, EveryFourthLayerSkipsRopeByDefault) {
  ModelConfig c = ModelConfig::from_json(base(), "s/config.json");
  EXPECT_TRUE(c.tie_word_embeddings);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(c.nope_layer(l), l == 3 || l == 7) << l;
  for (int l = 0; l < 8; ++l) EXPECT_EQ(c.layer_window(l), 0) << l;
}

TEST(SmolLM3Config, ExplicitFlagsAndWindowsOnNopeLayers) {
  json j = base();
  j["no_rope_layers"] = {1, 0, 1, 1, 0, 1, 1, 1};
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["tie_word_embeddings"] = false;
  ModelConfig c = ModelConfig::from_json(j, "s/config.json");
  EXPECT_FALSE(c.tie_word_embeddings);
  for (int l = 0; l < 8; ++l) {
    EXPECT_EQ(c.nope_layer(l), l == 1 || l == 4) << l;
    EXPECT_EQ(c.layer_window(l), l == 1 || l == 4 ? 16 : 0) << l;
  }
  j["no_rope_layers"] = {1, 0};  // one flag per layer
  EXPECT_THROW(ModelConfig::from_json(j, "s/config.json"), Error);
  j = base();
  j["no_rope_layer_interval"] = 0;
  EXPECT_THROW(ModelConfig::from_json(j, "s/config.json"), Error);
}

}  // namespace
}  // namespace vireo
