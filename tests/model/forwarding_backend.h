// ForwardingBackend: a backend that runs every op, and answers every question, with an inner one (the CPU
// backend in tests). Tests derive from it to change one answer, e.g. a preference the model consults.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace vireo::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}

  DeviceKind kind() const override { return in_->kind(); }
  std::string name() const override { return in_->name(); }
  DType activation_dtype() const override { return in_->activation_dtype(); }
  DType weight_dtype(const std::string& c) const override { return in_->weight_dtype(c); }
  bool batch_invariant() const override { return in_->batch_invariant(); }
  Tensor alloc(std::vector<int64_t> shape, DType dtype) override { return in_->alloc(std::move(shape), dtype); }
  void free(Tensor& t) override { in_->free(t); }
  Tensor upload(const Tensor& host, DType dtype) override { return in_->upload(host, dtype); }
  void copy_from_host(const void* src, Tensor& dst) override { in_->copy_from_host(src, dst); }
  void copy_to_host(const Tensor& src, void* dst) override { in_->copy_to_host(src, dst); }
  void synchronize() override { in_->synchronize(); }
  void copy(const Tensor& src, Tensor& dst) override { in_->copy(src, dst); }
  int copy_to_host_async(const Tensor& src, void* dst) override { return in_->copy_to_host_async(src, dst); }
  void wait_copy(int ticket) override { in_->wait_copy(ticket); }
  int fence() override { return in_->fence(); }
  void copy_from_host_after(const void* src, Tensor& dst, int after) override {
    in_->copy_from_host_after(src, dst, after);
  }
  size_t free_memory_bytes() const override { return in_->free_memory_bytes(); }
  size_t total_memory_bytes() const override { return in_->total_memory_bytes(); }
  void embedding(const EmbeddingParams& p) override { in_->embedding(p); }
  void rms_norm(const RmsNormParams& p) override { in_->rms_norm(p); }
  void linear(const LinearParams& p) override { in_->linear(p); }
  int64_t row_stats_ranges(int64_t m) const override { return in_->row_stats_ranges(m); }
  void silu_and_mul(const SiluAndMulParams& p) override { in_->silu_and_mul(p); }
  void add(const AddParams& p) override { in_->add(p); }
  void softcap(const SoftcapParams& p) override { in_->softcap(p); }
  void gather_rows(const GatherRowsParams& p) override { in_->gather_rows(p); }
  void qkv_prepare(const QkvPrepareParams& p) override { in_->qkv_prepare(p); }
  void paged_attention(const AttentionParams& p) override { in_->paged_attention(p); }
  void prepare_attention(const QkvPrepareParams& a, const AttentionParams& b) override { in_->prepare_attention(a, b); }
  bool attention_pending() const override { return in_->attention_pending(); }
  void join_attention() override { in_->join_attention(); }
  bool decode_stack_supported(const DecodeStackParams& p) const override { return in_->decode_stack_supported(p); }
  bool offers_decode_stack() const override { return in_->offers_decode_stack(); }
  void decode_stack(const DecodeStackParams& p) override { in_->decode_stack(p); }
  void moe(const MoeParams& p) override { in_->moe(p); }
  bool supports_mxfp4_moe(DType t) const override { return in_->supports_mxfp4_moe(t); }
  bool supports_packed_linear(DType t) const override { return in_->supports_packed_linear(t); }
  bool supports_fp8_linear() const override { return in_->supports_fp8_linear(); }
  bool prefers_fused_linear(DType t, int64_t rows) const override { return in_->prefers_fused_linear(t, rows); }
  bool prefers_silu_mul_input(DType t, int64_t rows) const override { return in_->prefers_silu_mul_input(t, rows); }
  bool supports_fp8_kv_cache() const override { return in_->supports_fp8_kv_cache(); }
  void mla_pack(const MlaPackParams& p) override { in_->mla_pack(p); }
  void short_conv(const ShortConvParams& p) override { in_->short_conv(p); }
  void gated_delta_net(const GatedDeltaNetParams& p) override { in_->gated_delta_net(p); }
  void sigmoid_gate(const SigmoidGateParams& p) override { in_->sigmoid_gate(p); }
  void sample(const SampleParams& p) override { in_->sample(p); }
  void add_logit_bias(const LogitBiasParams& p) override { in_->add_logit_bias(p); }
  void apply_token_bitmask(const TokenBitmaskParams& p) override { in_->apply_token_bitmask(p); }

 protected:
  std::unique_ptr<Backend> in_;
};

}  // namespace vireo::testing
