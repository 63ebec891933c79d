// DecoderModel's Qwen3-Next / Qwen3.5 parts: loading gated attention and Gated DeltaNet layers
// (their row reorderings happen once here), zero-centred norms, the per-slot recurrent states, and
// the gated_delta_net op's parameters for a step.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "model/decoder_model.h"
#include "model/dummy_weights.h"

namespace vireo {
namespace {
constexpr float kDummyStd = 0.02f;

std::vector<int64_t> iota(int64_t b, int64_t e) {
  std::vector<int64_t> v;
  for (int64_t i = b; i < e; ++i) v.push_back(i);
  return v;
}
}  // namespace

Tensor DecoderModel::load_row_picks(const std::string& fused_name, const std::vector<RowPick>& picks, float stddev) {
  int64_t rows = 0, cols = picks.at(0).shape.size() > 1 ? picks[0].shape[1] : 1;
  for (const auto& p : picks) rows += p.rows.empty() ? p.shape[0] : static_cast<int64_t>(p.rows.size());
  if (!ckpt_) return load(fused_name, {{fused_name, {rows, cols}}}, stddev);
  const size_t es = dtype_size(wdtype_), row_bytes = static_cast<size_t>(cols) * es;
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes), src;
  size_t at = 0;
  for (const auto& p : picks) {
    src.resize(static_cast<size_t>(p.shape[0]) * row_bytes);
    ckpt_->read(p.name, p.shape, wdtype_, src.data());
    const std::vector<int64_t> r = p.rows.empty() ? iota(0, p.shape[0]) : p.rows;
    for (int64_t i : r) {
      std::memcpy(out.data() + at, src.data() + static_cast<size_t>(i) * row_bytes, row_bytes);
      at += row_bytes;
    }
  }
  Tensor dev = be_->alloc({rows, cols}, wdtype_);
  owned_.push_back(dev);
  be_->copy_from_host(out.data(), dev);
  be_->synchronize();
  return dev;
}

// Qwen3NextRMSNorm / Gemma3RMSNorm: out = norm(x) * (1 + w), computed by HF in fp32. The CPU keeps
// 1 + w in F32 (its rms_norm reads any float weight); other backends get it in the weight dtype.
Tensor DecoderModel::load_norm(const std::string& name, int64_t n) {
  if (!spec_.gated_delta_net && !spec_.zero_centred_norm) return load(name, {{name, {n}}}, 0);
  if (!ckpt_) return load(name, {{name, {n}}}, 0);  // dummy: w = 0, so 1 + w = ones
  if (ckpt_->norms_include_one()) return load(name, {{name, {n}}}, 0);  // GGUF: the converter added the 1
  std::vector<float> host(static_cast<size_t>(n));
  ckpt_->read(name, {n}, DType::kF32, host.data());
  for (float& v : host) v += 1.0f;
  const DType dt = be_->kind() == DeviceKind::kCPU ? DType::kF32 : wdtype_;
  std::vector<uint8_t> conv(static_cast<size_t>(n) * dtype_size(dt));
  store_f32_as(host.data(), n, dt, conv.data());
  Tensor dev = be_->alloc({n}, dt);
  owned_.push_back(dev);
  be_->copy_from_host(conv.data(), dev);
  be_->synchronize();
  return dev;
}

// Qwen3NextAttention: q_proj [H * 2D, hidden] holds per head [query (D) | gate (D)]; the query rows go
// with k_proj / v_proj into qkv_w, the gate rows into attn_gate_w; q_norm / k_norm zero-centred.
void DecoderModel::load_gated_attention(const std::string& a, DecoderLayerWeights& w) {
  const int64_t hidden = cfg_.hidden_size, H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const int64_t D = cfg_.head_dim;
  std::vector<int64_t> q_rows, g_rows;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < D; ++j) q_rows.push_back(h * 2 * D + j), g_rows.push_back(h * 2 * D + D + j);
  const std::vector<int64_t> q_shape{H * 2 * D, hidden};
  w.qkv_w = load_row_picks(a + "qkv_proj.weight",
                           {{a + "q_proj.weight", q_shape, q_rows}, {a + "k_proj.weight", {Hkv * D, hidden}, {}},
                            {a + "v_proj.weight", {Hkv * D, hidden}, {}}},
                           kDummyStd);
  w.attn_gate_w = load_row_picks(a + "q_gate.weight", {{a + "q_proj.weight", q_shape, g_rows}}, kDummyStd);
  w.q_norm = load_norm(a + "q_norm.weight", D);
  w.k_norm = load_norm(a + "k_norm.weight", D);
  w.o_w = load_linear(a + "o_proj.weight", {{a + "o_proj.weight", {hidden, H * D}}}, kDummyStd);
}

// Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet. The fused input projection's rows are
// [q (Hk*dk) | k (Hk*dk) | v (Hv*dv) | z (Hv*dv) | b (Hv) | a (Hv)] (GatedDeltaNetParams). Qwen3.5 stores
// in_proj_qkv / z / b / a in that order already; Qwen3-Next's in_proj_qkvz holds per key head g
// [q (dk) | k (dk) | v (r*dv) | z (r*dv)] and in_proj_ba per g [b (r) | a (r)] (r = Hv / Hk; value head
// g*r + i), which fix_query_key_value_ordering splits at run time and this reorders once.
void DecoderModel::load_gated_delta_net(const std::string& p, DecoderLayerWeights& w) {
  const ModelConfig::LinearAttn& c = cfg_.linear_attn;
  const int64_t hidden = cfg_.hidden_size, Hk = c.num_k_heads, Hv = c.num_v_heads, dk = c.head_k_dim;
  const int64_t dv = c.head_v_dim, L = c.conv_kernel, r = Hv / Hk;
  const int64_t C = 2 * Hk * dk + Hv * dv;
  if (spec_.qkvz_interleaved) {
    const int64_t group = 2 * dk + 2 * r * dv;
    std::vector<int64_t> q, k, v, z, b, a;
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t j = 0; j < dk; ++j) q.push_back(g * group + j), k.push_back(g * group + dk + j);
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t j = 0; j < r * dv; ++j) v.push_back(g * group + 2 * dk + j), z.push_back(g * group + 2 * dk + r * dv + j);
    for (int64_t g = 0; g < Hk; ++g)
      for (int64_t i = 0; i < r; ++i) b.push_back(g * 2 * r + i), a.push_back(g * 2 * r + r + i);
    std::vector<int64_t> qkvz = q;
    for (const auto* part : {&k, &v, &z}) qkvz.insert(qkvz.end(), part->begin(), part->end());
    std::vector<int64_t> ba = b;
    ba.insert(ba.end(), a.begin(), a.end());
    w.gdn_in_w = load_row_picks(p + "in_proj.weight",
                                {{p + "in_proj_qkvz.weight", {Hk * group, hidden}, qkvz},
                                 {p + "in_proj_ba.weight", {2 * Hv, hidden}, ba}},
                                kDummyStd);
  } else {
    w.gdn_in_w = load(p + "in_proj.weight",
                      {{p + "in_proj_qkv.weight", {C, hidden}}, {p + "in_proj_z.weight", {Hv * dv, hidden}},
                       {p + "in_proj_b.weight", {Hv, hidden}}, {p + "in_proj_a.weight", {Hv, hidden}}},
                      kDummyStd);
  }
  // Dummy conv taps near HF's Conv1d init (uniform +-1/sqrt(L)) so the convolution visibly mixes tokens.
  w.gdn_conv_w = load(p + "conv1d.weight", {{p + "conv1d.weight", {C, 1, L}}}, 0.3f).view({C, L});
  // Dummy A_log / dt_bias: A = exp(A_log) around 1 and softplus(a + dt_bias) around 1: a decay of a
  // few tenths per token, as trained models have.
  w.gdn_A_log = load_f32(p + "A_log", Hv, 0.5f);
  w.gdn_dt_bias = load_f32(p + "dt_bias", Hv, 0.5f);
  w.gdn_norm_w = load(p + "norm.weight", {{p + "norm.weight", {dv}}}, 0);
  w.o_w = load_linear(p + "out_proj.weight", {{p + "out_proj.weight", {hidden, Hv * dv}}}, kDummyStd);
}

// One conv / ssm state per slot of every DeltaNet layer, zeroed (the op also zeroes a slot itself
// when a sequence starts at position 0).
void DecoderModel::allocate_gdn_states() {
  const ModelConfig::LinearAttn& c = cfg_.linear_attn;
  const int64_t C = 2 * c.num_k_heads * c.head_k_dim + c.num_v_heads * c.head_v_dim;
  state_slots_ = std::max(1, opts_.max_num_seqs);
  gdn_states_.assign(layers_.size(), GdnLayerState{});
  std::vector<uint8_t> zeros;
  auto zeroed = [&](std::vector<int64_t> shape, DType dt) {
    Tensor t = be_->alloc(std::move(shape), dt);
    owned_.push_back(t);
    if (zeros.size() < t.nbytes()) zeros.assign(t.nbytes(), 0);
    be_->copy_from_host(zeros.data(), t);
    return t;
  };
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].gdn_in_w.empty()) continue;
    gdn_states_[l].conv = zeroed({state_slots_, c.conv_kernel - 1, C}, be_->activation_dtype());
    gdn_states_[l].ssm = zeroed({state_slots_, c.num_v_heads, c.head_k_dim, c.head_v_dim}, DType::kF32);
  }
  be_->synchronize();
  size_t bytes = 0;
  for (const auto& st : gdn_states_) bytes += (st.conv.empty() ? 0 : st.conv.nbytes()) + (st.ssm.empty() ? 0 : st.ssm.nbytes());
  log_info("Gated DeltaNet state: {} slots (--max-num-seqs), {:.1f} MiB", state_slots_, bytes / 1048576.0);
}

GatedDeltaNetParams DecoderModel::gdn_params(const StepTensors& st, const DecoderWorkspace& ws, int l) const {
  const ModelConfig::LinearAttn& c = cfg_.linear_attn;
  const DecoderLayerWeights& w = layers_[l];
  const int64_t P = 2 * c.num_k_heads * c.head_k_dim + 2 * c.num_v_heads * c.head_v_dim + 2 * c.num_v_heads;
  GatedDeltaNetParams p;
  p.proj = ws.gdn_proj.view({st.T, P});
  p.conv_w = w.gdn_conv_w;
  p.A_log = w.gdn_A_log;
  p.dt_bias = w.gdn_dt_bias;
  p.norm_w = w.gdn_norm_w;
  p.conv_state = gdn_states_[l].conv;
  p.ssm_state = gdn_states_[l].ssm;
  p.out = ws.gdn_out.view({st.T, static_cast<int64_t>(c.num_v_heads) * c.head_v_dim});
  p.query_start = st.query_start;
  p.seq_lens = st.seq_lens;
  p.state_slots = st.state_slots;
  p.num_seqs = st.S;
  p.num_k_heads = c.num_k_heads;
  p.num_v_heads = c.num_v_heads;
  p.head_k_dim = c.head_k_dim;
  p.head_v_dim = c.head_v_dim;
  p.conv_kernel = c.conv_kernel;
  p.norm_eps = cfg_.rms_norm_eps;
  return p;
}

}  // namespace vireo
