// Qwen3.5 / Qwen3.5-MoE (Gated DeltaNet + gated attention hybrids) on a GPU: the tiny random-weight
// models of tests/model/qwen3_next_test_model.h (vocabulary 256 here) through prefill chunks, mixed steps
// and batched decode steps (decode graphs, padding rows, a state slot per sequence), against the CPU
// backend in fp32. Added after parity on the H200 (tools/parity, 2026-12-01) found the CUDA fp32 path
// diverging from transformers where the CPU path is EXACT.
#include <gtest/gtest.h>

#include "../model/qwen3_next_test_model.h"
#include "backend/backend.h"
#include "cuda_model_harness.h"

namespace vireo {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: Qwen3.5 CUDA model tests skipped"

using testing::graph_opts;

nlohmann::json config(const std::string& arch, bool moe) {
  nlohmann::json j = testing::text_json(arch, moe);
  j["vocab_size"] = 256;  // the harness's token ids
  return j;
}

void fp32_vs_cpu(const nlohmann::json& j, bool eager) {
  auto cpu = testing::tiny_qwen3_next(create_backend("cpu"), graph_opts(true), j);
  auto gpu = testing::tiny_qwen3_next(create_backend("cuda", "float32"), graph_opts(eager), j);
  testing::expect_fp32_matches_cpu(*cpu, *gpu);
}

TEST(Qwen3_5OnCuda, DenseFp32MatchesCpuEager) {
  REQUIRE_GPU();
  fp32_vs_cpu(config("Qwen3_5ForCausalLM", false), true);
}

TEST(Qwen3_5OnCuda, DenseFp32MatchesCpuWithGraphs) {
  REQUIRE_GPU();
  fp32_vs_cpu(config("Qwen3_5ForCausalLM", false), false);
}

TEST(Qwen3_5OnCuda, MoeFp32MatchesCpuEager) {
  REQUIRE_GPU();
  fp32_vs_cpu(config("Qwen3_5MoeForCausalLM", true), true);
}

// tools/parity's qwen3_5-small preset shape: head dim 64 with rotary 16, DeltaNet 4 / 8 heads of 32,
// mrope sections [4, 2, 2], the Qwen3 vocabulary.
TEST(Qwen3_5OnCuda, ParityPresetShapeFp32MatchesCpu) {
  REQUIRE_GPU();
  nlohmann::json j = config("Qwen3_5ForCausalLM", false);
  j["vocab_size"] = 151936;
  j["hidden_size"] = 256;
  j["intermediate_size"] = 512;
  j["head_dim"] = 64;
  j["linear_num_key_heads"] = 4;
  j["linear_num_value_heads"] = 8;
  j["linear_key_head_dim"] = 32;
  j["linear_value_head_dim"] = 32;
  j["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000000.0}, {"partial_rotary_factor", 0.25},
                          {"mrope_section", {4, 2, 2}}, {"mrope_interleaved", true}};
  fp32_vs_cpu(j, true);
}

}  // namespace
}  // namespace vireo
