// HunYuan-MoE (HunYuanMoEV1ForCausalLM) against transformers' HunYuan dense fixture: the dense checkpoint
// rewritten as an MoE whose four experts and shared MLP are all the dense MLP, the experts' and the shared
// MLP's down_proj halved (exact in float). transformers' MoE block gives shared(x) + sum_k w_k expert_k(x)
// with the top-2 weights renormalised, so whatever the random router picks, the sum is 0.5 f(x) + 0.5 f(x)
// (w_1 + w_2 = 1 up to rounding): the dense fixture's logits, near. That checks the router's name
// (mlp.gate.wg), the renormalisation, the ungated shared MLP (mlp.shared_mlp) and Hunyuan-A13B's per-layer
// config lists; then the same checkpoint as llama.cpp's converter writes it (arch hunyuan-moe).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "../gguf_util/hf_to_gguf.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

testing::RawTensor halved(testing::RawTensor t) {
  EXPECT_EQ(t.dtype, "F32");
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  for (float& x : v) x *= 0.5f;
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

TEST(HunyuanMoeCheckpoint, IdenticalExpertsGiveTheDenseLogits) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/hunyuan_dense";
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_hunyuan_moe_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  const int L = cfg["num_hidden_layers"], E = 4, hidden = cfg["hidden_size"];
  cfg["architectures"] = {"HunYuanMoEV1ForCausalLM"};
  cfg["model_type"] = "hunyuan_v1_moe";
  for (const char* k : {"num_experts", "moe_topk", "num_shared_expert", "moe_intermediate_size"}) cfg[k] = nlohmann::json::array();
  for (int l = 0; l < L; ++l) {
    cfg["num_experts"].push_back(E), cfg["moe_topk"].push_back(2), cfg["num_shared_expert"].push_back(1);
    cfg["moe_intermediate_size"].push_back(cfg["intermediate_size"]);
  }
  std::ofstream(dir / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(fixture / "model.safetensors");
  std::map<std::string, testing::RawTensor> moe;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& [name, x] : t) {
    const size_t at = name.find(".mlp.");
    if (at == std::string::npos) {
      moe[name] = x;
      continue;
    }
    const std::string layer = name.substr(0, at + 5), proj = name.substr(at + 5);  // "gate_proj.weight", ...
    const bool down = proj.rfind("down_proj", 0) == 0;
    for (int e = 0; e < E; ++e) moe[layer + "experts." + std::to_string(e) + "." + proj] = down ? halved(x) : x;
    moe[layer + "shared_mlp." + proj] = down ? halved(x) : x;
    if (down) {  // one router a layer, fp32 as transformers keeps it: spread logits, so picks differ by token
      testing::RawTensor r{"F32", {E, hidden}, std::string(size_t(E) * hidden * 4, '\0')};
      std::vector<float> w(size_t(E) * hidden);
      for (float& v : w) v = 0.5f * nd(rng);
      std::memcpy(r.bytes.data(), w.data(), r.bytes.size());
      moe[layer + "gate.wg.weight"] = r;
    }
  }
  testing::write_safetensors(dir / "model.safetensors", moe);
  const std::vector<float> want = testing::prompt_logits(fixture.string());
  const std::vector<float> got = testing::prompt_logits(dir.string());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(testing::rel_max_err(got.data(), want.data(), want.size()), 1e-5);
  // llama.cpp's converter: ffn_gate_inp, ffn_*_exps stacked, ffn_*_shexp, the NTK-alpha base baked in as an f32
  // (so near, as GgufParity's hunyuan_dense).
  const std::string gguf = (dir / "hunyuan_moe.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  const std::vector<float> from_gguf = testing::prompt_logits(gguf);
  ASSERT_EQ(from_gguf.size(), want.size());
  EXPECT_LT(testing::rel_max_err(from_gguf.data(), want.data(), want.size()), 1e-4);
  // Without the shared MLP (num_shared_expert 0; its tensors are then unused) the MLP is half the dense one:
  // the test sees the shared MLP's part.
  cfg["num_shared_expert"] = 0;
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_GT(testing::rel_max_err(testing::prompt_logits(dir.string()).data(), want.data(), want.size()), 1e-3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vireo
