// GLM-4.5 (Glm4MoeForCausalLM): with use_qk_norm, full rotary and no attention bias its attention is
// Qwen3's, so the qwen3 fixture rewritten as a Glm4Moe checkpoint whose layers are all dense
// (first_k_dense_replace = num_hidden_layers) gives bitwise its logits. With layer 1 sparse, experts
// that are copies of the dense MLP and a shared expert whose down_proj is zero, the renormalised weights
// sum to 1 and the logits stay those of the fixture (up to summation order). transformers' own numbers
// for the routing, partial RoPE and biases come from the glm4_moe model fixture.
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
using nlohmann::json;

json glm4_moe_json() {
  return {{"architectures", {"Glm4MoeForCausalLM"}}, {"model_type", "glm4_moe"}, {"vocab_size", 32},
          {"hidden_size", 64}, {"intermediate_size", 96}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"n_routed_experts", 8}, {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 16}};
}

TEST(Glm4MoeConfig, DefaultsAndRouter) {
  const ModelConfig c = ModelConfig::from_json(glm4_moe_json(), "t");
  EXPECT_EQ(c.head_dim, 128);  // Glm4MoeConfig's default, not hidden / heads
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_TRUE(c.qk_norm_off);  // use_qk_norm defaults to false
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.shared_expert_width(), 16);
  EXPECT_FALSE(c.moe_layer(0));  // first_k_dense_replace 1
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  json j = glm4_moe_json();
  j["use_qk_norm"] = true;
  j["n_group"] = 4;
  j["topk_group"] = 2;
  j["routed_scaling_factor"] = 2.5;
  j["first_k_dense_replace"] = 2;
  const ModelConfig d = ModelConfig::from_json(j, "t");
  EXPECT_FALSE(d.qk_norm_off);
  EXPECT_EQ(d.moe_n_group, 4);
  EXPECT_EQ(d.moe_topk_group, 2);
  EXPECT_FLOAT_EQ(d.routed_scaling_factor, 2.5f);
  EXPECT_FALSE(d.moe_layer(1));
  j["n_group"] = 3;  // does not divide 8
  EXPECT_THROW(ModelConfig::from_json(j, "t"), Error);
}

struct Glm4MoeCheckpoint : ::testing::Test {
  fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_glm4_moe_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }

  fs::path write(const std::string& name, bool sparse) {
    json cfg = json::parse(std::ifstream(fixture / "config.json"));
    const int E = 4, L = cfg["num_hidden_layers"], I = cfg["intermediate_size"];
    cfg["architectures"] = {"Glm4MoeForCausalLM"};
    cfg["model_type"] = "glm4_moe";
    cfg["partial_rotary_factor"] = 1.0;
    cfg["use_qk_norm"] = true;
    cfg["n_routed_experts"] = E;
    cfg["num_experts_per_tok"] = 2;
    cfg["moe_intermediate_size"] = I;
    cfg["first_k_dense_replace"] = sparse ? 1 : L;
    const fs::path dir = root / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << cfg.dump();
    auto t = testing::read_safetensors(fixture / "model.safetensors");
    if (sparse) {
      std::mt19937 rng(3);
      std::normal_distribution<float> dist(0.0f, 0.3f);
      auto random = [&](std::vector<int64_t> shape, float scale) {
        std::vector<float> v(shape[0] * (shape.size() > 1 ? shape[1] : 1));
        for (float& x : v) x = scale * dist(rng);
        return testing::RawTensor{"F32", shape, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
      };
      const std::string m = "model.layers.1.mlp.";
      const auto gate = t.at(m + "gate_proj.weight"), up = t.at(m + "up_proj.weight"), down = t.at(m + "down_proj.weight");
      for (const char* k : {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}) t.erase(m + k);
      t[m + "gate.weight"] = random({E, gate.shape[1]}, 1.0f);
      t[m + "gate.e_score_correction_bias"] = random({E}, 1.0f);
      for (int e = 0; e < E; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        t[x + "gate_proj.weight"] = gate;
        t[x + "up_proj.weight"] = up;
        t[x + "down_proj.weight"] = down;
      }
      t[m + "shared_experts.gate_proj.weight"] = random(gate.shape, 1.0f);
      t[m + "shared_experts.up_proj.weight"] = random(up.shape, 1.0f);
      t[m + "shared_experts.down_proj.weight"] = random(down.shape, 0.0f);
    }
    testing::write_safetensors(dir / "model.safetensors", t);
    return dir;
  }
};

TEST_F(Glm4MoeCheckpoint, DenseLayersAreQwen3AndCopiedExpertsChangeNothing) {
  const std::vector<float> want = testing::prompt_logits(fixture.string());
  EXPECT_EQ(testing::prompt_logits(write("dense", false).string()), want);
  const std::vector<float> sparse = testing::prompt_logits(write("sparse", true).string());
  ASSERT_EQ(sparse.size(), want.size());
  EXPECT_LT(testing::rel_max_err(sparse.data(), want.data(), want.size()), 1e-5);
}

// Its GGUF as convert_hf_to_gguf.py's Glm4MoeModel writes it (arch glm4moe: leading_dense_block_count,
// exp_probs_b, expert_shared_count, the router keys): the checkpoint's logits.
TEST_F(Glm4MoeCheckpoint, GgufLoadsLikeTheCheckpoint) {
  const fs::path dir = write("sparse", true);
  const std::vector<float> want = testing::prompt_logits(dir.string());
  const std::string gguf = (root / "glm4_moe.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  const ModelConfig c = gguf_model_config(GgufShards(gguf));
  EXPECT_EQ(c.architecture, "Glm4MoeForCausalLM");
  EXPECT_FALSE(c.qk_norm_off);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_EQ(c.n_shared_experts, 1);
  const std::vector<float> got = testing::prompt_logits(gguf);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(testing::rel_max_err(got.data(), want.data(), want.size()), 1e-6);
}

}  // namespace
}  // namespace vireo
