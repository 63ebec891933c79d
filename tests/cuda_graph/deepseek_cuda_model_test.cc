// DeepSeek-V3 (MLA through mla_pack + the common attention, sigmoid grouped routing, shared expert) on a
// GPU: a tiny dummy-weight model through prefill chunks, mixed steps and batched decode steps (decode
// graphs, with padding rows), against the CPU backend in fp32 and against enforce_eager in bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "model/decoder_model.h"
#include "model/model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: DeepSeek CUDA model tests skipped"

constexpr int kBlock = 16;

struct Seq {
  std::vector<int32_t> blocks;
  int len = 0;
};

// Steps of (sequence, tokens) pairs; logits of each sequence's last token.
std::vector<std::vector<float>> drive(Model& m, const std::vector<std::vector<std::pair<int, std::vector<int32_t>>>>& steps) {
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
// 1-4 sequences (graph sizes 1, 2 and 4, padded from 3).
std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> schedule() {
  std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> steps;
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

double max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

LoadOptions graph_opts(bool eager) {
  LoadOptions o;
  o.enforce_eager = eager;
  o.max_graph_batch_size = 4;
  o.max_model_len = 8 * kBlock;
  return o;
}

std::unique_ptr<Model> tiny_deepseek(std::unique_ptr<Backend> be, const LoadOptions& base) {
  nlohmann::json j{{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"},
                   {"vocab_size", 256}, {"hidden_size", 64}, {"intermediate_size", 96},
                   {"moe_intermediate_size", 32}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
                   {"num_key_value_heads", 4}, {"q_lora_rank", 48}, {"kv_lora_rank", 32},
                   {"qk_nope_head_dim", 32}, {"qk_rope_head_dim", 16}, {"v_head_dim", 32},
                   {"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"n_shared_experts", 1}, {"n_group", 2},
                   {"topk_group", 1}, {"routed_scaling_factor", 2.5}, {"norm_topk_prob", true},
                   {"first_k_dense_replace", 1}, {"rope_interleave", true}, {"max_position_embeddings", 256},
                   {"tie_word_embeddings", false}};
  LoadOptions o = base;
  o.load_format = "dummy";
  o.seed = 9;
  return load_model(ModelConfig::from_json(j, "deepseek"), "", std::move(be), o);
}

TEST(DeepseekOnCuda, Fp32MatchesCpuWithGraphs) {
  REQUIRE_GPU();
  auto cpu = tiny_deepseek(create_backend("cpu"), graph_opts(true));
  auto gpu = tiny_deepseek(create_backend("cuda", "float32"), graph_opts(false));
  const auto steps = schedule();
  const auto want = drive(*cpu, steps), got = drive(*gpu, steps);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_LT(max_rel_err(got[i], want[i]), 1e-3) << "step " << i;
}

TEST(DeepseekOnCuda, Bf16GraphsMatchEager) {
  REQUIRE_GPU();
  auto eager = tiny_deepseek(create_backend("cuda", "bfloat16"), graph_opts(true));
  auto graph = tiny_deepseek(create_backend("cuda", "bfloat16"), graph_opts(false));
  auto cpu = tiny_deepseek(create_backend("cpu"), graph_opts(true));
  const auto steps = schedule();
  const auto e = drive(*eager, steps), g = drive(*graph, steps), c = drive(*cpu, steps);
  const int64_t V = 256;
  int same_argmax = 0, rows = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_LT(max_rel_err(g[i], e[i]), 2e-2) << "step " << i;
    EXPECT_LT(max_rel_err(e[i], c[i]), 1e-1) << "step " << i;  // bf16 activations vs fp32
    for (size_t r = 0; r * V < c[i].size(); ++r, ++rows)
      same_argmax += std::max_element(e[i].begin() + r * V, e[i].begin() + (r + 1) * V) - e[i].begin() ==
                     std::max_element(c[i].begin() + r * V, c[i].begin() + (r + 1) * V) - c[i].begin();
  }
  EXPECT_GE(same_argmax, rows * 3 / 4);
  EXPECT_GT(dynamic_cast<DecoderModel&>(*graph).num_graphs(), 0);
}

}  // namespace
}  // namespace vireo
