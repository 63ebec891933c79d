// Batch-invariant mode at model level (the built-in default model, bf16 dummy weights): the decode
// logits of a sequence are bitwise the same alone, inside batches with other decodes and prefill chunks
// (eager and through the decode CUDA graphs, whose padded sizes differ), and when the sequence is
// recomputed from scratch as one prefill (what preemption does).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "model/default_model.h"
#include "model/model.h"
#include "paged_step.h"

namespace vireo {
namespace {

bool gpu_present() {
  static const bool present = cuda_available();
  return present;
}

using testing::make_step;
using Seq = testing::PagedSeq;

class BatchInvariantModel : public ::testing::TestWithParam<bool> {};  // param: enforce_eager

TEST_P(BatchInvariantModel, DecodeLogitsIndependentOfBatchAndOfPrefill) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA GPU visible: CUDA graph tests skipped";
  const bool eager = GetParam();
  const ModelConfig cfg = default_model_config();
  const int64_t V = cfg.vocab_size;
  const int bs = 16, blocks_per_seq = 16;
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = 7;
  o.enforce_eager = eager;
  o.max_graph_batch_size = 8;
  o.max_model_len = bs * blocks_per_seq;
  auto model = load_model(cfg, "", create_backend("cuda", "bfloat16", /*batch_invariant=*/true), o);
  ASSERT_TRUE(model->backend().batch_invariant());
  const int num_seqs = 6;
  KvCache kv = model->allocate_kv_cache(1 + num_seqs * blocks_per_seq, bs);
  std::vector<Seq> seqs(num_seqs);
  for (int s = 0; s < num_seqs; ++s)
    for (int b = 0; b < blocks_per_seq; ++b) seqs[s].blocks.push_back(1 + s * blocks_per_seq + b);
  std::mt19937 rng(3);
  auto tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % V);
    return t;
  };
  // Sequences 0 (alone) and 1 (batched) carry the same tokens; 2..5 are the company of sequence 1.
  const std::vector<int32_t> prompt = tokens(21);
  const int steps = 6;
  const std::vector<int32_t> gen = tokens(steps);
  auto forward = [&](const std::vector<int>& which, const std::vector<std::vector<int32_t>>& chunks) {
    std::vector<Seq*> ps;
    for (int i : which) ps.push_back(&seqs[i]);
    std::vector<float> logits;
    model->forward(make_step(ps, chunks, bs), kv, logits);
    EXPECT_EQ(logits.size(), which.size() * V);
    return logits;
  };
  auto row = [&](const std::vector<float>& l, size_t r) { return std::vector<float>(l.begin() + r * V, l.begin() + (r + 1) * V); };
  auto same = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };

  // Alone: the prompt as one prefill, then decode steps one token at a time.
  std::vector<std::vector<float>> solo;
  solo.push_back(forward({0}, {prompt}));
  for (int i = 0; i < steps; ++i) solo.push_back(forward({0}, {{gen[i]}}));

  // Batched: the prompt in a chunked prefill beside other prefills, then decodes beside other decodes
  // (decode-only steps of 2..5 rows: graph sizes 2, 4, 8) and beside prefill chunks (mixed steps).
  const std::vector<int32_t> p1(prompt.begin(), prompt.begin() + 9), p2(prompt.begin() + 9, prompt.end());
  forward({2, 1, 3}, {tokens(40), p1, tokens(3)});
  std::vector<std::vector<float>> batched;
  batched.push_back(row(forward({4, 1}, {tokens(70), p2}), 1));
  for (int i = 0; i < steps; ++i) {
    std::vector<int> which = {2, 3, 4, 1};
    std::vector<std::vector<int32_t>> chunks = {{tokens(1)}, {tokens(1)}, {tokens(1)}, {gen[i]}};
    if (i == 1) which = {1}, chunks = {{gen[i]}};
    if (i == 2) which = {3, 1}, chunks = {{tokens(1)}, {gen[i]}};
    if (i == 3) which = {5, 1, 2}, chunks = {tokens(33), {gen[i]}, {tokens(1)}};  // mixed with a prefill
    if (i == 4) which = {2, 3, 4, 1, 5}, chunks = {{tokens(1)}, {tokens(1)}, {tokens(1)}, {gen[i]}, {tokens(1)}};
    auto l = forward(which, chunks);
    const size_t r = std::find(which.begin(), which.end(), 1) - which.begin();
    batched.push_back(row(l, r));
  }
  for (size_t i = 0; i < solo.size(); ++i) EXPECT_TRUE(same(solo[i], batched[i])) << "step " << i << ": batched logits differ";

  // Recompute (preemption): sequence 1 restarts from an empty cache, prompt + generated tokens as one
  // prefill chunk beside a decode; its last row must equal the last decode step's logits.
  seqs[1].len = 0;
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  auto l = forward({2, 1}, {{tokens(1)}, all});
  EXPECT_TRUE(same(row(l, 1), solo.back())) << "recomputed prefill differs from the decode step";
  // And as two chunks, the second of one token (a decode-shaped row inside a mixed step).
  seqs[1].len = 0;
  forward({1}, {std::vector<int32_t>(all.begin(), all.end() - 1)});
  l = forward({3, 1}, {tokens(20), {all.back()}});
  EXPECT_TRUE(same(row(l, 1), solo.back())) << "recomputed in two chunks differs from the decode step";
}

INSTANTIATE_TEST_SUITE_P(EagerAndGraphs, BatchInvariantModel, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Eager" : "Graphs"; });

}  // namespace
}  // namespace vireo
