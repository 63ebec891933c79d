// The op interface every backend implements (CPU is the reference, CUDA the fast one).
// Models call only these ops; nothing above backend/ includes a device header.
// Ops are asynchronous on devices with streams: results are visible after synchronize()
// or a copy_to_host().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/op_params.h"
#include "core/error.h"
#include "core/tensor.h"

namespace vireo {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  // Activations dtype: F32 on the CPU; BF16 (or F16/F32 per --dtype) on CUDA.
  virtual DType activation_dtype() const = 0;
  // The dtype weights are stored in, given the checkpoint's ("float32", "bfloat16", "float16" as in
  // config.json): the activation dtype, except on the CPU, which keeps BF16 checkpoints in BF16 (its
  // decode GEMV reads BF16 directly: half the bytes of widened F32 weights).
  virtual DType weight_dtype(const std::string& checkpoint_dtype) const {
    (void)checkpoint_dtype;
    return activation_dtype();
  }
  // Batch-invariant mode (--batch-invariant): every op gives each row the same bits whatever the other
  // rows of the call are (and whether a token runs as prefill or decode). Only the CUDA backend has it.
  virtual bool batch_invariant() const { return false; }

  // ---- memory ----
  // Allocates device memory owned by the backend until free(). Contents undefined.
  virtual Tensor alloc(std::vector<int64_t> shape, DType dtype) = 0;
  virtual void free(Tensor& t) = 0;
  // Copies host data (F32/F16/BF16) into a new device tensor of `dtype`, converting if needed.
  // The CPU backend may return a view of `host` when no conversion is needed (mmapped weights).
  virtual Tensor upload(const Tensor& host, DType dtype) = 0;
  virtual void copy_from_host(const void* src, Tensor& dst) = 0;  // dst.nbytes() bytes
  virtual void copy_to_host(const Tensor& src, void* dst) = 0;     // src.nbytes() bytes, waits
  virtual void synchronize() = 0;
  // Device-to-device copy of src.nbytes() bytes into dst, ordered after the ops issued before it.
  virtual void copy(const Tensor& src, Tensor& dst) { (void)src, (void)dst; throw Error(name() + ": copy is not implemented"); }
  // Device-to-host copy that does not wait: dst is written by wait_copy(ticket) (and must stay alive
  // until then). Lets the host issue the next step before this one's results are back (async
  // scheduling). Tickets complete in order. The copy may run beside later ops (CUDA: on a stream of its
  // own), so ops issued after this call must not write src before wait_copy(ticket) has returned.
  // Default: copies at once.
  virtual int copy_to_host_async(const Tensor& src, void* dst) {
    copy_to_host(src, dst);
    return 0;
  }
  virtual void wait_copy(int /*ticket*/) {}
  // A point in the op order: every op issued before this call. For copy_from_host_after.
  virtual int fence() { return 0; }
  // copy_from_host, except that the copy need only wait for the ops issued before fence `after`, not
  // for every op issued so far (CUDA: it runs on a stream of its own, beside the ops issued since);
  // ops issued after this call see the copied data. For a buffer whose last reader is known: the next
  // decode step's metadata is uploaded while the previous step's sampling runs. after <= 0: no
  // earlier point is known (waits for everything). dst must not have been reallocated since the fence.
  virtual void copy_from_host_after(const void* src, Tensor& dst, int after) {
    (void)after;
    copy_from_host(src, dst);
  }
  // Free bytes left on the device (CPU: a large number); used to size the KV cache.
  virtual size_t free_memory_bytes() const = 0;
  // The device's whole memory, 0 where that has no meaning (the CPU); picks vLLM's size-dependent
  // defaults (--max-num-batched-tokens).
  virtual size_t total_memory_bytes() const { return 0; }
  // After the start-up profile step: time the library GEMM configurations of the linears it ran, at each of
  // these row counts (the chunked steps' 64-row buckets, the decode graphs' batch sizes), so none is timed
  // mid-serving or baked into a graph untuned (CUDA with VIREO_GEMM_TUNE=1; else nothing).
  virtual void tune_gemms(const std::vector<int>& rows) { (void)rows; }

  // ---- ops (shapes in op_params.h) ----
  virtual void embedding(const EmbeddingParams& p) = 0;
  virtual void rms_norm(const RmsNormParams& p) = 0;
  virtual void linear(const LinearParams& p) = 0;
  // The gated MLP block (op_params.h). Default (backend_mlp.cc): the two fused linears, SiLU-and-mul on the
  // side prefers_silu_mul_input says.
  virtual void mlp(const MlpParams& p);
  // The number of ranges C for which LinearParams::row_stats come (nearly) free with a linear of M output
  // columns at one row; 0: the caller should not ask (the default: the sample op reads the rows anyway).
  virtual int64_t row_stats_ranges(int64_t m) const {
    (void)m;
    return 0;
  }
  virtual void silu_and_mul(const SiluAndMulParams& p) = 0;
  virtual void add(const AddParams& p) = 0;
  virtual void softcap(const SoftcapParams& p) { (void)p, throw Error(name() + ": softcap is not implemented"); }
  virtual void gather_rows(const GatherRowsParams& p) = 0;
  virtual void qkv_prepare(const QkvPrepareParams& p) = 0;
  virtual void paged_attention(const AttentionParams& p) = 0;
  // Whether the last attention op left its decode rows running (AttentionParams::defer_decode_rows; a backend
  // may decline, e.g. where the step's decode rows are too few to gain); join_attention waits (in stream
  // order) for them.
  virtual bool attention_pending() const { return false; }
  virtual void join_attention() {}
  // qkv_prepare(prep) then paged_attention(attn), attn.q being prep.q_out. A backend may fuse the two
  // (CUDA does for decode-shape steps); fused, prep.q_out need not be written.
  virtual void prepare_attention(const QkvPrepareParams& prep, const AttentionParams& attn) {
    qkv_prepare(prep);
    paged_attention(attn);
  }
  // Every layer of a pre-norm dense decoder on a decode step (DecodeStackParams). The default runs the
  // ops above in the model's order (backend/decode_stack.cc): the reference. decode_stack_supported says
  // whether this backend has a faster form for p (CUDA: one persistent kernel); the model calls
  // decode_stack only then, and its own op sequence otherwise.
  virtual bool decode_stack_supported(const DecodeStackParams& p) const { (void)p; return false; }
  // Whether decode_stack_supported can say yes at all (cheap): the model skips building the layer
  // table on every decode step when it cannot.
  virtual bool offers_decode_stack() const { return false; }
  virtual void decode_stack(const DecodeStackParams& p);
  // Sparse MoE MLP (MoeParams); backends without it refuse MoE models at the first step.
  virtual void moe(const MoeParams& p) { (void)p, throw Error(name() + ": moe is not implemented"); }
  // Whether moe() takes MXFP4 experts (MoeParams gate_up_scales / down_scales) in a model whose other
  // weights are weight_dtype. Where it does not, the loader dequantizes MXFP4 checkpoints to weight_dtype.
  virtual bool supports_mxfp4_moe(DType weight_dtype) const {
    (void)weight_dtype;
    return false;
  }
  // Whether linear(), embedding() and moe() take weights of block type `t` (DType kQ4_0 ... kQ6_K: GGUF
  // weights kept packed). Where they do not, the loader dequantizes such weights to the weight dtype.
  virtual bool supports_packed_linear(DType t) const {
    (void)t;
    return false;
  }
  // Whether linear() takes F8_E4M3 weights with per-row scales (Tensor::row_scale; --quantization fp8).
  // Where it does not, the loader stores such weights dequantized in the weight dtype.
  virtual bool supports_fp8_linear() const { return false; }
  // Whether linears of this weight dtype with `rows` rows should take the fused forms of LinearParams
  // (input_norm prologue, residual epilogue) instead of the model's separate rms_norm / add ops. Every
  // backend computes both; this is only which is faster. Default: decode-sized steps (the GEMV range).
  virtual bool prefers_fused_linear(DType weight_dtype, int64_t rows) const {
    (void)weight_dtype;
    return rows <= 4;
  }
  // Whether a gated MLP of this weight dtype with `rows` rows should run SiLU-and-mul in the down
  // projection's prologue (silu_mul_input, gate_up writing its plain [rows, 2I] output) rather than in
  // gate_up's epilogue (silu_mul_output). Both are computed everywhere; this is only which is faster.
  virtual bool prefers_silu_mul_input(DType weight_dtype, int64_t rows) const {
    (void)weight_dtype, (void)rows;
    return false;
  }
  // Whether qkv_prepare / paged_attention take F8_E4M3 caches (--kv-cache-dtype fp8): the cache holds
  // E4M3 codes of the values (scale 1, saturating at +-448), the attention widens them.
  virtual bool supports_fp8_kv_cache() const { return false; }
  // DeepSeek MLA's q / k_nope / k_pe / v rows packed into the qkv layout (MlaPackParams).
  virtual void mla_pack(const MlaPackParams& p) { (void)p, throw Error(name() + ": mla_pack is not implemented"); }
  // LFM2's gated short convolution over its paged state (ShortConvParams); backends without it refuse
  // LFM2 models at the first step.
  virtual void short_conv(const ShortConvParams& p) { (void)p, throw Error(name() + ": short_conv is not implemented"); }
  // Qwen3-Next / Qwen3.5 Gated DeltaNet mixer over per-sequence state slots (GatedDeltaNetParams).
  virtual void gated_delta_net(const GatedDeltaNetParams& p) { (void)p, throw Error(name() + ": gated_delta_net is not implemented"); }
  virtual void sigmoid_gate(const SigmoidGateParams& p) { (void)p, throw Error(name() + ": sigmoid_gate is not implemented"); }
  virtual void sample(const SampleParams& p) { throw Error(name() + ": sample is not implemented"); }
  virtual void add_logit_bias(const LogitBiasParams& p) { throw Error(name() + ": add_logit_bias is not implemented"); }
  virtual void apply_token_bitmask(const TokenBitmaskParams& p) {
    (void)p, throw Error(name() + ": apply_token_bitmask is not implemented");
  }

  // ---- graphs (CUDA graphs; a backend without them keeps these defaults) ----
  // Ops issued between begin_capture() and end_capture() are recorded, not run; end_capture()
  // returns an id that replay_graph() runs with the same device pointers and host-side shapes.
  // Scratch an op takes while capturing belongs to that graph (freed by destroy_graph), so later
  // eager ops cannot move it. Host<->device copies are not allowed while capturing.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture() { throw Error(name() + ": graphs are not supported"); }
  virtual int end_capture() { throw Error(name() + ": graphs are not supported"); }
  virtual void abort_capture() {}  // after an op threw while capturing
  virtual void replay_graph(int /*graph*/) { throw Error(name() + ": graphs are not supported"); }
  virtual void destroy_graph(int /*graph*/) {}
  // A graph fixes its kernels' grids, so a decode graph plans attention for a context hint, not the
  // step's lengths (the kernels stretch to any length: the hint changes speed, never results). A backend
  // whose decode attention changes shape with short contexts returns the end of the bucket that
  // max_len falls in (steps of one bucket share a graph planned for it), or 0: no preference.
  virtual int graph_context_bucket(int num_seqs, int num_heads, int num_kv_heads, int head_dim, int max_len) const {
    (void)num_seqs, (void)num_heads, (void)num_kv_heads, (void)head_dim, (void)max_len;
    return 0;
  }
};

// "cpu" or "cuda" ("auto": cuda when built and a GPU is present, else cpu).
// `dtype_name` is vLLM's --dtype ("auto", "bfloat16", "float16", "float32"). batch_invariant: see
// Backend::batch_invariant (the CPU backend warns and ignores it).
std::unique_ptr<Backend> create_backend(const std::string& device, const std::string& dtype_name = "auto",
                                        bool batch_invariant = false);
bool cuda_available();

}  // namespace vireo
