// Parameter structs of the backend ops: raw views in, no model knowledge.
// Shapes use T = tokens in the step, S = sequences, H = query heads, Hkv = KV heads, D = head dim.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace vireo {

// out[t, :] = table[ids[t], :] * scale (Gemma's sqrt(hidden) normaliser; the caller rounds scale to the
// activation dtype as HF does; the product is rounded once)
struct EmbeddingParams {
  Tensor table;  // [vocab, hidden] weight dtype
  Tensor ids;    // [T] I32
  Tensor out;    // [T, hidden] activation dtype
  float scale = 1.0f;
};

// The gated MLP's activation (config.json hidden_act / hidden_activation).
enum class Activation : uint8_t {
  kSilu,      // silu / swish: x * sigmoid(x)
  kGeluTanh,  // gelu_pytorch_tanh / gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
};

// With residual: residual += x; out = rmsnorm(residual) * weight   (fused add + norm)
// Without:       out = rmsnorm(x) * weight
// add_after_norm (with residual): out = residual + round(rmsnorm(x) * weight), the residual read only
//   (out may alias it): the norm-then-add of post-norm blocks (OLMo-2, Gemma's sandwich norms).
// Rows are normalised independently; norm math in fp32.
struct RmsNormParams {
  Tensor x;         // [N, C]
  Tensor weight;    // [C]
  Tensor out;       // [N, C] (may alias x)
  Tensor residual;  // [N, C] or empty
  float eps = 1e-6f;
  bool add_after_norm = false;
};

// out = x @ w^T + bias, with optional fusions for the decode path (each one is exactly the
// unfused sequence of ops, with the same roundings to the activation dtype in between):
//   input_norm:   x' = rmsnorm(x) * input_norm          (rms_norm op, no residual), then the product
//   silu_mul_input: x is [N, 2K]; x' = silu(x[:, :K]) * x[:, K:]  (silu_and_mul op), then the product
//   residual:     out = residual + round(x' @ w^T + bias)  (add op); out may alias residual
//   silu_mul_output: w is [2I, K] = [gate; up] rows; y = round(x' @ w^T + bias) [N, 2I], then
//                 out [N, I] = act(y[:, :I]) * y[:, I:]  (silu_and_mul op with `act`, SiLU unless set):
//                 a gate_up projection with its activation, so the down projection reads x' directly
// input_norm and silu_mul_input are exclusive; silu_mul_output excludes silu_mul_input and residual.
struct LinearParams {
  Tensor x;     // [N, K] activation dtype ([N, 2K] with silu_mul_input)
  Tensor w;     // [M, K] weight dtype (HF layout)
  Tensor bias;  // [M] or empty
  Tensor out;   // [N, M] activation dtype ([N, M / 2] with silu_mul_output)
  Tensor input_norm;  // [K] or empty
  float norm_eps = 1e-6f;
  bool silu_mul_input = false;
  Tensor residual;    // [N, M] or empty
  bool silu_mul_output = false;
  Activation act = Activation::kSilu;  // silu_mul_output's gate activation
  // Optional [N, C, 4] F32: the softmax statistics of each output row over C ranges (RangeStats), for
  // the sample op (SampleParams::row_stats). Backend::row_stats_ranges says which C is cheap; any C >= 1
  // is honoured. Only with the plain output (no silu_mul_output).
  Tensor row_stats;
  // Elements from one row of out to the next; 0: M (contiguous). Only the plain or input_norm form, and only
  // on backends that keep weights packed (the CPU: q / k / v of different block types into one qkv buffer).
  int64_t out_stride = 0;
};

// The gated MLP of a pre-norm layer, in place on the residual stream (one op, so a backend can keep what
// passes between its two linears in its own form, e.g. an FP8 GEMM's unscaled output):
//   [gate; up] = rms_norm(residual) * norm_w @ gate_up_w^T + gate_up_b      [N, 2I]
//   residual  += (act(gate) * up) @ down_w^T + down_b                      [N, H]
// with the roundings of the two fused linears (input_norm + silu_mul_output, then residual).
struct MlpParams {
  Tensor residual;   // [N, H] activation dtype, read and updated in place
  Tensor norm_w;     // [H]
  float norm_eps = 1e-6f;
  Tensor gate_up_w;  // [2I, H]
  Tensor gate_up_b;  // [2I] or empty
  Tensor down_w;     // [H, I]
  Tensor down_b;     // [H] or empty
  Tensor gate_up;    // [N, 2I] activation dtype: scratch
  Tensor act;        // [N, I] activation dtype: scratch
  Activation act_fn = Activation::kSilu;
};

// The statistics of one range of an output row (LinearParams::row_stats), over the values as stored:
// range c of C over M columns is the even split [c * (M / C) + min(c, M % C), ...), the first M % C
// ranges one longer. An empty range: max -inf, sum 0, best_id INT32_MAX.
struct RangeStats {
  float max;         // the range's maximum (-inf: empty or all -inf)
  float sum;         // sum of exp(v - max) over the range
  float best_value;  // = max where a value is finite
  int32_t best_id;   // the lowest column holding it (absolute, not within the range)
};
static_assert(sizeof(RangeStats) == 16, "RangeStats is shared with device code as 4 raw words");

inline int64_t range_begin(int64_t m, int64_t num_ranges, int64_t c) {
  const int64_t lo = m / num_ranges, extra = m % num_ranges;
  return c * lo + (c < extra ? c : extra);
}

// out = act(x[:, :I]) * x[:, I:]   (act: SiLU unless set; fp32 math, one rounding)
struct SiluAndMulParams {
  Tensor x;    // [N, 2*I]
  Tensor out;  // [N, I]
  Activation act = Activation::kSilu;
};

// x = cap * tanh(x / cap), in place (fp32 math, one rounding): Gemma 2's final logit soft-capping.
struct SoftcapParams {
  Tensor x;  // [N, V] logits (activation dtype)
  float cap = 0.0f;
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

enum class MoeScoring : uint8_t {
  kSoftmax,  // Qwen3-MoE / Mixtral: probs = softmax(round(logits))
  kSigmoid,  // DeepSeek-V3: scores = sigmoid(logits), logits in fp32 from unrounded products
  kSoftmaxFp32,  // DeepSeek-V2, ERNIE 4.5 MoE: probs = softmax(logits), logits in fp32 (unrounded); weights as kSigmoid's
};

// Sparse mixture-of-experts MLP (Qwen3-MoE's SparseMoeBlock, DeepSeek-V3's routed experts), per token t:
// Routing (kSoftmax, the defaults): probs = softmax(round(x[t] @ router_w^T)) in fp32 (the logits
//   rounded to the activation dtype as HF's bf16 router linear rounds); the top_k experts by
//   probability (lowest id first among equal ones), their weights renormalised to sum 1 when
//   norm_topk_prob, then rounded to the activation dtype.
// Routing (kSigmoid, DeepSeek-V3's noaux_tc): logits = x[t] @ router_w^T in fp32 (HF's
//   F.linear(x.float(), w.float()): no rounding), scores = sigmoid(logits); choice = scores + score_bias
//   (e_score_correction_bias; 0 when empty). With n_group > 1 the E experts form n_group groups of
//   E / n_group consecutive ids; a group's score is the sum of its two largest choice values; the
//   topk_group best groups are kept (lower group id first among equal scores) and the other groups'
//   experts get choice -inf. The top_k experts by choice (lowest id first among equal ones) are picked;
//   weight_e = scores[e] (unbiased), divided by (sum of the k + renorm_eps) when norm_topk_prob, times
//   routed_scaling_factor; weights stay fp32 (HF multiplies the bf16 expert output by fp32 weights).
// Routing (kSoftmaxFp32, DeepSeek-V2's greedy gate): logits as kSigmoid's, probs = softmax(logits) in
//   fp32; the top_k by choice = probs + score_bias (ERNIE 4.5 MoE's moe_statics; none for DeepSeek-V2);
//   weights as kSigmoid's (the unbiased probs, fp32, optional renormalisation, times
//   routed_scaling_factor).
//   Grouping (n_group > 1, top-2 group sums) applies in every mode, on the values the top-k compares.
// Experts: out[t] = sum over the chosen e (ascending id) of weight_e * down_e(silu(gate_e(x)) * up_e(x)),
//   each product rounded to the activation dtype as HF's bf16 modules round. Shared experts are not
//   part of this op (the model adds them as a dense MLP).
struct MoeParams {
  Tensor x;          // [T, hidden] activation dtype (the post-attention-normalised MLP input)
  Tensor router_w;   // [E, hidden] weight dtype (mlp.gate.weight)
  Tensor gate_up_w;  // [E, 2 * inter, hidden]: expert e's [gate_proj; up_proj]
  Tensor down_w;     // [E, hidden, inter]
  Tensor out;        // [T, hidden] (must not alias x)
  int top_k = 1;
  bool norm_topk_prob = true;
  MoeScoring scoring = MoeScoring::kSoftmax;
  Tensor score_bias;   // [E] F32 or empty: added to the scores the top-k compares (kSigmoid, kSoftmaxFp32)
  int n_group = 1;     // divides E; n_group <= 32
  int topk_group = 1;  // groups kept, in [1, n_group]; topk_group * (E / n_group) >= top_k
  float routed_scaling_factor = 1.0f;  // kSigmoid / kSoftmaxFp32 (kSoftmax weights are never scaled)
  float renorm_eps = 1e-20f;           // kSigmoid / kSoftmaxFp32 renormalisation (DeepSeek 1e-20, LFM2-MoE 1e-6)
  // GPT-OSS (all optional, empty / 0: absent):
  //   router_b [E] (weight dtype): logits = round(x[t] @ router_w^T + router_b) (kSoftmax)
  //   gate_up_b [E, 2 * inter]: g, u = round(round(x . gate_e) + b_gate), likewise u
  //   down_b [E, hidden]: y = round(round(act . down_e) + b_down), then weighted as above
  //   swiglu_limit > 0: act = round((clamp(u, -limit, limit) + 1) * g' * sigmoid(swiglu_alpha * g')),
  //     g' = min(g, limit), instead of silu(g) * u
  Tensor router_b, gate_up_b, down_b;
  float swiglu_alpha = 1.702f, swiglu_limit = 0.0f;
  // MXFP4 experts (GPT-OSS's checkpoints kept as they are stored; both scales or neither). Then gate_up_w
  // is U8 [E, 2I, hidden / 2] and down_w U8 [E, hidden, I / 2]: E2M1 pairs, byte j of a row holding
  // element 2j in its low nibble and 2j + 1 in its high one; and these are their E8M0 scales, one per 32
  // elements of a row (value = fp4 * 2^(s - 127)): gate_up_scales [E, 2I, hidden / 32], down_scales
  // [E, hidden, I / 32]. hidden and I are multiples of 32. Results as with the dequantized weights (in
  // the activation dtype) up to the fp32 summation order.
  Tensor gate_up_scales, down_scales;
  bool mxfp4() const { return !gate_up_scales.empty() || !down_scales.empty(); }
  int64_t inter() const { return mxfp4() ? down_w.dim(2) * 2 : down_w.dim(2); }  // I
};

// DeepSeek MLA (multi-head latent attention) expanded to ordinary attention rows: packs the per-token
// projections into the qkv layout qkv_prepare takes (H query heads, H KV heads, head dim D =
// rope + nope, V zero-padded to D). Per token t and head h:
//   qkv[t, h*D : (h+1)*D]             = q[t, h*D : (h+1)*D]                 (already [rope | nope] per head)
//   qkv[t, (H+h)*D : (H+h)*D + rope]  = k_pe[t, :]                          (the one rope key, every head)
//   qkv[t, (H+h)*D + rope : (H+h+1)*D] = kv[t, h*(nope+v) : h*(nope+v) + nope]   (k_nope of head h)
//   qkv[t, (2H+h)*D : (2H+h)*D + v]   = kv[t, h*(nope+v) + nope : (h+1)*(nope+v)]  (v of head h)
//   qkv[t, (2H+h)*D + v : (2H+h+1)*D] = 0
// A pure copy (no rounding); all tensors in the activation dtype.
struct MlaPackParams {
  Tensor q;     // [T, H * D]
  Tensor kv;    // [T, H * (nope + v)]: kv_b_proj output
  Tensor k_pe;  // [T, rope]
  Tensor qkv;   // [T, 3 * H * D]
  int num_heads = 0, rope_dim = 0, nope_dim = 0, v_dim = 0;  // D = rope_dim + nope_dim >= v_dim
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
  // Sliding-window attention (Mistral, Qwen2's sliding layers): > 0 limits the query at position pos to
  // keys (pos - window, pos], itself included (HF's sliding mask: kv_idx > q_idx - window); 0: full causal.
  int window = 0;
  // Logit soft-capping (Gemma 2): > 0 replaces each score s (after scale) by softcap * tanh(s / softcap).
  float softcap = 0.0f;
  // Attention sinks (GPT-OSS): [H] F32 or empty. Head h's softmax gets one more logit, sinks[h], that
  // has no value: p_i = exp(s_i - m) / (sum_j exp(s_j - m) + exp(sinks[h] - m)), m over the scores and
  // the sink, so a row's weights may sum to less than 1.
  Tensor sinks;
  int max_query_len = 0, max_seq_len = 0;  // host-side hints for planning
  // Host-side hint: the fewest query tokens of a sequence with more than one (0: there is none; < 0: not
  // given). Lets a backend skip kernels for decode-shape row groups that cannot occur.
  int min_multi_query_len = -1;
  // Optional host-side hint: the sequences with more than one query token (prompts, prefill chunks),
  // in order, [num_prefill_seqs] I32; num_prefill_seqs < 0: not given. A backend may plan its prefill
  // work over these alone: in a serving step hundreds of decode sequences sit beside one or two
  // prefill chunks, and a grid over every (sequence, KV head) is then almost all empty work items.
  Tensor prefill_seqs;
  int num_prefill_seqs = -1;
  // A mixed step whose decode sequences come first: the backend may leave those rows' attention running
  // beside the caller's next ops (their `out` rows unwritten until Backend::join_attention); the prefill
  // rows' `out` is complete when the op returns. Lets the prompt rows' o_proj and MLP (bound by FLOPs) run
  // while the decode rows read their K / V (bound by HBM bandwidth).
  bool defer_decode_rows = false;
};

// The first key a query at position pos sees: pos - window + 1 with a sliding window, else 0.
inline int window_start(int pos, int window) { return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0; }

// LFM2's gated short convolution (Lfm2ShortConv after in_proj), its state kept like a KV cache: the
// paged `state` holds bx = B * x of every token, addressed by the block tables and slot mapping the
// attention layers use, so chunked prefill, prefix caching and preemption need nothing else.
// Token row t = query_start[s] + j of sequence s sits at position pos = seq_lens[s] - q_len + j; per
// channel c < C (bcx row = [B | C | x], each C wide, in that order):
//   bx(t)     = round(B[t, c] * x[t, c])                                  (written to state at slot_mapping[t] if >= 0)
//   conv      = round(sum_{k<L} weight[c, k] * bx(pos - (L-1) + k) + bias[c])   (fp32 sum; 0 for positions < 0)
//   out[t, c] = round(C[t, c] * conv)
// round: to the activation dtype, where HF's bf16 modules round. bx of positions before this step's
// first token come from the state pages; those of this step from bcx itself (so the op never reads a
// row it writes).
struct ShortConvParams {
  Tensor bcx;           // [T, 3 * C] activation dtype: in_proj output, chunks B, C, x
  Tensor weight;        // [C, L] weight dtype (conv.conv.weight [C, 1, L])
  Tensor bias;          // [C] or empty (conv.conv.bias)
  Tensor state;         // [num_blocks, block_size, C] activation dtype: this layer's bx pages
  Tensor out;           // [T, C] activation dtype (must not alias bcx)
  Tensor slot_mapping;  // [T] I32: block_id * block_size + offset; < 0 means do not write
  Tensor query_start;   // [S + 1] I32, cumulative
  Tensor seq_lens;      // [S] I32, context length including this step's tokens
  Tensor block_tables;  // [S, max_blocks_per_seq] I32
  int num_seqs = 0, max_blocks_per_seq = 0, block_size = 16;
};

// Qwen3-Next / Qwen3.5 Gated DeltaNet token mixer (HF Qwen3NextGatedDeltaNet between its input
// projections and out_proj), its state kept per sequence in a fixed slot (not paged): a running
// sequence s owns slot state_slots[s] (< 0: a padding row of a graph, skipped) of conv_state and
// ssm_state. Token row t = query_start[s] + j sits at position pos = seq_lens[s] - q_len + j; when the
// sequence's first row this step has pos 0, both states of its slot are zeroed first (a new or
// recomputed request). Hk = num_k_heads, Hv = num_v_heads (a multiple of Hk), dk, dv head dims,
// C = 2*Hk*dk + Hv*dv conv channels, L = conv_kernel. Per token (fp32 math; round = to the activation
// dtype where HF's bf16 modules round):
//   proj row = [q (Hk*dk) | k (Hk*dk) | v (Hv*dv) | z (Hv*dv) | b (Hv) | a (Hv)]   (the model reorders
//              Qwen3-Next's per-key-head in_proj_qkvz / in_proj_ba rows into this layout at load)
//   x_c     = round(silu(round(sum_{i<L} conv_w[c, i] * in_c(pos - (L-1) + i))))   for c < C, where
//             in_c(p) is proj[., c] of position p (0 for p < 0; positions before this step's first
//             row come from conv_state, which afterwards holds the inputs of the last L-1 positions)
//   q_h, k_h = l2norm(x's q / k head h / (Hv / Hk)) (x * rsqrt(sum x^2 + 1e-6)); q_h *= dk^-0.5
//   beta_h  = sigmoid(b_h); g_h = -exp(A_log[h]) * softplus(a_h + dt_bias[h])
//   S_h = S_h * exp(g_h); kv = S_h^T k_h; delta = (v_h - kv) * beta_h; S_h += k_h delta^T   (S_h [dk, dv])
//   o_h = round(S_h^T q_h)
//   out[t, h*dv : (h+1)*dv] = round(round(norm_w * round(rmsnorm(o_h, norm_eps))) * silu(z_h))
// Rows of one sequence run in order (the recurrence); sequences are independent.
struct GatedDeltaNetParams {
  Tensor proj;          // [T, 2*Hk*dk + 2*Hv*dv + 2*Hv] activation dtype (in_proj outputs, layout above)
  Tensor conv_w;        // [C, L] weight dtype (conv1d.weight [C, 1, L]); the conv has no bias
  Tensor A_log;         // [Hv] F32
  Tensor dt_bias;       // [Hv] F32
  Tensor norm_w;        // [dv] weight dtype (linear_attn.norm.weight: plain weight, not 1 + w)
  Tensor conv_state;    // [num_slots, L - 1, C] activation dtype: the last L-1 positions' conv inputs
  Tensor ssm_state;     // [num_slots, Hv, dk, dv] F32
  Tensor out;           // [T, Hv * dv] activation dtype (must not alias proj)
  Tensor query_start;   // [S + 1] I32, cumulative
  Tensor seq_lens;      // [S] I32, context length including this step's tokens
  Tensor state_slots;   // [S] I32
  int num_seqs = 0;
  int num_k_heads = 0, num_v_heads = 0, head_k_dim = 0, head_v_dim = 0, conv_kernel = 4;
  float norm_eps = 1e-6f;
};

// out = residual + round(x * round(sigmoid(gate))), residual optional (then out = round(x * ...)).
// gate is [N, C] (Qwen3-Next's attention output gate) or [N, 1], broadcast over the row (the shared
// expert's gate). out may alias x or residual.
struct SigmoidGateParams {
  Tensor x;         // [N, C] activation dtype
  Tensor gate;      // [N, C] or [N, 1] activation dtype
  Tensor residual;  // [N, C] or empty
  Tensor out;       // [N, C]
};

// ---- the decode stack ----
// One pre-norm dense decoder layer's weights, as DecoderLayerWeights holds them (views, no copies).
struct DecodeStackLayer {
  Tensor input_norm;         // [hidden]
  Tensor qkv_w, qkv_b;       // [(H + 2*Hkv) * D, hidden], bias [(H + 2*Hkv) * D] or empty
  Tensor q_norm, k_norm;     // [D] (per-head q/k norm) or empty
  Tensor o_w;                // [hidden, H * D]
  Tensor post_attn_norm;     // [hidden]
  Tensor gate_up_w;          // [2 * inter, hidden]: gate rows, then up rows
  Tensor down_w;             // [hidden, inter]
  Tensor k_cache, v_cache;   // [num_blocks, block_size, Hkv, D]
};

// All layers of a pre-norm dense decoder (Llama / Qwen2 / Qwen3 / HunYuan dense) on a decode step: every
// sequence has exactly one query token (T == S, token s belongs to sequence s). Per layer, exactly the
// model's fused op sequence (Backend::decode_stack's default, backend/decode_stack.cc):
//   qkv = linear(x = residual, input_norm in the prologue, qkv_w, qkv_b)
//   q, k = qkv_prepare(qkv) (per-head q/k norm, RoPE; k, v written at slot_mapping); attn = paged_attention
//   residual = residual + round(attn @ o_w^T)
//   act = silu(gate) * up of linear(residual, post_attn_norm in the prologue, gate_up_w)
//   residual = residual + round(act @ down_w^T)
// residual holds the embeddings on entry and the last layer's output on return (before the final norm).
// qkv, q, attn and act are scratch the default implementation uses (a fused backend may not write them).
struct DecodeStackParams {
  std::vector<DecodeStackLayer> layers;
  Tensor residual;      // [T, hidden] activation dtype, in/out
  Tensor qkv;           // [T, (H + 2*Hkv) * D] scratch
  Tensor q;             // [T, H, D] scratch
  Tensor attn;          // [T, H, D] scratch
  Tensor act;           // [T, inter] scratch
  Tensor positions;     // [T] I32
  Tensor slot_mapping;  // [T] I32
  Tensor query_start;   // [T + 1] I32 (0, 1, ..., T)
  Tensor seq_lens;      // [T] I32
  Tensor block_tables;  // [T, max_blocks_per_seq] I32
  Tensor rope_cos_sin;  // [max_positions, rotary_dim] F32
  int rotary_dim = 0;
  bool neox = true;
  QkNorm qk_norm = QkNorm::kNone;  // kNone, kPerHeadBeforeRope or kPerHeadAfterRope
  float norm_eps = 1e-6f;          // every RMSNorm of the layer (input, post-attention, q/k)
  float scale = 1.0f;              // attention softmax scale
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 16, max_blocks_per_seq = 0;
  int max_seq_len = 0;             // host-side hint, as AttentionParams::max_seq_len
};

// ---- sampling ----
// One logits row's sampling settings, laid out identically on host and device (raw I32 words).
// The pipeline is vLLM's (and the CPU reference's, backend/cpu/cpu_sampling.h):
//   raw logprobs = log_softmax(logits)                   (reported: chosen token + top-N)
//   penalties (repetition over prompt+output, presence/frequency over output), masks -> -inf
//   greedy (temperature < 1e-5): argmax, lowest id among ties
//   else probs = softmax(l / temperature); min-p; top-k; top-p; renormalise; the token is the first
//   id (in id order) where the cumulative probability exceeds `uniform`.
struct SamplingRow {
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;  // <= 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float uniform = 0.0f;       // the draw in [0, 1), made on the host from the request's RNG
  int32_t forced_token = -1;  // >= 0: no sampling; this token is reported (prompt logprobs)
  int32_t penalty_begin = 0, penalty_end = 0;  // this row's range of penalty_tokens entries
  int32_t mask_begin = 0, mask_end = 0;        // this row's range of mask_tokens
  int32_t pad_ = 0;
};
static_assert(sizeof(SamplingRow) == 14 * 4, "SamplingRow is shared with device code as raw words");

// logits[row, token] += bias for each entry, in place (OpenAI logit_bias), before the sample op.
struct LogitBiasParams {
  Tensor logits;   // [M, V] F32/BF16/F16
  Tensor entries;  // [E, 3] I32: (row, token id, bias as the bits of a float); (row, token) distinct;
                   // entries outside [0, M) x [0, V) are errors on the CPU and skipped on devices
};

// Structured outputs: logits[rows[g], v] = -inf for every token v whose bit is clear in bitmask row g
// (bit v % 32 of word v / 32), in place, before logit_bias and the sample op.
struct TokenBitmaskParams {
  Tensor logits;   // [M, V] F32/BF16/F16
  Tensor rows;     // [G] I32: distinct logits rows in [0, M)
  Tensor bitmask;  // [G, W] I32 words, W = ceil(V / 32)
};

// Token selection over M logits rows, so only ids and a few logprobs leave the device.
struct SampleParams {
  Tensor logits;          // [M, V] F32/BF16/F16, not modified
  Tensor rows;            // [M * 14] I32: the SamplingRow array, raw
  Tensor penalty_tokens;  // [E, 2] I32: (token id, times in the output) for every distinct id of
                          // prompt + output of a row with penalties; may be empty
  Tensor mask_tokens;     // [E2] I32: ids set to -inf before sampling (min_tokens); may be empty
  int num_top_logprobs = 0;  // N (<= 20): top-N of the raw log-softmax per row
  Tensor out_tokens;      // [M] I32
  Tensor out_logprobs;    // [M, 1 + N] F32: the chosen token's raw logprob, then the top-N (best first)
  Tensor out_top_ids;     // [M, N] I32: ids of the top-N (ties: lower id first); may be empty if N = 0
  // Optional [M] I32: the chosen token's rank in its raw row, vLLM's: #{ids v : logit[v] >= logit[token]}
  // (>= 1; ties share the worse rank). Wanted for prompt logprobs, where the token may be far down.
  Tensor out_ranks;
  // Optional: the same M SamplingRows in host memory (never read by the CPU backend). The CUDA backend
  // skips the kernels no row needs (a wrong copy costs speed, never correctness).
  const void* host_rows = nullptr;
  // Optional [>= M] I32: the tokens are also written here (the next decode step's ids buffer, so the
  // step needs no device copy of them between the sampling and its graph); may be empty.
  Tensor out_tokens_mirror;
  // Optional [M, C, 4] F32: the logits rows' RangeStats (LinearParams::row_stats) as the logits stand.
  // A backend may take the log-softmax and plain draws from them instead of a pass over the rows; the
  // result is the same up to float summation order (CPU: ignored).
  Tensor row_stats;
};

}  // namespace vireo
