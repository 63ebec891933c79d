// The engine, unchanged, over a hybrid LFM2 (tests/model/lfm2_test_model.h: conv layers keep their
// state in the KV blocks): batching, chunked prefill, prefix-cache hits and preemption must give each
// request the greedy tokens of a full recompute, as for attention-only models.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../model/lfm2_test_model.h"
#include "../model/model_test_util.h"
#include "backend/backend.h"
#include "engine/engine_core.h"

namespace vireo {
namespace {

// Greedy tokens by recomputing the whole sequence every step (no cache reuse at all).
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

std::map<std::string, std::vector<int32_t>> run_engine(const std::vector<std::vector<int32_t>>& prompts, int num_blocks,
                                                       int max_batched, uint64_t* preemptions, uint64_t* hits) {
  EngineCoreConfig cfg;
  cfg.scheduler.max_num_seqs = 16;
  cfg.scheduler.max_num_batched_tokens = max_batched;
  cfg.scheduler.max_model_len = 128;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = num_blocks;
  cfg.scheduler.enable_prefix_caching = true;
  EngineCore core(testing::tiny_lfm2(create_backend("cpu")), nullptr, cfg);
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 10;
  sp.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i)
    core.add_request(std::make_shared<Request>("r" + std::to_string(i), prompts[i], sp, 0.0));
  std::map<std::string, std::vector<int32_t>> out;
  for (int guard = 0; core.has_unfinished(); ++guard) {
    if (guard > 10000) throw std::runtime_error("engine does not finish");
    for (auto& o : core.step()) out[o.request_id].insert(out[o.request_id].end(), o.token_ids.begin(), o.token_ids.end());
  }
  *preemptions = core.scheduler().num_preemptions();
  *hits = core.scheduler().kv().prefix_cache_hits();
  return out;
}

TEST(Lfm2Engine, BatchedChunkedCachedAndPreemptedMatchFullRecompute) {
  // Twelve prompts of 3-30 tokens; half share a 12-token prefix (three full blocks of 4).
  std::mt19937 rng(21);
  std::vector<int32_t> shared;
  for (int i = 0; i < 12; ++i) shared.push_back(static_cast<int32_t>(rng() % 256));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    const int extra = 3 + static_cast<int>(rng() % 18);
    for (int k = 0; k < extra; ++k) p.push_back(static_cast<int32_t>(rng() % 256));
    prompts.push_back(p);
  }
  auto ref_model = testing::tiny_lfm2(create_backend("cpu"));
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(oracle_greedy(*ref_model, p, 10));

  // Roomy cache, 16-token steps (chunked prefill, mixed prefill/decode steps, prefix hits); then a
  // cache of 24 blocks for ~12 sequences of up to 40 tokens: preemption and recompute.
  for (int num_blocks : {400, 24}) {
    SCOPED_TRACE("num_blocks " + std::to_string(num_blocks));
    uint64_t preemptions = 0, hits = 0;
    auto got = run_engine(prompts, num_blocks, 16, &preemptions, &hits);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got["r" + std::to_string(i)], want[i]) << "request " << i;
    EXPECT_GT(hits, 0u);
    if (num_blocks == 24) EXPECT_GT(preemptions, 0u);
  }
}

}  // namespace
}  // namespace vireo
