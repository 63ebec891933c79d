// DeepSeek-V3 (MLA through mla_pack + the common attention, sigmoid grouped routing, shared expert) on a
// GPU: a tiny dummy-weight model through prefill chunks, mixed steps and batched decode steps (decode
// graphs, with padding rows), against the CPU backend in fp32 and against enforce_eager in bf16.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "cuda_model_harness.h"
#include "model/decoder_model.h"
#include "model/model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: DeepSeek CUDA model tests skipped"

using testing::graph_opts;

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
  testing::expect_fp32_matches_cpu(*cpu, *gpu);
}

TEST(DeepseekOnCuda, Bf16GraphsMatchEager) {
  REQUIRE_GPU();
  auto eager = tiny_deepseek(create_backend("cuda", "bfloat16"), graph_opts(true));
  auto graph = tiny_deepseek(create_backend("cuda", "bfloat16"), graph_opts(false));
  auto cpu = tiny_deepseek(create_backend("cpu"), graph_opts(true));
  testing::expect_bf16_graphs_match_eager(*eager, *graph, *cpu, 256);
  EXPECT_GT(dynamic_cast<DecoderModel&>(*graph).num_graphs(), 0);
}

}  // namespace
}  // namespace vireo
