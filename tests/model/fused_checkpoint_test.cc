// Checkpoints that store q/k/v and gate/up fused (Phi-3: self_attn.qkv_proj = [q; k; v] rows,
// mlp.gate_up_proj = [gate; up] rows) load as they are: the llama3 fixture rewritten that way, as a
// Phi3ForCausalLM, gives bitwise its logits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/llama3";


// Rows of the parts, in order, as one tensor (dim 0 concatenated).
testing::RawTensor concat_rows(const std::vector<const testing::RawTensor*>& parts) {
  testing::RawTensor out = *parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    out.shape[0] += parts[i]->shape[0];
    out.bytes += parts[i]->bytes;
  }
  return out;
}

TEST(FusedCheckpoint, PhiThreeLayoutLoadsLikeSeparateTensors) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_phi3_fused_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(kFixture / "config.json"));
  cfg["architectures"] = {"Phi3ForCausalLM"};
  cfg["model_type"] = "phi3";
  std::ofstream(dir / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(kFixture / "model.safetensors");
  std::map<std::string, testing::RawTensor> fused;
  for (auto& [name, x] : t)
    if (name.find("_proj.") == std::string::npos || name.find("o_proj") != std::string::npos ||
        name.find("down_proj") != std::string::npos)
      fused[name] = x;
  for (int l = 0; l < cfg["num_hidden_layers"].get<int>(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    fused[p + "self_attn.qkv_proj.weight"] = concat_rows(
        {&t[p + "self_attn.q_proj.weight"], &t[p + "self_attn.k_proj.weight"], &t[p + "self_attn.v_proj.weight"]});
    fused[p + "mlp.gate_up_proj.weight"] = concat_rows({&t[p + "mlp.gate_proj.weight"], &t[p + "mlp.up_proj.weight"]});
  }
  ASSERT_EQ(fused.count("model.layers.0.self_attn.q_proj.weight"), 0u);
  testing::write_safetensors(dir / "model.safetensors", fused);
  EXPECT_EQ(testing::prompt_logits(dir.string()), testing::prompt_logits(kFixture.string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vireo
