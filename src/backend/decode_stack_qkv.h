// The q/k path of one decode-stack layer as the qkv_prepare op's params: used by Backend::decode_stack's
// default (decode_stack.cc) and checked by the CUDA kernel's launch (cuda/decode_stack.cu).
#pragma once
#include "backend/op_params.h"

namespace vireo {

inline QkvPrepareParams decode_stack_qkv_params(const DecodeStackParams& p, const DecodeStackLayer& l) {
  QkvPrepareParams qp;
  qp.qkv = p.qkv;
  qp.positions = p.positions;
  qp.rope_cos_sin = p.rope_cos_sin;
  qp.rotary_dim = p.rotary_dim;
  qp.neox = p.neox;
  qp.qk_norm = p.qk_norm;
  qp.q_norm = l.q_norm;
  qp.k_norm = l.k_norm;
  qp.norm_eps = p.norm_eps;
  qp.q_out = p.q;
  qp.k_cache = l.k_cache;
  qp.v_cache = l.v_cache;
  qp.slot_mapping = p.slot_mapping;
  qp.num_heads = p.num_heads;
  qp.num_kv_heads = p.num_kv_heads;
  qp.head_dim = p.head_dim;
  qp.block_size = p.block_size;
  return qp;
}

}  // namespace vireo
