// GPT-OSS on a GPU (attention sinks, 8-token sliding windows, the biased MoE with the clamped SwiGLU, and
// MXFP4 experts kept packed: moe_decode_mxfp4.cu, the grouped GEMM's MXFP4 B tiles): the gpt_oss fixture's
// config with dummy weights (MXFP4 experts, as the hub's checkpoints) through prefill chunks, a mixed step
// and batched decode steps (decode graphs, with padding rows). bf16 with the experts packed against the
// same values dequantized at load (VIREO_MXFP4=dequantize's form), against enforce_eager and against the
// CPU (packed too) in fp32; fp32 on CUDA (experts dequantized: the MXFP4 kernels are bf16) against the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/decoder_model.h"
#include "model/model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: GPT-OSS CUDA model tests skipped"

using testing::graph_opts;

std::unique_ptr<Model> tiny_gpt_oss(std::unique_ptr<Backend> be, LoadOptions o, bool dequantize = false) {
  const auto cfg = std::filesystem::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/gpt_oss/config.json";
  o.load_format = "dummy";
  o.seed = 11;
  o.dequantize_mxfp4 = dequantize;
  return load_model(ModelConfig::from_file(cfg.string()), "", std::move(be), o);
}

TEST(GptOssOnCuda, Fp32MatchesCpuWithGraphs) {
  REQUIRE_GPU();
  auto cpu = tiny_gpt_oss(create_backend("cpu"), graph_opts(true));
  auto gpu = tiny_gpt_oss(create_backend("cuda", "float32"), graph_opts(false));
  testing::expect_fp32_matches_cpu(*cpu, *gpu);
}

TEST(GptOssOnCuda, Bf16PackedGraphsMatchEagerAndCpu) {
  REQUIRE_GPU();
  auto eager = tiny_gpt_oss(create_backend("cuda", "bfloat16"), graph_opts(true));
  auto graph = tiny_gpt_oss(create_backend("cuda", "bfloat16"), graph_opts(false));
  auto cpu = tiny_gpt_oss(create_backend("cpu"), graph_opts(true));
  // Single steps of this tiny dummy model differ from fp32 by more than a dense model's 1e-1: 0.22 and 0.34
  // at steps 7 and 8 on the H200 (2026-12-05). The likely cause (not measured): bf16 rounding flips its
  // top-2-of-8 choice where router logits nearly tie, and the clamped SwiGLU makes each expert's output large. The fp32 run (1e-3), packed vs
  // dequantized and graphs vs eager (2e-2) pin the kernels; this one keeps the argmax rule.
  testing::expect_bf16_graphs_match_eager(*eager, *graph, *cpu, 512, /*cpu_tol=*/0.5);
  EXPECT_GT(dynamic_cast<DecoderModel&>(*graph).num_graphs(), 0);
}

// Packed and dequantized experts hold the same values: every step's logits within bf16 noise (the
// kernels differ only in their fp32 summation order; the rest of the model is bitwise the same code).
TEST(GptOssOnCuda, Bf16PackedMatchesDequantized) {
  REQUIRE_GPU();
  auto packed = tiny_gpt_oss(create_backend("cuda", "bfloat16"), graph_opts(false));
  auto dense = tiny_gpt_oss(create_backend("cuda", "bfloat16"), graph_opts(false), /*dequantize=*/true);
  const auto steps = testing::schedule();
  const auto a = testing::drive(*packed, steps), b = testing::drive(*dense, steps);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_LT(testing::max_rel_err(a[i], b[i]), 2e-2) << "step " << i;
}

}  // namespace
}  // namespace vireo
