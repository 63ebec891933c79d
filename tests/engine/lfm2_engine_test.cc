// The engine, unchanged, over a hybrid LFM2 (tests/model/lfm2_test_model.h: conv layers keep their
// state in the KV blocks): batching, chunked prefill, prefix-cache hits and preemption must give each
// request the greedy tokens of a full recompute, as for attention-only models.
#include <gtest/gtest.h>

#include "../model/lfm2_test_model.h"
#include "backend/backend.h"
#include "engine_oracle.h"

namespace vireo {
namespace {

TEST(Lfm2Engine, BatchedChunkedCachedAndPreemptedMatchFullRecompute) {
  // Twelve prompts of 3-30 tokens; half share a 12-token prefix (three full blocks of 4).
  const auto prompts = testing::shared_prefix_prompts(21, 12, 256);
  auto ref_model = testing::tiny_lfm2(create_backend("cpu"));
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(testing::oracle_greedy(*ref_model, p, 10));

  // Roomy cache, 16-token steps (chunked prefill, mixed prefill/decode steps, prefix hits); then a
  // cache of 24 blocks for ~12 sequences of up to 40 tokens: preemption and recompute.
  for (int num_blocks : {400, 24}) {
    SCOPED_TRACE("num_blocks " + std::to_string(num_blocks));
    testing::EngineRun run =
        testing::run_engine(testing::tiny_lfm2(create_backend("cpu")), prompts, num_blocks, 16, 16);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(run.tokens["r" + std::to_string(i)], want[i]) << "request " << i;
    EXPECT_GT(run.hits, 0u);
    if (num_blocks == 24) EXPECT_GT(run.preemptions, 0u);
  }
}

}  // namespace
}  // namespace vireo
