// DecoderModel construction: weight loading (checkpoint or dummy), KV cache, workspace.
#include "model/decoder_model.h"

#include <algorithm>
#include <cmath>

#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "model/dummy_weights.h"
#include "model/rope.h"

namespace vireo {
namespace {
constexpr float kDummyStd = 0.02f;
}  // namespace

float DecoderModel::round_to_dtype(float v) const {
  const DType dt = be_->activation_dtype();
  std::vector<uint8_t> buf(dtype_size(dt));
  store_f32_as(&v, 1, dt, buf.data());
  float out = 0;
  convert_to_f32(buf.data(), dt, &out, 1);
  return out;
}

DecoderModel::DecoderModel(ModelConfig config, const ArchSpec& spec, std::unique_ptr<Backend> backend,
                           std::unique_ptr<WeightSource> checkpoint, const LoadOptions& opts)
    : cfg_(std::move(config)), spec_(spec), be_(std::move(backend)), ckpt_(std::move(checkpoint)), opts_(opts) {
  // Weights live in the backend's choice for this checkpoint: the activation dtype on CUDA (per --dtype),
  // F32 or BF16 on the CPU.
  wdtype_ = be_->weight_dtype(cfg_.torch_dtype);
  kv_dtype_ = kv_cache_dtype(opts_.kv_cache_dtype, *be_);
  if (kv_dtype_ == DType::kF8E4M3)
    log_info("--kv-cache-dtype {}: K and V stored as F8_E4M3 codes with scale 1 (a checkpoint's k_scale / v_scale "
             "are not applied)", opts_.kv_cache_dtype);
  if (cfg_.qk_norm_off) spec_.qk_norm = QkNorm::kNone;  // GLM-4.5 without use_qk_norm
  mlp_act_ = cfg_.hidden_act.rfind("gelu", 0) == 0 ? Activation::kGeluTanh : Activation::kSilu;
  if (spec_.scaled_embedding) embed_scale_ = round_to_dtype(static_cast<float>(std::sqrt(cfg_.hidden_size)));
  if (cfg_.embedding_multiplier > 0) embed_scale_ = cfg_.embedding_multiplier;  // Granite: a float, as HF's
  try {
    load_weights();
    // One row per position the engine may use: --max-model-len may exceed max_position_embeddings
    // (vLLM allows it with a warning); positions past the table would be an error.
    const int num_positions = std::max(cfg_.max_position_embeddings, opts_.max_model_len);
    auto upload = [&](const std::vector<float>& table) {  // [num_positions, rotary_dim] F32
      Tensor dev = be_->alloc({num_positions, cfg_.rotary_dim()}, DType::kF32);
      owned_.push_back(dev);
      be_->copy_from_host(table.data(), dev);
      be_->synchronize();
      return dev;
    };
    auto upload_table = [&](const ModelConfig& c) { return upload(rope_cos_sin_table(c, num_positions)); };
    rope_ = upload_table(cfg_);
    if (cfg_.rope_local_theta > 0) {  // Gemma 3's local layers: default RoPE, their own base
      ModelConfig local = cfg_;
      local.rope_theta = cfg_.rope_local_theta;
      local.rope_scaling = RopeScaling{};
      rope_local_ = upload_table(local);
    }
    if (!cfg_.nope_layers.empty()) {  // SmolLM3's NoPE layers: cos 1, sin 0 (q and k pass through exactly)
      std::vector<float> identity(static_cast<size_t>(num_positions) * cfg_.rotary_dim(), 0.0f);
      for (int p = 0; p < num_positions; ++p)
        std::fill_n(identity.begin() + static_cast<size_t>(p) * cfg_.rotary_dim(), cfg_.rotary_dim() / 2, 1.0f);
      rope_none_ = upload(identity);
    }
  } catch (...) {
    for (auto& t : owned_) be_->free(t);
    throw;
  }
}

DecoderModel::~DecoderModel() {
  reset_graphs();
  while (!loras_.empty()) remove_lora(loras_.begin()->first);
  free_lora_scratch();
  free_workspace(ws_);
  free_sampling_workspace(*be_, sampling_);
  for (auto& t : owned_) be_->free(t);
}

Tensor DecoderModel::load(const std::string& fused_name, const std::vector<Part>& parts, float stddev) {
  std::vector<int64_t> shape = parts[0].shape;
  for (size_t i = 1; i < parts.size(); ++i) shape[0] += parts[i].shape[0];
  if (!ckpt_) {  // dummy: generate in the device dtype; on the CPU straight into place
    Tensor dev = be_->alloc(shape, wdtype_);
    owned_.push_back(dev);
    if (be_->kind() == DeviceKind::kCPU) {
      fill_dummy(dev, opts_.seed, fused_name, stddev);
    } else {
      std::vector<uint8_t> host(dev.nbytes());
      Tensor h(host.data(), wdtype_, shape);
      fill_dummy(h, opts_.seed, fused_name, stddev);
      be_->copy_from_host(host.data(), dev);
      be_->synchronize();
    }
    return dev;
  }
  // Phi-3 stores q/k/v and gate/up fused already (self_attn.qkv_proj, mlp.gate_up_proj): read it whole
  // where the parts are absent.
  if (parts.size() > 1 && !ckpt_->has(parts[0].name) && ckpt_->has(fused_name))
    return load(fused_name, {{fused_name, shape}}, stddev);
  if (parts.size() == 1) {  // may be a view of the mmapped file on the CPU
    if (auto view = ckpt_->view(parts[0].name, parts[0].shape)) {
      Tensor dev = be_->upload(*view, wdtype_);
      owned_.push_back(dev);
      return dev;
    }
  }
  Tensor dev = be_->alloc(shape, wdtype_);
  owned_.push_back(dev);
  std::vector<uint8_t> host(dev.nbytes());
  size_t off = 0;
  for (const auto& p : parts) {
    ckpt_->read(p.name, p.shape, wdtype_, host.data() + off);
    off += static_cast<size_t>(Tensor(nullptr, wdtype_, p.shape).nbytes());
  }
  be_->copy_from_host(host.data(), dev);
  be_->synchronize();
  return dev;
}

Tensor DecoderModel::alloc_filled(const std::vector<int64_t>& shape, DType dtype,
                                  const std::function<void(uint8_t*)>& fill) {
  Tensor dev = be_->alloc(shape, dtype);
  owned_.push_back(dev);
  if (be_->kind() == DeviceKind::kCPU) {
    fill(static_cast<uint8_t*>(dev.data));
    return dev;
  }
  std::vector<uint8_t> host(dev.nbytes());
  fill(host.data());
  be_->copy_from_host(host.data(), dev);
  be_->synchronize();
  return dev;
}

void DecoderModel::load_weights() {
  const int64_t hidden = cfg_.hidden_size, inter = cfg_.intermediate_size, vocab = cfg_.vocab_size;
  const int64_t H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = cfg_.head_dim;
  const bool qkv_bias = (spec_.qkv_bias && !cfg_.qkv_bias_off) || cfg_.attention_bias;
  const ModuleNames& n = spec_.names;
  if (spec_.mla && !cfg_.mla_attention())
    throw Error(cfg_.architecture + ": config.json has no kv_lora_rank > 0 (MLA attention)");
  if (mlp_act_ != Activation::kSilu && (spec_.moe || spec_.gated_delta_net || spec_.mla))
    throw Error(cfg_.architecture + ": hidden_act '" + cfg_.hidden_act + "' is supported for dense MLPs only");
  if (spec_.moe && cfg_.num_experts <= 0)
    throw Error(cfg_.architecture + ": config.json has no num_experts (or num_local_experts) > 0");
  // Packed where the backend gathers rows of blocks (the CPU), and then also the tied lm_head.
  embed_ = load_linear("model.embed_tokens.weight", {{"model.embed_tokens.weight", {vocab, hidden}}}, kDummyStd);
  // Granite's residual_multiplier, folded into the weights of the projections whose outputs it scales.
  const float residual_scale = cfg_.residual_multiplier > 0 ? cfg_.residual_multiplier : 1.0f;
  layers_.resize(cfg_.num_hidden_layers);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string a = p + n.attn + ".", m = p + n.mlp + ".";
    DecoderLayerWeights& w = layers_[l];
    auto norm = [&](const std::string& name) { return load_norm(p + name + ".weight", hidden); };
    if (!spec_.post_norm) w.input_norm = norm(n.input_norm);
    if (spec_.gated_delta_net && cfg_.linear_layer(l)) {
      load_gated_delta_net(p + "linear_attn.", w);
    } else if (spec_.gated_delta_net) {
      load_gated_attention(a, w);
    } else if (spec_.short_conv && cfg_.conv_layer(l)) {
      load_short_conv(p + "conv.", w);
    } else if (spec_.mla) {
      load_mla(a, w);
    } else {
      const std::vector<Part> qkv{{a + "q_proj.weight", {H * D, hidden}}, {a + "k_proj.weight", {Hkv * D, hidden}},
                                  {a + "v_proj.weight", {Hkv * D, hidden}}};
      if (packed_apart(qkv)) {
        for (const Part& part : qkv) w.qkv_parts.push_back(load_linear(part.name, {part}, kDummyStd));
      } else {
        w.qkv_w = load_projection(a + "qkv_proj.weight", qkv, kDummyStd);
      }
      if (qkv_bias)
        w.qkv_b = load(a + "qkv_proj.bias",
                       {{a + "q_proj.bias", {H * D}}, {a + "k_proj.bias", {Hkv * D}}, {a + "v_proj.bias", {Hkv * D}}},
                       kDummyStd);
      if (spec_.qk_norm != QkNorm::kNone) {
        const bool full = spec_.qk_norm == QkNorm::kFullWidth;
        const std::string qn = a + spec_.q_norm_name + ".weight", kn = a + spec_.k_norm_name + ".weight";
        w.q_norm = load_norm(qn, full ? H * D : D);  // 1 + w where zero-centred (Gemma)
        w.k_norm = load_norm(kn, full ? Hkv * D : D);
      }
      const std::string o = a + n.o_proj + ".";
      w.o_w = residual_scale != 1.0f ? load_scaled(o + "weight", {hidden, H * D}, residual_scale)
                                     : load_projection(o + "weight", {{o + "weight", {hidden, H * D}}}, kDummyStd);
      if ((cfg_.attention_bias && spec_.o_proj_bias) || cfg_.attention_out_bias) w.o_b = load_scaled(o + "bias", {hidden}, residual_scale);
      if (cfg_.attention_sinks) w.sinks = load_f32(a + "sinks", H, 0.5f);  // GPT-OSS
    }
    w.post_attn_norm = norm(n.post_attn_norm);
    if (spec_.post_norm || spec_.sandwich_norm) w.post_ffn_norm = norm(n.post_ffn_norm);
    if (spec_.sandwich_norm) w.pre_ffn_norm = norm(n.pre_ffn_norm);
    if (spec_.moe && cfg_.moe_layer(l)) {
      spec_.gpt_oss_experts ? load_gpt_oss_moe(m, w) : load_moe(m, w);
      continue;
    }
    const std::string g = m + n.gate_proj + ".", u = m + n.up_proj + ".", d = m + n.down_proj + ".";
    w.gate_up_w = load_projection(m + "gate_up_proj.weight", {{g + "weight", {inter, hidden}}, {u + "weight", {inter, hidden}}},
                       kDummyStd);
    if (cfg_.mlp_bias)
      w.gate_up_b = load(m + "gate_up_proj.bias", {{g + "bias", {inter}}, {u + "bias", {inter}}}, kDummyStd);
    w.down_w = residual_scale != 1.0f ? load_scaled(d + "weight", {hidden, inter}, residual_scale)
                                      : load_projection(d + "weight", {{d + "weight", {hidden, inter}}}, kDummyStd);
    if (cfg_.mlp_bias) w.down_b = load_scaled(d + "bias", {hidden}, residual_scale);
  }
  final_norm_ = load_norm(n.final_norm + ".weight", hidden);
  // Tied checkpoints sometimes still carry lm_head.weight; the embedding is what HF uses then.
  const bool headless = opts_.pooling && ckpt_ && !ckpt_->has("lm_head.weight");  // pooling never runs it
  lm_head_ = cfg_.tie_word_embeddings || headless ? embed_
                                                  : load_linear("lm_head.weight", {{"lm_head.weight", {vocab, hidden}}}, kDummyStd);
  if (cfg_.logits_scaling > 0 && cfg_.logits_scaling != 1.0f && ckpt_ && !headless)  // Granite: logits / logits_scaling
    lm_head_ = load_scaled(cfg_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {vocab, hidden},
                           1.0f / cfg_.logits_scaling);
  if (spec_.gated_delta_net) allocate_gdn_states();
  if (spec_.gpt_oss_experts) log_gpt_oss_experts();
  log_packed_weights();
  log_fp8_weights();
}

// LFM2's gated short convolution (Lfm2ShortConv): in_proj [3 * hidden, hidden], the depthwise conv
// weight [hidden, 1, L] (kept as [hidden, L]), out_proj [hidden, hidden]; biases with conv_bias.
void DecoderModel::load_short_conv(const std::string& c, DecoderLayerWeights& w) {
  const int64_t hidden = cfg_.hidden_size, L = cfg_.conv_kernel;
  if (L <= 0) throw Error(cfg_.architecture + ": config.json has no conv_L_cache > 0");
  w.in_proj_w = load_linear(c + "in_proj.weight", {{c + "in_proj.weight", {3 * hidden, hidden}}}, kDummyStd);
  // Dummy conv taps larger than the projections' (HF's Conv1d init is uniform(+-1/sqrt(L))), so the
  // convolution visibly mixes neighbouring tokens in dummy-weight tests.
  w.conv_w = load(c + "conv.weight", {{c + "conv.weight", {hidden, 1, L}}}, 0.3f).view({hidden, L});
  w.o_w = load_linear(c + "out_proj.weight", {{c + "out_proj.weight", {hidden, hidden}}}, kDummyStd);
  if (!cfg_.conv_bias) return;
  w.in_proj_b = load(c + "in_proj.bias", {{c + "in_proj.bias", {3 * hidden}}}, kDummyStd);
  w.conv_b = load(c + "conv.bias", {{c + "conv.bias", {hidden}}}, kDummyStd);
  w.o_b = load(c + "out_proj.bias", {{c + "out_proj.bias", {hidden}}}, kDummyStd);
}

Tensor DecoderModel::load_remapped(const std::string& name, const std::vector<int64_t>& src_shape,
                                  const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, float stddev) {
  const int64_t src_rows = src_shape[0], src_cols = src_shape.size() > 1 ? src_shape[1] : 1;
  const int64_t out_cols = cols.empty() ? src_cols : static_cast<int64_t>(cols.size());
  std::vector<int64_t> shape{static_cast<int64_t>(rows.size())};
  if (src_shape.size() > 1) shape.push_back(out_cols);
  if (!ckpt_)  // dummy: random values in the final layout (distinct per row range of one tensor)
    return load(name + "@" + std::to_string(rows.empty() ? 0 : rows[0]), {{name, shape}}, stddev);
  const size_t es = dtype_size(wdtype_);
  std::vector<uint8_t> src(static_cast<size_t>(src_rows * src_cols) * es), out(rows.size() * out_cols * es, 0);
  ckpt_->read(name, src_shape, wdtype_, src.data());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] < 0) continue;
    const uint8_t* in = src.data() + static_cast<size_t>(rows[r] * src_cols) * es;
    uint8_t* o = out.data() + r * out_cols * es;
    if (cols.empty()) {
      std::memcpy(o, in, src_cols * es);
      continue;
    }
    for (int64_t c = 0; c < out_cols; ++c)
      if (cols[c] >= 0) std::memcpy(o + c * es, in + cols[c] * es, es);
  }
  Tensor dev = be_->alloc(shape, wdtype_);
  owned_.push_back(dev);
  be_->copy_from_host(out.data(), dev);
  be_->synchronize();
  return dev;
}

Tensor DecoderModel::load_scaled(const std::string& name, const std::vector<int64_t>& shape, float scale) {
  if (!ckpt_ || scale == 1.0f) return load(name, {{name, shape}}, kDummyStd);
  const int64_t n = Tensor(nullptr, DType::kF32, shape).numel();
  std::vector<float> host(static_cast<size_t>(n));
  ckpt_->read(name, shape, DType::kF32, host.data());
  for (float& v : host) v *= scale;
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_size(wdtype_));
  store_f32_as(host.data(), n, wdtype_, out.data());
  Tensor dev = be_->alloc(shape, wdtype_);
  owned_.push_back(dev);
  be_->copy_from_host(out.data(), dev);
  be_->synchronize();
  return dev;
}

Tensor DecoderModel::load_f32(const std::string& name, int64_t n, float stddev, std::vector<int64_t> stored) {
  std::vector<float> host(static_cast<size_t>(n));
  if (ckpt_) {
    ckpt_->read(name, stored.empty() ? std::vector<int64_t>{n} : stored, DType::kF32, host.data());
  } else {
    Tensor h(host.data(), DType::kF32, {n});
    fill_dummy(h, opts_.seed, name, stddev);
  }
  Tensor dev = be_->alloc({n}, DType::kF32);
  owned_.push_back(dev);
  be_->copy_from_host(host.data(), dev);
  be_->synchronize();
  return dev;
}

// DeepSeek MLA. Each head's query / key dims become [rope | nope] (HF: [nope | rope]); the rope dims
// keep their order, rotated as GPT-J pairs (rope_interleave) or halves by qkv_prepare over the first
// rope_dim dims. Scores are unchanged: q and k are permuted alike. o_proj gets zero columns for the
// padded V dims [v_head_dim, D) of every head.
void DecoderModel::load_mla(const std::string& a, DecoderLayerWeights& w) {
  const ModelConfig::Mla& m = cfg_.mla;
  const int64_t hidden = cfg_.hidden_size, H = cfg_.num_attention_heads;
  const int64_t R = m.qk_rope_head_dim, N = m.qk_nope_head_dim, V = m.v_head_dim, D = R + N, L = m.kv_lora_rank;
  std::vector<int64_t> q_rows(static_cast<size_t>(H * D));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < D; ++j) q_rows[h * D + j] = h * D + (j < R ? N + j : j - R);
  auto range = [](int64_t b, int64_t e) {
    std::vector<int64_t> v;
    for (int64_t i = b; i < e; ++i) v.push_back(i);
    return v;
  };
  if (m.q_lora_rank > 0) {
    const int64_t Q = m.q_lora_rank;
    w.q_a_w = load(a + "q_a_proj.weight", {{a + "q_a_proj.weight", {Q, hidden}}}, kDummyStd);
    w.q_a_norm = load(a + "q_a_layernorm.weight", {{a + "q_a_layernorm.weight", {Q}}}, 0);
    w.q_w = load_remapped(a + "q_b_proj.weight", {H * D, Q}, q_rows, {}, kDummyStd);
  } else {
    w.q_w = load_remapped(a + "q_proj.weight", {H * D, hidden}, q_rows, {}, kDummyStd);
  }
  const std::string kva = a + "kv_a_proj_with_mqa.weight";
  w.kv_a_w = load_remapped(kva, {L + R, hidden}, range(0, L), {}, kDummyStd);
  w.kpe_w = load_remapped(kva, {L + R, hidden}, range(L, L + R), {}, kDummyStd);
  w.kv_a_norm = load(a + "kv_a_layernorm.weight", {{a + "kv_a_layernorm.weight", {L}}}, 0);
  w.kv_b_w = load(a + "kv_b_proj.weight", {{a + "kv_b_proj.weight", {H * (N + V), L}}}, kDummyStd);
  std::vector<int64_t> o_cols(static_cast<size_t>(H * D), -1);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < V; ++j) o_cols[h * D + j] = h * V + j;
  const std::string o = a + spec_.names.o_proj + ".weight";
  w.o_w = load_remapped(o, {hidden, H * V}, range(0, hidden), o_cols, kDummyStd);
}

// Router and experts of a sparse layer: per-expert tensors (HF checkpoints) stacked at load, or the
// stacked form transformers 5 uses in memory (mlp.experts.gate_up_proj [E, 2I, hidden], down_proj).
// Mixtral's hub checkpoints name the block block_sparse_moe and its experts' gate / down / up w1 / w2 / w3;
// GraniteMoe's, block_sparse_moe with router.layer and the stacked input_linear / output_linear.
void DecoderModel::load_moe(const std::string& mlp, DecoderLayerWeights& w) {
  const int64_t hidden = cfg_.hidden_size, E = cfg_.num_experts, I = cfg_.moe_intermediate_size;
  const float residual = cfg_.residual_multiplier > 0 ? cfg_.residual_multiplier : 1.0f;  // GraniteMoe's, folded
  std::string m = mlp;
  const std::string router = spec_.names.router + ".weight";
  bool w123 = false;
  if (ckpt_ && !ckpt_->has(m + router) && m.size() > 4 && m.compare(m.size() - 4, 4, "mlp.") == 0) {
    const std::string alt = m.substr(0, m.size() - 4) + "block_sparse_moe.";
    if (ckpt_->has(alt + "router.layer.weight")) {  // GraniteMoe: stacked already
      w.router_w = load(alt + "router.layer.weight", {{alt + "router.layer.weight", {E, hidden}}}, kDummyStd);
      w.experts_gate_up = load(alt + "input_linear.weight", {{alt + "input_linear.weight", {E, 2 * I, hidden}}}, kDummyStd);
      w.experts_down = load_scaled(alt + "output_linear.weight", {E, hidden, I}, residual);
      return;
    }
    if (ckpt_->has(alt + "gate.weight")) {
      m = alt;
      w123 = ckpt_->has(m + "experts.0.w1.weight");
    }
  }
  // Per-expert w1 / w2 / w3 (Mixtral's block_sparse_moe, LFM2-MoE's feed_forward) or gate / up / down_proj.
  w123 = w123 || (ckpt_ && ckpt_->has(m + "experts.0.w1.weight") && !ckpt_->has(m + "experts.0.gate_proj.weight"));
  w.router_w = load(m + router, {{m + router, {E, hidden}}}, kDummyStd);
  if (cfg_.moe_sigmoid && cfg_.moe_score_bias) w.router_bias = load_f32(m + spec_.names.router_bias, E, 0.1f);
  if (cfg_.moe_softmax_bias) w.router_bias = load_f32(m + spec_.names.router_bias, E, 0.1f, {1, E});  // ERNIE: [1, E]
  if (cfg_.shared_expert_width() > 0) {
    const int64_t Is = cfg_.shared_expert_width();
    // DeepSeek: mlp.shared_experts.*; Qwen2-MoE / Qwen3-Next: mlp.shared_expert.* and its sigmoid gate;
    // HunYuan-MoE: mlp.shared_mlp.*.
    const std::string s = m + (!spec_.names.shared_expert.empty() ? spec_.names.shared_expert + "."
                               : spec_.gated_shared_expert     ? "shared_expert."
                                                               : "shared_experts.");
    if (spec_.gated_shared_expert)
      w.shared_expert_gate_w = load(m + "shared_expert_gate.weight", {{m + "shared_expert_gate.weight", {1, hidden}}}, kDummyStd);
    w.shared_gate_up_w = load_projection(s + "gate_up_proj.weight",
                              {{s + "gate_proj.weight", {Is, hidden}}, {s + "up_proj.weight", {Is, hidden}}}, kDummyStd);
    w.shared_down_w = load_projection(s + "down_proj.weight", {{s + "down_proj.weight", {hidden, Is}}}, kDummyStd);
  }
  const std::string stacked = m + "experts.gate_up_proj";
  // Qwen3-VL-MoE's hub checkpoints: [E, hidden, 2I] and [E, I, hidden] (what transformers 5 saves is
  // [E, 2I, hidden] / [E, hidden, I]); down_proj's shape tells them apart even when hidden == 2I.
  if (spec_.transposed_experts && ckpt_ && ckpt_->has(stacked) && !ckpt_->has(m + "experts.0.gate_proj.weight") &&
      ckpt_->shape(m + "experts.down_proj") == std::vector<int64_t>{E, I, hidden} && I != hidden) {
    std::vector<int64_t> rows(static_cast<size_t>(std::max(2 * I, hidden)));
    for (size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<int64_t>(r);
    w.experts_gate_up = load_gpt_oss_experts(stacked, E, 2 * I, hidden, rows, ExpertsForm::kDense, nullptr);
    w.experts_down = load_gpt_oss_experts(m + "experts.down_proj", E, hidden, I, rows, ExpertsForm::kDense, nullptr);
    return;
  }
  if (ckpt_ && ckpt_->has(stacked) && !ckpt_->has(m + "experts.0.gate_proj.weight")) {
    // GGUF experts may stay in their block types (load_linear); a residual multiplier needs them widened.
    w.experts_gate_up = load_linear(stacked, {{stacked, {E, 2 * I, hidden}}}, kDummyStd);
    w.experts_down = residual != 1.0f ? load_scaled(m + "experts.down_proj", {E, hidden, I}, residual)
                                      : load_linear(m + "experts.down_proj", {{m + "experts.down_proj", {E, hidden, I}}},
                                                    kDummyStd);
    return;
  }
  if (ckpt_ && residual != 1.0f)  // per-expert parts are stacked by load(), which does not scale
    throw Error(cfg_.architecture + ": residual_multiplier needs the experts stacked in the checkpoint (" + m +
                "experts.down_proj or GraniteMoe's block_sparse_moe.output_linear)");
  std::vector<Part> gate_up, down;
  for (int64_t e = 0; e < E; ++e) {
    const std::string x = m + "experts." + std::to_string(e) + ".";
    gate_up.push_back({x + (w123 ? "w1.weight" : "gate_proj.weight"), {I, hidden}});
    gate_up.push_back({x + (w123 ? "w3.weight" : "up_proj.weight"), {I, hidden}});
    down.push_back({x + (w123 ? "w2.weight" : "down_proj.weight"), {hidden, I}});
  }
  if (!ckpt_ && packed_type({{stacked, {E, 2 * I, hidden}}})) {  // dummy packed experts (VIREO_DUMMY_QUANT)
    w.experts_gate_up = load_linear(stacked, {{stacked, {E, 2 * I, hidden}}}, kDummyStd);
    w.experts_down = load_linear(m + "experts.down_proj", {{m + "experts.down_proj", {E, hidden, I}}}, kDummyStd);
    return;
  }
  w.experts_gate_up = load(stacked, gate_up, kDummyStd).view({E, 2 * I, hidden});
  w.experts_down = load(m + "experts.down_proj", down, kDummyStd).view({E, hidden, I});
}

// Attention layers: K and V [num_blocks, block_size, Hkv, D]; short-conv layers: their bx state
// [num_blocks, block_size, hidden] in k, v empty (KvCache).
KvCache DecoderModel::allocate_kv_cache(int num_blocks, int block_size) {
  if (num_blocks <= 0 || block_size <= 0) throw Error("allocate_kv_cache: num_blocks and block_size must be > 0");
  KvCache kv;
  kv.num_blocks = num_blocks;
  kv.block_size = block_size;
  const std::vector<int64_t> shape{num_blocks, block_size, cfg_.num_key_value_heads, cfg_.head_dim};
  try {
    for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
      if (!layers_[l].gdn_in_w.empty()) {  // Gated DeltaNet: its state lives in the model's slots
        kv.k.push_back(Tensor());
        kv.v.push_back(Tensor());
        continue;
      }
      if (!layers_[l].conv_w.empty()) {
        kv.k.push_back(be_->alloc({num_blocks, block_size, cfg_.hidden_size}, be_->activation_dtype()));
        kv.v.push_back(Tensor());
        continue;
      }
      kv.k.push_back(be_->alloc(shape, kv_dtype_));
      kv.v.push_back(be_->alloc(shape, kv_dtype_));
    }
  } catch (...) {
    free_kv_cache(kv);
    throw;
  }
  return kv;
}

void DecoderModel::free_kv_cache(KvCache& kv) {
  for (auto& t : kv.k) be_->free(t);
  for (auto& t : kv.v) be_->free(t);
  kv.k.clear();
  kv.v.clear();
}

size_t DecoderModel::kv_block_bytes(int block_size) const {
  size_t per_token = 0;  // bytes of one token over all layers: K and V in kv_dtype_, conv states in the activation dtype
  for (const auto& w : layers_)
    if (w.gdn_in_w.empty())
      per_token += w.conv_w.empty() ? size_t{2} * cfg_.num_key_value_heads * cfg_.head_dim * dtype_size(kv_dtype_)
                                    : size_t(cfg_.hidden_size) * dtype_size(be_->activation_dtype());
  return per_token * block_size;
}

void DecoderModel::free_workspace(DecoderWorkspace& ws) {
  for (Tensor* t : {&ws.ints, &ws.residual, &ws.hidden, &ws.branch, &ws.qkv, &ws.bcx, &ws.q, &ws.attn, &ws.mla_qa,
                    &ws.mla_ckv, &ws.mla_kpe, &ws.mla_kv, &ws.gdn_proj, &ws.gdn_out, &ws.attn_gate, &ws.shared_gate, &ws.gate_up, &ws.act, &ws.rows, &ws.logits,
                    &ws.logit_stats})
    if (!t->empty()) be_->free(*t);
  ws.token_cap = ws.logit_cap = ws.int_cap = 0;
}

void DecoderModel::ensure_workspace(DecoderWorkspace& ws, int64_t tokens, int64_t logit_rows, int64_t ints) {
  if (tokens <= ws.token_cap && logit_rows <= ws.logit_cap && ints <= ws.int_cap) return;
  const int64_t t = std::max(tokens, ws.token_cap * 2), m = std::max(logit_rows, ws.logit_cap * 2);
  const int64_t n = std::max(ints, ws.int_cap * 2);
  free_workspace(ws);
  const DType act = be_->activation_dtype();
  const int64_t hidden = cfg_.hidden_size, H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const int64_t D = cfg_.head_dim;
  const int64_t inter = std::max<int64_t>(cfg_.intermediate_size, cfg_.shared_expert_width());
  ws.ints = be_->alloc({n}, DType::kI32);
  ws.residual = be_->alloc({t, hidden}, act);
  ws.hidden = be_->alloc({t, hidden}, act);
  ws.branch = be_->alloc({t, hidden}, act);
  ws.qkv = be_->alloc({t, (H + 2 * Hkv) * D}, act);
  if (spec_.short_conv) ws.bcx = be_->alloc({t, 3 * hidden}, act);
  ws.q = be_->alloc({t, H * D}, act);
  ws.attn = be_->alloc({t, H * D}, act);
  if (spec_.mla) {
    const ModelConfig::Mla& m = cfg_.mla;
    if (m.q_lora_rank > 0) ws.mla_qa = be_->alloc({t, m.q_lora_rank}, act);
    ws.mla_ckv = be_->alloc({t, m.kv_lora_rank}, act);
    ws.mla_kpe = be_->alloc({t, m.qk_rope_head_dim}, act);
    ws.mla_kv = be_->alloc({t, H * (m.qk_nope_head_dim + m.v_head_dim)}, act);
  }
  if (spec_.gated_delta_net) {
    const ModelConfig::LinearAttn& la = cfg_.linear_attn;
    const int64_t vd = static_cast<int64_t>(la.num_v_heads) * la.head_v_dim;
    ws.gdn_proj = be_->alloc({t, 2 * static_cast<int64_t>(la.num_k_heads) * la.head_k_dim + 2 * vd + 2 * la.num_v_heads}, act);
    ws.gdn_out = be_->alloc({t, vd}, act);
    ws.attn_gate = be_->alloc({t, H * D}, act);
  }
  if (spec_.gated_shared_expert) ws.shared_gate = be_->alloc({t, 1}, act);
  ws.gate_up = be_->alloc({t, 2 * inter}, act);
  ws.act = be_->alloc({t, inter}, act);
  ws.rows = be_->alloc({m, hidden}, act);
  ws.logits = be_->alloc({m, cfg_.vocab_size}, act);
  // A one-row step's logits statistics (decoder_forward.cc: the batch-1 lm_head writes them; the sampling
  // then makes no pass of its own over the row).
  const int64_t num_ranges = be_->row_stats_ranges(cfg_.vocab_size);
  ws.logit_stats = num_ranges > 0 ? be_->alloc({1, num_ranges, 4}, DType::kF32) : Tensor();
  ws.token_cap = t;
  ws.logit_cap = m;
  ws.int_cap = n;
}

}  // namespace vireo
