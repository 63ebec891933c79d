// LFM2 (hybrid short-conv + attention) on a GPU: the tiny random-weight model of
// tests/model/lfm2_test_model.h through prefill chunks, mixed steps and batched decode steps (decode
// graphs, with padding rows), against the CPU backend in fp32 and against enforce_eager in bf16.
#include <gtest/gtest.h>

#include <vector>

#include "../model/lfm2_test_model.h"
#include "backend/backend.h"
#include "cuda_model_harness.h"

namespace vireo {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: LFM2 CUDA model tests skipped"

using testing::graph_opts;

TEST(Lfm2OnCuda, Fp32MatchesCpuWithGraphs) {
  REQUIRE_GPU();
  auto cpu = testing::tiny_lfm2(create_backend("cpu"), graph_opts(true));
  auto gpu = testing::tiny_lfm2(create_backend("cuda", "float32"), graph_opts(false));
  testing::expect_fp32_matches_cpu(*cpu, *gpu);
  EXPECT_EQ(gpu->num_graphs(), 3);  // decode sizes 1, 2, 4
}

TEST(Lfm2OnCuda, Bf16GraphsMatchEager) {
  REQUIRE_GPU();
  auto eager = testing::tiny_lfm2(create_backend("cuda", "bfloat16"), graph_opts(true));
  auto graph = testing::tiny_lfm2(create_backend("cuda", "bfloat16"), graph_opts(false));
  auto cpu = testing::tiny_lfm2(create_backend("cpu"), graph_opts(true));
  testing::expect_bf16_graphs_match_eager(*eager, *graph, *cpu, cpu->config().vocab_size);
  EXPECT_GT(graph->num_graphs(), 0);
  EXPECT_EQ(eager->num_graphs(), 0);
}

}  // namespace
}  // namespace vireo
