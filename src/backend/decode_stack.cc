// Backend::decode_stack's default: the model's fused decode-step op sequence, layer by layer. It is what
// the CPU backend runs and the oracle of the CUDA persistent kernel (cuda/decode_stack.cu).
#include "backend/backend.h"
#include "backend/decode_stack_qkv.h"

namespace vireo {

void Backend::decode_stack(const DecodeStackParams& p) {
  const int64_t T = p.residual.dim(0);
  const int64_t H = p.num_heads, D = p.head_dim;
  AttentionParams ap;
  ap.q = p.q;
  ap.out = p.attn;
  ap.query_start = p.query_start;
  ap.seq_lens = p.seq_lens;
  ap.block_tables = p.block_tables;
  ap.num_seqs = static_cast<int>(T);
  ap.max_blocks_per_seq = p.max_blocks_per_seq;
  ap.block_size = p.block_size;
  ap.num_heads = p.num_heads;
  ap.num_kv_heads = p.num_kv_heads;
  ap.head_dim = p.head_dim;
  ap.scale = p.scale;
  ap.max_query_len = 1;
  ap.max_seq_len = p.max_seq_len;

  auto linear = [&](const Tensor& x, const Tensor& w, const Tensor& out) {
    LinearParams lp;
    lp.x = x;
    lp.w = w;
    lp.out = out;
    lp.norm_eps = p.norm_eps;
    return lp;
  };
  for (const DecodeStackLayer& l : p.layers) {
    LinearParams qkv = linear(p.residual, l.qkv_w, p.qkv);  // [q; k; v](input_layernorm(h))
    qkv.bias = l.qkv_b;
    qkv.input_norm = l.input_norm;
    this->linear(qkv);
    ap.k_cache = l.k_cache;
    ap.v_cache = l.v_cache;
    prepare_attention(decode_stack_qkv_params(p, l), ap);
    LinearParams o = linear(p.attn.view({T, H * D}), l.o_w, p.residual);  // h += o_proj(attn)
    o.residual = p.residual;
    this->linear(o);
    LinearParams gu = linear(p.residual, l.gate_up_w, p.act);  // silu(gate) * up of post_attention_layernorm(h)
    gu.input_norm = l.post_attn_norm;
    gu.silu_mul_output = true;
    this->linear(gu);
    LinearParams down = linear(p.act, l.down_w, p.residual);  // h += down_proj(act)
    down.residual = p.residual;
    this->linear(down);
  }
}

}  // namespace vireo
