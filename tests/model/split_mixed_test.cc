// Split mixed steps (VIREO_SPLIT_MIXED=1, StepTensors::leading_decode_rows): when a step's decode sequences
// come first, each fused layer asks the attention to leave the decode rows running and runs the prompt rows'
// o_proj and MLP before the decode rows'. On the CPU (every op in order) the logits must be the unsplit
// step's, and the model must ask for the split only where the layout allows it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "forwarding_backend.h"
#include "model/model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

// Counts the split's requests; fused: prefers the fused linear forms everywhere (as CUDA does for FP8
// weights), else the CPU's own choice (the separate ops above 4 rows, as CUDA's BF16 path).
class SplitRecordingBackend final : public testing::ForwardingBackend {
 public:
  SplitRecordingBackend(std::unique_ptr<Backend> inner, bool fused, int* deferred, int* joins)
      : ForwardingBackend(std::move(inner)), fused_(fused), deferred_(deferred), joins_(joins) {}
  bool prefers_fused_linear(DType t, int64_t rows) const override {
    return fused_ || ForwardingBackend::prefers_fused_linear(t, rows);
  }
  // Every op runs in order here: a deferral asked for is "granted" (nothing is left running), so the model
  // takes its split path.
  void prepare_attention(const QkvPrepareParams& a, const AttentionParams& b) override {
    pending_ = b.defer_decode_rows;
    if (pending_) ++*deferred_;
    ForwardingBackend::prepare_attention(a, b);
  }
  bool attention_pending() const override { return pending_; }
  void join_attention() override {
    ++*joins_;
    pending_ = false;
    ForwardingBackend::join_attention();
  }

 private:
  bool fused_;
  int *deferred_, *joins_;
  bool pending_ = false;
};

struct Seq {
  std::vector<int32_t> prompt;
  int first_block;
};

// Prefills each sequence alone, then runs one step of `order` (indices into seqs): a sequence already
// prefilled decodes token 7, one not yet seen runs its whole prompt. Returns that step's last-row logits
// per sequence.
std::vector<float> mixed_step(const fs::path& dir, bool split, const std::vector<Seq>& seqs,
                              const std::vector<int>& prefilled, const std::vector<int>& order, int* deferred,
                              int* joins, bool fused = true) {
  setenv("VIREO_SPLIT_MIXED", split ? "1" : "0", 1);
  auto model = load_model(dir.string(),
                          std::make_unique<SplitRecordingBackend>(create_backend("cpu"), fused, deferred, joins),
                          LoadOptions{});
  const int bs = 16, blocks_per_seq = 4;
  KvCache kv = model->allocate_kv_cache(static_cast<int>(seqs.size()) * blocks_per_seq, bs);
  std::vector<int> len(seqs.size(), 0);
  auto table = [&](int s) {
    std::vector<int32_t> t(blocks_per_seq);
    for (int i = 0; i < blocks_per_seq; ++i) t[i] = seqs[s].first_block + i;
    return t;
  };
  for (int s : prefilled) {
    testing::SeqDriver d{*model, kv, table(s)};
    d.step(seqs[s].prompt);
    len[s] = d.len;
  }
  StepInput in;
  in.query_start = {0};
  in.max_blocks_per_seq = blocks_per_seq;
  for (int s : order) {
    const std::vector<int32_t> toks = len[s] > 0 ? std::vector<int32_t>{7} : seqs[s].prompt;
    for (size_t i = 0; i < toks.size(); ++i) {
      const int p = len[s] + static_cast<int>(i);
      in.token_ids.push_back(toks[i]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(table(s)[p / bs] * bs + p % bs);
    }
    in.query_start.push_back(in.query_start.back() + static_cast<int32_t>(toks.size()));
    in.logits_indices.push_back(in.query_start.back() - 1);
    in.seq_lens.push_back(len[s] + static_cast<int>(toks.size()));
    for (int32_t b : table(s)) in.block_tables.push_back(b);
  }
  std::vector<float> logits;
  model->forward(in, kv, logits);
  model->free_kv_cache(kv);
  unsetenv("VIREO_SPLIT_MIXED");
  return logits;
}

const std::vector<Seq> kSeqs = {{{5, 17, 300, 2, 9, 41, 77, 8, 8, 100, 3, 250}, 0},
                                {{42, 7, 19, 3, 3, 60, 11, 12}, 4},
                                {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 8},
                                {{33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49}, 12}};

TEST(SplitMixed, DecodeRowsFirstGiveTheUnsplitLogits) {
  const fs::path dir = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
  for (bool fused : {true, false}) {  // the fused linear forms (FP8 on CUDA) and the separate ops (BF16)
    SCOPED_TRACE(fused ? "fused forms" : "separate ops");
    int deferred = 0, joins = 0;
    // Two decode rows, then two prompts of 20 and 17 tokens (prefill-shaped at any GQA group).
    const std::vector<float> plain = mixed_step(dir, false, kSeqs, {0, 1}, {0, 1, 2, 3}, &deferred, &joins, fused);
    EXPECT_EQ(deferred, 0);
    const std::vector<float> split = mixed_step(dir, true, kSeqs, {0, 1}, {0, 1, 2, 3}, &deferred, &joins, fused);
    ASSERT_EQ(split.size(), plain.size());
    EXPECT_GT(deferred, 0);      // every attention layer asked
    EXPECT_EQ(joins, deferred);  // and joined each before the decode rows' o_proj
    EXPECT_LT(testing::rel_max_err(split.data(), plain.data(), plain.size()), 1e-5);
  }
}

TEST(SplitMixed, OnlyWhereDecodeRowsLead) {
  const fs::path dir = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
  int deferred = 0, joins = 0;
  mixed_step(dir, true, kSeqs, {0, 1}, {2, 0, 1, 3}, &deferred, &joins);  // a prompt first
  EXPECT_EQ(deferred, 0);
  mixed_step(dir, true, kSeqs, {0, 1, 2, 3}, {0, 1, 2, 3}, &deferred, &joins);  // decode rows only
  EXPECT_EQ(deferred, 0);
  mixed_step(dir, true, kSeqs, {}, {0, 1, 2, 3}, &deferred, &joins);  // prompts only
  EXPECT_EQ(deferred, 0);
  EXPECT_EQ(joins, 0);
}

}  // namespace
}  // namespace vireo
