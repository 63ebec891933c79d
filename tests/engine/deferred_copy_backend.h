// DeferredCopyBackend: a backend that runs every op on an inner one (the CPU backend) but performs each
// copy_to_host_async only at wait_copy, reading its source then: the latest a device's side-stream
// download may run (Backend::copy_to_host_async). A caller that writes the source again before waiting
// for the copy gets the later data back, so tests of async scheduling catch that hazard on the host.
#pragma once
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace vireo::testing {

class DeferredCopyBackend final : public Backend {
 public:
  explicit DeferredCopyBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}

  int copy_to_host_async(const Tensor& src, void* dst) override {
    pending_.push_back({next_ticket_, src.data, dst, static_cast<size_t>(src.nbytes())});
    return next_ticket_++;
  }
  void wait_copy(int ticket) override {
    while (!pending_.empty() && pending_.front().ticket <= ticket) {
      const Pending& p = pending_.front();
      std::memcpy(p.dst, p.src, p.n);
      pending_.pop_front();
    }
  }
  int fence() override { return ++fences_; }
  void copy_from_host_after(const void* src, Tensor& dst, int after) override {
    if (after > fences_) throw Error("copy_from_host_after: a fence that was never issued");
    in_->copy_from_host(src, dst);
  }
  size_t num_pending_copies() const { return pending_.size(); }

  // ---- the rest: the inner backend's ----
  DeviceKind kind() const override { return in_->kind(); }
  std::string name() const override { return "deferred-" + in_->name(); }
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
  size_t free_memory_bytes() const override { return in_->free_memory_bytes(); }
  size_t total_memory_bytes() const override { return in_->total_memory_bytes(); }
  void embedding(const EmbeddingParams& p) override { in_->embedding(p); }
  void rms_norm(const RmsNormParams& p) override { in_->rms_norm(p); }
  void linear(const LinearParams& p) override { in_->linear(p); }
  void silu_and_mul(const SiluAndMulParams& p) override { in_->silu_and_mul(p); }
  void add(const AddParams& p) override { in_->add(p); }
  void gather_rows(const GatherRowsParams& p) override { in_->gather_rows(p); }
  void qkv_prepare(const QkvPrepareParams& p) override { in_->qkv_prepare(p); }
  void paged_attention(const AttentionParams& p) override { in_->paged_attention(p); }
  void prepare_attention(const QkvPrepareParams& a, const AttentionParams& b) override { in_->prepare_attention(a, b); }
  bool decode_stack_supported(const DecodeStackParams& p) const override { return in_->decode_stack_supported(p); }
  bool offers_decode_stack() const override { return in_->offers_decode_stack(); }
  void decode_stack(const DecodeStackParams& p) override { in_->decode_stack(p); }
  void moe(const MoeParams& p) override { in_->moe(p); }
  void mla_pack(const MlaPackParams& p) override { in_->mla_pack(p); }
  void short_conv(const ShortConvParams& p) override { in_->short_conv(p); }
  void gated_delta_net(const GatedDeltaNetParams& p) override { in_->gated_delta_net(p); }
  void sigmoid_gate(const SigmoidGateParams& p) override { in_->sigmoid_gate(p); }
  void sample(const SampleParams& p) override { in_->sample(p); }
  void add_logit_bias(const LogitBiasParams& p) override { in_->add_logit_bias(p); }
  void apply_token_bitmask(const TokenBitmaskParams& p) override { in_->apply_token_bitmask(p); }

 private:
  struct Pending {
    int ticket;
    const void* src;
    void* dst;
    size_t n;
  };
  std::unique_ptr<Backend> in_;
  std::deque<Pending> pending_;
  int next_ticket_ = 1, fences_ = 0;
};

}  // namespace vireo::testing
