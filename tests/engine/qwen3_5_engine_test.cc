// The engine over Qwen3.5 (tests/fixtures/model/qwen3_5, made with transformers): its Gated DeltaNet
// layers keep recurrent state in per-request slots, so batching, chunked prefill, slot reuse and
// preemption (state dropped, prompt + output recomputed) must give each request the greedy tokens of
// a full recompute, and prefix caching must stay off.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "engine_oracle.h"

namespace vireo {
namespace {

std::string fixture() { return std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3_5"; }

// As the engine loads it: --max-num-seqs state slots.
std::unique_ptr<Model> engine_model(int max_seqs) {
  LoadOptions opts;
  opts.max_graph_batch_size = max_seqs;
  opts.max_num_seqs = max_seqs;
  return load_model(fixture(), create_backend("cpu"), opts);
}

TEST(Qwen3_5Engine, BatchedChunkedAndPreemptedMatchFullRecompute) {
  // Ten prompts of 3-30 tokens, half sharing a 12-token prefix (a prefix cache would hit on them).
  const auto prompts = testing::shared_prefix_prompts(5, 10, 512);
  auto ref_model = load_model(fixture(), create_backend("cpu"), LoadOptions{});
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(testing::oracle_greedy(*ref_model, p, 10));

  struct Case {
    int num_blocks, max_seqs, max_batched;
  };
  // Roomy cache with 16-token steps (chunked prefill, mixed steps); 3 slots for 10 requests (slot
  // reuse); then 20 blocks for sequences of up to 40 tokens: preemption and recompute.
  for (Case c : {Case{400, 16, 16}, Case{400, 3, 64}, Case{20, 8, 16}}) {
    SCOPED_TRACE("blocks " + std::to_string(c.num_blocks) + " seqs " + std::to_string(c.max_seqs));
    testing::EngineRun run =
        testing::run_engine(engine_model(c.max_seqs), prompts, c.num_blocks, c.max_seqs, c.max_batched);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(run.tokens["r" + std::to_string(i)], want[i]) << "request " << i;
    EXPECT_EQ(run.hits, 0u);
    if (c.num_blocks == 20) EXPECT_GT(run.preemptions, 0u);
  }
}

}  // namespace
}  // namespace vireo
