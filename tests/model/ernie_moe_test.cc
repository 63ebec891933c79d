// ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM) against the ERNIE 4.5 dense model: the dense fixture without
// its biases (use_bias false) rewritten as an MoE whose router weights are
// zero, so every token's probabilities are uniform and the choice is the moe_statics bias alone:
// bias [0, 0.3, 0.5, 0] picks experts 2 and 1 with the unbiased weights 1/2 each. Expert 2 is the dense
// MLP, expert 1 a zero MLP, experts 0 and 3 random (picked if the bias were ignored: lowest ids first on a
// tie); one shared MLP is the dense MLP with down_proj halved. So the MLP gives 0.5 f + 0.5 f = f, the
// dense logits, only if the bias chooses and does not weigh (biased weights would give 1.08 f). Then
// moe_layer_start_index 1: layer 0 keeps the dense MLP (its tensors under mlp.*). Both also as GGUF.
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

testing::RawTensor scaled(testing::RawTensor t, float s, std::mt19937* noise = nullptr) {
  EXPECT_EQ(t.dtype, "F32");
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (float& x : v) x = noise ? nd(*noise) : x * s;
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

testing::RawTensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  testing::RawTensor r{"F32", std::move(shape), std::string(v.size() * 4, '\0')};
  std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
  return r;
}

// The dense fixture as an MoE checkpoint in dir; layers below `start` keep their dense MLP.
void write_moe(const fs::path& fixture, const fs::path& dir, int start, const std::vector<float>& bias) {
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  const int E = static_cast<int>(bias.size()), hidden = cfg["hidden_size"];
  cfg["architectures"] = {"Ernie4_5_MoeForCausalLM"};
  cfg["model_type"] = "ernie4_5_moe";
  cfg["use_bias"] = false;
  cfg["moe_num_experts"] = E;
  cfg["moe_k"] = 2;
  cfg["moe_intermediate_size"] = cfg["intermediate_size"];
  cfg["moe_num_shared_experts"] = 1;
  cfg["moe_layer_start_index"] = start;
  std::ofstream(dir / "config.json") << cfg.dump();
  std::mt19937 rng(11);
  std::map<std::string, testing::RawTensor> moe;
  for (auto& [name, x] : testing::read_safetensors(fixture / "model.safetensors")) {
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) continue;  // use_bias false
    const size_t at = name.find(".mlp.");
    if (at == std::string::npos) {
      moe[name] = x;
      continue;
    }
    const std::string layer = name.substr(0, at + 5), proj = name.substr(at + 5);  // "gate_proj.weight", ...
    if (std::stoi(name.substr(name.find("layers.") + 7)) < start) {
      moe[name] = x;
      continue;
    }
    const bool down = proj.rfind("down_proj", 0) == 0;
    for (int e = 0; e < E; ++e) {
      const std::string n = layer + "experts." + std::to_string(e) + "." + proj;
      moe[n] = e == 2 ? x : e == 1 ? (down ? scaled(x, 0.0f) : x) : scaled(x, 1.0f, &rng);
    }
    moe[layer + "shared_experts." + proj] = down ? scaled(x, 0.5f) : x;
    if (down) {
      moe[layer + "gate.weight"] = f32({E, hidden}, std::vector<float>(size_t(E) * hidden, 0.0f));
      moe[layer + "moe_statics.e_score_correction_bias"] = f32({1, E}, bias);
    }
  }
  testing::write_safetensors(dir / "model.safetensors", moe);
}

TEST(ErnieMoeCheckpoint, TheBiasChoosesAndTheProbabilitiesWeigh) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/ernie4_5";
  const fs::path base = fs::path(::testing::TempDir()) / ("vireo_ernie_moe_" + std::to_string(::getpid()));
  const fs::path dense = base / "dense", dir = base / "moe";
  fs::remove_all(base);
  fs::create_directories(dense);
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
  cfg["use_bias"] = false;
  std::ofstream(dense / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(fixture / "model.safetensors");
  std::map<std::string, testing::RawTensor> nobias;
  for (auto& [name, x] : t)
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".bias") != 0) nobias[name] = x;
  testing::write_safetensors(dense / "model.safetensors", nobias);
  const std::vector<float> want = testing::prompt_logits(dense.string());

  for (int start : {0, 1}) {
    write_moe(fixture, dir, start, {0.0f, 0.3f, 0.5f, 0.0f});
    const std::vector<float> got = testing::prompt_logits(dir.string());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(testing::rel_max_err(got.data(), want.data(), want.size()), 1e-5) << "moe_layer_start_index " << start;
    // As llama.cpp's converter writes it (arch ernie4_5-moe: stacked experts, ffn_*_shexp, exp_probs_b [1, E]).
    const std::string gguf = (base / "ernie_moe.gguf").string();
    testing::convert_model_fixture(dir.string(), gguf);
    const std::vector<float> from_gguf = testing::prompt_logits(gguf);
    ASSERT_EQ(from_gguf.size(), want.size());
    EXPECT_LT(testing::rel_max_err(from_gguf.data(), want.data(), want.size()), 1e-5) << "GGUF, start " << start;
  }
  // The bias picks 0 and 3 instead (random experts): far from the dense logits.
  write_moe(fixture, dir, 0, {0.5f, 0.0f, 0.0f, 0.3f});
  EXPECT_GT(testing::rel_max_err(testing::prompt_logits(dir.string()).data(), want.data(), want.size()), 1e-3);
  fs::remove_all(base);
}

}  // namespace
}  // namespace vireo
