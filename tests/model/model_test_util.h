// Helpers that drive Model::forward like a minimal engine: one sequence, a block table, greedy.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace vireo::testing {

// One sequence whose logical block i lives in physical block table[i].
struct SeqDriver {
  Model& model;
  KvCache& kv;
  std::vector<int32_t> table;
  int len = 0;  // tokens already in the cache

  // Runs `tokens` as one step (a prefill chunk or a decode token); returns logits of every
  // token when all_logits, else of the last one: [rows * vocab].
  std::vector<float> step(const std::vector<int32_t>& tokens, bool all_logits = false) {
    StepInput in;
    const int n = static_cast<int>(tokens.size());
    in.token_ids = tokens;
    for (int i = 0; i < n; ++i) {
      const int p = len + i;
      in.positions.push_back(p);
      in.slot_mapping.push_back(table[p / kv.block_size] * kv.block_size + p % kv.block_size);
      if (all_logits || i == n - 1) in.logits_indices.push_back(i);
    }
    in.query_start = {0, n};
    in.seq_lens = {len + n};
    in.max_blocks_per_seq = static_cast<int>(table.size());
    in.block_tables = table;
    std::vector<float> logits;
    model.forward(in, kv, logits);
    len += n;
    return logits;
  }
};

inline int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

inline std::vector<int32_t> contiguous_table(int num_blocks) {
  std::vector<int32_t> t(num_blocks);
  for (int i = 0; i < num_blocks; ++i) t[i] = i;
  return t;
}

// The model at dir on the CPU with options o through a 12-token prefill and two decode steps (the loops of
// the every-fixture tests): the last step's logits. block_bytes: kv_block_bytes(16), when given.
inline std::vector<float> prefill_and_two_decodes(const std::string& dir, const LoadOptions& o,
                                                  size_t* block_bytes = nullptr) {
  auto model = load_model(dir, create_backend("cpu"), o);
  if (block_bytes) *block_bytes = model->kv_block_bytes(16);
  KvCache kv = model->allocate_kv_cache(8, 16);
  SeqDriver d{*model, kv, contiguous_table(8)};
  d.step({5, 17, 300, 2, 9, 41, 77, 8, 8, 100, 3, 250});
  d.step({42});
  std::vector<float> l = d.step({7});
  model->free_kv_cache(kv);
  return l;
}

// max |a - b| / max |b|
inline double rel_max_err(const float* a, const float* b, size_t n) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    ref = std::max(ref, static_cast<double>(std::abs(b[i])));
  }
  return ref > 0 ? diff / ref : diff;
}

// The CPU logits of every position of one fixed 12-token prompt of the checkpoint in `dir` (tests that
// load one model in two layouts and expect the same numbers).
inline std::vector<float> prompt_logits(const std::string& dir, const LoadOptions& opts = {}) {
  auto model = load_model(dir, create_backend("cpu"), opts);
  KvCache kv = model->allocate_kv_cache(8, 16);
  SeqDriver d{*model, kv, contiguous_table(8)};
  std::vector<float> logits = d.step({5, 17, 300, 2, 9, 41, 77, 8, 8, 100, 3, 250}, true);
  model->free_kv_cache(kv);
  return logits;
}

}  // namespace vireo::testing
