// DecoderModel::forward: one engine step through the backend ops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "model/decoder_model.h"

namespace vireo {
namespace {

// The step's state slot per sequence: as given, or slot s for sequence s (empty StepInput::state_slots).
std::vector<int32_t> step_state_slots(const StepInput& in, int num_slots) {
  const size_t S = in.seq_lens.size();
  std::vector<int32_t> slots = in.state_slots;
  if (slots.empty())
    for (size_t s = 0; s < S; ++s) slots.push_back(static_cast<int32_t>(s));
  if (num_slots > 0)
    for (int32_t v : slots)
      if (v >= num_slots)
        throw Error("forward: state slot " + std::to_string(v) + " outside the model's " + std::to_string(num_slots) +
                    " slots (--max-num-seqs)");
  return slots;
}

// VIREO_SPLIT_MIXED=1 (opt-in until measured): a mixed step whose decode sequences come first runs each
// layer's prompt rows' o_proj and MLP beside its decode rows' attention (StepTensors::leading_decode_rows).
// Read every step, so a test may switch it between runs.
bool split_mixed_enabled() {
  const char* v = std::getenv("VIREO_SPLIT_MIXED");
  return v != nullptr && v[0] == '1';
}

// The number of leading one-token sequences when every later sequence is a prompt whose rows take the
// attention's prefill shape (q_len x group > 16), at least one of each; else 0.
int64_t leading_decode_rows(const StepInput& in, int group) {
  const size_t S = in.seq_lens.size();
  size_t d = 0;
  while (d < S && in.query_start[d + 1] - in.query_start[d] == 1) ++d;
  if (d == 0 || d == S) return 0;
  for (size_t s = d; s < S; ++s)
    if (int64_t{in.query_start[s + 1] - in.query_start[s]} * group <= 16) return 0;
  return static_cast<int64_t>(d);
}

void validate(const StepInput& in, const KvCache& kv, int num_layers) {
  const size_t T = in.token_ids.size();
  if (in.positions.size() != T || in.slot_mapping.size() != T)
    throw Error("forward: token_ids, positions and slot_mapping must have the same length");
  if (in.query_start.empty() || in.query_start.front() != 0 || static_cast<size_t>(in.query_start.back()) != T)
    throw Error("forward: query_start must run from 0 to the number of tokens");
  const size_t S = in.query_start.size() - 1;
  if (in.seq_lens.size() != S) throw Error("forward: seq_lens must have one entry per sequence");
  for (size_t s = 0; s < S; ++s)
    if (in.query_start[s + 1] < in.query_start[s]) throw Error("forward: query_start must be non-decreasing");
  if ((S > 0 && in.max_blocks_per_seq <= 0) || in.block_tables.size() != S * static_cast<size_t>(in.max_blocks_per_seq))
    throw Error("forward: block_tables must hold num_seqs * max_blocks_per_seq entries");
  for (int32_t i : in.logits_indices)
    if (i < 0 || static_cast<size_t>(i) >= T) throw Error("forward: logits index " + std::to_string(i) + " out of range");
  if (!in.state_slots.empty() && in.state_slots.size() != S)
    throw Error("forward: state_slots must be empty or have one entry per sequence");
  if (static_cast<int>(kv.k.size()) != num_layers || static_cast<int>(kv.v.size()) != num_layers)
    throw Error("forward: KV cache has the wrong number of layers");
}

}  // namespace

void DecoderModel::forward(const StepInput& in, KvCache& kv, std::vector<float>& logits) {
  const int64_t M = static_cast<int64_t>(in.logits_indices.size());
  logits.resize(static_cast<size_t>(M * cfg_.vocab_size));
  const Tensor dev = run_step(in, kv);
  if (dev.empty()) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    return;
  }
  logits_to_host(dev, logits);
}

void DecoderModel::forward_hidden(const StepInput& in, KvCache& kv, std::vector<float>& hidden) {
  const int64_t M = static_cast<int64_t>(in.logits_indices.size());
  hidden.resize(static_cast<size_t>(M * cfg_.hidden_size));
  const Tensor dev = run_step(in, kv, nullptr, nullptr, nullptr, /*hidden_rows=*/true);
  if (dev.empty()) {
    std::fill(hidden.begin(), hidden.end(), 0.0f);
    return;
  }
  logits_to_host(dev, hidden);
}

Tensor DecoderModel::run_step(const StepInput& in, KvCache& kv, const IdsOnDevice* ids_from, Tensor* stats,
                              GraphSample* gs, bool hidden_rows) {
  validate(in, kv, cfg_.num_hidden_layers);
  const int64_t T = static_cast<int64_t>(in.token_ids.size());
  const int64_t M = static_cast<int64_t>(in.logits_indices.size());
  const int S = static_cast<int>(in.seq_lens.size());
  if (T == 0) return Tensor();
  const std::vector<int32_t> state_slots = step_state_slots(in, num_state_slots());  // checked before graphs too
  if (!in.lora_ids.empty() && in.lora_ids.size() != static_cast<size_t>(S))
    throw Error("forward: lora_ids must be empty or have one entry per sequence");
  std::vector<StepTensors::LoraRows> lora_rows;  // runs of adapter rows (adjacent sequences merged)
  for (int s = 0; s < static_cast<int>(in.lora_ids.size()); ++s) {
    const int32_t id = in.lora_ids[s];
    const int64_t b = in.query_start[s], e = in.query_start[s + 1];
    if (id == 0 || b == e) continue;
    if (!lora_rows.empty() && lora_rows.back().id == id && lora_rows.back().end == b) {
      lora_rows.back().end = e;
    } else {
      lora_rows.push_back({b, e, id});
    }
  }
  Tensor graphed;
  if (stats) *stats = Tensor();
  // Steps with adapter rows run eagerly: the adapters' linears are not in the captured graphs.
  if (lora_rows.empty() && !hidden_rows && forward_graphed(in, kv, graphed, ids_from, stats, gs)) return graphed;

  // Pack the integer inputs into one upload: ids, positions, slots, query_start, seq_lens, tables, logits rows.
  std::vector<int32_t> ints;
  // The sequences with more than one query token (prompts, prefill chunks) for attention planning.
  std::vector<int32_t> prefill_seqs;
  for (int s = 0; s < S; ++s)
    if (in.query_start[s + 1] - in.query_start[s] > 1) prefill_seqs.push_back(s);
  ints.reserve(3 * T + 4 * S + 1 + in.block_tables.size() + M);
  auto append = [&](const std::vector<int32_t>& v) {
    const int64_t off = static_cast<int64_t>(ints.size());
    ints.insert(ints.end(), v.begin(), v.end());
    return off;
  };
  const int64_t o_ids = append(in.token_ids), o_pos = append(in.positions), o_slot = append(in.slot_mapping);
  const int64_t o_qs = append(in.query_start), o_lens = append(in.seq_lens), o_tab = append(in.block_tables);
  const int64_t o_li = append(in.logits_indices);
  const int64_t o_ss = append(state_slots);
  const int64_t o_ps = append(prefill_seqs);
  ensure_workspace(ws_, T, std::max<int64_t>(M, 1), static_cast<int64_t>(ints.size()));
  Tensor all_ints = ws_.ints.view({static_cast<int64_t>(ints.size())});
  be_->copy_from_host(ints.data(), all_ints);
  auto iv = [&](int64_t off, int64_t n) {
    return Tensor(static_cast<int32_t*>(ws_.ints.data) + off, DType::kI32, {n}, ws_.ints.device);
  };
  StepTensors st;
  st.ids = iv(o_ids, T);
  if (ids_from) copy_ids_on_device(*be_, *ids_from, st.ids);
  st.positions = iv(o_pos, T);
  st.slots = iv(o_slot, T);
  st.query_start = iv(o_qs, S + 1);
  st.seq_lens = iv(o_lens, S);
  st.block_tables = iv(o_tab, static_cast<int64_t>(in.block_tables.size()));
  st.logits_idx = iv(o_li, M);
  st.state_slots = iv(o_ss, S);
  st.prefill_seqs = iv(o_ps, static_cast<int64_t>(prefill_seqs.size()));
  st.num_prefill_seqs = static_cast<int>(prefill_seqs.size());
  st.T = T;
  st.M = M;
  st.S = S;
  st.max_blocks_per_seq = in.max_blocks_per_seq;
  for (int s = 0; s < S; ++s) {
    const int q_len = in.query_start[s + 1] - in.query_start[s];
    if (q_len > 1 && (st.min_multi_query_len == 0 || q_len < st.min_multi_query_len)) st.min_multi_query_len = q_len;
    st.max_query_len = std::max(st.max_query_len, q_len);
    st.max_seq_len = std::max(st.max_seq_len, in.seq_lens[s]);
  }
  st.logits_rows_are_tokens = M == T;
  for (int64_t i = 0; i < M && st.logits_rows_are_tokens; ++i) st.logits_rows_are_tokens = in.logits_indices[i] == i;
  st.beyond_window = cfg_.sliding_window > 0 && st.max_seq_len > cfg_.sliding_window;
  st.lora_rows = std::move(lora_rows);
  st.hidden_rows = hidden_rows;
  if (split_mixed_enabled() && st.lora_rows.empty() && cfg_.num_key_value_heads > 0)
    st.leading_decode_rows = leading_decode_rows(in, cfg_.num_attention_heads / cfg_.num_key_value_heads);
  run_ops(st, kv, ws_);
  if (M == 0) return Tensor();
  if (hidden_rows) return ws_.rows.view({M, cfg_.hidden_size});
  if (stats) *stats = logit_stats_of(ws_, M);
  return ws_.logits.view({M, cfg_.vocab_size});
}

void DecoderModel::run_ops(const StepTensors& st, KvCache& kv, DecoderWorkspace& ws) {
  const int64_t T = st.T, M = st.M;
  const int S = st.S;
  const int64_t V = cfg_.vocab_size, hidden = cfg_.hidden_size;
  const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = cfg_.head_dim;
  const Tensor &ids = st.ids, &positions = st.positions, &slots = st.slots;
  const Tensor &query_start = st.query_start, &seq_lens = st.seq_lens, &block_tables = st.block_tables;
  const Tensor& logits_idx = st.logits_idx;

  auto rows = [&](const Tensor& buf, int64_t n, int64_t width) { return buf.view({n, width}); };
  const int64_t qkv_w = static_cast<int64_t>(H + 2 * Hkv) * D, inter = cfg_.intermediate_size;
  Tensor residual = rows(ws.residual, T, hidden), hid = rows(ws.hidden, T, hidden);
  Tensor branch = rows(ws.branch, T, hidden), qkv = rows(ws.qkv, T, qkv_w);
  Tensor bcx = ws.bcx.empty() ? Tensor() : rows(ws.bcx, T, 3 * hidden);
  Tensor q = ws.q.view({T, H, D}), attn = ws.attn.view({T, H, D});
  Tensor gate_up = rows(ws.gate_up, T, 2 * inter), act = rows(ws.act, T, inter);

  AttentionParams ap;
  ap.q = q;
  ap.out = attn;
  ap.query_start = query_start;
  ap.seq_lens = seq_lens;
  ap.block_tables = block_tables;
  ap.num_seqs = S;
  ap.max_blocks_per_seq = st.max_blocks_per_seq;
  ap.block_size = kv.block_size;
  ap.num_heads = H;
  ap.num_kv_heads = Hkv;
  ap.head_dim = D;
  ap.scale = cfg_.attention_scale > 0 ? cfg_.attention_scale : 1.0f / std::sqrt(static_cast<float>(D));
  ap.softcap = cfg_.attn_logit_softcapping;  // Gemma 2
  ap.max_query_len = st.max_query_len;
  ap.min_multi_query_len = st.min_multi_query_len;
  ap.max_seq_len = st.max_seq_len;
  ap.prefill_seqs = st.prefill_seqs;
  ap.num_prefill_seqs = st.num_prefill_seqs;

  ShortConvParams cp;  // LFM2's conv layers: state pages addressed like the attention layers' K/V
  cp.bcx = bcx;
  cp.out = hid;  // free once in_proj has read it (fused: never written)
  cp.slot_mapping = slots;
  cp.query_start = query_start;
  cp.seq_lens = seq_lens;
  cp.block_tables = block_tables;
  cp.num_seqs = S;
  cp.max_blocks_per_seq = st.max_blocks_per_seq;
  cp.block_size = kv.block_size;

  QkvPrepareParams qp;
  qp.qkv = qkv;
  qp.positions = positions;
  qp.rope_cos_sin = rope_;
  qp.rotary_dim = cfg_.rotary_dim();
  qp.neox = spec_.mla ? !cfg_.mla.rope_interleave : spec_.neox_rope;
  qp.qk_norm = spec_.qk_norm;
  qp.norm_eps = cfg_.rms_norm_eps;
  qp.q_out = q;
  qp.slot_mapping = slots;
  qp.num_heads = H;
  qp.num_kv_heads = Hkv;
  qp.head_dim = D;
  qp.block_size = kv.block_size;

  const float eps = cfg_.rms_norm_eps;
  auto linear = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out) {
    LinearParams p;
    p.x = x;
    p.w = w;
    p.bias = b;
    p.out = out;
    p.norm_eps = eps;
    return p;
  };
  auto moe = [&](const Tensor& x, const DecoderLayerWeights& w, const Tensor& out) {
    MoeParams p;
    p.x = x;
    p.router_w = w.router_w;
    p.gate_up_w = w.experts_gate_up;
    p.down_w = w.experts_down;
    p.out = out;
    p.top_k = cfg_.num_experts_per_tok;
    p.norm_topk_prob = cfg_.norm_topk_prob;
    p.scoring = cfg_.moe_sigmoid        ? MoeScoring::kSigmoid
                : cfg_.moe_softmax_fp32 ? MoeScoring::kSoftmaxFp32
                                        : MoeScoring::kSoftmax;
    p.score_bias = w.router_bias;
    p.n_group = cfg_.moe_n_group;
    p.topk_group = cfg_.moe_topk_group;
    p.routed_scaling_factor = cfg_.routed_scaling_factor;
    p.renorm_eps = cfg_.moe_renorm_eps;
    p.router_b = w.router_b;  // GPT-OSS: router and expert biases, clamped SwiGLU
    p.gate_up_b = w.experts_gate_up_b;
    p.down_b = w.experts_down_b;
    p.gate_up_scales = w.experts_gate_up_s;  // MXFP4 experts (empty: dense)
    p.down_scales = w.experts_down_s;
    p.swiglu_alpha = cfg_.swiglu_alpha;
    p.swiglu_limit = cfg_.swiglu_limit;
    return p;
  };
  // DeepSeek's shared expert, added to the routed experts' output in `routed` ([T, hidden]); reads x.
  // Fused: silu-mul in gate_up's epilogue, the add in down's; else separate ops, down into `scratch`.
  const int64_t shared_inter = cfg_.shared_expert_width();
  auto shared_expert = [&](const Tensor& x, const DecoderLayerWeights& w, const Tensor& routed, const Tensor& scratch,
                           bool fuse) {
    if (w.shared_gate_up_w.empty()) return;
    Tensor sgu = rows(ws.gate_up, T, 2 * shared_inter), sact = rows(ws.act, T, shared_inter);
    if (!w.shared_expert_gate_w.empty()) {  // Qwen3-Next: routed += sigmoid(shared_expert_gate(x)) * shared_expert(x)
      Tensor g = rows(ws.shared_gate, T, 1);
      be_->linear(linear(x, w.shared_gate_up_w, Tensor(), sgu));
      be_->linear(linear(x, w.shared_expert_gate_w, Tensor(), g));
      be_->silu_and_mul({sgu, sact});
      be_->linear(linear(sact, w.shared_down_w, Tensor(), scratch));  // x is free now: scratch may be x
      be_->sigmoid_gate({scratch, g, routed, routed});
      return;
    }
    if (fuse) {
      LinearParams gu = linear(x, w.shared_gate_up_w, Tensor(), sact);
      gu.silu_mul_output = true;
      be_->linear(gu);
      LinearParams down = linear(sact, w.shared_down_w, Tensor(), routed);  // routed += shared_experts(x)
      down.residual = routed;
      be_->linear(down);
      return;
    }
    be_->linear(linear(x, w.shared_gate_up_w, Tensor(), sgu));
    be_->silu_and_mul({sgu, sact});
    be_->linear(linear(sact, w.shared_down_w, Tensor(), scratch));
    be_->add({routed, scratch, routed});
  };
  // DeepSeek MLA from the normalised layer input x: the q rows, the compressed KV (normalised, then
  // kv_b_proj) and the shared rope key, packed into qkv (per-head K, V padded to D).
  auto mla_qkv = [&](const Tensor& x, const DecoderLayerWeights& w) {
    const ModelConfig::Mla& m = cfg_.mla;
    Tensor mq = ws.q.view({T, static_cast<int64_t>(H) * D});  // free until prepare_attention writes q_out
    if (m.q_lora_rank > 0) {
      Tensor qa = rows(ws.mla_qa, T, m.q_lora_rank);
      be_->linear(linear(x, w.q_a_w, Tensor(), qa));           // q_a_proj
      be_->rms_norm({qa, w.q_a_norm, qa, Tensor(), m.norm_eps});  // q_a_layernorm
      be_->linear(linear(qa, w.q_w, Tensor(), mq));            // q_b_proj (rows [rope | nope] per head)
    } else {
      be_->linear(linear(x, w.q_w, Tensor(), mq));             // q_proj
    }
    Tensor ckv = rows(ws.mla_ckv, T, m.kv_lora_rank), kpe = rows(ws.mla_kpe, T, m.qk_rope_head_dim);
    Tensor kvb = rows(ws.mla_kv, T, static_cast<int64_t>(H) * (m.qk_nope_head_dim + m.v_head_dim));
    be_->linear(linear(x, w.kv_a_w, Tensor(), ckv));           // kv_a_proj_with_mqa, latent part
    be_->linear(linear(x, w.kpe_w, Tensor(), kpe));            // kv_a_proj_with_mqa, rope key
    be_->rms_norm({ckv, w.kv_a_norm, ckv, Tensor(), m.norm_eps});  // kv_a_layernorm
    be_->linear(linear(ckv, w.kv_b_w, Tensor(), kvb));         // kv_b_proj: [k_nope | v] per head
    MlaPackParams mp;
    mp.q = mq;
    mp.kv = kvb;
    mp.k_pe = kpe;
    mp.qkv = qkv;
    mp.num_heads = H;
    mp.rope_dim = m.qk_rope_head_dim;
    mp.nope_dim = m.qk_nope_head_dim;
    mp.v_dim = m.v_head_dim;
    be_->mla_pack(mp);
  };
  // The residual stream is whole at each layer's start (no MLP output waiting to be added).
  const bool whole_residual = spec_.post_norm || spec_.sandwich_norm;
  // Decode-sized steps use the fused linear forms (norm in the prologue, the gate activation in
  // gate_up's epilogue, residual add in the epilogue): 5 kernels a layer instead of 9 on the GEMV path
  // of a pre-norm model; post-norm and sandwich-norm blocks (OLMo-2, Gemma) add each normalised branch
  // with one rms_norm (add_after_norm) instead of a norm and an add. Larger steps keep the separate
  // ops (the GEMMs dominate there). (No post-norm MoE family exists: those keep the separate ops.)
  // Steps with LoRA rows keep the separate ops too: the adapters add to each projection's plain output.
  const bool lora = !st.lora_rows.empty();
  // (Backends may ask for them at any size: CUDA with FP8 weights, whose W8A8 path fuses both ends.)
  const DType proj_dtype = layers_.empty() ? DType::kF32 : layers_[0].o_w.dtype;
  const bool fused =
      kUseFusedLinear && be_->prefers_fused_linear(proj_dtype, T) && !(whole_residual && spec_.moe) && !lora;
  // h += norm(x) * w in one kernel (post-norm and sandwich-norm blocks).
  auto add_normalised = [&](const Tensor& x, const Tensor& w) {
    RmsNormParams p{x, w, residual, residual, eps};
    p.add_after_norm = true;
    be_->rms_norm(p);
  };

  be_->embedding({embed_, ids, residual, embed_scale_});  // residual = embed_tokens(input_ids) (* sqrt(hidden))
  const bool stacked = !lora && run_decode_stack(st, kv, ws);  // every layer in one backend op
  for (int l = 0; l < cfg_.num_hidden_layers && !stacked; ++l) {
    const DecoderLayerWeights& w = layers_[l];
    const bool conv = !w.conv_w.empty();  // LFM2 short-conv layer instead of attention
    const bool mla = !w.kv_b_w.empty();   // DeepSeek MLA: its own projections, then the common attention
    const bool gdn = !w.gdn_in_w.empty();  // Qwen3-Next Gated DeltaNet layer instead of attention
    if (mla) {
      if (fused || l == 0) {
        be_->rms_norm({residual, w.input_norm, hid, Tensor(), eps});  // input_layernorm(h)
      } else {
        be_->rms_norm({branch, w.input_norm, hid, residual, eps});  // h += mlp_out; input_layernorm(h)
      }
      mla_qkv(hid, w);
    }
    // The mixer's input projection: pre-norm models normalise (fusing the previous MLP's residual
    // add); post-norm models feed the residual stream itself.
    LinearParams in_p = conv  ? linear(residual, w.in_proj_w, w.in_proj_b, bcx)   // conv.in_proj(x) = [B; C; x]
                        : gdn ? linear(residual, w.gdn_in_w, Tensor(), ws.gdn_proj.view({T, w.gdn_in_w.dim(0)}))
                              : linear(residual, w.qkv_w, w.qkv_b, qkv);          // [q_proj; k_proj; v_proj](x)
    if (mla) {
      // projections done above
    } else if (fused) {
      if (!spec_.post_norm) in_p.input_norm = w.input_norm;  // input_layernorm(h) in the prologue
    } else if (!spec_.post_norm) {
      if (l == 0 || spec_.sandwich_norm) {
        be_->rms_norm({residual, w.input_norm, hid, Tensor(), eps});  // input_layernorm(h)
      } else {
        be_->rms_norm({branch, w.input_norm, hid, residual, eps});  // h += mlp_out; input_layernorm(h)
      }
      in_p.x = hid;
    }
    if (!mla && w.qkv_parts.empty()) be_->linear(in_p);
    for (int64_t i = 0, col = 0; i < static_cast<int64_t>(w.qkv_parts.size()); ++i) {  // q, k, v kept apart
      LinearParams part = in_p;
      const int64_t width = w.qkv_parts[i].dim(0);
      part.w = w.qkv_parts[i];
      if (!w.qkv_b.empty()) part.bias = w.qkv_b.slice_rows(col, col + width);
      part.out = Tensor(static_cast<char*>(qkv.data) + col * dtype_size(qkv.dtype), qkv.dtype, {T, width}, qkv.device);
      part.out_stride = qkv.dim(1);  // its columns of each qkv row
      be_->linear(part);
      col += width;
    }
    if (lora && !mla && !conv && !gdn) apply_lora(st, l, &LoraLayerWeights::qkv, in_p.x, qkv);  // + LoRA q/k/v
    Tensor mixed;  // [T, width of o_w's input]: what the output projection reads
    if (conv) {
      cp.weight = w.conv_w;
      cp.bias = w.conv_b;
      cp.state = kv.k[l];
      be_->short_conv(cp);  // C * conv(B * x) over the paged state; this step's bx written to it
      mixed = hid;
    } else if (gdn) {
      GatedDeltaNetParams gp = gdn_params(st, ws, l);
      be_->gated_delta_net(gp);  // conv, delta rule and gated norm over the sequences' state slots
      mixed = gp.out;
    } else {
      qp.q_norm = w.q_norm;
      qp.k_norm = w.k_norm;
      qp.rope_cos_sin = rope_of(l);
      qp.k_cache = kv.k[l];
      qp.v_cache = kv.v[l];
      ap.k_cache = kv.k[l];
      ap.v_cache = kv.v[l];
      ap.window = st.beyond_window ? cfg_.layer_window(l) : 0;
      ap.sinks = w.sinks;  // GPT-OSS (empty elsewhere)
      // Split mixed steps (dense pre-norm layers only): the decode rows' attention may still run below.
      ap.defer_decode_rows =
          st.leading_decode_rows > 0 && !whole_residual && !mla && w.router_w.empty() && w.attn_gate_w.empty();
      be_->prepare_attention(qp, ap);  // q/k norm, RoPE, cache write, attention (fused on CUDA decode steps)
      mixed = attn.view({T, static_cast<int64_t>(H) * D});
      if (!w.attn_gate_w.empty()) {  // Qwen3-Next: attn *= sigmoid(gate rows of q_proj(x))
        LinearParams gp = in_p;        // the same (normalised) input as the q/k/v projection
        gp.w = w.attn_gate_w;
        gp.bias = Tensor();
        gp.out = rows(ws.attn_gate, T, static_cast<int64_t>(H) * D);
        be_->linear(gp);
        be_->sigmoid_gate({mixed, gp.out, Tensor(), mixed});
      }
    }
    if (fused && whole_residual) {  // h += norm(o_proj(attn)); h += norm(mlp(mlp_norm(h)))
      be_->linear(linear(mixed, w.o_w, w.o_b, branch));
      add_normalised(branch, w.post_attn_norm);  // h += post_attention_layernorm(attn_out)
      LinearParams gu = linear(residual, w.gate_up_w, w.gate_up_b, act);  // act_fn(gate) * up
      if (spec_.sandwich_norm) gu.input_norm = w.pre_ffn_norm;  // pre_feedforward_layernorm(h) in the prologue
      gu.silu_mul_output = true;
      gu.act = mlp_act_;
      be_->linear(gu);
      be_->linear(linear(act, w.down_w, w.down_b, branch));  // down_proj
      add_normalised(branch, w.post_ffn_norm);                // h += post_feedforward_layernorm(mlp_out)
      continue;
    }
    const bool split_rows = ap.defer_decode_rows && be_->attention_pending();
    ap.defer_decode_rows = false;
    if (split_rows) {
      // The prompt rows [td, T) first, beside the decode rows' attention; then, joined, the decode rows [0, td).
      const int64_t td = st.leading_decode_rows;
      for (const auto& [b, e] : {std::pair<int64_t, int64_t>{td, T}, std::pair<int64_t, int64_t>{0, td}}) {
        if (b == 0) be_->join_attention();
        Tensor res = residual.slice_rows(b, e), gu = gate_up.slice_rows(b, e), a = act.slice_rows(b, e);
        if (fused) {
          LinearParams o = linear(mixed.slice_rows(b, e), w.o_w, w.o_b, res);  // h += o_proj(attn)
          o.residual = res;
          be_->linear(o);
          be_->mlp({res, w.post_attn_norm, eps, w.gate_up_w, w.gate_up_b, w.down_w, w.down_b, gu, a, mlp_act_});
          continue;
        }
        Tensor br = branch.slice_rows(b, e), h = hid.slice_rows(b, e);  // the separate ops, as below
        be_->linear(linear(mixed.slice_rows(b, e), w.o_w, w.o_b, br));  // o_proj
        be_->rms_norm({br, w.post_attn_norm, h, res, eps});             // h += attn_out; post_attention_layernorm(h)
        be_->linear(linear(h, w.gate_up_w, w.gate_up_b, gu));           // [gate_proj; up_proj](x)
        be_->silu_and_mul({gu, a, mlp_act_});                           // act_fn(gate) * up
        be_->linear(linear(a, w.down_w, w.down_b, br));                 // down_proj (added at the next norm)
      }
      continue;
    }
    if (fused) {
      LinearParams o = linear(mixed, w.o_w, w.o_b, residual);  // h += o_proj(attn) (conv: out_proj)
      o.residual = residual;
      be_->linear(o);
      if (!w.router_w.empty()) {  // sparse MoE MLP: h += moe(post_attention_layernorm(h))
        be_->rms_norm({residual, w.post_attn_norm, hid, Tensor(), eps});
        be_->moe(moe(hid, w, branch));
        shared_expert(hid, w, branch, hid, true);  // hid is free once the shared expert has read it
        be_->add({residual, branch, residual});
        continue;
      }
      // h += down(act(gate) * up), [gate; up] = post_attention_layernorm(h) W_gate_up^T
      be_->mlp({residual, w.post_attn_norm, eps, w.gate_up_w, w.gate_up_b, w.down_w, w.down_b, gate_up, act, mlp_act_});
      continue;
    }
    be_->linear(linear(mixed, w.o_w, w.o_b, branch));  // o_proj (conv: out_proj)
    if (lora) apply_lora(st, l, &LoraLayerWeights::o, mixed, branch);
    Tensor mlp_in;
    if (spec_.sandwich_norm) {
      be_->rms_norm({branch, w.post_attn_norm, branch, Tensor(), eps});  // post_attention_layernorm(attn_out)
      be_->rms_norm({branch, w.pre_ffn_norm, hid, residual, eps});       // h += that; pre_feedforward_layernorm(h)
      mlp_in = hid;
    } else if (spec_.post_norm) {
      add_normalised(branch, w.post_attn_norm);  // h += post_attention_layernorm(attn_out)
      mlp_in = residual;
    } else {
      be_->rms_norm({branch, w.post_attn_norm, hid, residual, eps});  // h += attn_out; post_attention_layernorm(h)
      mlp_in = hid;
    }
    if (!w.router_w.empty()) {
      be_->moe(moe(mlp_in, w, branch));  // sparse MoE MLP
      shared_expert(mlp_in, w, branch, hid, false);  // + shared experts (DeepSeek); hid is free after
    } else {
      be_->linear(linear(mlp_in, w.gate_up_w, w.gate_up_b, gate_up));  // [gate_proj; up_proj](x)
      if (lora) apply_lora(st, l, &LoraLayerWeights::gate_up, mlp_in, gate_up);
      be_->silu_and_mul({gate_up, act, mlp_act_});                      // act_fn(gate) * up
      be_->linear(linear(act, w.down_w, w.down_b, branch));             // down_proj
      if (lora) apply_lora(st, l, &LoraLayerWeights::down, act, branch);
    }
    if (whole_residual) add_normalised(branch, w.post_ffn_norm);  // h += post_feedforward_layernorm(mlp_out)
  }
  if (M == 0) return;
  Tensor sel = rows(ws.rows, M, hidden);
  Tensor out = rows(ws.logits, M, V);
  if (st.hidden_rows) {  // pooling: model.norm(h) of the rows, no lm_head
    if (fused || stacked || whole_residual) {
      be_->rms_norm({residual, final_norm_, hid, Tensor(), eps});  // the residual stream is complete
    } else {
      be_->rms_norm({branch, final_norm_, hid, residual, eps});  // h += mlp_out; model.norm(h)
    }
    be_->gather_rows({hid, logits_idx, sel});
    return;
  }
  if (fused || stacked) {  // the residual stream is complete: gather the rows, model.norm in the lm_head prologue
    if (st.logits_rows_are_tokens) {
      sel = residual;  // every token is a logits row, in order: no gather kernel on the decode path
    } else {
      be_->gather_rows({residual, logits_idx, sel});
    }
  } else {
    if (whole_residual) {
      be_->rms_norm({residual, final_norm_, hid, Tensor(), eps});  // model.norm(h)
    } else {
      be_->rms_norm({branch, final_norm_, hid, residual, eps});  // h += mlp_out; model.norm(h)
    }
    be_->gather_rows({hid, logits_idx, sel});
  }
  LinearParams head = linear(sel, lm_head_, Tensor(), out);
  if (fused || stacked) head.input_norm = final_norm_;  // model.norm(h) in the lm_head prologue
  head.row_stats = logit_stats_of(ws, M);
  be_->linear(head);  // lm_head
  if (cfg_.final_logit_softcapping > 0) be_->softcap({out, cfg_.final_logit_softcapping});  // Gemma 2
}

Tensor DecoderModel::logit_stats_of(const DecoderWorkspace& ws, int64_t num_rows) const {
  // (Soft-capped logits: the lm_head's statistics would describe the values before the cap.)
  return num_rows == 1 && cfg_.final_logit_softcapping == 0 ? ws.logit_stats : Tensor();
}

void DecoderModel::logits_to_host(const Tensor& out, std::vector<float>& logits) {
  // out: [M, V] on the device; logits already holds M * V floats.
  if (out.dtype == DType::kF32) {
    be_->copy_to_host(out, logits.data());
  } else {
    std::vector<uint16_t> tmp(static_cast<size_t>(out.numel()));
    be_->copy_to_host(out, tmp.data());
    convert_to_f32(tmp.data(), out.dtype, logits.data(), tmp.size());
  }
}

}  // namespace vireo
