// Qwen2-VL / Qwen2.5-VL served as their Qwen2 text model, against transformers' qwen2 fixture rewritten in
// both checkpoint layouts: the hub's (a flat config with rope_scaling {"type": "mrope", "mrope_section"},
// weights under model.* beside visual.*) and transformers 5's (text_config with rope_parameters and
// mrope_section, weights under model.language_model.* beside model.visual.*). Text positions give M-RoPE's
// three sections one position, so both must give the qwen2 fixture's logits exactly; the vision tensors
// are left unread.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

testing::RawTensor vision_tensor() { return {"F32", {4, 4}, std::string(64, '\0')}; }

TEST(Qwen2VlCheckpoint, TextModelInBothLayoutsGivesQwen2Logits) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen2";
  const fs::path base = fs::path(::testing::TempDir()) / ("vireo_qwen2_vl_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const nlohmann::json text = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  const auto tensors = testing::read_safetensors(fixture / "model.safetensors");
  const std::vector<float> want = testing::prompt_logits(fixture.string());
  const nlohmann::json mrope = {2, 3, 3};  // M-RoPE sections of head_dim / 2 = 8 frequencies (7B: 16, 24, 24)

  for (const char* arch : {"Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"}) {
    const std::string type = std::string(arch) == "Qwen2VLForConditionalGeneration" ? "qwen2_vl" : "qwen2_5_vl";
    // The hub's layout: flat fields, rope_scaling of type mrope, model.* and visual.*.
    const fs::path hub = base / (type + "_hub");
    fs::create_directories(hub);
    nlohmann::json flat = text;
    flat["architectures"] = {arch};
    flat["model_type"] = type;
    flat.erase("rope_parameters");
    flat["rope_theta"] = text["rope_parameters"]["rope_theta"];
    flat["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", mrope}};
    flat["vision_config"] = {{"depth", 1}};
    std::ofstream(hub / "config.json") << flat.dump();
    std::map<std::string, testing::RawTensor> t1(tensors.begin(), tensors.end());
    t1["visual.blocks.0.attn.qkv.weight"] = vision_tensor();
    testing::write_safetensors(hub / "model.safetensors", t1);
    // transformers 5's layout: text_config, model.language_model.* and model.visual.*.
    const fs::path v5 = base / (type + "_v5");
    fs::create_directories(v5);
    nlohmann::json tc = text;
    tc["model_type"] = type + "_text";
    tc["rope_parameters"]["mrope_section"] = mrope;
    tc.erase("architectures");
    nlohmann::json wrapped = {{"architectures", {arch}}, {"model_type", type}, {"text_config", tc},
                              {"vision_config", {{"depth", 1}}}, {"tie_word_embeddings", text["tie_word_embeddings"]}};
    std::ofstream(v5 / "config.json") << wrapped.dump();
    std::map<std::string, testing::RawTensor> t2;
    for (const auto& [name, x] : tensors)
      t2[name.rfind("model.", 0) == 0 ? "model.language_model." + name.substr(6) : name] = x;
    t2["model.visual.blocks.0.attn.qkv.weight"] = vision_tensor();
    testing::write_safetensors(v5 / "model.safetensors", t2);

    for (const fs::path& dir : {hub, v5}) {
      const std::vector<float> got = testing::prompt_logits(dir.string());
      ASSERT_EQ(got.size(), want.size()) << dir;
      EXPECT_EQ(testing::rel_max_err(got.data(), want.data(), want.size()), 0.0) << dir;
    }
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace vireo
