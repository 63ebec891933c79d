// The CUDA backend: one device, one compute stream (plus SideCopies' copy streams), a caching allocator, cuBLASLt GEMMs and the kernels of
// this folder. Activations are BF16 by default (F16 or F32 per --dtype).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/sm_partition.h"
#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/host_staging.h"
#include "backend/cuda/op_gpu_timer.h"
#include "backend/cuda/side_copies.h"
#include "backend/cuda/step_gpu_timer.h"

namespace vireo::cuda {

class CudaBackend final : public Backend {
 public:
  // batch_invariant: Backend::batch_invariant; linears go to the fixed-order GEMM (gemm_invariant.cu),
  // attention to one kernel shape without key splits, sampling to fixed vocabulary chunks.
  explicit CudaBackend(DType activation_dtype, int device = 0, bool batch_invariant = false);
  ~CudaBackend() override;

  DeviceKind kind() const override { return DeviceKind::kCUDA; }
  std::string name() const override { return "cuda"; }
  DType activation_dtype() const override { return act_; }
  bool batch_invariant() const override { return batch_invariant_; }

  Tensor alloc(std::vector<int64_t> shape, DType dtype) override;
  void free(Tensor& t) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  void copy_from_host(const void* src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  int copy_to_host_async(const Tensor& src, void* dst) override;
  void wait_copy(int ticket) override;
  int fence() override;
  void copy_from_host_after(const void* src, Tensor& dst, int after) override;
  void synchronize() override;
  size_t free_memory_bytes() const override;
  size_t total_memory_bytes() const override;
  void tune_gemms(const std::vector<int>& rows) override;

  void embedding(const EmbeddingParams& p) override;
  void rms_norm(const RmsNormParams& p) override;
  void linear(const LinearParams& p) override;
  // FP8 weights with VIREO_FP8_FUSED_LINEAR=3: gate_up unscaled, its scales in down's prologue (run_mlp_fp8;
  // opt-in: 2.5% slower end to end on an H100 in session 41, although the GEMM alone is 12% faster).
  void mlp(const MlpParams& p) override;
  int64_t row_stats_ranges(int64_t m) const override;
  void silu_and_mul(const SiluAndMulParams& p) override;
  void add(const AddParams& p) override;
  void softcap(const SoftcapParams& p) override;
  void gather_rows(const GatherRowsParams& p) override;
  void qkv_prepare(const QkvPrepareParams& p) override;
  void paged_attention(const AttentionParams& p) override;
  void join_attention() override;
  bool attention_pending() const override { return attention_deferred_; }
  // Benches (OverlapBench): the SMs the GEMMs issued from now on are planned for (0: the whole device).
  void set_gemm_sm_target(int n) { gemm_->set_sm_count_target(n); }
  void prepare_attention(const QkvPrepareParams& prep, const AttentionParams& attn) override;
  void moe(const MoeParams& p) override;
  bool supports_mxfp4_moe(DType weight_dtype) const override { return weight_dtype == DType::kBF16; }
  // FP8 linears (fp8_linear.h) with bf16/f16 activations; batch-invariant mode keeps its one fixed-order GEMM.
  // FP8 E4M3 caches: written by qkv_prepare, read by the mma.sync kernels (head dims 64 / 128) or the plain one.
  bool supports_fp8_kv_cache() const override { return true; }
  // FP8 weights at any size: the W8A8 path runs the norm inside the activation's quantization and the
  // residual add in the GEMM's epilogue (fp8_linear.cc), fewer passes than the separate ops.
  // VIREO_FP8_FUSED_LINEAR=0: the separate ops above 4 rows as for BF16 (A/B runs).
  bool prefers_fused_linear(DType weight_dtype, int64_t rows) const override;
  // FP8 weights on the W8A8 GEMM (above the GEMV's rows), with VIREO_FP8_FUSED_LINEAR=2 (default): cuBLASLt has no
  // SiLU epilogue, so gate_up's output takes a pass either way; in down's prologue it is read once into the
  // quantization instead of written as act and read again. The default since session 42 (+0.5-1.0% on an
  // H100, once the quantization read its rows once).
  bool prefers_silu_mul_input(DType weight_dtype, int64_t rows) const override;
  bool supports_fp8_linear() const override {
    return !batch_invariant_ && (act_ == DType::kBF16 || act_ == DType::kF16);
  }
  void short_conv(const ShortConvParams& p) override;
  void gated_delta_net(const GatedDeltaNetParams& p) override;
  void sigmoid_gate(const SigmoidGateParams& p) override;
  void mla_pack(const MlaPackParams& p) override;
  void sample(const SampleParams& p) override;
  void add_logit_bias(const LogitBiasParams& p) override;
  void apply_token_bitmask(const TokenBitmaskParams& p) override;
  bool decode_stack_supported(const DecodeStackParams& p) const override;
  bool offers_decode_stack() const override;
  void decode_stack(const DecodeStackParams& p) override;

  bool supports_graphs() const override { return true; }
  int graph_context_bucket(int num_seqs, int num_heads, int num_kv_heads, int head_dim, int max_len) const override;
  void begin_capture() override;
  int end_capture() override;
  void abort_capture() override;
  void replay_graph(int graph) override;
  void destroy_graph(int graph) override;

  cudaStream_t stream() const { return stream_; }

 private:
  void* workspace(size_t bytes);
  // VIREO_OP_TIMING: the stream's work since the last mark belongs to label (eager ops only).
  void mark(std::string_view label) {
    if (op_timer_->enabled() && !graphs_.capturing()) op_timer_->mark(label, stream_);
  }
  void* side_workspace(size_t bytes);
  const SideLane* side_lane() const;
  // Grows buf (capacity cap) to at least bytes; see workspace().
  void* grow(void*& buf, size_t& cap, size_t bytes);

  DType act_;
  int device_;
  bool batch_invariant_ = false;
  cudaStream_t stream_ = nullptr;
  DeviceInfo info_;
  CudaAllocator alloc_;
  std::unique_ptr<CublasLtGemm> gemm_;
  std::unique_ptr<StepGpuTimer> timer_;
  std::unique_ptr<OpGpuTimer> op_timer_;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  SideLane side_lane_;  // the attention's side stream (launch_paged_attention), its events and scratch
  bool attention_deferred_ = false;  // decode rows left running on side_lane_ (join_attention waits for them)
  std::unique_ptr<SmPartition> decode_part_;  // VIREO_DECODE_SMS: where deferred decode rows run, or null
  void after_attention();
  void* side_ws_ = nullptr;
  size_t side_ws_bytes_ = 0;
  std::unique_ptr<HostStaging> staging_;  // pinned rings for the small copies
  std::unique_ptr<SideCopies> side_;      // their streams, beside stream_ (after staging_)
  unsigned* stack_counters_ = nullptr;  // decode_stack's barrier / split counters, zero between launches
  static constexpr size_t kStackCounters = 4096;
  CudaGraphSet graphs_{alloc_};  // after alloc_: graphs give their scratch back before it goes
};

}  // namespace vireo::cuda
