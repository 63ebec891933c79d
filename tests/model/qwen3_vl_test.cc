// Qwen3-VL / Qwen3-VL-MoE served as text models: the qwen3 and qwen3_moe fixtures rewritten the way the
// released checkpoints are laid out (config nested in text_config with M-RoPE sections, weights under
// model.language_model.*, a vision tensor beside them, the MoE experts stacked as gate_up_proj
// [E, hidden, 2I] and down_proj [E, I, hidden]) must give bitwise the fixtures' logits.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "model/model_config.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Qwen3VlCheckpoint : ::testing::Test {
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_qwen3_vl_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }

  static fs::path fixture(const std::string& name) { return fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model" / name; }

  // [E, rows, cols] F32 -> [E, cols, rows]
  static testing::RawTensor transpose_experts(const testing::RawTensor& t) {
    const int64_t E = t.shape[0], R = t.shape[1], C = t.shape[2];
    testing::RawTensor out{"F32", {E, C, R}, std::string(t.bytes.size(), '\0')};
    const float* src = reinterpret_cast<const float*>(t.bytes.data());
    float* dst = reinterpret_cast<float*>(out.bytes.data());
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) dst[(e * C + c) * R + r] = src[(e * R + r) * C + c];
    return out;
  }

  fs::path write(const std::string& from, const std::string& arch) {
    json text = json::parse(std::ifstream(fixture(from) / "config.json"));
    const bool moe = text.contains("num_experts");
    text["model_type"] = moe ? "qwen3_vl_moe_text" : "qwen3_vl_text";
    text.erase("architectures");
    text["rope_parameters"]["mrope_section"] = {8, 4, 4};
    text["rope_parameters"]["mrope_interleaved"] = true;
    json cfg = {{"architectures", {arch}},
                {"model_type", moe ? "qwen3_vl_moe" : "qwen3_vl"},
                {"tie_word_embeddings", text["tie_word_embeddings"]},
                {"text_config", text},
                {"vision_config", {{"depth", 1}, {"hidden_size", 32}}}};
    const fs::path dir = root / arch;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << cfg.dump();
    const auto t = testing::read_safetensors(fixture(from) / "model.safetensors");
    std::map<std::string, testing::RawTensor> out;
    std::map<std::string, std::map<int, std::map<std::string, testing::RawTensor>>> experts;  // mlp -> e -> part
    for (const auto& [name, x] : t) {
      if (name == "lm_head.weight") {
        out[name] = x;
        continue;
      }
      const std::string lm = "model.language_model." + name.substr(std::string("model.").size());
      const size_t p = lm.find(".experts.");
      if (p == std::string::npos) {
        out[lm] = x;
        continue;
      }
      const size_t e0 = p + 9, e1 = lm.find('.', e0);
      experts[lm.substr(0, p + 1)][std::stoi(lm.substr(e0, e1 - e0))][lm.substr(e1 + 1)] = x;
    }
    for (const auto& [mlp, by_e] : experts) {  // stacked as the hub's checkpoints: [E, hidden, 2I], [E, I, hidden]
      const int64_t E = static_cast<int64_t>(by_e.size());
      const auto& g0 = by_e.at(0).at("gate_proj.weight");
      const int64_t I = g0.shape[0], H = g0.shape[1];
      testing::RawTensor gu{"F32", {E, 2 * I, H}, ""}, down{"F32", {E, H, I}, ""};
      for (const auto& [e, parts] : by_e) {
        gu.bytes += parts.at("gate_proj.weight").bytes + parts.at("up_proj.weight").bytes;
        down.bytes += parts.at("down_proj.weight").bytes;
      }
      out[mlp + "experts.gate_up_proj"] = transpose_experts(gu);
      out[mlp + "experts.down_proj"] = transpose_experts(down);
    }
    std::vector<float> patch(32, 0.5f);
    out["model.visual.patch_embed.proj.weight"] = {"F32", {32}, std::string(reinterpret_cast<const char*>(patch.data()), 128)};
    testing::write_safetensors(dir / "model.safetensors", out);
    return dir;
  }
};

TEST_F(Qwen3VlCheckpoint, TextModelIsQwen3) {
  const fs::path dir = write("qwen3", "Qwen3VLForConditionalGeneration");
  const ModelConfig c = ModelConfig::from_file((dir / "config.json").string());
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(testing::prompt_logits(dir.string()), testing::prompt_logits(fixture("qwen3").string()));
}

TEST_F(Qwen3VlCheckpoint, MoeTextModelIsQwen3MoeWithTransposedExperts) {
  const fs::path dir = write("qwen3_moe", "Qwen3VLMoeForConditionalGeneration");
  const ModelConfig c = ModelConfig::from_file((dir / "config.json").string());
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(testing::prompt_logits(dir.string()), testing::prompt_logits(fixture("qwen3_moe").string()));
}

}  // namespace
}  // namespace vireo
