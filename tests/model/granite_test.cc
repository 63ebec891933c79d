// Granite (GraniteForCausalLM): GraniteConfig's four multipliers. transformers' GraniteModel multiplies the
// embeddings by embedding_multiplier, uses attention_multiplier as the softmax scale, scales each
// attention / MLP output by residual_multiplier before its residual add, and divides the logits by
// logits_scaling. The llama3 fixture rewritten as a Granite checkpoint whose weights undo those
// multipliers (powers of two, so every step is exact) must give bitwise the llama3 fixture's logits, and
// so must its GGUF (arch granite).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/error.h"
#include "model/model_config.h"
#include "../gguf_util/hf_to_gguf.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

TEST(GraniteConfig, MultipliersDefaultToOne) {
  ModelConfig c = ModelConfig::from_json({{"architectures", {"GraniteForCausalLM"}}, {"model_type", "granite"},
                                          {"vocab_size", 32}, {"hidden_size", 16}, {"intermediate_size", 32},
                                          {"num_hidden_layers", 1}, {"num_attention_heads", 2}},
                                         "t");
  EXPECT_FLOAT_EQ(c.embedding_multiplier, 1.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f);  // attention_multiplier is the scale itself, not head_dim^-0.5
  EXPECT_FLOAT_EQ(c.residual_multiplier, 1.0f);
  EXPECT_FLOAT_EQ(c.logits_scaling, 1.0f);
  EXPECT_THROW(ModelConfig::from_json({{"architectures", {"GraniteForCausalLM"}}, {"vocab_size", 32}, {"hidden_size", 16},
                                       {"intermediate_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                                       {"logits_scaling", 0}},
                                      "t"),
               Error);
}

// Multiplies every float of a F32 tensor by f.
void scale(testing::RawTensor& t, float f) {
  ASSERT_EQ(t.dtype, "F32");
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  for (float& x : v) x *= f;
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
}

TEST(GraniteCheckpoint, MultipliersActWhereTransformersAppliesThem) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/llama3";
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_granite_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  ASSERT_FALSE(cfg.value("tie_word_embeddings", false));
  const int head_dim = cfg["hidden_size"].get<int>() / cfg["num_attention_heads"].get<int>();
  ASSERT_EQ(head_dim, 16);  // attention_multiplier 0.25 = Llama's head_dim^-0.5
  cfg["architectures"] = {"GraniteForCausalLM"};
  cfg["model_type"] = "granite";
  cfg["embedding_multiplier"] = 16.0;
  cfg["attention_multiplier"] = 0.25;
  cfg["residual_multiplier"] = 0.25;
  cfg["logits_scaling"] = 8.0;
  std::ofstream(dir / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(fixture / "model.safetensors");
  for (auto& [name, x] : t) {
    if (name == "model.embed_tokens.weight") scale(x, 1.0f / 16);  // x 16 again at the embedding
    if (name == "lm_head.weight") scale(x, 8.0f);                     // / 8 again on the logits
    if (name.find("o_proj.weight") != std::string::npos || name.find("down_proj.weight") != std::string::npos)
      scale(x, 4.0f);  // x 0.25 again before each residual add
  }
  testing::write_safetensors(dir / "model.safetensors", t);
  const std::vector<float> want = testing::prompt_logits(fixture.string());
  const std::vector<float> got = testing::prompt_logits(dir.string());
  EXPECT_EQ(got, want);
  // The same checkpoint as llama.cpp's converter writes it (arch granite, *_scale keys, Q/K permuted; the
  // llama3 RoPE scaling as the rope_freqs tensor, an ulp off transformers' formula: near, as GgufParity's llama3).
  const std::string gguf = (dir / "granite.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  const std::vector<float> from_gguf = testing::prompt_logits(gguf);
  ASSERT_EQ(from_gguf.size(), want.size());
  EXPECT_LT(testing::rel_max_err(from_gguf.data(), want.data(), want.size()), 1e-5);
  fs::remove(gguf);
  // A multiplier left out changes the logits (the test sees each one).
  cfg["residual_multiplier"] = 1.0;
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_NE(testing::prompt_logits(dir.string()), want);
  fs::remove_all(dir);
}

// GraniteMoe (GraniteMoeForCausalLM): the mixtral fixture rewritten with GraniteMoe's names (router.layer,
// the experts stacked as input_linear [E, 2I, hidden] = [w1; w3] rows and output_linear [E, hidden, I]) and
// multipliers undone by its weights (powers of two: exact) gives bitwise the logits of the same Mixtral
// without its sliding window (GraniteMoe has none). residual_multiplier reaches the experts' output too.
TEST(GraniteMoeCheckpoint, StackedExpertsAndMultipliersLikeMixtral) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/mixtral";
  const fs::path root = fs::path(::testing::TempDir()) / ("vireo_granitemoe_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "mixtral");
  fs::create_directories(root / "granitemoe");
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  ASSERT_EQ(cfg["head_dim"].get<int>(), 16);  // attention_multiplier 0.5 = 2 x Mixtral's head_dim^-0.5
  cfg.erase("sliding_window");
  std::ofstream(root / "mixtral" / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(fixture / "model.safetensors");
  testing::write_safetensors(root / "mixtral" / "model.safetensors", t);
  cfg["architectures"] = {"GraniteMoeForCausalLM"};
  cfg["model_type"] = "granitemoe";
  cfg["embedding_multiplier"] = 4.0;
  cfg["attention_multiplier"] = 0.5;
  cfg["residual_multiplier"] = 0.5;
  cfg["logits_scaling"] = 2.0;
  std::ofstream(root / "granitemoe" / "config.json") << cfg.dump();
  const int E = cfg["num_local_experts"], L = cfg["num_hidden_layers"];
  std::map<std::string, testing::RawTensor> g;
  for (auto& [name, x] : t) {
    if (name.find(".experts.") != std::string::npos || name.find("block_sparse_moe.gate.") != std::string::npos)
      continue;
    testing::RawTensor y = x;
    if (name == "model.embed_tokens.weight") scale(y, 0.25f);                 // x 4 again at the embedding
    if (name == "lm_head.weight") scale(y, 2.0f);                              // / 2 again on the logits
    if (name.find("q_proj.weight") != std::string::npos) scale(y, 0.5f);      // x 2 again in the scale
    if (name.find("o_proj.weight") != std::string::npos) scale(y, 2.0f);      // x 0.5 again before the add
    g[name] = y;
  }
  for (int l = 0; l < L; ++l) {
    const std::string m = "model.layers." + std::to_string(l) + ".block_sparse_moe.";
    g[m + "router.layer.weight"] = t.at(m + "gate.weight");
    testing::RawTensor in = t.at(m + "experts.0.w1.weight"), out = t.at(m + "experts.0.w2.weight");
    const int64_t I = in.shape[0], H = in.shape[1];
    in.shape = {E, 2 * I, H};
    out.shape = {E, H, I};
    in.bytes.clear();
    out.bytes.clear();
    for (int e = 0; e < E; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      in.bytes += t.at(x + "w1.weight").bytes;  // gate rows, then up rows
      in.bytes += t.at(x + "w3.weight").bytes;
      out.bytes += t.at(x + "w2.weight").bytes;
    }
    scale(out, 2.0f);  // x 0.5 again before the add
    g[m + "input_linear.weight"] = in;
    g[m + "output_linear.weight"] = out;
  }
  testing::write_safetensors(root / "granitemoe" / "model.safetensors", g);
  const std::vector<float> want = testing::prompt_logits((root / "mixtral").string());
  const std::vector<float> got = testing::prompt_logits((root / "granitemoe").string());
  EXPECT_EQ(got, want);
  // Its GGUF as llama.cpp's GraniteMoeModel writes it (arch granitemoe, *_scale keys, Q/K permuted,
  // input_linear split into ffn_gate_exps / ffn_up_exps): the same logits up to the fp32 order of the
  // dequantization-free F32 path (bitwise here: the same values and kernels).
  const std::string gguf = (root / "granitemoe.gguf").string();
  testing::convert_model_fixture((root / "granitemoe").string(), gguf);
  const std::vector<float> from_gguf = testing::prompt_logits(gguf);
  ASSERT_EQ(from_gguf.size(), want.size());
  EXPECT_LT(testing::rel_max_err(from_gguf.data(), want.data(), want.size()), 1e-6);
  fs::remove(gguf);
  cfg["residual_multiplier"] = 1.0;  // left out: the logits change
  std::ofstream(root / "granitemoe" / "config.json") << cfg.dump();
  EXPECT_NE(testing::prompt_logits((root / "granitemoe").string()), want);
  fs::remove_all(root);
}

TEST(GraniteMoeConfig, ExpertsAreIntermediateSizeWideAndRenormalised) {
  ModelConfig c = ModelConfig::from_json({{"architectures", {"GraniteMoeForCausalLM"}}, {"model_type", "granitemoe"},
                                          {"vocab_size", 32}, {"hidden_size", 16}, {"intermediate_size", 32},
                                          {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                                          {"num_local_experts", 4}, {"num_experts_per_tok", 2},
                                          {"residual_multiplier", 0.25}},
                                         "t");
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.residual_multiplier, 0.25f);
  EXPECT_TRUE(c.moe_layer(0));
}

}  // namespace
}  // namespace vireo
