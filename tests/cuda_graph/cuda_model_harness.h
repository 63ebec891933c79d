// The harness of the tiny-model GPU tests (deepseek_cuda_model_test.cc, lfm2_cuda_model_test.cc): four
// sequences in scattered blocks driven through one schedule of prefill chunks, a mixed step and batched
// decode steps (decode graphs, with padding rows), and the comparisons of their logits.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/model.h"

namespace vireo::testing {

inline constexpr int kBlock = 16;

// Each step: (sequence, tokens) pairs.
using Schedule = std::vector<std::vector<std::pair<int, std::vector<int32_t>>>>;

// Steps of (sequence, tokens) pairs; logits of each sequence's last token.
inline std::vector<std::vector<float>> drive(Model& m, const Schedule& steps) {
  struct Seq {
    std::vector<int32_t> blocks;
    int len = 0;
  };
  KvCache kv = m.allocate_kv_cache(1 + 4 * 8, kBlock);
  std::vector<Seq> seqs(4);
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < 8; ++b) seqs[s].blocks.push_back(1 + s * 8 + (b * 5 + s) % 8);  // scattered
  std::vector<std::vector<float>> out;
  for (const auto& step : steps) {
    StepInput in;
    in.max_blocks_per_seq = 8;
    in.query_start.push_back(0);
    for (const auto& [s, toks] : step) {
      Seq& q = seqs[s];
      for (int32_t t : toks) {
        in.token_ids.push_back(t);
        in.positions.push_back(q.len);
        in.slot_mapping.push_back(q.blocks[q.len / kBlock] * kBlock + q.len % kBlock);
        ++q.len;
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(q.len);
      in.state_slots.push_back(s);  // recurrent-state models (Gated DeltaNet): a slot per sequence
      in.block_tables.insert(in.block_tables.end(), q.blocks.begin(), q.blocks.end());
      in.logits_indices.push_back(in.query_start.back() - 1);
    }
    std::vector<float> lg;
    m.forward(in, kv, lg);
    out.push_back(lg);
  }
  m.free_kv_cache(kv);
  return out;
}

// Prompts of 5-40 tokens in chunks (one crossing a block), a mixed step, then 12 decode steps of
// 1-4 sequences (graph sizes 1, 2 and 4, padded from 3). Token ids below 256.
inline Schedule schedule() {
  Schedule steps;
  auto toks = [](int n, int salt) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back((i * 37 + salt * 101 + 5) % 256);
    return v;
  };
  steps.push_back({{0, toks(14, 0)}, {1, toks(5, 1)}});
  steps.push_back({{0, toks(9, 2)}, {2, toks(40, 3)}});
  steps.push_back({{1, toks(1, 4)}, {3, toks(17, 5)}, {0, toks(1, 6)}});
  const std::vector<std::vector<int>> batches = {{0}, {1, 2, 3}, {0, 1}, {3, 2, 1, 0}, {2}, {0, 3, 1}};
  for (int i = 0; i < 12; ++i) {
    std::vector<std::pair<int, std::vector<int32_t>>> step;
    for (int s : batches[i % batches.size()]) step.push_back({s, {static_cast<int32_t>((i * 13 + s * 7) % 256)}});
    steps.push_back(step);
  }
  return steps;
}

inline double max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

// Decode graphs up to 4 rows (none when eager), contexts up to the 8 blocks a sequence has.
inline LoadOptions graph_opts(bool eager) {
  LoadOptions o;
  o.enforce_eager = eager;
  o.max_graph_batch_size = 4;
  o.max_num_seqs = 4;
  o.max_model_len = 8 * kBlock;
  return o;
}

// The schedule on a GPU model with decode graphs in fp32: each step's logits within 1e-3 (relative) of
// the CPU's.
inline void expect_fp32_matches_cpu(Model& cpu, Model& gpu) {
  const auto steps = schedule();
  const auto want = drive(cpu, steps), got = drive(gpu, steps);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_LT(max_rel_err(got[i], want[i]), 1e-3) << "step " << i;
}

// The schedule in bf16 with decode graphs (graph) and without (eager) and on the CPU in fp32: graphs
// within 2e-2 of eager, eager within cpu_tol (1e-1) of the CPU, and at least 3/4 of the rows (of V logits)
// with the CPU's argmax.
inline void expect_bf16_graphs_match_eager(Model& eager, Model& graph, Model& cpu, int64_t V, double cpu_tol = 1e-1) {
  const auto steps = schedule();
  const auto e = drive(eager, steps), g = drive(graph, steps), c = drive(cpu, steps);
  int same_argmax = 0, rows = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_LT(max_rel_err(g[i], e[i]), 2e-2) << "step " << i;
    EXPECT_LT(max_rel_err(e[i], c[i]), cpu_tol) << "step " << i;  // bf16 activations vs fp32
    for (size_t r = 0; r * V < c[i].size(); ++r, ++rows)
      same_argmax += std::max_element(e[i].begin() + r * V, e[i].begin() + (r + 1) * V) - e[i].begin() ==
                     std::max_element(c[i].begin() + r * V, c[i].begin() + (r + 1) * V) - c[i].begin();
  }
  EXPECT_GE(same_argmax, rows * 3 / 4);
}

}  // namespace vireo::testing
