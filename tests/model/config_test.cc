// config.json parsing: defaults, old/new RoPE spellings, eos forms, field errors; RoPE tables.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/model_config.h"
#include "model/rope.h"

namespace vireo {
namespace {

using nlohmann::json;

json base() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 100}, {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"max_position_embeddings", 256}};
}

TEST(ModelConfig, Defaults) {
  ModelConfig c = ModelConfig::from_json(base(), "x/config.json");
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(ModelConfig, OldStyleRopeScalingAndEosList) {
  json j = base();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["eos_token_id"] = {7, 9};
  j["bos_token_id"] = 3;
  j["torch_dtype"] = "bfloat16";
  j["partial_rotary_factor"] = 0.5;
  ModelConfig c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 2.0f);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(c.bos_token_id, 3);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.rotary_dim(), 8);
  // linear: inv_freq / factor, over rotary_dim
  RopeFrequencies rf = rope_frequencies(c);
  ASSERT_EQ(rf.inv_freq.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rf.inv_freq[i], std::pow(500000.0, -2.0 * i / 8) / 2, 1e-7);
}

TEST(ModelConfig, NewStyleRopeParameters) {
  json j = base();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0},
                          {"original_max_position_embeddings", 64}};
  ModelConfig c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
}

// YaRN takes the factor as written, as transformers 5 and vLLM do: Qwen3's way of turning it on (factor 4,
// original_max_position_embeddings 32768) leaves max_position_embeddings at 40960, a ratio of 1.25 that
// older transformers used instead. Without a factor, the ratio of the two lengths.
TEST(ModelConfig, YarnUsesTheExplicitFactor) {
  json j = base();
  j["max_position_embeddings"] = 40960;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelConfig c = ModelConfig::from_json(j, "x/config.json");
  RopeFrequencies rf = rope_frequencies(c);
  EXPECT_NEAR(rf.attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-6);
  j["rope_scaling"].erase("factor");
  c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_NEAR(rope_frequencies(c).attention_scaling, 0.1 * std::log(40960.0 / 32768.0) + 1.0, 1e-6);
}

TEST(ModelConfig, SlidingWindowFollowsHfRules) {
  EXPECT_EQ(ModelConfig::from_json(base(), "c").sliding_window, 0);
  json mistral = base();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 4096;  // every layer slides
  EXPECT_EQ(ModelConfig::from_json(mistral, "c").sliding_window, 4096);
  EXPECT_EQ(ModelConfig::from_json(mistral, "c").sliding_layers, (std::vector<uint8_t>{1, 1}));
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json(mistral, "c").sliding_window, 0);
  json qwen = base();
  qwen["sliding_window"] = 128;
  qwen["use_sliding_window"] = false;  // Qwen2/3: only when asked for
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_window, 0);
  qwen["use_sliding_window"] = true;
  qwen["max_window_layers"] = 2;  // layers >= 2 slide: none of the 2
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_window, 0);
  qwen["max_window_layers"] = 1;
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_window, 128);
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_layers, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").layer_window(0), 0);
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").layer_window(1), 128);
  qwen["layer_types"] = {"full_attention", "full_attention"};  // layer_types wins when present
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_window, 0);
  qwen["layer_types"] = {"sliding_attention", "full_attention"};
  qwen["use_sliding_window"] = false;
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_window, 128);
  EXPECT_EQ(ModelConfig::from_json(qwen, "c").sliding_layers, (std::vector<uint8_t>{1, 0}));
}

// OLMo 3 (Olmo3Config): without layer_types, every 4th layer is global and the others slide over
// sliding_window keys (4096 when absent); layer_types, when given, wins.
TEST(ModelConfig, Olmo3SlidesThreeLayersOfFour) {
  json olmo3 = base();
  olmo3["architectures"] = {"Olmo3ForCausalLM"};
  olmo3["num_hidden_layers"] = 8;
  ModelConfig c = ModelConfig::from_json(olmo3, "c");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0}));
  olmo3["sliding_window"] = 16;
  olmo3["num_hidden_layers"] = 2;
  olmo3["layer_types"] = {"full_attention", "sliding_attention"};
  c = ModelConfig::from_json(olmo3, "c");
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{0, 1}));
  olmo3["layer_types"] = {"full_attention"};
  EXPECT_THROW(ModelConfig::from_json(olmo3, "c"), Error);
}

// OLMo 3's defaults (Olmo3Config: rms_norm_eps 1e-5, rope_theta 500000) and its older configs, whose
// top-level rope_scaling applies to the full-attention layers only (transformers 4.57's rotary_embs and
// 5's conversion into rope_parameters per layer type): the sliding layers rotate with plain RoPE.
TEST(ModelConfig, Olmo3DefaultsAndOlderRopeScaling) {
  json o = base();
  o["architectures"] = {"Olmo3ForCausalLM"};
  o["num_hidden_layers"] = 4;
  ModelConfig c = ModelConfig::from_json(o, "c");
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_local_theta, 0.0f);  // one RoPE for every layer
  o["rope_theta"] = 20000.0;
  o["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  c = ModelConfig::from_json(o, "c");
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FLOAT_EQ(c.rope_theta, 20000.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 20000.0f);
  EXPECT_EQ(c.local_rope_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  // transformers 5's nested form; a sliding entry without a theta takes default_theta.
  o.erase("rope_scaling");
  o.erase("rope_theta");
  o["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 30000.0}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  c = ModelConfig::from_json(o, "c");
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(c.rope_theta, 30000.0f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 500000.0f);
}

// EXAONE 4.0 (Exaone4Config): sliding layers by sliding_window_pattern (an integer period, or an L / G
// string whose last layer is always global) when layer_types is absent; global layers NoPE when hybrid.
TEST(ModelConfig, Exaone4HybridLayers) {
  json e = base();
  e["architectures"] = {"Exaone4ForCausalLM"};
  e["num_hidden_layers"] = 6;
  e["sliding_window"] = 32;
  ModelConfig c = ModelConfig::from_json(e, "c");  // pattern 4 (the default)
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1}));
  EXPECT_EQ(c.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1, 0, 0}));
  e["sliding_window_pattern"] = "LLG";
  c = ModelConfig::from_json(e, "c");
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(c.nope_layers, (std::vector<uint8_t>{0, 0, 1, 0, 0, 1}));
  e["sliding_window_pattern"] = "LLLL";  // the last layer stays global
  EXPECT_EQ(ModelConfig::from_json(e, "c").sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  e["sliding_window_pattern"] = "LXG";
  EXPECT_THROW(ModelConfig::from_json(e, "c"), Error);
  e["sliding_window"] = nullptr;  // no hybrid attention: every layer global and rotating
  c = ModelConfig::from_json(e, "c");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.nope_layers, (std::vector<uint8_t>(6, 0)));
}

// OLMoE: experts intermediate_size wide, no renormalisation by default, clip_qkv refused. ERNIE 4.5:
// use_bias sets both bias flags; Ernie4_5Config's defaults.
TEST(ModelConfig, OlmoeAndErnieFields) {
  json o = base();
  o["architectures"] = {"OlmoeForCausalLM"};
  o["num_experts"] = 8;
  o["num_experts_per_tok"] = 2;
  ModelConfig c = ModelConfig::from_json(o, "c");
  EXPECT_EQ(c.moe_intermediate_size, 128);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.moe_layer(0));
  o["clip_qkv"] = 8.0;
  EXPECT_THROW(ModelConfig::from_json(o, "c"), Error);
  json e = base();
  e["architectures"] = {"Ernie4_5ForCausalLM"};
  e["use_bias"] = true;
  c = ModelConfig::from_json(e, "c");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  e["head_dim"] = nullptr;  // Ernie4_5Config: hidden_size / num_attention_heads
  e["rope_parameters"] = {{"rope_type", "default"}};
  c = ModelConfig::from_json(e, "c");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  o.erase("clip_qkv");
  EXPECT_FLOAT_EQ(ModelConfig::from_json(o, "c").rms_norm_eps, 1e-5f);  // OlmoeConfig's default
}

// ERNIE 4.5 MoE: its moe_* fields onto the generic MoE fields; which layers are sparse by start / end /
// interval as Ernie4_5_MoeDecoderLayer decides; the softmax router with a choice bias.
TEST(ModelConfig, ErnieMoeFields) {
  json e = base();
  e["architectures"] = {"Ernie4_5_MoeForCausalLM"};
  e["num_hidden_layers"] = 6;
  e["moe_num_experts"] = 8;
  e["moe_k"] = 2;
  e["moe_intermediate_size"] = 24;
  e["moe_num_shared_experts"] = 2;
  e["moe_layer_start_index"] = 1;
  e["moe_layer_end_index"] = 4;
  e["moe_layer_interval"] = 2;
  ModelConfig c = ModelConfig::from_json(e, "c");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 24);
  EXPECT_EQ(c.shared_expert_width(), 48);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.moe_softmax_fp32);
  EXPECT_TRUE(c.moe_softmax_bias);
  EXPECT_FALSE(c.moe_sigmoid);
  EXPECT_FLOAT_EQ(c.moe_renorm_eps, 1e-12f);
  const bool sparse[] = {false, true, false, true, false, false};  // (l + 1) % 2 == 0, 1 <= l <= 4
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.moe_layer(l), sparse[l]) << l;
  e["moe_layer_end_index"] = -1;  // the last layer
  e["moe_layer_interval"] = 1;
  c = ModelConfig::from_json(e, "c");
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.moe_layer(l), l >= 1) << l;
  e["moe_num_shared_experts"] = 0;
  EXPECT_EQ(ModelConfig::from_json(e, "c").shared_expert_width(), 0);
  e["use_bias"] = true;  // the experts would carry biases
  EXPECT_THROW(ModelConfig::from_json(e, "c"), Error);
  e["use_bias"] = false;
  e["moe_layer_interval"] = 0;
  EXPECT_THROW(ModelConfig::from_json(e, "c"), Error);
}

// HunYuan-MoE: Hunyuan-A13B's per-layer lists and its own field names onto the generic MoE fields.
TEST(ModelConfig, HunyuanMoeFields) {
  json h = base();
  h["architectures"] = {"HunYuanMoEV1ForCausalLM"};
  h.erase("rms_norm_eps");
  h["num_hidden_layers"] = 3;
  h["num_experts"] = {8, 8, 8};
  h["moe_topk"] = {2, 2, 2};
  h["moe_intermediate_size"] = {48, 48, 48};
  h["num_shared_expert"] = {2, 2, 2};
  ModelConfig c = ModelConfig::from_json(h, "c");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 48);
  EXPECT_EQ(c.shared_expert_width(), 2 * c.intermediate_size);
  EXPECT_TRUE(c.norm_topk_prob);  // transformers renormalises for every k
  EXPECT_TRUE(c.moe_softmax_fp32);  // its fp32 gate: unrounded logits, fp32 weights
  EXPECT_FALSE(c.moe_sigmoid);
  EXPECT_FLOAT_EQ(c.moe_renorm_eps, 0.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  for (int l = 0; l < 3; ++l) EXPECT_TRUE(c.moe_layer(l));
  // transformers' own config: plain integers, every expert and the one shared MLP intermediate_size wide.
  json t = base();
  t["architectures"] = {"HunYuanMoEV1ForCausalLM"};
  t["num_experts"] = 4;
  t["moe_topk"] = 1;
  c = ModelConfig::from_json(t, "c");
  EXPECT_EQ(c.num_experts_per_tok, 1);
  EXPECT_EQ(c.moe_intermediate_size, c.intermediate_size);
  EXPECT_EQ(c.shared_expert_width(), c.intermediate_size);
  h["moe_topk"] = {2, 1, 2};
  try {
    ModelConfig::from_json(h, "c");
    ADD_FAILURE() << "per-layer top-k that differs must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moe_topk"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ErrorsNameFileAndField) {
  auto expect_error = [](json j, const std::string& field) {
    try {
      ModelConfig::from_json(j, "dir/config.json");
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("dir/config.json"), std::string::npos) << m;
      EXPECT_NE(m.find(field), std::string::npos) << m;
    }
  };
  json j = base();
  j["hidden_size"] = "big";
  expect_error(j, "hidden_size");
  j = base();
  j.erase("architectures");
  expect_error(j, "architectures");
  j = base();
  j["num_key_value_heads"] = 3;
  expect_error(j, "num_key_value_heads");
  j = base();
  j["rope_scaling"] = {{"rope_type", "longrope"}};
  expect_error(j, "rope_scaling");
  j = base();
  j["eos_token_id"] = "x";
  expect_error(j, "eos_token_id");
}

// Phi-3's LongRoPE ("su" in its first configs): inv_freq = 1 / (ext * base^(2i/d)), the short factors up
// to original_max_position_embeddings (beside the rope object), the long ones from there; cos / sin times
// sqrt(1 + ln(max / original) / ln(original)).
TEST(RopeTable, LongRopeSwitchesFactorsAtTheOriginalLength) {
  json j = base();  // head_dim 16: 8 frequencies
  j["architectures"] = {"Phi3ForCausalLM"};
  j["max_position_embeddings"] = 512;
  j["original_max_position_embeddings"] = 128;
  const std::vector<float> sf{1.0f, 1.1f, 1.3f, 1.6f, 2.0f, 2.5f, 3.0f, 4.0f}, lf{1, 2, 3, 4, 5, 6, 7, 8};
  j["rope_scaling"] = {{"type", "su"}, {"short_factor", sf}, {"long_factor", lf}};
  ModelConfig c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 128);
  const RopeFrequencies rf = rope_frequencies(c);
  const double attn = std::sqrt(1 + std::log(4.0) / std::log(128.0));
  EXPECT_NEAR(rf.attention_scaling, attn, 1e-6);
  auto t = rope_cos_sin_table(c, 300);
  for (int p : {0, 5, 127, 128, 299})
    for (int i = 0; i < 8; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / 16) / (p < 128 ? sf[i] : lf[i]);
      EXPECT_NEAR(t[p * 16 + i], std::cos(p * f) * attn, 2e-5) << p << " " << i;
      EXPECT_NEAR(t[p * 16 + 8 + i], std::sin(p * f) * attn, 2e-5) << p << " " << i;
    }
  j["rope_scaling"]["long_factor"] = {1, 2};  // one value per frequency
  EXPECT_THROW(rope_frequencies(ModelConfig::from_json(j, "x/config.json")), Error);
  j["rope_scaling"]["long_factor"] = {1, 2, 3, 4, 5, 6, 7, -8};
  EXPECT_THROW(ModelConfig::from_json(j, "x/config.json"), Error);
}

TEST(RopeTable, LayoutIsCosThenSinPerPosition) {
  ModelConfig c = ModelConfig::from_json(base(), "x");
  auto t = rope_cos_sin_table(c, 10);
  ASSERT_EQ(t.size(), 10u * 16);
  for (int p = 0; p < 10; ++p)
    for (int i = 0; i < 8; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / 16);
      EXPECT_NEAR(t[p * 16 + i], std::cos(p * f), 2e-6);
      EXPECT_NEAR(t[p * 16 + 8 + i], std::sin(p * f), 2e-6);
    }
}

}  // namespace
}  // namespace vireo
