// Gemma 3's config.json forms: the hub's (rope_local_base_freq, sliding_window_pattern, rope_scaling),
// transformers 5's (layer_types, rope_parameters per layer type) and the multimodal wrapper's text_config.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/default_model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

using nlohmann::json;

// google/gemma-3-4b-it's text_config fields (trimmed sizes), as the hub ships them.
json hub_text() {
  return {{"model_type", "gemma3_text"}, {"vocab_size", 300}, {"hidden_size", 64}, {"intermediate_size", 128},
          {"num_hidden_layers", 7}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 32},
          {"query_pre_attn_scalar", 24}, {"sliding_window", 16}, {"sliding_window_pattern", 6},
          {"rope_local_base_freq", 10000.0}, {"rope_theta", 1000000.0},
          {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"final_logit_softcapping", nullptr},
          {"attn_logit_softcapping", nullptr}, {"max_position_embeddings", 512}};
}

TEST(Gemma3Config, HubWrapperWithPatternAndLocalBase) {
  json j = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
            {"text_config", hub_text()}, {"eos_token_id", {1, 106}}, {"torch_dtype", "bfloat16"}};
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");  // hidden_activation's default
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(c.rope_local_theta, 10000.0f);
  // Every 6th layer global (index 5), the rest sliding, with the window and the local RoPE.
  EXPECT_EQ(c.sliding_window, 16);
  for (int l = 0; l < 7; ++l) {
    EXPECT_EQ(c.layer_window(l), l == 5 ? 0 : 16) << l;
    EXPECT_EQ(c.local_rope_layer(l), l != 5) << l;
  }
}

// google/gemma-3-4b-it's config.json as released: its text_config names only what differs from
// Gemma3TextConfig's defaults.
TEST(Gemma3Config, ReleasedFourBConfigLeansOnTheDefaults) {
  json j = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
            {"eos_token_id", {1, 106}}, {"torch_dtype", "bfloat16"}, {"mm_tokens_per_image", 256},
            {"text_config", {{"hidden_size", 2560}, {"intermediate_size", 10240}, {"model_type", "gemma3_text"},
                             {"num_hidden_layers", 34}, {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                             {"sliding_window", 1024}}},
            {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 1152}}}};
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_hidden_layers, 34);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  for (int l = 0; l < 34; ++l) EXPECT_EQ(c.layer_window(l), (l + 1) % 6 ? 1024 : 0) << l;
}

TEST(Gemma3Config, TransformersFiveRopePerLayerType) {
  json j = hub_text();
  j["architectures"] = {"Gemma3ForCausalLM"};
  j.erase("rope_scaling");
  j.erase("rope_local_base_freq");
  j.erase("rope_theta");
  j.erase("sliding_window_pattern");
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                      "full_attention", "sliding_attention", "full_attention"};
  j["rope_parameters"] = {
      {"full_attention", {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 500000.0},
                          {"original_max_position_embeddings", 128}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["tie_word_embeddings"] = false;
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 20000.0f);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.layer_window(2), 16);
  EXPECT_FALSE(c.local_rope_layer(4));
  EXPECT_TRUE(c.local_rope_layer(5));
}

TEST(Gemma3Config, BuiltinOneB) {
  ModelConfig c = builtin_model_config("gemma3-1b");
  EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);
  int global = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) global += c.layer_window(l) == 0;
  EXPECT_EQ(global, 4);  // layers 5, 11, 17, 23
  EXPECT_EQ(c.layer_window(0), 512);
}

TEST(Gemma3Config, SoftCappingIsReadWhereGiven) {
  json j = hub_text();
  j["architectures"] = {"Gemma3ForCausalLM"};
  ModelConfig c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_EQ(c.attn_logit_softcapping, 0.0f);  // null in the released checkpoints
  EXPECT_EQ(c.final_logit_softcapping, 0.0f);
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  c = ModelConfig::from_json(j, "g/config.json");
  EXPECT_FLOAT_EQ(c.attn_logit_softcapping, 50.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcapping, 30.0f);
  j["final_logit_softcapping"] = -1.0;
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
}

TEST(Gemma3Config, RefusesWhatItCannotRun) {
  json j = hub_text();
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["hidden_activation"] = "relu";
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
  j = hub_text();
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["use_bidirectional_attention"] = true;
  EXPECT_THROW(ModelConfig::from_json(j, "g/config.json"), Error);
}

}  // namespace
}  // namespace vireo
