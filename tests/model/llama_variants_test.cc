// Llama relatives that only rename or regroup Llama's parts, checked against the Llama fixtures (bitwise):
// Seed-OSS (o_proj's bias by attention_out_bias, not attention_bias) and Mistral 3 served as its text
// model (config in text_config; weights as transformers 4 wrote them, language_model.model.* and
// language_model.lm_head, or as transformers 5 does, model.language_model.* and lm_head).
#include <gtest/gtest.h>

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

struct LlamaVariants : ::testing::Test {
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_llama_variants_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  static fs::path fixture(const std::string& name) { return fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model" / name; }

  fs::path write(const std::string& name, const json& cfg, const std::map<std::string, testing::RawTensor>& t) {
    const fs::path dir = root / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << cfg.dump();
    testing::write_safetensors(dir / "model.safetensors", t);
    return dir;
  }
};

TEST_F(LlamaVariants, SeedOssBiasesAsLlama) {
  json cfg = json::parse(std::ifstream(fixture("llama_yarn_bias") / "config.json"));
  const auto t = testing::read_safetensors(fixture("llama_yarn_bias") / "model.safetensors");
  const std::vector<float> want = testing::prompt_logits(fixture("llama_yarn_bias").string());
  cfg["architectures"] = {"SeedOssForCausalLM"};
  cfg["model_type"] = "seed_oss";
  cfg["attention_out_bias"] = true;
  EXPECT_EQ(testing::prompt_logits(write("out_bias", cfg, t).string()), want);
  // attention_out_bias false: no o_proj bias is read, so zero biases in the file give the same numbers.
  cfg["attention_out_bias"] = false;
  auto zeroed = t;
  for (auto& [name, x] : zeroed)
    if (name.find("o_proj.bias") != std::string::npos) x.bytes.assign(x.bytes.size(), '\0');
  const std::vector<float> zero_ref = testing::prompt_logits(write("zero_llama", json::parse(std::ifstream(fixture("llama_yarn_bias") / "config.json")), zeroed).string());
  zeroed.erase("model.layers.0.self_attn.o_proj.bias");
  zeroed.erase("model.layers.1.self_attn.o_proj.bias");
  EXPECT_EQ(testing::prompt_logits(write("no_out_bias", cfg, zeroed).string()), zero_ref);
}

TEST_F(LlamaVariants, Mistral3TextModelIsMistral) {
  json text = json::parse(std::ifstream(fixture("llama3") / "config.json"));
  const auto t = testing::read_safetensors(fixture("llama3") / "model.safetensors");
  const std::vector<float> want = testing::prompt_logits(fixture("llama3").string());
  text["architectures"] = {"MistralForCausalLM"};
  text["model_type"] = "mistral";
  json cfg = {{"architectures", {"Mistral3ForConditionalGeneration"}}, {"model_type", "mistral3"},
              {"text_config", text}, {"vision_config", {{"hidden_size", 32}}}, {"image_token_index", 10}};
  for (const bool v4 : {true, false}) {
    SCOPED_TRACE(v4 ? "language_model.model.*" : "model.language_model.*");
    std::map<std::string, testing::RawTensor> w;
    for (const auto& [name, x] : t) {
      if (name == "lm_head.weight") {
        w[v4 ? "language_model.lm_head.weight" : name] = x;
      } else {
        w[(v4 ? "language_model.model." : "model.language_model.") + name.substr(6)] = x;
      }
    }
    w["vision_tower.patch_conv.weight"] = t.at("model.norm.weight");
    EXPECT_EQ(testing::prompt_logits(write(v4 ? "v4" : "v5", cfg, w).string()), want);
  }
}

}  // namespace
}  // namespace vireo
