// GLM / GLM-4 config.json: GlmConfig's defaults where a field is absent (head_dim 128, q/k/v biases,
// RoPE over half of each head), the config's own values otherwise.
#include <gtest/gtest.h>

#include "model/arch_spec.h"
#include "model/model_config.h"

namespace vireo {
namespace {

using nlohmann::json;

TEST(GlmConfig, DefaultsOfGlmConfig) {
  json j = {{"architectures", {"Glm4ForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 512},
            {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 8},
            {"num_key_value_heads", 2}, {"max_position_embeddings", 512}};
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.rotary_dim(), 64);
  j["head_dim"] = 64;
  j["attention_bias"] = false;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 1.0}};
  c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rotary_dim(), 64);
}

TEST(GlmConfig, LayerSpecs) {
  const ArchSpec& glm = find_arch_spec("GlmForCausalLM");
  EXPECT_FALSE(glm.neox_rope);
  EXPECT_FALSE(glm.o_proj_bias);
  EXPECT_FALSE(glm.sandwich_norm);
  const ArchSpec& glm4 = find_arch_spec("Glm4ForCausalLM");
  EXPECT_TRUE(glm4.sandwich_norm);
  EXPECT_EQ(glm4.names.post_attn_norm, "post_self_attn_layernorm");
  EXPECT_EQ(glm4.names.pre_ffn_norm, "post_attention_layernorm");
  EXPECT_EQ(glm4.names.post_ffn_norm, "post_mlp_layernorm");
}

}  // namespace
}  // namespace vireo
