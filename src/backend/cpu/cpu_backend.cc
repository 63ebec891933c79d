// The CPU reference backend: F32 activations, host memory, ops in cpu_ops*.cc.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_range_stats.h"
#include "backend/cpu/cpu_sampling.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/log.h"

namespace vireo {
namespace {

class CpuBackend final : public Backend {
 public:
  ~CpuBackend() override {
    for (void* p : owned_) std::free(p);
  }

  DeviceKind kind() const override { return DeviceKind::kCPU; }
  std::string name() const override { return "cpu"; }
  explicit CpuBackend(std::string dtype_name) : dtype_name_(std::move(dtype_name)) {}

  DType activation_dtype() const override { return DType::kF32; }
  // BF16 weights stay BF16 (--dtype auto on a BF16 checkpoint, or --dtype bfloat16): the BF16 GEMV reads
  // them in place (mmapped safetensors need no copy at all). F16 is widened to F32: there is no F16 GEMV.
  DType weight_dtype(const std::string& checkpoint_dtype) const override {
    if (dtype_name_ == "bfloat16" || (dtype_name_ == "auto" && checkpoint_dtype == "bfloat16")) return DType::kBF16;
    return DType::kF32;
  }

  Tensor alloc(std::vector<int64_t> shape, DType dtype) override {
    Tensor t(nullptr, dtype, std::move(shape), DeviceKind::kCPU);
    for (auto s : t.shape)
      if (s < 0) throw Error("cpu alloc: negative dimension in " + t.shape_str());
    // 64-byte aligned, never a null pointer (empty() means "absent" for optional tensors).
    // Big buffers (weights, KV cache) get 2 MiB alignment and transparent huge pages: loading
    // a model otherwise spends seconds in 4 KiB page faults.
    const bool huge = t.nbytes() >= (size_t{4} << 20);
    const size_t align = huge ? (size_t{2} << 20) : 64;
    const size_t bytes = (std::max<size_t>(t.nbytes(), 1) + align - 1) / align * align;
    t.data = std::aligned_alloc(align, bytes);
    if (!t.data) throw Error("cpu alloc: out of memory allocating " + std::to_string(bytes) + " bytes");
    if (huge) ::madvise(t.data, bytes, MADV_HUGEPAGE);
    std::lock_guard<std::mutex> lock(mu_);
    owned_.insert(t.data);
    return t;
  }

  void free(Tensor& t) override {
    if (!t.data) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Views handed out by upload() are not ours to free.
      if (owned_.erase(t.data) == 0) {
        t.data = nullptr;
        return;
      }
    }
    std::free(t.data);
    t.data = nullptr;
  }

  Tensor upload(const Tensor& host, DType dtype) override {
    if (host.dtype == dtype) return host;  // no conversion: share the host memory (e.g. mmapped weights)
    Tensor t = alloc(host.shape, dtype);
    const int64_t n = host.numel();
    if (dtype == DType::kF32) {
      auto* dst = t.ptr<float>();
      const size_t es = dtype_size(host.dtype);
      pool_.parallel_for(n, [&](int64_t b, int64_t e) {
        convert_to_f32(static_cast<const char*>(host.data) + b * es, host.dtype, dst + b, e - b);
      }, 1 << 16);
    } else if (dtype == DType::kBF16 || dtype == DType::kF16) {
      pool_.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) cpu::store_elem(t.data, dtype, i, cpu::load_elem(host.data, host.dtype, i));
      }, 1 << 16);
    } else {
      free(t);
      throw Error("cpu upload: cannot convert " + std::string(dtype_name(host.dtype)) + " to " +
                  std::string(dtype_name(dtype)));
    }
    return t;
  }

  void copy_from_host(const void* src, Tensor& dst) override { std::memcpy(dst.data, src, dst.nbytes()); }
  void copy_to_host(const Tensor& src, void* dst) override { std::memcpy(dst, src.data, src.nbytes()); }
  void copy(const Tensor& src, Tensor& dst) override { std::memcpy(dst.data, src.data, src.nbytes()); }
  void synchronize() override {}
  size_t free_memory_bytes() const override { return size_t{1} << 40; }

  void embedding(const EmbeddingParams& p) override { cpu::embedding(pool_, p); }
  void rms_norm(const RmsNormParams& p) override { cpu::rms_norm(pool_, p); }
  void linear(const LinearParams& p) override {
    cpu::linear_fused(pool_, p);
    if (!p.row_stats.empty()) cpu::linear_row_stats(p);
  }
  void silu_and_mul(const SiluAndMulParams& p) override { cpu::silu_and_mul(pool_, p); }
  void add(const AddParams& p) override { cpu::add(pool_, p); }
  void softcap(const SoftcapParams& p) override { cpu::softcap(pool_, p); }
  void moe(const MoeParams& p) override { cpu::moe(pool_, p); }
  bool supports_mxfp4_moe(DType weight_dtype) const override { return true; }  // cpu_mxfp4.cc, any dtype
  bool supports_packed_linear(DType t) const override { return dtype_is_blocked(t); }  // cpu_linear_blocks.cc
  bool supports_fp8_linear() const override { return true; }
  bool supports_fp8_kv_cache() const override { return true; }  // F8_E4M3 caches widened in the attention  // cpu_linear_fp8.cc: codes kept, half BF16's bytes
  void short_conv(const ShortConvParams& p) override { cpu::short_conv(pool_, p); }
  void gated_delta_net(const GatedDeltaNetParams& p) override { cpu::gated_delta_net(pool_, p); }
  void sigmoid_gate(const SigmoidGateParams& p) override { cpu::sigmoid_gate(pool_, p); }
  void mla_pack(const MlaPackParams& p) override { cpu::mla_pack(pool_, p); }
  void gather_rows(const GatherRowsParams& p) override { cpu::gather_rows(pool_, p); }
  void qkv_prepare(const QkvPrepareParams& p) override { cpu::qkv_prepare(pool_, p); }
  void paged_attention(const AttentionParams& p) override { cpu::paged_attention(pool_, p); }
  void sample(const SampleParams& p) override { cpu::sample(pool_, p); }
  void add_logit_bias(const LogitBiasParams& p) override { cpu::add_logit_bias(p); }
  void apply_token_bitmask(const TokenBitmaskParams& p) override { cpu::apply_token_bitmask(p); }

 private:
  std::string dtype_name_;  // --dtype as given
  ThreadPool pool_;
  std::mutex mu_;
  std::unordered_set<void*> owned_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const std::string& dtype_name) {
  // Activations are always F32 on the CPU; --dtype only changes how weights are stored (weight_dtype).
  if (dtype_name != "auto" && dtype_name != "float32" && dtype_name != "float" && dtype_name != "bfloat16" &&
      dtype_name != "float16" && dtype_name != "half")
    throw Error("--dtype: unknown value '" + dtype_name + "' (expected auto, bfloat16, float16 or float32)");
  return std::make_unique<CpuBackend>(dtype_name);
}

}  // namespace vireo
