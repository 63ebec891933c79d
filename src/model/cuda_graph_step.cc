// DecoderModel::forward_graphed: decode-only steps replayed from CUDA graphs.
//
// A step whose S sequences all have one token, with S <= the largest capture size, is padded to
// the next capture size Sp. Padding rows: token 0, position 0, slot -1 (nothing written to the
// cache), state slot -1 (no recurrent state touched), seq_len 1, a block-table row of zeros, query_start continuing by one, and a logits index
// pointing at itself; their outputs are ignored. Inputs go into fixed-address buffers (graphs keep
// pointers) laid out for the largest size, block tables at a fixed width (max_model_len / block).
// The first step of a size runs the ops eagerly (its result is that step's answer, and it builds
// cuBLASLt plans and kernel attributes outside the capture), then the same ops are captured;
// later steps of that size replay the graph. The logits rows stay on the device (sampled there).
//
// Attention inside a graph plans with a fixed context hint (graphs fix grid sizes), not the step's
// lengths: min(max_model_len, kGraphAttentionHint). The kernels read the real seq_lens from device
// memory and stretch the planned split length when a sequence is longer than the hint, so every
// context length is correct; the hint only sets how many splits a long sequence gets. Each size has
// up to four graphs: steps whose contexts are all <= kGraphShortContext plan with that as the hint (so
// the backend may pick a kernel that is fast only for short contexts: the CUDA cluster decode
// attention), longer ones with the general hint; and logits rows in token order (the engine's: lm_head
// reads the residual rows directly) or in another order (gathered first). A backend may split the short
// contexts further (Backend::graph_context_bucket: the CUDA cluster kernel's size follows the planned
// context), one graph per bucket used: batch-1 graphs of 128-key buckets on the H200.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "model/cuda_graph_sizes.h"
#include "model/decoder_model.h"

namespace vireo {
namespace {

// VIREO_SAMPLE_MIRROR=0: samplings do not write their tokens into the graphs' ids rows (A/B).
bool mirror_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_SAMPLE_MIRROR");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

constexpr int kGraphAttentionHint = 8192;
constexpr int kGraphShortContext = 4096;  // = the CUDA cluster decode attention's limit (kClusterMaxKeys)

constexpr int64_t kRowWords = sizeof(SamplingRow) / sizeof(int32_t);
constexpr int64_t kSampleOutWords = 4;  // sample_out_words(1, 1): a batch-1 graph's results

// Offsets into one region of the packed graph ints for capacity `n` sequences: tables last, `width` per
// row, then (never uploaded) the results of sampling inside a batch-1 graph. There are two regions: graphs
// that sample alternate between them, so one step's inputs go up while the graph before it still reads
// the other region's (DecoderGraphs::inputs_fence).
struct GraphLayout {
  int64_t ids, pos, slots, lens, logits_idx, state_slots, query_start, sample_row, tables;
  explicit GraphLayout(int64_t n)
      : ids(0), pos(n), slots(2 * n), lens(3 * n), logits_idx(4 * n), state_slots(5 * n), query_start(6 * n),
        sample_row(7 * n + 1), tables(7 * n + 1 + kRowWords) {}
  int64_t sample_out(int64_t n, int64_t width) const { return tables + n * width; }
  int64_t region(int64_t n, int64_t width) const { return sample_out(n, width) + kSampleOutWords; }
};

}  // namespace

int DecoderModel::num_graphs() const {
  int n = 0;
  for (const auto& [size, id] : graphs_.graph_of_size) n += id >= 0;
  return n;
}

void DecoderModel::reset_graphs() {
  for (int b = 0; b < 2; ++b) wait_sample_downloads(*be_, sampling_, kGraphOut + b);  // they read g.ws.ints
  for (const auto& [size, id] : graphs_.graph_of_size)
    if (id >= 0) be_->destroy_graph(id);
  graphs_.graph_of_size.clear();
  free_workspace(graphs_.ws);
  sampling_.mirror = Tensor();
  graphs_.kv_pages.clear();
  graphs_.kv_block_size = 0;
  graphs_.inputs_fence[0] = graphs_.inputs_fence[1] = 0;
}

bool DecoderModel::forward_graphed(const StepInput& in, KvCache& kv, Tensor& logits, const IdsOnDevice* ids_from,
                                   Tensor* stats, GraphSample* gs) {
  if (opts_.enforce_eager || !be_->supports_graphs() || opts_.max_graph_batch_size <= 0) return false;
  if (!is_decode_only(in) || kv.k.empty()) return false;
  DecoderGraphs& g = graphs_;
  if (g.sizes.empty()) {
    g.sizes = graph_capture_sizes(opts_.max_graph_batch_size);
    g.max_size = g.sizes.back();
  }
  const int S = static_cast<int>(in.seq_lens.size());
  const int64_t M = static_cast<int64_t>(in.logits_indices.size());
  const int Sp = padded_graph_size(g.sizes, S);
  if (Sp == 0 || M > Sp) return false;

  // Graphs hold the KV cache's pointers and the block-table width: a new cache starts over.
  std::vector<const void*>& pages = g.kv_scratch;
  pages.clear();
  for (const auto* side : {&kv.k, &kv.v})
    for (const Tensor& t : *side) pages.push_back(t.data);
  if (pages != g.kv_pages || g.kv_block_size != kv.block_size) {
    reset_graphs();
    const int max_len = opts_.max_model_len > 0 ? opts_.max_model_len : cfg_.max_position_embeddings;
    if (max_len <= 0) return false;  // no bound on the block-table width: stay eager
    g.table_width = (max_len + kv.block_size - 1) / kv.block_size;
    g.attention_hint = std::min(max_len, kGraphAttentionHint);
    g.kv_pages = pages;
    g.kv_block_size = kv.block_size;
  }
  if (in.max_blocks_per_seq > g.table_width) return false;  // longer than max_model_len: eager
  const int W = g.table_width, mb = in.max_blocks_per_seq;
  const GraphLayout L(g.max_size);
  const int64_t used = L.tables + int64_t{Sp} * W, region_words = L.region(g.max_size, W);
  const void* ints_before = g.ws.ints.data;
  ensure_workspace(g.ws, g.max_size, g.max_size, 2 * region_words);
  if (g.ws.ints.data != ints_before) g.inputs_fence[0] = g.inputs_fence[1] = 0;  // new memory: last reader unknown
  auto region_ids = [&](int r) { return static_cast<int32_t*>(g.ws.ints.data) + r * region_words + L.ids; };
  // Every sampling after a graph also writes its tokens into region 0's ids rows (when it has at most
  // max_size); graphs that sample write theirs into the other region's.
  if (mirror_enabled()) sampling_.mirror = Tensor(region_ids(0), DType::kI32, {g.max_size}, g.ws.ints.device);

  // Sampling inside the graph (batch 1). Region: the one the previous sampling mirrored this step's token
  // into, else the one the last such graph did not use.
  const bool sample = gs && Sp == 1 && M == 1;
  const int r = !sample ? 0
                : ids_from && ids_from->mirror == region_ids(0) ? 0
                : ids_from && ids_from->mirror == region_ids(1) ? 1
                                                               : 1 - g.sample_buf;
  auto iv = [&](int64_t off, int64_t n) {
    return Tensor(static_cast<int32_t*>(g.ws.ints.data) + r * region_words + off, DType::kI32, {n}, g.ws.ints.device);
  };

  // Stage the padded inputs; only the prefix up to this size's tables is uploaded.
  std::vector<int32_t>& h = g.host;
  h.resize(static_cast<size_t>(used));
  for (int s = 0; s < Sp; ++s) {
    const bool real = s < S;
    h[L.ids + s] = real ? in.token_ids[s] : 0;
    h[L.pos + s] = real ? in.positions[s] : 0;
    h[L.slots + s] = real ? in.slot_mapping[s] : -1;
    h[L.lens + s] = real ? in.seq_lens[s] : 1;
    h[L.logits_idx + s] = s < M ? in.logits_indices[s] : s;
    // Recurrent state slot (Gated DeltaNet): padding rows -1, so the op leaves every slot alone.
    h[L.state_slots + s] = !real ? -1 : in.state_slots.empty() ? s : in.state_slots[s];
    int32_t* row = h.data() + L.tables + int64_t{s} * W;
    int copied = 0;
    if (real) {
      std::memcpy(row, in.block_tables.data() + int64_t{s} * mb, sizeof(int32_t) * mb);
      copied = mb;
    }
    std::fill(row + copied, row + W, 0);
  }
  for (int s = 0; s <= Sp; ++s) h[L.query_start + s] = s;
  if (sample) {
    std::memcpy(h.data() + L.sample_row, gs->row, sizeof(SamplingRow));  // goes up with the inputs
    wait_sample_downloads(*be_, sampling_, kGraphOut + r);  // an older step's results may still go down
  }
  StepTensors st;
  st.ids = iv(L.ids, Sp);
  // Tokens sampled by the previous step (async scheduling) are in the ids rows already when that
  // sampling mirrored them there, else copied on the device first; the upload starts after their rows
  // (at the padding rows' ids) and waits only for the last graph that read this region, not for the
  // sampling after it: it runs beside that sampling (or, from a graph that samples, beside that graph).
  // Without such tokens the upload rewrites rows that a sampling still in flight may mirror into: it
  // waits for everything issued.
  // Tokens from some of the previous step's rows only (a request finished, or joined with host ids):
  // that sampling may mirror into rows this upload writes, so it waits for everything issued too.
  const bool in_place = ids_from && ids_from->in_place();
  const int64_t upload_from = ids_from ? L.ids + ids_from->num_ids() : 0;
  if (ids_from && !(in_place && ids_from->mirror == st.ids.data)) copy_ids_on_device(*be_, *ids_from, st.ids);
  Tensor upload = iv(upload_from, used - upload_from);
  be_->copy_from_host_after(h.data() + upload_from, upload, in_place ? g.inputs_fence[r] : 0);
  st.positions = iv(L.pos, Sp);
  st.slots = iv(L.slots, Sp);
  st.query_start = iv(L.query_start, Sp + 1);
  st.seq_lens = iv(L.lens, Sp);
  st.block_tables = iv(L.tables, int64_t{Sp} * W);
  st.logits_idx = iv(L.logits_idx, Sp);
  st.state_slots = iv(L.state_slots, Sp);
  st.T = st.M = Sp;
  st.S = Sp;
  st.max_blocks_per_seq = W;
  st.max_query_len = 1;
  // Row s's logits from token s (the engine's order): lm_head reads the residual rows directly; any
  // other order gathers them first, in a graph of its own.
  st.logits_rows_are_tokens = M == S;
  for (int64_t i = 0; i < M && st.logits_rows_are_tokens; ++i) st.logits_rows_are_tokens = in.logits_indices[i] == i;
  int step_max_len = 0;
  for (int len : in.seq_lens) step_max_len = std::max(step_max_len, len);
  const bool short_ctx = step_max_len <= kGraphShortContext;
  st.max_seq_len = short_ctx ? std::min(g.attention_hint, kGraphShortContext) : g.attention_hint;
  // The backend may plan short contexts in finer buckets (the CUDA cluster decode attention's size
  // follows the planned context): one graph per bucket used.
  const int bucket = short_ctx ? be_->graph_context_bucket(Sp, cfg_.num_attention_heads, cfg_.num_key_value_heads,
                                                           cfg_.head_dim, step_max_len)
                               : 0;
  if (bucket > 0) st.max_seq_len = std::min(st.max_seq_len, bucket);
  st.beyond_window = cfg_.sliding_window > 0 && step_max_len > cfg_.sliding_window;
  // Graphs that sample differ in their region and in N (the sample op's outputs).
  const int64_t sample_bits = sample ? (int64_t{1} << 30) + (int64_t{gs->num_top} << 29) + (int64_t{r} << 28) : 0;
  const int64_t key = (int64_t{bucket} << 32) + (int64_t{st.beyond_window} << 31) + sample_bits + 4 * Sp +
                      (st.logits_rows_are_tokens ? 0 : 2) + (short_ctx ? 0 : 1);
  const Tensor sample_out = iv(L.sample_out(g.max_size, W), kSampleOutWords);
  // The sampled token also goes to the other region's ids row, where the next step's graph reads it.
  const Tensor next_ids = mirror_enabled() ? Tensor(region_ids(1 - r), DType::kI32, {1}, g.ws.ints.device) : Tensor();
  auto ops = [&] {
    run_ops(st, kv, g.ws);
    if (sample) sample_in_graph(*gs, iv(L.sample_row, kRowWords), sample_out, next_ids);
  };

  auto it = g.graph_of_size.find(key);
  if (it != g.graph_of_size.end() && it->second >= 0) {
    be_->replay_graph(it->second);
  } else {
    ops();  // this step's answer; also the warm-up of the capture below
    if (it == g.graph_of_size.end()) {
      int id = -1;
      be_->synchronize();
      be_->begin_capture();
      try {
        ops();
        id = be_->end_capture();
      } catch (const Error& e) {
        be_->abort_capture();
        log_warn("cuda graph for batch {} not captured (steps of this size run eagerly): {}", Sp, e.what());
      }
      g.graph_of_size[key] = id;
    }
  }
  g.inputs_fence[r] = be_->fence();
  if (sample) {
    g.sample_buf = r;
    gs->sampled = true;
    gs->out = sample_out.view({sample_out_words(1, gs->num_top)});
    gs->out_id = kGraphOut + r;
    gs->mirror = next_ids.data;
  }
  logits = M > 0 ? g.ws.logits.view({M, cfg_.vocab_size}) : Tensor();
  if (stats && M == Sp) *stats = logit_stats_of(g.ws, Sp);  // the graph's lm_head wrote them (run_ops)
  return true;
}

void DecoderModel::sample_in_graph(const GraphSample& gs, const Tensor& row_words, const Tensor& out,
                                   const Tensor& mirror) {
  SampleParams p;
  p.logits = graphs_.ws.logits.view({1, cfg_.vocab_size});
  p.rows = row_words;
  set_sample_outputs(p, out, 1, gs.num_top);
  // A captured op keeps the choices the backend made from this row: every row sampleable_in_graph
  // takes the same kernels (none of them depends on the row's kind).
  p.host_rows = gs.row;
  p.row_stats = logit_stats_of(graphs_.ws, 1);
  p.out_tokens_mirror = mirror;
  be_->sample(p);
}

}  // namespace vireo
