// --quantization fp8 on CUDA (FP8 weights, W8A8 GEMMs for prefill, the weight-only GEMV for decode)
// against the CPU, which computes with the same per-row rounded weights (decoder_fp8.cc) in fp32: the
// qwen3 fixture through the harness's prefill chunks, mixed step and decode steps, with decode graphs and
// without. Prefill rows also round the activations to E4M3, so the CPU tolerance is wider than bf16's.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/model.h"

namespace vireo {
namespace {

TEST(Fp8OnCuda, GraphsMatchEagerAndTheCpuWithTheSameWeights) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const std::string dir = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3";
  LoadOptions eager = testing::graph_opts(true), graph = testing::graph_opts(false);
  eager.quantization = graph.quantization = "fp8";
  auto cpu = load_model(dir, create_backend("cpu"), eager);
  auto e = load_model(dir, create_backend("cuda", "bfloat16"), eager);
  auto g = load_model(dir, create_backend("cuda", "bfloat16"), graph);
  testing::expect_bf16_graphs_match_eager(*e, *g, *cpu, 512, 0.15);
}

}  // namespace
}  // namespace vireo
