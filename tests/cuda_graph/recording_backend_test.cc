// The graph path of DecoderModel on the host: a backend that wraps the CPU backend and "captures"
// by recording each op with its parameters (device pointers included, as a CUDA graph does) and
// "replays" by running the records. Padding, the fixed-address buffers and the block-table layout
// are checked against enforce_eager without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "model/decoder_model.h"
#include "model/default_model.h"
#include "../model/lfm2_test_model.h"

namespace vireo {
namespace {

class RecordingBackend final : public Backend {
 public:
  RecordingBackend() : cpu_(create_backend("cpu")) {}
  DeviceKind kind() const override { return cpu_->kind(); }
  std::string name() const override { return "recording-cpu"; }
  DType activation_dtype() const override { return cpu_->activation_dtype(); }
  DType weight_dtype(const std::string& checkpoint) const override { return cpu_->weight_dtype(checkpoint); }
  Tensor alloc(std::vector<int64_t> shape, DType dtype) override {
    Tensor t = cpu_->alloc(std::move(shape), dtype);
    // Poison: padding rows must never feed real rows, whatever the scratch held.
    if (dtype == DType::kF32) std::fill_n(static_cast<float*>(t.data), t.numel(), NAN);
    return t;
  }
  void free(Tensor& t) override { cpu_->free(t); }
  Tensor upload(const Tensor& host, DType dtype) override { return cpu_->upload(host, dtype); }
  void copy_from_host(const void* src, Tensor& dst) override {
    if (capturing_) throw Error("copy while capturing");
    cpu_->copy_from_host(src, dst);
  }
  void copy_to_host(const Tensor& src, void* dst) override {
    if (capturing_) throw Error("copy while capturing");
    cpu_->copy_to_host(src, dst);
  }
  void synchronize() override {}
  size_t free_memory_bytes() const override { return cpu_->free_memory_bytes(); }

  void embedding(const EmbeddingParams& p) override { op([=, this] { cpu_->embedding(p); }); }
  void rms_norm(const RmsNormParams& p) override { op([=, this] { cpu_->rms_norm(p); }); }
  void linear(const LinearParams& p) override { op([=, this] { cpu_->linear(p); }); }
  void silu_and_mul(const SiluAndMulParams& p) override { op([=, this] { cpu_->silu_and_mul(p); }); }
  void add(const AddParams& p) override { op([=, this] { cpu_->add(p); }); }
  void gather_rows(const GatherRowsParams& p) override { op([=, this] { cpu_->gather_rows(p); }); }
  void qkv_prepare(const QkvPrepareParams& p) override { op([=, this] { cpu_->qkv_prepare(p); }); }
  void paged_attention(const AttentionParams& p) override { op([=, this] { cpu_->paged_attention(p); }); }
  void short_conv(const ShortConvParams& p) override { op([=, this] { cpu_->short_conv(p); }); }
  void sample(const SampleParams& p) override { op([=, this] { cpu_->sample(p); }); }
  void add_logit_bias(const LogitBiasParams& p) override { op([=, this] { cpu_->add_logit_bias(p); }); }
  void apply_token_bitmask(const TokenBitmaskParams& p) override { op([=, this] { cpu_->apply_token_bitmask(p); }); }
  void copy(const Tensor& src, Tensor& dst) override {
    if (capturing_) throw Error("copy while capturing");
    cpu_->copy(src, dst);
  }

  bool supports_graphs() const override { return true; }
  void begin_capture() override {
    capturing_ = true;
    recording_.clear();
  }
  int end_capture() override {
    capturing_ = false;
    graphs_[next_] = std::move(recording_);
    return next_++;
  }
  void abort_capture() override { capturing_ = false; }
  void replay_graph(int g) override {
    ++replays;
    for (auto& f : graphs_.at(g)) f();
  }
  void destroy_graph(int g) override { graphs_.erase(g); }

  int replays = 0;

 private:
  void op(std::function<void()> f) {
    if (capturing_) recording_.push_back(std::move(f));
    else f();
  }
  std::unique_ptr<Backend> cpu_;
  bool capturing_ = false;
  std::vector<std::function<void()>> recording_;
  std::map<int, std::vector<std::function<void()>>> graphs_;
  int next_ = 1;
};

StepInput decode_step(const std::vector<int>& lens_before, const std::vector<int32_t>& toks, int bs, int nb_per_seq,
                      const std::vector<int>& seq_ids) {
  StepInput in;
  const int S = static_cast<int>(seq_ids.size());
  int mb = 1;
  for (int i = 0; i < S; ++i) mb = std::max(mb, (lens_before[i] + 1 + bs - 1) / bs);
  in.max_blocks_per_seq = mb;
  in.query_start.push_back(0);
  for (int i = 0; i < S; ++i) {
    const int pos = lens_before[i], first_block = 1 + seq_ids[i] * nb_per_seq;
    in.token_ids.push_back(toks[i]);
    in.positions.push_back(pos);
    in.slot_mapping.push_back((first_block + pos / bs) * bs + pos % bs);
    in.query_start.push_back(i + 1);
    in.seq_lens.push_back(pos + 1);
    for (int b = 0; b < mb; ++b) in.block_tables.push_back(first_block + b);
  }
  // Logits in reverse order, to check the index padding keeps the requested rows.
  for (int i = S - 1; i >= 0; --i) in.logits_indices.push_back(i);
  return in;
}

// Dummy weights (seed 4), graphs up to `max_batch` sequences, 256-token contexts.
LoadOptions graph_options(int max_batch) {
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = 4;
  o.max_graph_batch_size = max_batch;
  o.max_model_len = 256;
  return o;
}

// capture_at_start: every size's graph made before the first step (DecoderModel::capture_graphs, as the
// engine's ModelRunner does), so no decode step captures and each one replays.
void decode_matches_eager(const ModelConfig& cfg, bool capture_at_start = false) {
  const int64_t V = cfg.vocab_size;
  LoadOptions o = graph_options(8);
  auto rb = std::make_unique<RecordingBackend>();
  RecordingBackend* rec = rb.get();
  auto graph = load_model(cfg, "", std::move(rb), o);
  o.enforce_eager = true;
  auto eager = load_model(cfg, "", create_backend("cpu"), o);
  const int bs = 16, nb = 4, num_seqs = 6;
  KvCache kg = graph->allocate_kv_cache(1 + num_seqs * nb, bs), ke = eager->allocate_kv_cache(1 + num_seqs * nb, bs);
  if (capture_at_start) {
    graph->capture_graphs(kg);
    EXPECT_EQ(dynamic_cast<DecoderModel&>(*graph).num_graphs(), 4);  // sizes 1, 2, 4, 8
    EXPECT_EQ(rec->replays, 0);
  }
  // Made on first use: every size without start-up capture; with it, the steps below whose logits rows are
  // asked in reverse order (sizes 2, 4, 8: the gathered form, a graph of its own; the start-up graphs are the
  // engine's token order, as batch 1 is either way).
  const int lazy_captures = capture_at_start ? 3 : 4;
  std::vector<int> len(num_seqs, 0);
  std::mt19937 rng(3);
  // Prompts through mixed steps (eager in both): all six sequences in one step.
  {
    StepInput in;
    const std::vector<int> plen = {3, 15, 16, 17, 30, 9};
    int mb = 2;
    in.max_blocks_per_seq = mb;
    in.query_start.push_back(0);
    for (int s = 0; s < num_seqs; ++s) {
      for (int p = 0; p < plen[s]; ++p) {
        in.token_ids.push_back(static_cast<int32_t>(rng() % V));
        in.positions.push_back(p);
        in.slot_mapping.push_back((1 + s * nb + p / bs) * bs + p % bs);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(plen[s]);
      for (int b = 0; b < mb; ++b) in.block_tables.push_back(1 + s * nb + b);
      in.logits_indices.push_back(static_cast<int32_t>(in.token_ids.size()) - 1);
      len[s] = plen[s];
    }
    std::vector<float> a, b;
    graph->forward(in, kg, a);
    eager->forward(in, ke, b);
    ASSERT_EQ(a.size(), b.size());
  }
  const std::vector<std::vector<int>> batches = {{0}, {0, 1, 2}, {1, 2, 3, 4, 5}, {4}, {5, 3}, {0, 2, 4}};
  for (int step = 0; step < 18; ++step) {
    const auto& ids = batches[step % batches.size()];
    std::vector<int> before;
    std::vector<int32_t> toks;
    for (int s : ids) before.push_back(len[s]), toks.push_back(static_cast<int32_t>(rng() % V));
    StepInput in = decode_step(before, toks, bs, nb, ids);
    std::vector<float> a, b;
    graph->forward(in, kg, a);
    eager->forward(in, ke, b);
    ASSERT_EQ(a.size(), ids.size() * V);
    ASSERT_EQ(b.size(), a.size());
    double err = 0, scale = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      ASSERT_TRUE(std::isfinite(a[j])) << "step " << step << " at " << j;
      err = std::max(err, static_cast<double>(std::fabs(a[j] - b[j])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[j])));
    }
    EXPECT_LE(err, 1e-4 * scale + 1e-5) << "step " << step;
    for (int s : ids) ++len[s];
  }
  auto& dm = dynamic_cast<DecoderModel&>(*graph);
  EXPECT_EQ(dm.num_graphs(), capture_at_start ? 7 : 4);  // padded sizes 1, 4, 8, 2 (+ 2, 4, 8 in token order)
  EXPECT_EQ(rec->replays, 18 - lazy_captures);
  // One step through a graph, then the same step eagerly on the same cache (what the GPU long-context
  // test does): same logits, and the eager run replays nothing.
  {
    const std::vector<int> ids = {1, 3, 5};
    std::vector<int> before;
    for (int s : ids) before.push_back(len[s]);
    StepInput in = decode_step(before, {7, 8, 9}, bs, nb, ids);
    std::vector<float> a, b;
    graph->forward(in, kg, a);
    dm.set_enforce_eager(true);
    graph->forward(in, kg, b);
    dm.set_enforce_eager(false);
    EXPECT_EQ(rec->replays, 18 - lazy_captures + 1);
    ASSERT_EQ(a.size(), b.size());
    double err = 0;
    for (size_t j = 0; j < a.size(); ++j) err = std::max(err, static_cast<double>(std::fabs(a[j] - b[j])));
    EXPECT_LE(err, 1e-3);
    for (int s : ids) ++len[s];
  }
  EXPECT_GT(len[1], 16 + 4);
  graph->free_kv_cache(kg);
  eager->free_kv_cache(ke);
}

TEST(RecordedGraphs, DecodeMatchesEagerOnHost) { decode_matches_eager(default_model_config()); }

// Graphs made at start-up on a dummy step (slot -1, the null block): the cache written later by the prompts
// is what the eager twin has, and every decode step replays.
TEST(RecordedGraphs, CapturedAtStartUpDecodeMatchesEagerOnHost) {
  decode_matches_eager(default_model_config(), /*capture_at_start=*/true);
}
TEST(RecordedGraphs, HybridConvCapturedAtStartUpMatchesEagerOnHost) {
  decode_matches_eager(ModelConfig::from_json(testing::tiny_lfm2_json(), "tiny-lfm2/config.json"), true);
}

// LFM2's conv layers in decode graphs: their state pages are captured like K/V, padding rows (slot -1,
// position 0) read and write no state.
TEST(RecordedGraphs, HybridConvDecodeMatchesEagerOnHost) {
  decode_matches_eager(ModelConfig::from_json(testing::tiny_lfm2_json(), "tiny-lfm2/config.json"));
}

// Sampling inside batch-1 graphs (GraphSample) on the host: the recorded graph holds the sample op after
// the lm_head, reads the row from the graph inputs and writes one of two result buffers. Against the same
// recording backend with that off, over launched-ahead steps (tokens from the previous sampling) whose rows
// change kind, a chain break and synchronous steps: the same tokens, logprobs and top ids.
TEST(RecordedGraphs, BatchOneSamplingInsideTheGraph) {
  const ModelConfig cfg = default_model_config();
  const LoadOptions o = graph_options(4);
  auto rb = std::make_unique<RecordingBackend>();
  RecordingBackend* rec = rb.get();
  auto fused = load_model(cfg, "", std::move(rb), o);
  auto ref = load_model(cfg, "", std::make_unique<RecordingBackend>(), o);
  dynamic_cast<DecoderModel&>(*ref).set_graph_sampling(false);
  auto batch_for = [](int step) {
    SamplingBatch b;
    b.rows.resize(1);
    SamplingRow& r = b.rows[0];
    r.uniform = static_cast<float>(((step + 3) * 41 % 100) / 100.0);
    const int kind = (step + 6) % 6;
    r.temperature = kind == 0 || kind == 4 ? 0.0f : kind == 3 ? 0.7f : 1.0f;  // 3: sampled after the graph
    b.num_top_logprobs = kind >= 4 ? 1 : 0;
    return b;
  };
  using Results = std::vector<SampledRows>;
  auto run = [&](Model& m) {
    const int bs = 16, nb = 4;
    KvCache kv = m.allocate_kv_cache(1 + nb, bs);
    Results r;
    int len = 0;
    auto step_in = [&](int32_t tok) { return decode_step({len++}, {tok}, bs, nb, {0}); };
    SampledRows out;
    m.forward_sample(step_in(11), kv, batch_for(-1), out);  // one token: a graphed step already
    r.push_back(out);
    int ticket = m.launch_sample(step_in(out.tokens[0]), kv, batch_for(0), false);
    for (int step = 1; step <= 24; ++step) {
      int next = 0;
      if (step < 24 && step != 9) next = m.launch_sample(step_in(0), kv, batch_for(step), true);
      m.finish_sample(ticket, out);
      r.push_back(out);
      if (step == 9) next = m.launch_sample(step_in(out.tokens[0]), kv, batch_for(step), false);
      ticket = next;
    }
    for (int step = 24; step < 30; ++step) {
      m.forward_sample(step_in(out.tokens[0]), kv, batch_for(step), out);
      r.push_back(out);
    }
    m.free_kv_cache(kv);
    return r;
  };
  const Results want = run(*ref);
  const int replays_before = rec->replays;
  const Results got = run(*fused);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "step " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "step " << i;
    EXPECT_EQ(got[i].top_ids, want[i].top_ids) << "step " << i;
  }
  // Graphs: one plain (temperature 0.7 rows), and sampling ones for N = 0 / 1 and both result buffers.
  EXPECT_EQ(dynamic_cast<DecoderModel&>(*fused).num_graphs(), 5);
  EXPECT_EQ(dynamic_cast<DecoderModel&>(*ref).num_graphs(), 1);
  EXPECT_GT(rec->replays, replays_before + 20);
}

}  // namespace
}  // namespace vireo
