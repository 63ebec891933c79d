// LFM2-MoE (Lfm2MoeForCausalLM, LFM2-8B-A1B): LFM2's conv / attention layers with sparse feed_forwards
// from num_dense_layers on (sigmoid router, expert_bias for the choice, renormalised weights). The lfm2
// fixture rewritten as an LFM2-MoE checkpoint whose experts are all copies of the layer's dense MLP
// must give the fixture's logits: the renormalised weights sum to 1 whichever experts the router picks
// (up to the 1e-6 HF adds to their sum). The routing itself is checked against transformers by the
// lfm2_moe model fixture (tools/reference/make_model_fixtures.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "core/error.h"
#include "model/gguf_config.h"
#include "model/model_config.h"
#include "../gguf_util/hf_to_gguf.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

nlohmann::json moe_config(int num_dense_layers) {
  return {{"architectures", {"Lfm2MoeForCausalLM"}}, {"model_type", "lfm2_moe"}, {"vocab_size", 32},
          {"hidden_size", 16}, {"intermediate_size", 40}, {"moe_intermediate_size", 8},
          {"num_hidden_layers", 3}, {"num_attention_heads", 2}, {"num_experts", 4}, {"num_experts_per_tok", 2},
          {"num_dense_layers", num_dense_layers}, {"layer_types", {"conv", "full_attention", "conv"}}};
}

TEST(Lfm2MoeConfig, DenseLayersRouterAndDefaults) {
  const ModelConfig c = ModelConfig::from_json(moe_config(1), "t");
  EXPECT_EQ(c.intermediate_size, 40);  // as given: Lfm2MoeMLP has no width rule
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_TRUE(c.moe_layer(2));
  EXPECT_TRUE(c.conv_layer(0));
  EXPECT_FALSE(c.conv_layer(1));
  EXPECT_TRUE(c.norm_topk_prob);  // Lfm2MoeConfig's default
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_TRUE(c.moe_score_bias);
  EXPECT_FLOAT_EQ(c.moe_renorm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);  // norm_eps's default
  nlohmann::json j = moe_config(2);
  j["use_expert_bias"] = false;
  j["norm_topk_prob"] = false;
  j["routed_scaling_factor"] = 2.5;
  const ModelConfig d = ModelConfig::from_json(j, "t");
  EXPECT_FALSE(d.moe_layer(1));
  EXPECT_TRUE(d.moe_layer(2));
  EXPECT_FALSE(d.moe_score_bias);
  EXPECT_FALSE(d.norm_topk_prob);
  EXPECT_FLOAT_EQ(d.routed_scaling_factor, 2.5f);
  j["num_dense_layers"] = -1;
  EXPECT_THROW(ModelConfig::from_json(j, "t"), Error);
}

testing::RawTensor random_f32(std::vector<int64_t> shape, float stddev, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (float& x : v) x = dist(rng);
  return {"F32", shape, std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float))};
}

struct Lfm2MoeCheckpoints : ::testing::Test {
  fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/lfm2";
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_lfm2_moe_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }

  // The fixture as an LFM2-MoE checkpoint: layer 0 dense, layers 1-3 with 4 experts (top-2), each a copy
  // of the layer's w1 / w3 / w2; per expert (HF's files) or stacked (transformers' in-memory layout).
  fs::path write(const std::string& name, bool stacked, bool expert_bias) {
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
    cfg["architectures"] = {"Lfm2MoeForCausalLM"};
    cfg["model_type"] = "lfm2_moe";
    for (const char* k : {"block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of"}) cfg.erase(k);
    const int I = 192;  // the fixture's width after Lfm2MLP's rule (intermediate_size 200 x 2/3 x 1.25, to 32)
    const int E = 4;
    cfg["intermediate_size"] = I;
    cfg["moe_intermediate_size"] = I;
    cfg["num_experts"] = E;
    cfg["num_experts_per_tok"] = 2;
    cfg["num_dense_layers"] = 1;
    cfg["use_expert_bias"] = expert_bias;
    const fs::path dir = root / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << cfg.dump();
    auto t = testing::read_safetensors(fixture / "model.safetensors");
    std::mt19937 rng(7);
    const int L = cfg["num_hidden_layers"];
    for (int l = 1; l < L; ++l) {
      const std::string f = "model.layers." + std::to_string(l) + ".feed_forward.";
      const testing::RawTensor w1 = t.at(f + "w1.weight"), w3 = t.at(f + "w3.weight"), w2 = t.at(f + "w2.weight");
      EXPECT_EQ(w1.shape[0], I);
      t.erase(f + "w1.weight");
      t.erase(f + "w3.weight");
      t.erase(f + "w2.weight");
      // Small router weights keep each sigmoid score near 0.5, so that the 1e-6 HF adds to the top-k sum
      // moves the weights by ~1e-6 only; the bias (larger) still changes which experts are picked.
      t[f + "gate.weight"] = random_f32({E, w1.shape[1]}, 0.01f, rng);
      if (expert_bias) t[f + "expert_bias"] = random_f32({E}, 0.1f, rng);
      if (stacked) {
        testing::RawTensor gu{"F32", {E, 2 * I, w1.shape[1]}, ""}, down{"F32", {E, w2.shape[0], I}, ""};
        for (int e = 0; e < E; ++e) {
          gu.bytes += w1.bytes + w3.bytes;
          down.bytes += w2.bytes;
        }
        t[f + "experts.gate_up_proj"] = gu;
        t[f + "experts.down_proj"] = down;
      } else {
        for (int e = 0; e < E; ++e) {
          const std::string x = f + "experts." + std::to_string(e) + ".";
          t[x + "w1.weight"] = w1;
          t[x + "w3.weight"] = w3;
          t[x + "w2.weight"] = w2;
        }
      }
    }
    testing::write_safetensors(dir / "model.safetensors", t);
    return dir;
  }
};

TEST_F(Lfm2MoeCheckpoints, IdenticalExpertsGiveTheDenseModel) {
  const std::vector<float> want = testing::prompt_logits(fixture.string());
  const std::vector<float> per_expert = testing::prompt_logits(write("per_expert", false, true).string());
  ASSERT_EQ(per_expert.size(), want.size());
  EXPECT_LT(testing::rel_max_err(per_expert.data(), want.data(), want.size()), 5e-6);
  // transformers' in-memory layout (experts.gate_up_proj [E, 2I, hidden], down_proj): the same numbers.
  EXPECT_EQ(testing::prompt_logits(write("stacked", true, true).string()), per_expert);
  // use_expert_bias false: no expert_bias tensor is read.
  const std::vector<float> no_bias = testing::prompt_logits(write("no_bias", false, false).string());
  EXPECT_LT(testing::rel_max_err(no_bias.data(), want.data(), want.size()), 5e-6);
}

// Its GGUF as convert_hf_to_gguf.py's LFM2MoeModel writes it (arch lfm2moe: head_count_kv 0 on conv layers,
// leading_dense_block_count, expert_gating_func sigmoid, exp_probs_b, ffn_*_exps): the same logits.
TEST_F(Lfm2MoeCheckpoints, GgufLoadsLikeTheCheckpoint) {
  const fs::path dir = write("per_expert", false, true);
  const std::vector<float> want = testing::prompt_logits(dir.string());
  const std::string gguf = (root / "lfm2_moe.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  const ModelConfig c = gguf_model_config(GgufShards(gguf));
  EXPECT_EQ(c.architecture, "Lfm2MoeForCausalLM");
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_TRUE(c.moe_score_bias);
  const std::vector<float> got = testing::prompt_logits(gguf);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(testing::rel_max_err(got.data(), want.data(), want.size()), 1e-6);
}

}  // namespace
}  // namespace vireo
