// The engine against a full recompute, for the engine tests of one model (lfm2_engine_test.cc,
// qwen3_5_engine_test.cc): prompts, greedy tokens of each prompt with no cache reuse, and the tokens
// the engine gives the same prompts as a batch.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../model/model_test_util.h"
#include "engine/engine_core.h"

namespace vireo::testing {

// `count` prompts of 3-20 random tokens below `vocab` (std::mt19937(seed)); the odd ones start with the
// same 12 tokens (three full blocks of 4, which a prefix cache would hit on).
inline std::vector<std::vector<int32_t>> shared_prefix_prompts(uint32_t seed, int count, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared;
  for (int i = 0; i < 12; ++i) shared.push_back(static_cast<int32_t>(rng() % vocab));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    const int extra = 3 + static_cast<int>(rng() % 18);
    for (int k = 0; k < extra; ++k) p.push_back(static_cast<int32_t>(rng() % vocab));
    prompts.push_back(p);
  }
  return prompts;
}

// Greedy tokens by recomputing the whole sequence every step (a fresh cache each step, so no cache reuse
// at all; a model with state slots runs in slot 0, reset at position 0).
inline std::vector<int32_t> oracle_greedy(Model& m, std::vector<int32_t> ids, int n) {
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    KvCache kv = m.allocate_kv_cache(32, 4);
    SeqDriver d{m, kv, contiguous_table(32)};
    auto lg = d.step(ids);
    m.free_kv_cache(kv);
    out.push_back(argmax(lg.data(), V));
    ids.push_back(out.back());
  }
  return out;
}

struct EngineRun {
  std::map<std::string, std::vector<int32_t>> tokens;  // by request id: "r<index of the prompt>"
  uint64_t preemptions = 0, hits = 0;
};

// The prompts through an EngineCore over `model` (blocks of 4 tokens, max_model_len 128, prefix caching
// asked for) until all finish: 10 greedy tokens each, EOS ignored.
inline EngineRun run_engine(std::unique_ptr<Model> model, const std::vector<std::vector<int32_t>>& prompts,
                            int num_blocks, int max_seqs, int max_batched) {
  EngineCoreConfig cfg;
  cfg.scheduler.max_num_seqs = max_seqs;
  cfg.scheduler.max_num_batched_tokens = max_batched;
  cfg.scheduler.max_model_len = 128;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = num_blocks;
  cfg.scheduler.enable_prefix_caching = true;  // the engine turns it off for models with state slots
  EngineCore core(std::move(model), nullptr, cfg);
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

}  // namespace vireo::testing
