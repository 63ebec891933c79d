// Split mixed steps on CUDA (VIREO_SPLIT_MIXED=1): a step of two decode rows ahead of two prompts, where
// each layer leaves the decode rows' attention running on the side lane while the prompt rows' o_proj and
// MLP go first. The split's logits must be the unsplit step's (same kernels, other row counts), for FP8
// and BF16 weights and caches. The attention defers only where the prefill rows take part of the SMs: run with
// VIREO_ATTN_PREFILL_SM_PCT=50 (a tiny model's step is otherwise all prompt, and keeps the whole chip).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/model.h"

namespace vireo {
namespace {

testing::Schedule split_schedule() {
  auto toks = [](int n, int salt) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back((i * 37 + salt * 101 + 5) % 256);
    return v;
  };
  testing::Schedule steps;
  steps.push_back({{0, toks(14, 0)}, {1, toks(5, 1)}});
  steps.push_back({{0, toks(1, 2)}, {1, toks(1, 3)}, {2, toks(40, 4)}, {3, toks(17, 5)}});  // decode rows first
  steps.push_back({{0, toks(1, 6)}, {1, toks(1, 7)}, {2, toks(1, 8)}, {3, toks(1, 9)}});
  return steps;
}

// tol: BF16 2e-2 (the same kernels at other row counts); FP8 weights 0.15, as Fp8OnCuda against the CPU:
// the split's two decode rows take the weight-only GEMV where the whole step's W8A8 GEMM rounded their
// activations to E4M3.
void expect_split_matches(const std::string& quantization, const std::string& kv_dtype, double tol) {
  const std::string dir = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3";
  LoadOptions o = testing::graph_opts(true);
  o.quantization = quantization;  // fp8: the fused linear forms at every size; "": BF16's separate ops
  o.kv_cache_dtype = kv_dtype;
  auto m = load_model(dir, create_backend("cuda", "bfloat16"), o);
  const auto steps = split_schedule();
  setenv("VIREO_SPLIT_MIXED", "0", 1);
  const auto plain = testing::drive(*m, steps);
  setenv("VIREO_SPLIT_MIXED", "1", 1);
  const auto split = testing::drive(*m, steps);
  unsetenv("VIREO_SPLIT_MIXED");
  ASSERT_EQ(plain.size(), split.size());
  for (size_t i = 0; i < steps.size(); ++i)
    EXPECT_LT(testing::max_rel_err(split[i], plain[i]), tol) << quantization << " / " << kv_dtype << " step " << i;
}

TEST(SplitMixedOnCuda, Fp8WeightsGiveTheUnsplitLogits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  expect_split_matches("fp8", "fp8", 0.15);
  expect_split_matches("fp8", "auto", 0.15);
}

TEST(SplitMixedOnCuda, Bf16WeightsGiveTheUnsplitLogits) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  expect_split_matches("", "auto", 2e-2);
  expect_split_matches("", "fp8", 2e-2);
}

}  // namespace
}  // namespace vireo
