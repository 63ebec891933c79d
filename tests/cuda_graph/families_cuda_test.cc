// The families of tests/model/tiny_family_configs.h (EXAONE 4.0, OLMo 3, GLM-4.5, LFM2-MoE, OLMoE,
// ERNIE 4.5, Qwen3-VL-MoE) on a GPU with dummy weights: the harness's prefill chunks, mixed step and
// batched decode steps (decode graphs, with padding rows) in fp32 against the CPU backend.
#include <gtest/gtest.h>

#include <string>

#include "../model/tiny_family_configs.h"
#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

std::unique_ptr<Model> dummy(const ModelConfig& cfg, std::unique_ptr<Backend> be, LoadOptions o) {
  o.load_format = "dummy";
  o.seed = 5;
  return load_model(cfg, "", std::move(be), o);
}

TEST(FamiliesOnCuda, Fp32MatchesCpuWithGraphs) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: family CUDA tests skipped";
  for (const auto& j : testing::family_configs()) {
    SCOPED_TRACE(j["architectures"][0].get<std::string>());
    const ModelConfig cfg = ModelConfig::from_json(j, "families/config.json");
    auto cpu = dummy(cfg, create_backend("cpu"), testing::graph_opts(true));
    auto gpu = dummy(cfg, create_backend("cuda", "float32"), testing::graph_opts(false));
    testing::expect_fp32_matches_cpu(*cpu, *gpu);
  }
}

}  // namespace
}  // namespace vireo
