// The engine over Qwen3.5 (tests/fixtures/model/qwen3_5, made with transformers): its Gated DeltaNet
// layers keep recurrent state in per-request slots, so batching, chunked prefill, slot reuse and
// preemption (state dropped, prompt + output recomputed) must give each request the greedy tokens of
// a full recompute, and prefix caching must stay off.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../model/model_test_util.h"
#include "backend/backend.h"
#include "engine/engine_core.h"

namespace vireo {
namespace {

std::string fixture() { return std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3_5"; }

// Greedy tokens by recomputing the whole sequence every step (slot 0, reset at position 0).
std::vector<int32_t> oracle_greedy(Model& m, std::vector<int32_t> ids, int n) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    KvCache kv = m.allocate_kv_cache(32, 4);
    testing::SeqDriver d{m, kv, testing::contiguous_table(32)};
    auto lg = d.step(ids);
    m.free_kv_cache(kv);
    out.push_back(testing::argmax(lg.data(), V));
    ids.push_back(out.back());
  }
  return out;
}

struct EngineRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  uint64_t preemptions = 0, hits = 0;
};

EngineRun run_engine(const std::vector<std::vector<int32_t>>& prompts, int num_blocks, int max_seqs, int max_batched) {
  EngineCoreConfig cfg;
  cfg.scheduler.max_num_seqs = max_seqs;
  cfg.scheduler.max_num_batched_tokens = max_batched;
  cfg.scheduler.max_model_len = 128;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = num_blocks;
  cfg.scheduler.enable_prefix_caching = true;  // the engine must turn it off for this model
  LoadOptions opts;
  opts.max_graph_batch_size = max_seqs;  // as the engine loads it: --max-num-seqs state slots
  EngineCore core(load_model(fixture(), create_backend("cpu"), opts), nullptr, cfg);
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 10;
  sp.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i)
    core.add_request(std::make_shared<Request>("r" + std::to_string(i), prompts[i], sp, 0.0));
  EngineRun run;
  for (int guard = 0; core.has_unfinished(); ++guard) {
    if (guard > 10000) throw std::runtime_error("engine does not finish");
    for (auto& o : core.step())
      run.tokens[o.request_id].insert(run.tokens[o.request_id].end(), o.token_ids.begin(), o.token_ids.end());
  }
  run.preemptions = core.scheduler().num_preemptions();
  run.hits = core.scheduler().kv().prefix_cache_hits();
  return run;
}

TEST(Qwen3_5Engine, BatchedChunkedAndPreemptedMatchFullRecompute) {
  // Ten prompts of 3-30 tokens, half sharing a 12-token prefix (a prefix cache would hit on them).
  std::mt19937 rng(5);
  std::vector<int32_t> shared;
  for (int i = 0; i < 12; ++i) shared.push_back(static_cast<int32_t>(rng() % 512));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    const int extra = 3 + static_cast<int>(rng() % 18);
    for (int k = 0; k < extra; ++k) p.push_back(static_cast<int32_t>(rng() % 512));
    prompts.push_back(p);
  }
  auto ref_model = load_model(fixture(), create_backend("cpu"), LoadOptions{});
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(oracle_greedy(*ref_model, p, 10));

  struct Case {
    int num_blocks, max_seqs, max_batched;
  };
  // Roomy cache with 16-token steps (chunked prefill, mixed steps); 3 slots for 10 requests (slot
  // reuse); then 20 blocks for sequences of up to 40 tokens: preemption and recompute.
  for (Case c : {Case{400, 16, 16}, Case{400, 3, 64}, Case{20, 8, 16}}) {
    SCOPED_TRACE("blocks " + std::to_string(c.num_blocks) + " seqs " + std::to_string(c.max_seqs));
    EngineRun run = run_engine(prompts, c.num_blocks, c.max_seqs, c.max_batched);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(run.tokens["r" + std::to_string(i)], want[i]) << "request " << i;
    EXPECT_EQ(run.hits, 0u);
    if (c.num_blocks == 20) EXPECT_GT(run.preemptions, 0u);
  }
}

}  // namespace
}  // namespace vireo
