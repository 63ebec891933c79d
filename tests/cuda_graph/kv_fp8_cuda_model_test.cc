// --kv-cache-dtype fp8 on CUDA against the CPU with the same FP8 cache: the harness's prefill chunks,
// mixed step and decode steps, with decode graphs and without. The qwen3 fixture (head dim 32: the plain
// attention kernel) and dummy Qwen3 shapes at head dims 64 and 128 (the mma.sync kernels' decode and
// prefill shapes over E4M3 tiles).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/model.h"

namespace vireo {
namespace {

const std::string kQwen3 = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3";

TEST(KvFp8OnCuda, FixtureGraphsMatchEagerAndTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  LoadOptions eager = testing::graph_opts(true), graph = testing::graph_opts(false);
  eager.kv_cache_dtype = graph.kv_cache_dtype = "fp8";
  auto cpu = load_model(kQwen3, create_backend("cpu"), eager);
  auto e = load_model(kQwen3, create_backend("cuda", "bfloat16"), eager);
  auto g = load_model(kQwen3, create_backend("cuda", "bfloat16"), graph);
  testing::expect_bf16_graphs_match_eager(*e, *g, *cpu, 512, 0.15);
}

TEST(KvFp8OnCuda, TensorCoreHeadDimsMatchTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kQwen3 + "/config.json"));
  for (int d : {64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    j["head_dim"] = d;
    j["hidden_size"] = 128;
    j["num_attention_heads"] = 8;  // GQA 4
    const ModelConfig cfg = ModelConfig::from_json(j, "qwen3 fixture, head_dim " + std::to_string(d));
    LoadOptions eager = testing::graph_opts(true), graph = testing::graph_opts(false);
    for (LoadOptions* o : {&eager, &graph}) {
      o->kv_cache_dtype = "fp8";
      o->load_format = "dummy";
      o->seed = 3;
    }
    auto cpu = load_model(cfg, "", create_backend("cpu"), eager);
    auto e = load_model(cfg, "", create_backend("cuda", "bfloat16"), eager);
    auto g = load_model(cfg, "", create_backend("cuda", "bfloat16"), graph);
    testing::expect_bf16_graphs_match_eager(*e, *g, *cpu, 512, 0.15);
  }
}

}  // namespace
}  // namespace vireo
