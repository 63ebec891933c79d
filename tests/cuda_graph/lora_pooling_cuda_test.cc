// LoRA adapters and pooling (forward_hidden) on CUDA against the CPU backend (fp32 on both sides): a
// batch mixing an adapter's rows with base rows, prefill then decode steps (adapter steps run eagerly,
// base-only decode steps through the graphs), and the final hidden states of the pooling path. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "../model/lora_util.h"
#include "../model/model_test_util.h"
#include "model/lora_adapter.h"
#include "model/model.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";

// Two sequences in blocks 1-4 and 5-8; each step runs the given tokens of each (empty: not in the step)
// with its adapter id; returns each scheduled sequence's last-token logits, or hidden states (pool).
struct Pair {
  Model& m;
  KvCache kv;
  int len[2] = {0, 0};
  explicit Pair(Model& model) : m(model), kv(model.allocate_kv_cache(9, 16)) {}
  ~Pair() { m.free_kv_cache(kv); }
  std::vector<float> step(const std::vector<int32_t> (&toks)[2], const int32_t (&lora)[2], bool pool = false) {
    StepInput in;
    in.max_blocks_per_seq = 4;
    in.query_start = {0};
    for (int s = 0; s < 2; ++s) {
      if (toks[s].empty()) continue;
      for (int32_t t : toks[s]) {
        in.token_ids.push_back(t);
        in.positions.push_back(len[s]);
        in.slot_mapping.push_back((1 + 4 * s + len[s] / 16) * 16 + len[s] % 16);
        ++len[s];
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(len[s]);
      for (int b = 0; b < 4; ++b) in.block_tables.push_back(1 + 4 * s + b);
      in.logits_indices.push_back(in.query_start.back() - 1);
      in.lora_ids.push_back(lora[s]);
    }
    std::vector<float> out;
    pool ? m.forward_hidden(in, kv, out) : m.forward(in, kv, out);
    return out;
  }
};

TEST(LoraPoolingCuda, AdapterRowsAndHiddenStatesMatchTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: LoRA / pooling CUDA tests skipped";
  const fs::path root = fs::path(::testing::TempDir()) / ("vireo_lora_cuda_" + std::to_string(::getpid()));
  fs::create_directories(root);
  const fs::path a = testing::write_lora_adapter(
      kFixture, root, "a", {{"self_attn.q_proj", 4, 16}, {"self_attn.v_proj", 4, 16}, {"mlp.gate_proj", 8, 16},
                            {"mlp.down_proj", 8, 16}, {"self_attn.o_proj", 4, 16}}, 5);
  auto gpu = load_model(kFixture.string(), create_backend("cuda", "float32"), {});
  auto cpu = load_model(kFixture.string(), create_backend("cpu"), {});
  const LoraAdapter adapter = load_lora_adapter(a.string());
  gpu->add_lora(1, adapter);
  cpu->add_lora(1, adapter);
  Pair g(*gpu), c(*cpu);
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{5, 17, 30, 2, 9, 41, 77, 8, 8, 10, 3, 25, 6, 19, 11, 4, 12, 7}, {14, 3, 3, 28, 1}}, {{21}, {9}}, {{13}, {2}},
      {{4}, {}}, {{}, {6}}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::vector<int32_t> t[2] = {steps[i][0], steps[i][1]};
    const int32_t ids[2] = {1, 0};  // sequence 0 with the adapter, sequence 1 the base model
    const auto x = g.step(t, ids), y = c.step(t, ids);
    ASSERT_EQ(x.size(), y.size()) << i;
    EXPECT_LT(testing::rel_max_err(x.data(), y.data(), y.size()), 2e-3) << "step " << i;
  }
  // Pooling: the final hidden states of the same kind of batch.
  Pair gp(*gpu), cp(*cpu);
  const std::vector<int32_t> t[2] = {{5, 17, 30, 2, 9, 41}, {14, 3, 3}};
  const int32_t base[2] = {0, 0};
  const auto x = gp.step(t, base, true), y = cp.step(t, base, true);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_LT(testing::rel_max_err(x.data(), y.data(), y.size()), 2e-3);
  fs::remove_all(root);
}

}  // namespace
}  // namespace vireo
