// Host entry points of the CUDA kernels (one .cu file each). Plain C++: callers need only cuda_runtime.h.
// Each takes the op's params struct with device views, validates shapes, launches on `stream`.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "backend/op_params.h"

namespace vireo::cuda {

void launch_embedding(const EmbeddingParams& p, cudaStream_t stream);
void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);
void launch_silu_and_mul(const SiluAndMulParams& p, cudaStream_t stream);
void launch_add(const AddParams& p, cudaStream_t stream);
void launch_softcap(const SoftcapParams& p, cudaStream_t stream);
void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream);
// dst[i] = src[i] converted; both device pointers, float dtypes.
void launch_convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n, cudaStream_t stream);
// out[n, m] += bias[m] (bias in any float dtype); used when the GEMM epilogue cannot take the bias.
void launch_bias_add(void* out, DType out_dtype, const void* bias, DType bias_dtype, int64_t rows, int64_t cols,
                     cudaStream_t stream);
// linear for N <= 4 rows of bf16/f16 (decode), with the fused forms of LinearParams (input_norm,
// silu_mul_input, residual); false when the shape or dtype is not covered.
bool launch_gemv_small_n(const LinearParams& p, cudaStream_t stream);
// LinearParams::row_stats: the C the batch-1 streaming GEMV writes in its epilogue (a range a warp),
// and that launch (out and row_stats) when p is such a GEMV with C ranges; false: nothing launched.
int64_t gemv_row_stats_ranges();
bool launch_gemv_row_stats(const LinearParams& p, cudaStream_t stream);
// p.row_stats from p.out ([N, M] F32/BF16/F16) in a pass of its own (range_stats.cu): one warp a range.
void launch_row_stats(const LinearParams& p, cudaStream_t stream);
// Batch-invariant linear (gemm_invariant.cu), plain form (x, w, bias, out): every output element is
// accumulated in the same K order whatever N is, so a row's bits never depend on the other rows.
void launch_gemm_invariant(const LinearParams& p, cudaStream_t stream);
// Programmatic dependent launch of our kernels (pdl.cuh): on unless VIREO_NO_PDL=1. Captured graphs
// keep the setting they were captured with.
bool pdl_enabled();
void set_pdl_enabled(bool on);
// batch_invariant: one kernel for every T (the per-head kernel unless the norm is full width).
void launch_qkv_prepare(const QkvPrepareParams& p, cudaStream_t stream, bool batch_invariant = false);

// Returns device scratch of at least `bytes` bytes, valid until the next call (stream-ordered).
using WorkspaceFn = std::function<void*(size_t bytes)>;
// Sparse MoE MLP (moe.cu): routing, experts and the weighted sum on the device; scratch from workspace.
void launch_moe(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream);
// LFM2's gated short convolution over its paged state (short_conv.cu): one thread per (token, channel).
void launch_short_conv(const ShortConvParams& p, cudaStream_t stream);
// Qwen3-Next / Qwen3.5 Gated DeltaNet mixer over per-sequence state slots (gated_delta_net.cu): one block
// per (sequence, value head), S_h in registers, rows of a sequence in order; then the conv-state update.
void launch_gated_delta_net(const GatedDeltaNetParams& p, cudaStream_t stream);
// out = [residual +] round(x * round(sigmoid(gate))) (elementwise_ops.cu); gate [N, C] or [N, 1].
void launch_sigmoid_gate(const SigmoidGateParams& p, cudaStream_t stream);
// DeepSeek MLA's projections packed into qkv rows (mla_pack.cu): one thread per output element.
void launch_mla_pack(const MlaPackParams& p, cudaStream_t stream);

struct DeviceInfo {
  int num_sms = 132;
  size_t max_smem_per_block = 227 * 1024;
};
// Kernel-shape choices of the tensor-core attention (tests and benchmarks exercise each).
struct AttentionTuning {
  int prefill_m_tiles = 2;  // 16-row m-tiles per warp in the prefill shape: 1 (64-row blocks) or 2 (128-row)
  int fuse_prepare = -1;    // launch_prepare_attention: 1 fuse decode steps, 0 never, -1 per VIREO_FUSED_ATTENTION
  int prefill_wgmma = -1;   // prefill shape on wgmma (attention_wgmma.cuh): 1 on, 0 off, -1 per VIREO_ATTN_WGMMA (default on)
  int decode_cluster = -1;  // decode steps on the cluster kernel: 0 never, n > 0 cluster size n, -1 per VIREO_DECODE_CLUSTER (few pairs)
};
// A second stream an op may fork work onto, to run beside the main stream's kernels (the prefill rows'
// attention beside the decode rows': one bound by FLOPs, the other by HBM bandwidth). fork and join are
// events of the backend's own; workspace is scratch of its own, never the main stream's. Ops join the side
// stream back before they return, so callers see one stream. Never pass one while the stream is captured
// (the side scratch and the FP8 page widening's may grow; decode graphs have no prefill rows anyway).
struct SideLane {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  WorkspaceFn workspace;
  // VIREO_OP_TIMING: labels the main stream's work so far (the parts of an op that runs them in turn,
  // VIREO_ATTN_OVERLAP=0); empty when the timer is off.
  std::function<void(const char*)> mark;
  // Set when an op left a step's decode rows running on `stream` (AttentionParams::defer_decode_rows): the
  // caller waits on `join` before reading them (CudaBackend::join_attention).
  bool* deferred = nullptr;
  // Where deferred decode rows run when set: a stream confined to decode_sms SMs (SmPartition,
  // VIREO_DECODE_SMS) and an event of its context, recorded after them; else `stream` and `join`.
  cudaStream_t decode_stream = nullptr;
  cudaEvent_t decode_join = nullptr;
  int decode_sms = 0;
};
// side: where an FP8-cache step's prefill rows may run beside its decode rows (VIREO_ATTN_OVERLAP), or null.
void launch_paged_attention(const AttentionParams& p, const WorkspaceFn& workspace, const DeviceInfo& dev,
                            cudaStream_t stream, const AttentionTuning& tuning = {}, const SideLane* side = nullptr);
// The plain reference kernel (any float dtype, any head dim <= 256); the fast path falls back to it.
// qkv_prepare then paged_attention (attn.q == prep.q_out), fused into the decode attention kernel for
// decode-shape steps when VIREO_FUSED_ATTENTION=1 (prep.q_out is then not written; measured slower on the
// H200 than the two ops, see attention_mma.cu).
void launch_prepare_attention(const QkvPrepareParams& prep, const AttentionParams& attn, const WorkspaceFn& workspace,
                              const DeviceInfo& dev, cudaStream_t stream, const AttentionTuning& tuning = {},
                              const SideLane* side = nullptr);
// The persistent decode-stack kernel (decode_stack.cu): every layer of a dense pre-norm decoder on a
// decode step of <= 8 tokens in one launch. supported: whether the kernel takes p (bf16, head dim 64 /
// 128, GQA <= 8, ...). counters: num_counters zeroed words the kernel leaves zeroed (its grid barrier
// and split arrivals); 2 + T * Hkv are used.
bool decode_stack_supported(const DecodeStackParams& p, const DeviceInfo& dev);
bool decode_stack_enabled();  // VIREO_DECODE_STACK=1 (opt-in)
void launch_decode_stack(const DecodeStackParams& p, unsigned* counters, size_t num_counters,
                         const WorkspaceFn& workspace, const DeviceInfo& dev, cudaStream_t stream);
// VIREO_STACK_PROFILE=1 only: prints the last decode-stack launch's per-phase work and barrier times.
void report_decode_stack_profile(cudaStream_t stream);
void launch_paged_attention_simple(const AttentionParams& p, cudaStream_t stream);
// CUDA-core flash decoding (attention_decode_wide.cu) for the head dims the tensor-core kernels do not
// take: bf16/f16, head_dim % 64 == 0 up to 256 (Qwen3.5 / Qwen3-Next 256, DeepSeek MLA 192). One block
// per (row, KV head, query heads of the group) and key split, lanes reading K/V rows coalesced; decode
// and prefill rows; split partials in `workspace`, merged by a second kernel. launch_paged_attention
// takes it instead of the simple kernel where decode_wide_supported.
bool decode_wide_supported(const AttentionParams& p);
// The key splits (grid.y) the wide kernel plans for p on dev (1: no workspace, no merge).
int decode_wide_splits(const AttentionParams& p, const DeviceInfo& dev);
void launch_paged_attention_decode_wide(const AttentionParams& p, const WorkspaceFn& workspace, const DeviceInfo& dev,
                                        cudaStream_t stream);
// Batch-invariant paged attention (attention_invariant.cu): every query row, prefill or decode, through
// one kernel shape without key splits, key tiles from position 0, so a row's bits depend only on its
// own q and its sequence's keys [0, position]. bf16/f16 with head dim 64/128; else the simple kernel
// (one warp per row, invariant too).
void launch_paged_attention_invariant(const AttentionParams& p, cudaStream_t stream);
// Token selection over logits rows (sampling.cu); scratch for penalised rows ([M, V] fp32) comes
// from `workspace`, only when penalty_tokens or mask_tokens are given.
// batch_invariant: fixed 8192-id chunks (the chunk size otherwise depends on M), so a row's logprobs
// and draws do not depend on the batch.
// logits[row, token] += bias per entry (logit_bias.cu); entries outside the logits are skipped.
void launch_logit_bias(const LogitBiasParams& p, cudaStream_t stream);
void launch_token_bitmask(const TokenBitmaskParams& p, cudaStream_t stream);
void launch_sample(const SampleParams& p, const WorkspaceFn& workspace, cudaStream_t stream,
                   bool batch_invariant = false);

}  // namespace vireo::cuda
