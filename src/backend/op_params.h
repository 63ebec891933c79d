// Parameter structs of the backend ops: raw views in, no model knowledge.
// Shapes use T = tokens in the step, S = sequences, H = query heads, Hkv = KV heads, D = head dim.
#pragma once
#include "core/tensor.h"

namespace vireo {

// out[t, :] = table[ids[t], :]
struct EmbeddingParams {
  Tensor table;  // [vocab, hidden] weight dtype
  Tensor ids;    // [T] I32
  Tensor out;    // [T, hidden] activation dtype
};

// With residual: residual += x; out = rmsnorm(residual) * weight   (fused add + norm)
// Without:       out = rmsnorm(x) * weight
// Rows are normalised independently; norm math in fp32.
struct RmsNormParams {
  Tensor x;         // [N, C]
  Tensor weight;    // [C]
  Tensor out;       // [N, C] (may alias x)
  Tensor residual;  // [N, C] or empty
  float eps = 1e-6f;
};

// out = x @ w^T + bias
struct LinearParams {
  Tensor x;     // [N, K] activation dtype
  Tensor w;     // [M, K] weight dtype (HF layout)
  Tensor bias;  // [M] or empty
  Tensor out;   // [N, M] activation dtype
};

// out = silu(x[:, :I]) * x[:, I:]
struct SiluAndMulParams {
  Tensor x;    // [N, 2*I]
  Tensor out;  // [N, I]
};

// out = a + b (same shape)
struct AddParams {
  Tensor a, b, out;
};

// out[i, :] = x[indices[i], :]
struct GatherRowsParams {
  Tensor x;        // [N, C]
  Tensor indices;  // [M] I32
  Tensor out;      // [M, C]
};

enum class QkNorm : uint8_t {
  kNone,
  kPerHeadBeforeRope,  // Qwen3: RMSNorm over each head's D values, then RoPE
  kPerHeadAfterRope,   // HunYuan dense: RoPE, then per-head RMSNorm
  kFullWidth,          // OLMo-2: RMSNorm over all H*D (resp. Hkv*D) values of the token, then RoPE
};

// The fused Q/K path: split qkv, optional q/k norm, RoPE on q and k, write k and v into the
// paged cache at slot_mapping, write q to q_out.
struct QkvPrepareParams {
  Tensor qkv;           // [T, (H + 2*Hkv) * D]: q heads, then k heads, then v heads
  Tensor positions;     // [T] I32
  Tensor rope_cos_sin;  // [max_positions, rotary_dim] F32: cos in [0, rotary_dim/2), sin after
  int rotary_dim = 0;   // <= D; dims past it are not rotated (partial rotary)
  bool neox = true;     // true: rotate halves (x[i], x[i + rotary_dim/2]); false: GPT-J pairs (x[2i], x[2i+1])
  QkNorm qk_norm = QkNorm::kNone;
  Tensor q_norm;        // [D] or [H*D] (kFullWidth), weight dtype
  Tensor k_norm;        // [D] or [Hkv*D]
  float norm_eps = 1e-6f;
  Tensor q_out;         // [T, H, D] activation dtype
  Tensor k_cache;       // [num_blocks, block_size, Hkv, D] cache dtype
  Tensor v_cache;       // [num_blocks, block_size, Hkv, D]
  Tensor slot_mapping;  // [T] I32: block_id * block_size + offset; < 0 means do not write
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 16;
};

// Causal attention of each step token over its sequence's paged KV (cached prefix + this step).
// Query row j of sequence s (q_len = query_start[s+1] - query_start[s]) sits at position
// seq_lens[s] - q_len + j and attends to keys [0, that position].
struct AttentionParams {
  Tensor q;                // [T, H, D]
  Tensor k_cache, v_cache; // [num_blocks, block_size, Hkv, D]
  Tensor out;              // [T, H, D]
  Tensor query_start;      // [S + 1] I32, cumulative
  Tensor seq_lens;         // [S] I32, context length including this step's tokens
  Tensor block_tables;     // [S, max_blocks_per_seq] I32
  int num_seqs = 0, max_blocks_per_seq = 0, block_size = 16;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int max_query_len = 0, max_seq_len = 0;  // host-side hints for planning
};

}  // namespace vireo
