// The generic decoder-only transformer every registered architecture maps onto.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/arch_spec.h"
#include "model/lora_adapter.h"
#include "model/model.h"
#include "model/sample_on_backend.h"
#include "model/weight_source.h"

namespace vireo {

// Device weights of one decoder layer (HF module names in comments). Empty tensors are absent.
struct DecoderLayerWeights {
  Tensor input_norm;       // input_layernorm.weight [hidden] (pre-norm only)
  Tensor qkv_w, qkv_b;     // self_attn.{q,k,v}_proj fused: [(H + 2*Hkv) * D, hidden], bias [(H + 2*Hkv) * D]
  // q, k, v kept apart instead of qkv_w where a GGUF file has them in different block types and the backend
  // keeps them packed (Q4_K_M's Q6_K attn_v beside Q4_K attn_q, on the CPU): each writes its columns of qkv.
  std::vector<Tensor> qkv_parts;
  Tensor q_norm, k_norm;   // self_attn.q_norm/k_norm: [D] per head or [H*D] / [Hkv*D] full width
  Tensor o_w, o_b;         // self_attn.o_proj: [hidden, H*D]
  Tensor post_attn_norm;   // post_attention_layernorm.weight [hidden]
  Tensor post_ffn_norm;    // post_feedforward_layernorm.weight [hidden] (post-norm and sandwich-norm only)
  Tensor pre_ffn_norm;     // pre_feedforward_layernorm.weight [hidden] (sandwich-norm only: the MLP's input norm)
  Tensor gate_up_w, gate_up_b;  // mlp.{gate,up}_proj fused: [2 * inter, hidden]
  Tensor down_w, down_b;   // mlp.down_proj: [hidden, inter]
  // Sparse MoE layers (ArchSpec::moe and config.moe_layer(l)) instead of gate_up / down:
  Tensor router_w;         // mlp.gate.weight [E, hidden]
  Tensor experts_gate_up;  // mlp.experts.<e>.{gate,up}_proj stacked: [E, 2 * moe_inter, hidden]
  Tensor experts_down;     // mlp.experts.<e>.down_proj stacked: [E, hidden, moe_inter]
  Tensor router_bias;      // mlp.gate.e_score_correction_bias [E] F32 (DeepSeek-V3)
  Tensor shared_gate_up_w; // mlp.shared_experts.{gate,up}_proj fused: [2 * Is, hidden] (Is = n_shared * moe_inter)
  Tensor shared_down_w;    // mlp.shared_experts.down_proj: [hidden, Is]
  // MLA layers (ArchSpec::mla) instead of qkv_w: per-head dims of q rows and K are reordered at load to
  // [rope | nope] (D = rope + nope); o_w is [hidden, H * D] with zero columns past v_head_dim of each head.
  Tensor q_a_w, q_a_norm;  // self_attn.q_a_proj [q_lora, hidden], q_a_layernorm [q_lora] (q_lora_rank set)
  Tensor q_w;              // self_attn.q_b_proj [H * D, q_lora] or q_proj [H * D, hidden], rows reordered
  Tensor kv_a_w, kv_a_norm;  // kv_a_proj_with_mqa rows [0, kv_lora) [kv_lora, hidden], kv_a_layernorm [kv_lora]
  Tensor kpe_w;            // kv_a_proj_with_mqa rows [kv_lora, kv_lora + rope): the shared rope key [rope, hidden]
  Tensor kv_b_w;           // self_attn.kv_b_proj [H * (nope + v), kv_lora]
  // Short-convolution layers (ArchSpec::short_conv and config.conv_layer(l)) instead of qkv / q_norm /
  // k_norm; o_w / o_b hold conv.out_proj [hidden, hidden]:
  Tensor in_proj_w, in_proj_b;  // conv.in_proj: [3 * hidden, hidden] (rows B, C, x), bias [3 * hidden]
  Tensor conv_w, conv_b;        // conv.conv.weight [hidden, 1, L] held as [hidden, L], bias [hidden]
  // Qwen3-Next gated attention: q_proj's gate rows [H * D, hidden] (qkv_w holds its query rows).
  Tensor attn_gate_w;
  // Qwen3-Next shared expert gate: mlp.shared_expert_gate.weight [1, hidden] (shared_* hold the expert).
  Tensor shared_expert_gate_w;
  // Gated DeltaNet layers (ArchSpec::gated_delta_net and config.linear_layer(l)) instead of attention;
  // o_w holds linear_attn.out_proj [hidden, Hv * dv]:
  Tensor gdn_in_w;     // in_proj rows fused as [q | k | v | z | b | a]: [2*Hk*dk + 2*Hv*dv + 2*Hv, hidden]
  Tensor gdn_conv_w;   // conv1d.weight [C, 1, L] held as [C, L]
  Tensor gdn_A_log, gdn_dt_bias;  // [Hv] F32
  Tensor gdn_norm_w;   // linear_attn.norm.weight [dv] (a plain weight)
  // GPT-OSS (decoder_gpt_oss.cc): attention sinks, the router's bias and the experts' biases.
  Tensor sinks;              // self_attn.sinks [H] F32
  Tensor router_b;           // mlp.router.bias [E]
  Tensor experts_gate_up_b;  // mlp.experts.gate_up_proj_bias [E, 2 * moe_inter], [gate; up] like experts_gate_up
  Tensor experts_down_b;     // mlp.experts.down_proj_bias [E, hidden]
  // MXFP4 experts kept packed (MoeParams gate_up_scales / down_scales): experts_gate_up / experts_down
  // are then U8 [E, 2I, hidden / 2] / [E, hidden, I / 2] and these their E8M0 scales; empty otherwise.
  Tensor experts_gate_up_s, experts_down_s;
};

// Per-sequence recurrent state of one Gated DeltaNet layer, num_state_slots() slots.
struct GdnLayerState {
  Tensor conv;  // [slots, L - 1, C] activation dtype
  Tensor ssm;   // [slots, Hv, dk, dv] F32
};

// Per-step scratch, grown when a step needs more rows than the last one.
struct DecoderWorkspace {
  int64_t token_cap = 0, logit_cap = 0, int_cap = 0;
  Tensor ints;                  // I32 packed step inputs
  Tensor residual, hidden, branch;  // [T, hidden]
  Tensor qkv;                   // [T, (H + 2*Hkv) * D]
  Tensor bcx;                   // [T, 3 * hidden] short-conv in_proj output (models with conv layers)
  Tensor q, attn;               // [T, H * D]
  Tensor mla_qa, mla_ckv, mla_kpe, mla_kv;  // MLA: [T, q_lora], [T, kv_lora], [T, rope], [T, H * (nope + v)]
  Tensor gdn_proj, gdn_out;     // Gated DeltaNet: [T, 2*Hk*dk + 2*Hv*dv + 2*Hv], [T, Hv * dv]
  Tensor attn_gate;             // [T, H * D] gated attention's gate rows
  Tensor shared_gate;           // [T, 1] the shared expert's gate logit
  Tensor gate_up;               // [T, 2 * inter] (inter: the larger of the dense and shared-expert widths)
  Tensor act;                   // [T, inter]
  Tensor rows;                  // [M, hidden] (logits rows)
  Tensor logits;                // [M, vocab]
  Tensor logit_stats;           // [1, C, 4] F32 RangeStats of a one-row step's logits (empty: none)
};

// Device views of one step's integer inputs and the host-side sizes/hints the ops need.
struct StepTensors {
  Tensor ids, positions, slots;        // [T]
  Tensor query_start;                  // [S + 1]
  Tensor seq_lens;                     // [S]
  Tensor block_tables;                 // [S, max_blocks_per_seq]
  Tensor logits_idx;                   // [M]
  Tensor state_slots;                  // [S] recurrent state slot per sequence (< 0: padding)
  Tensor prefill_seqs;                 // [num_prefill_seqs] the sequences with > 1 query token
  int num_prefill_seqs = -1;           // < 0: not listed (AttentionParams::prefill_seqs)
  int64_t T = 0, M = 0;
  int S = 0, max_blocks_per_seq = 0;
  int max_query_len = 0, max_seq_len = 0;  // attention planning hints
  int min_multi_query_len = 0;             // the fewest query tokens of a sequence with > 1 (0: none)
  bool logits_rows_are_tokens = false;     // logits_idx is 0..T-1 (decode-only steps): no gather
  // Some context is longer than the sliding window: the sliding layers bound their keys. Up to the
  // window sliding and full attention are the same, and full attention keeps the fast kernels.
  bool beyond_window = false;
  // Rows [begin, end) of the step run LoRA adapter `id` (StepInput::lora_ids; base-model rows are left
  // out): adjacent sequences of one adapter merged. Empty: no adapter in the step.
  struct LoraRows {
    int64_t begin = 0, end = 0;
    int32_t id = 0;
  };
  std::vector<LoraRows> lora_rows;
  // Pooling (Model::forward_hidden): the rows end as model.norm(h) in ws.rows [M, hidden], no lm_head.
  bool hidden_rows = false;
  // > 0: the step's first leading_decode_rows sequences are one-token decode rows and the rest prompts
  // (VIREO_SPLIT_MIXED=1): each layer's attention may leave the decode rows running while the prompt rows'
  // o_proj and MLP go first (AttentionParams::defer_decode_rows).
  int64_t leading_decode_rows = 0;
};

// One LoRA adapter's matrices for one of a layer's projections, the q/k/v (gate/up) parts stacked:
// delta = b (a x), the scale folded into b.
struct LoraPair {
  Tensor a;  // [R, K]: the parts' lora_A rows stacked (R = their ranks summed)
  Tensor b;  // [M, R]: each part's scale * lora_B in its rows and its rank's columns, zeros elsewhere
};
// A layer's adapter weights; an empty pair: the adapter leaves that projection alone.
struct LoraLayerWeights {
  LoraPair qkv, o, gate_up, down;
};

// Decode-only CUDA graphs, one per padded batch size, over fixed-address buffers (graphs keep
// device pointers, so these never move while a graph exists).
struct DecoderGraphs {
  std::vector<int> sizes;          // capture sizes, ascending
  // (context bucket << 32) + (beyond the sliding window << 31) + 4 * padded batch + 2 * gathered logits +
  // long context -> graph id (-1: eager)
  std::map<int64_t, int> graph_of_size;
  DecoderWorkspace ws;             // activations + packed ints for the largest size
  std::vector<int32_t> host;       // staging of the packed ints
  int max_size = 0, table_width = 0, attention_hint = 0;
  // The KV cache the graphs were captured against (its pointers are inside them).
  std::vector<const void*> kv_pages, kv_scratch;  // every layer's K then V (conv layers: state, null)
  int kv_block_size = 0;
  // Backend::fence after the last graph (or eager run) that read each of the two regions of ws.ints
  // (cuda_graph_step.cc): a step's upload waits only for it (0: for everything issued).
  int inputs_fence[2] = {0, 0};
  int sample_buf = 0;  // the region (0 / 1) of the last graph that sampled inside
};

// launch_sample's batch when one fixed op sequence samples it (sampleable_in_graph): a graphed batch-1
// step then captures the sample op after its lm_head, so no launch gap and no separate kernel launch
// follow the graph. forward_graphed sets `sampled` and the packed results (SamplingWorkspace layout).
struct GraphSample {
  const SamplingRow* row = nullptr;
  int num_top = 0;
  bool sampled = false;
  Tensor out;      // [tokens 1][logprobs 1 + N][top ids N] I32 words
  int out_id = 0;  // SamplingWorkspace::Pending::out (kGraphOut + buffer)
  const void* mirror = nullptr;  // where the token was also written (the next graph's ids row), or null
};

// A step's token ids already on the device (async scheduling): the previous sampling's tokens ([R] I32),
// where that sampling also wrote them (SamplingWorkspace::mirror; null: nowhere), and which of them the
// step's first rows.size() tokens are (token i: tokens[rows[i]]). When every token is its row's
// (in_place) and the mirror is the decode graphs' ids buffer, the graphed step copies nothing: a device
// copy between the sampling and the graph cost ~2-5 us of each decode step (docs/cuda_kernels.md,
// "Copies between decode steps").
struct IdsOnDevice {
  Tensor tokens;
  const void* mirror = nullptr;
  std::vector<int32_t> rows;
  int64_t num_ids() const { return static_cast<int64_t>(rows.size()); }
  bool in_place() const;  // rows == 0, 1, ..., R - 1
};

// ids[i] = from.tokens[from.rows[i]] for i < from.num_ids(), one device copy per run of consecutive rows.
void copy_ids_on_device(Backend& be, const IdsOnDevice& from, const Tensor& ids);

// Steps use the fused linear forms where the backend prefers them (Backend::prefers_fused_linear: by
// default up to 4 tokens, the backends' GEMV range).
constexpr bool kUseFusedLinear = true;

class DecoderModel final : public Model {
 public:
  // weights == nullptr means dummy weights from opts.seed.
  DecoderModel(ModelConfig config, const ArchSpec& spec, std::unique_ptr<Backend> backend,
                std::unique_ptr<WeightSource> weights, const LoadOptions& opts);
  ~DecoderModel() override;

  const ModelConfig& config() const override { return cfg_; }
  Backend& backend() override { return *be_; }
  KvCache allocate_kv_cache(int num_blocks, int block_size) override;
  void free_kv_cache(KvCache& kv) override;
  size_t kv_block_bytes(int block_size) const override;
  int num_state_slots() const override { return gdn_states_.empty() ? 0 : state_slots_; }
  void forward(const StepInput& in, KvCache& kv, std::vector<float>& logits) override;
  void forward_hidden(const StepInput& in, KvCache& kv, std::vector<float>& hidden) override;
  void forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out) override;
  bool supports_async_sampling() const override { return true; }
  int launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last) override;
  void finish_sample(int ticket, SampledRows& out) override;
  void launch_forward(const StepInput& in, KvCache& kv, bool tokens_from_last) override;
  int launch_sampling(const SamplingBatch& batch) override;
  void add_lora(int32_t id, const LoraAdapter& adapter) override;  // decoder_lora.cc
  void remove_lora(int32_t id) override;
  void discard_pending_samples() override {
    sampling_.pending.clear();
    forwarded_ = forwarded_stats_ = Tensor();
    forward_pending_ = false;
  }
  // Graphs captured so far (decode-only steps; 0 with enforce_eager or on the CPU).
  int num_graphs() const;
  void capture_graphs(KvCache& kv) override;  // cuda_graph_capture.cc
  // Turns graphs off (true) or back on for later steps; captured graphs are kept.
  void set_enforce_eager(bool on) { opts_.enforce_eager = on; }
  // Whether batch-1 decode graphs sample inside the graph (GraphSample; default on, VIREO_GRAPH_SAMPLE=0
  // off): tests compare both ways.
  void set_graph_sampling(bool on) { graph_sampling_ = on; }

 private:
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
  };
  // Loads parts (concatenated along dim 0) onto the device. stddev: dummy init (0 = ones).
  Tensor load(const std::string& fused_name, const std::vector<Part>& parts, float stddev);
  // A linear weight (parts concatenated along dim 0, as load): kept in its GGUF block type where every
  // part has the same one and the backend's linear takes it (or dummy blocks: dummy_block_dtype); else load().
  Tensor load_linear(const std::string& fused_name, const std::vector<Part>& parts, float stddev);
  // A layer's dense projection (q/k/v, o, gate/up, down, shared experts): load_linear, or with
  // LoadOptions::fp8_linears quantized to FP8 per row (decoder_fp8.cc): kept as F8_E4M3 with row scales
  // where the backend's linear takes them, else dequantized back into the weight dtype.
  Tensor load_projection(const std::string& fused_name, const std::vector<Part>& parts, float stddev);
  void log_fp8_weights() const;
  // The block type load_linear keeps these parts in; nullopt: load() them.
  std::optional<DType> packed_type(const std::vector<Part>& parts);
  // Whether each part would stay packed on its own, in block types that differ (then load them apart).
  bool packed_apart(const std::vector<Part>& parts);
  void log_packed_weights() const;
  void load_weights();
  void load_moe(const std::string& mlp_prefix, DecoderLayerWeights& w);
  void load_gpt_oss_moe(const std::string& mlp_prefix, DecoderLayerWeights& w);  // decoder_gpt_oss.cc
  // A stacked expert weight with rows = output features, source row row_of[r] as row r, from GPT-OSS's
  // [E, cols, rows] tensor, its MXFP4 form (<name>_blocks [E, rows, cols / 32, 16], <name>_scales
  // [E, rows, cols / 32]), a GGUF's [E, rows, cols] (row_of then the identity) or dummy MXFP4 values.
  // kMxfp4Packed: U8 blocks [E, rows, cols / 2], and *scales set to the U8 scales [E, rows, cols / 32];
  // otherwise [E, rows, cols] in the weight dtype and *scales left empty.
  enum class ExpertsForm : uint8_t { kDense, kMxfp4Dequantized, kMxfp4Packed };  // source, and how it is kept
  Tensor load_gpt_oss_experts(const std::string& name, int64_t E, int64_t rows, int64_t cols,
                              const std::vector<int64_t>& row_of, ExpertsForm form, Tensor* scales);
  // Whether MXFP4 experts stay packed: not opted out (LoadOptions::dequantize_mxfp4) and the backend's moe
  // takes them with this model's weight dtype.
  bool keep_mxfp4_experts() const;
  void log_gpt_oss_experts() const;  // which form the experts took, and their bytes
  // A device tensor whose bytes `fill` writes (on the CPU straight into place, else through host memory).
  Tensor alloc_filled(const std::vector<int64_t>& shape, DType dtype, const std::function<void(uint8_t*)>& fill);
  void load_short_conv(const std::string& conv_prefix, DecoderLayerWeights& w);
  void load_mla(const std::string& attn_prefix, DecoderLayerWeights& w);
  // Loads `name` (shape src_shape, 1 or 2 dims) with out[r][c] = src[rows[r]][cols[c]] (index -1: 0;
  // cols empty: all columns as they are), so MLA's reorderings happen once at load.
  Tensor load_remapped(const std::string& name, const std::vector<int64_t>& src_shape, const std::vector<int64_t>& rows,
                       const std::vector<int64_t>& cols, float stddev);
  // F32 [n] whatever the weight dtype; `stored`: the checkpoint's shape when not [n] (same count).
  Tensor load_f32(const std::string& name, int64_t n, float stddev, std::vector<int64_t> stored = {});
  // `name` times `scale` (Granite's multipliers folded into weights; dummy weights are not scaled).
  Tensor load_scaled(const std::string& name, const std::vector<int64_t>& shape, float scale);
  // Qwen3-Next family (decoder_gated_delta_net.cc).
  struct RowPick {  // rows of one checkpoint tensor (empty: all) in a row-concatenated weight
    std::string name;
    std::vector<int64_t> shape, rows;
  };
  Tensor load_row_picks(const std::string& fused_name, const std::vector<RowPick>& picks, float stddev);
  // An RMSNorm weight [n]; 1 + w for zero-centred families (Qwen3-Next, Gemma).
  Tensor load_norm(const std::string& name, int64_t n);
  void load_gated_attention(const std::string& attn_prefix, DecoderLayerWeights& w);
  void load_gated_delta_net(const std::string& prefix, DecoderLayerWeights& w);
  void allocate_gdn_states();
  GatedDeltaNetParams gdn_params(const StepTensors& st, const DecoderWorkspace& ws, int layer) const;
  void ensure_workspace(DecoderWorkspace& ws, int64_t tokens, int64_t logit_rows, int64_t ints);
  void free_workspace(DecoderWorkspace& ws);
  // Every op of a step after the inputs are on the device; logits rows end in ws.logits [M, V].
  void run_ops(const StepTensors& st, KvCache& kv, DecoderWorkspace& ws);
  // Every layer through Backend::decode_stack when the step is decode-only and the backend takes this
  // model's layers in one go (decoder_stack.cc); false: run_ops runs the layers op by op.
  bool run_decode_stack(const StepTensors& st, KvCache& kv, DecoderWorkspace& ws);
  // The step's logits rows [M, V] on the device (a view into a workspace; empty when M = 0).
  // ids_from: when set, the step's token ids come from the device instead (the previous sampling's).
  // stats: when set, receives the logits' RangeStats when the lm_head wrote them (else empty).
  // gs: when set, a graphed step may also sample (GraphSample::sampled).
  // hidden_rows: the rows' final hidden states [M, hidden] instead of logits (StepTensors::hidden_rows).
  Tensor run_step(const StepInput& in, KvCache& kv, const IdsOnDevice* ids_from = nullptr, Tensor* stats = nullptr,
                  GraphSample* gs = nullptr, bool hidden_rows = false);
  // ws.logit_stats when a step of num_rows logits rows has the lm_head write them (one row), else empty.
  Tensor logit_stats_of(const DecoderWorkspace& ws, int64_t num_rows) const;
  void logits_to_host(const Tensor& logits, std::vector<float>& host);
  // Decode-only steps through a CUDA graph (cuda_graph_step.cc); false: the step must run eagerly.
  bool forward_graphed(const StepInput& in, KvCache& kv, Tensor& logits, const IdsOnDevice* ids_from, Tensor* stats,
                       GraphSample* gs);
  // The sample op of a GraphSample inside a batch-1 graph (cuda_graph_step.cc), eager or being captured.
  void sample_in_graph(const GraphSample& gs, const Tensor& row_words, const Tensor& out, const Tensor& mirror);
  // launch_forward, and with gs the sampling too when the step is graphed (gs->sampled).
  void launch_forward_step(const StepInput& in, KvCache& kv, bool tokens_from_last, GraphSample* gs);
  // A GraphSample for the batch when graphs may sample it, else null (into `gs`).
  GraphSample* graph_sample_for(const SamplingBatch& batch, GraphSample& gs) const;
  void reset_graphs();
  // LoRA (decoder_lora.cc): out += the adapters' deltas of `pair_of` for x, over st.lora_rows.
  void apply_lora(const StepTensors& st, int layer, LoraPair LoraLayerWeights::*pair_of, const Tensor& x,
                  const Tensor& out);
  LoraPair upload_lora_pair(const std::vector<const LoraModule*>& parts, const std::vector<int64_t>& offsets,
                            int64_t out_rows, float extra_scale);
  void free_lora_scratch();
  float round_to_dtype(float v) const;  // v as the activation dtype holds it

  ModelConfig cfg_;
  ArchSpec spec_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<WeightSource> ckpt_;  // mmaps stay alive: CPU weights may be views into them
  LoadOptions opts_;
  DType kv_dtype_ = DType::kF32;  // attention layers' K / V cache (kv_cache_dtype(opts_.kv_cache_dtype))
  DType wdtype_;
  struct PackedStats {  // what load_linear kept packed, for the load log
    int64_t tensors = 0, bytes = 0, widened_bytes = 0;  // widened: their bytes in the weight dtype
    int64_t mixed = 0;  // fused weights whose parts had different block types (dequantized)
    std::map<DType, int64_t> by_type;
  } packed_;
  struct Fp8Stats {  // what load_projection quantized, for the load log
    int64_t tensors = 0, bytes = 0, widened_bytes = 0, kept_dense = 0;
  } fp8_;
  Tensor embed_, final_norm_, lm_head_, rope_;
  Tensor rope_local_;             // Gemma 3's sliding layers' RoPE table (cfg_.local_rope_layer); empty: none
  Tensor rope_none_;              // SmolLM3's NoPE layers: the identity rotation (cfg_.nope_layer); empty: none
  float embed_scale_ = 1.0f;      // spec_.scaled_embedding: sqrt(hidden) in the activation dtype
  Activation mlp_act_ = Activation::kSilu;  // the dense MLP's act_fn (cfg_.hidden_act)
  // The RoPE table layer l rotates with.
  const Tensor& rope_of(int l) const {
    return cfg_.nope_layer(l) ? rope_none_ : cfg_.local_rope_layer(l) ? rope_local_ : rope_;
  }
  std::vector<DecoderLayerWeights> layers_;
  std::vector<GdnLayerState> gdn_states_;  // [num layers] (empty entries for attention layers); empty: none
  int state_slots_ = 0;
  std::vector<Tensor> owned_;  // every device tensor to free on destruction
  bool mxfp4_source_ = false;  // the experts came as MXFP4 (checkpoint or dummy), packed or not
  DecoderWorkspace ws_;
  DecoderGraphs graphs_;
  SamplingWorkspace sampling_;
  // launch_forward's logits rows (and their RangeStats, or empty), waiting for launch_sampling.
  Tensor forwarded_, forwarded_stats_;
  bool forward_pending_ = false;
  int64_t forwarded_rows_ = 0;
  bool graph_sampling_ = true;
  std::map<int32_t, std::vector<LoraLayerWeights>> loras_;  // by adapter id: one entry per layer
  Tensor lora_mid_, lora_delta_;                             // LoRA scratch: [T, R], [T, M] (grown)
};

}  // namespace vireo
