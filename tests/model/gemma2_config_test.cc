// Gemma 2's config.json: the hub's (google/gemma-2-2b, trimmed sizes), Gemma2Config's defaults where a
// field is absent, null soft-caps, the builtin shape.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/default_model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

using nlohmann::json;

json hub() {
  return {{"architectures", {"Gemma2ForCausalLM"}}, {"model_type", "gemma2"}, {"vocab_size", 300},
          {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 5}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 32}, {"query_pre_attn_scalar", 24}, {"sliding_window", 16},
          {"attn_logit_softcapping", 50.0}, {"final_logit_softcapping", 30.0}, {"hidden_act", "gelu_pytorch_tanh"},
          {"hidden_activation", "gelu_pytorch_tanh"}, {"rope_theta", 10000.0}, {"eos_token_id", {1, 107}},
          {"torch_dtype", "float32"}};
}

TEST(Gemma2Config, HubConfig) {
  ModelConfig c = ModelConfig::from_json(hub(), "g/config.json");
  EXPECT_EQ(c.architecture, "Gemma2ForCausalLM");
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma2Config's default
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_FLOAT_EQ(c.attn_logit_softcapping, 50.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcapping, 30.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 0.0f);  // one RoPE for every layer
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(c.layer_window(l), l % 2 == 0 ? 16 : 0) << l;  // layer 0 slides, layer 1 is global, ...
    EXPECT_FALSE(c.local_rope_layer(l));
  }
}

TEST(Gemma2Config, DefaultsAndNulls) {
  json j = {{"architectures", {"Gemma2ForCausalLM"}}};  // everything from Gemma2Config
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.vocab_size, 256000);
  EXPECT_EQ(c.hidden_size, 2304);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.attn_logit_softcapping, 50.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcapping, 30.0f);
  EXPECT_EQ(c.layer_window(0), 4096);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);
  j = hub();
  j["attn_logit_softcapping"] = nullptr;  // null: none
  j["final_logit_softcapping"] = nullptr;
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.attn_logit_softcapping, 0.0f);
  EXPECT_EQ(c.final_logit_softcapping, 0.0f);
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 16);
  EXPECT_EQ(c.layer_window(4), 16);
}

TEST(Gemma2Config, Refusals) {
  json j = hub();
  j["use_bidirectional_attention"] = true;
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
  j = hub();
  j["attn_logit_softcapping"] = -2.0;
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
  j = hub();
  j["hidden_activation"] = "relu";
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
}

TEST(Gemma2Config, BuiltinTwoB) {
  ModelConfig c = builtin_model_config("gemma2-2b");
  EXPECT_EQ(c.architecture, "Gemma2ForCausalLM");
  EXPECT_EQ(c.num_hidden_layers, 26);
  EXPECT_EQ(c.layer_window(0), 4096);
  EXPECT_EQ(c.layer_window(25), 0);
  EXPECT_FLOAT_EQ(c.final_logit_softcapping, 30.0f);
}

}  // namespace
}  // namespace vireo
