// DecoderModel::run_decode_stack: a decode-only step of a dense pre-norm model handed to the backend's
// decode_stack op in one call (CUDA: one persistent kernel for every layer), instead of op by op.
#include <cmath>

#include "model/decoder_model.h"

namespace vireo {
namespace {

// A layer the stack op covers: standard attention and a dense SiLU MLP, biases on q/k/v only.
bool plain_dense_layer(const DecoderLayerWeights& w) {
  return !w.qkv_w.empty() && !w.gate_up_w.empty() && w.o_b.empty() && w.gate_up_b.empty() && w.down_b.empty() &&
         w.router_w.empty() && w.kv_b_w.empty() && w.conv_w.empty() && w.gdn_in_w.empty() && w.attn_gate_w.empty() &&
         w.sinks.empty();
}

}  // namespace

bool DecoderModel::run_decode_stack(const StepTensors& st, KvCache& kv, DecoderWorkspace& ws) {
  const int64_t T = st.T;
  if (!be_->offers_decode_stack()) return false;  // before building the layer table
  if (spec_.post_norm || spec_.sandwich_norm || spec_.mla || st.max_query_len != 1 || T != st.S || st.M > T) return false;
  if (spec_.qk_norm == QkNorm::kFullWidth || cfg_.sliding_window > 0 || mlp_act_ != Activation::kSilu) return false;
  if (embed_scale_ != 1.0f || !rope_local_.empty() || !rope_none_.empty()) return false;  // one RoPE table for all
  const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = cfg_.head_dim;
  DecodeStackParams p;
  p.layers.reserve(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DecoderLayerWeights& w = layers_[l];
    if (!plain_dense_layer(w)) return false;
    p.layers.push_back({w.input_norm, w.qkv_w, w.qkv_b, w.q_norm, w.k_norm, w.o_w, w.post_attn_norm, w.gate_up_w,
                        w.down_w, kv.k[l], kv.v[l]});
  }
  const int64_t hidden = cfg_.hidden_size, inter = cfg_.intermediate_size;
  p.residual = ws.residual.view({T, hidden});
  p.qkv = ws.qkv.view({T, static_cast<int64_t>(H + 2 * Hkv) * D});
  p.q = ws.q.view({T, H, D});
  p.attn = ws.attn.view({T, H, D});
  p.act = ws.act.view({T, inter});
  p.positions = st.positions;
  p.slot_mapping = st.slots;
  p.query_start = st.query_start;
  p.seq_lens = st.seq_lens;
  p.block_tables = st.block_tables;
  p.rope_cos_sin = rope_;
  p.rotary_dim = cfg_.rotary_dim();
  p.neox = spec_.neox_rope;
  p.qk_norm = spec_.qk_norm;
  p.norm_eps = cfg_.rms_norm_eps;
  p.scale = cfg_.attention_scale > 0 ? cfg_.attention_scale : 1.0f / std::sqrt(static_cast<float>(D));
  p.num_heads = H;
  p.num_kv_heads = Hkv;
  p.head_dim = D;
  p.block_size = kv.block_size;
  p.max_blocks_per_seq = st.max_blocks_per_seq;
  p.max_seq_len = st.max_seq_len;
  if (!be_->decode_stack_supported(p)) return false;
  be_->decode_stack(p);
  return true;
}

}  // namespace vireo
