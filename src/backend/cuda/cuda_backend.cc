#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/fp8_linear.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/attention_decode_cluster.h"
#include "backend/cuda/cuda_backend_factory.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/fused_linear.h"
#include "core/log.h"

namespace vireo::cuda {
namespace {
// VIREO_SIDE_COPIES (measurements): which small copies run on SideCopies' streams; bit 1 uploads after a
// fence, bit 2 downloads. Default 3 (both); 0 puts them back on the compute stream.
int side_copy_mode() {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_SIDE_COPIES");
    return v && *v ? std::atoi(v) : 3;
  }();
  return mode;
}

void require_device(const Tensor& t, const char* op, const char* field) {
  if (!t.empty() && t.device != DeviceKind::kCUDA)
    throw Error(std::string(op) + ": " + field + " is not a CUDA tensor");
}

// VIREO_FP8_FUSED_LINEAR: 0 = the separate rms_norm / add ops above 4 rows, as for BF16; 1 = the fused linear
// forms, SiLU-and-mul a pass of its own after gate_up; 2 (the default) = fused, SiLU-and-mul in down's
// quantization; 3 = 2, with gate_up's GEMM unscaled and its scales applied in down's quantization
// (run_mlp_fp8, opt-in: -2.5% in session 41). 2 won once the quantization read its rows once (session 42, an
// H100, Qwen3-8B FP8 offline 256 sequences in one call: 5,520 vs 5,466 tok/s).
int fp8_fused_mode() {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_FP8_FUSED_LINEAR");
    return v == nullptr || v[0] < '0' || v[0] > '3' ? 2 : v[0] - '0';
  }();
  return mode;
}
// "linear 6144x4096 F8_E4M3 rows >1024": an op timing label that tells the projections apart by shape.
std::string linear_label(const LinearParams& p) {
  const int64_t k = p.w.ndim() == 2 ? p.w.dim(1) : 0, m = p.w.ndim() == 2 ? p.w.dim(0) : 0;
  const int64_t in_k = p.silu_mul_input ? 2 * k : k;
  const int64_t n = in_k > 0 ? p.x.numel() / in_k : 0;
  // Rows in buckets, so decode-only and mixed steps land on separate lines without one line a step size.
  const char* rows = n <= 8 ? "<=8" : n <= 256 ? "9-256" : n <= 1024 ? "257-1024" : ">1024";
  return "linear " + std::to_string(m) + "x" + std::to_string(k) + " " + std::string(dtype_name(p.w.dtype)) + " rows " + rows;
}
}  // namespace

CudaBackend::CudaBackend(DType act, int device, bool batch_invariant)
    : act_(act), device_(device), batch_invariant_(batch_invariant) {
  VIREO_CUDA_CHECK(cudaSetDevice(device_));
  VIREO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  cudaDeviceProp prop{};
  VIREO_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  info_.num_sms = prop.multiProcessorCount;
  info_.max_smem_per_block = prop.sharedMemPerBlockOptin;
  timer_ = std::make_unique<StepGpuTimer>();
  op_timer_ = std::make_unique<OpGpuTimer>();
  gemm_ = std::make_unique<CublasLtGemm>();
  staging_ = std::make_unique<HostStaging>();
  side_ = std::make_unique<SideCopies>(*staging_);
  // The side lane at the device's highest stream priority, so its blocks (the prefill rows beside the
  // decode rows, launch_mma) are dispatched first where both wait: without it a prefill grid on part of
  // the SMs lost to the whole chip (session 46). VIREO_SIDE_PRIORITY=0: the default priority.
  if (const char* e = std::getenv("VIREO_SIDE_PRIORITY"); !(e && e[0] == '0')) {
    int least = 0, greatest = 0;
    VIREO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    VIREO_CUDA_CHECK(cudaStreamCreateWithPriority(&side_lane_.stream, cudaStreamNonBlocking, greatest));
  } else {
    VIREO_CUDA_CHECK(cudaStreamCreateWithFlags(&side_lane_.stream, cudaStreamNonBlocking));
  }
  VIREO_CUDA_CHECK(cudaEventCreateWithFlags(&side_lane_.fork, cudaEventDisableTiming));
  VIREO_CUDA_CHECK(cudaEventCreateWithFlags(&side_lane_.join, cudaEventDisableTiming));
  side_lane_.workspace = [this](size_t b) { return side_workspace(b); };
  side_lane_.deferred = &attention_deferred_;
  // VIREO_DECODE_SMS=n: split mixed steps' decode rows on a partition of >= n SMs (a green context).
  if (const char* e = std::getenv("VIREO_DECODE_SMS"); e && std::atoi(e) > 0) {
    int least = 0, greatest = 0;
    VIREO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    decode_part_ = SmPartition::create(device, std::atoi(e), greatest);
    if (decode_part_) {
      side_lane_.decode_stream = decode_part_->stream();
      side_lane_.decode_join = decode_part_->done();
      side_lane_.decode_sms = decode_part_->num_sms();
    }
  }
  if (op_timer_->enabled()) side_lane_.mark = [this](const char* label) { mark(label); };
  VIREO_CUDA_CHECK(cudaMalloc(&stack_counters_, kStackCounters * sizeof(unsigned)));
  VIREO_CUDA_CHECK(cudaMemset(stack_counters_, 0, kStackCounters * sizeof(unsigned)));
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  decode_part_.reset();  // its stream finishes before the side scratch it may read is released
  try {
    report_decode_stack_profile(stream_);  // VIREO_STACK_PROFILE=1 only
  } catch (...) {
  }
  graphs_.abort(stream_);
  timer_.reset();
  op_timer_.reset();
  gemm_.reset();
  if (ws_) alloc_.release(ws_);
  if (side_ws_) alloc_.release(side_ws_);
  if (side_lane_.stream) cudaStreamSynchronize(side_lane_.stream);
  if (side_lane_.fork) cudaEventDestroy(side_lane_.fork);
  if (side_lane_.join) cudaEventDestroy(side_lane_.join);
  if (side_lane_.stream) cudaStreamDestroy(side_lane_.stream);
  side_.reset();
  staging_.reset();
  if (stack_counters_) cudaFree(stack_counters_);
  alloc_.empty_cache();
  if (stream_) cudaStreamDestroy(stream_);
}

Tensor CudaBackend::alloc(std::vector<int64_t> shape, DType dtype) {
  Tensor t(nullptr, dtype, std::move(shape), DeviceKind::kCUDA);
  t.data = alloc_.allocate(t.nbytes());
  return t;
}

void CudaBackend::free(Tensor& t) {
  if (t.data) alloc_.release(t.data);
  t.data = nullptr;
}

Tensor CudaBackend::upload(const Tensor& host, DType dtype) {
  if (host.device != DeviceKind::kCPU) throw Error("upload: source tensor is not on the host");
  Tensor out = alloc(host.shape, dtype);
  if (host.dtype == dtype) {
    VIREO_CUDA_CHECK(cudaMemcpyAsync(out.data, host.data, host.nbytes(), cudaMemcpyHostToDevice, stream_));
  } else {
    if (!is_float_dtype(host.dtype) || !is_float_dtype(dtype))
      throw Error("upload: cannot convert " + std::string(dtype_name(host.dtype)) + " to " +
                  std::string(dtype_name(dtype)));
    void* staging = alloc_.allocate(host.nbytes());
    VIREO_CUDA_CHECK(cudaMemcpyAsync(staging, host.data, host.nbytes(), cudaMemcpyHostToDevice, stream_));
    launch_convert(staging, host.dtype, out.data, dtype, static_cast<size_t>(host.numel()), stream_);
    alloc_.release(staging);  // stream-ordered: a later allocation reuses it after the convert
  }
  VIREO_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may go away after we return
  return out;
}

void CudaBackend::begin_capture() {
  graphs_.begin(stream_);
}
int CudaBackend::end_capture() { return graphs_.end(stream_); }
void CudaBackend::abort_capture() { graphs_.abort(stream_); }
void CudaBackend::replay_graph(int graph) {
  timer_->before_graph(stream_);
  graphs_.replay(graph, stream_);
  timer_->after_graph(stream_);
  mark("decode graph replay");
}
void CudaBackend::destroy_graph(int graph) {
  VIREO_CUDA_CHECK(cudaStreamSynchronize(stream_));  // a replay may still use its scratch
  graphs_.destroy(graph);
}

void CudaBackend::copy_from_host(const void* src, Tensor& dst) {
  if (graphs_.capturing()) throw Error("copy_from_host: not allowed while capturing a graph");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  if (n <= HostStaging::kSlotBytes) {
    // Small metadata (ids, positions, block tables): through pinned memory, truly asynchronous.
    staging_->upload(src, dst.data, n, stream_);
  } else {
    VIREO_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, n, cudaMemcpyHostToDevice, stream_));
    VIREO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
}

void CudaBackend::copy_to_host(const Tensor& src, void* dst) {
  if (graphs_.capturing()) throw Error("copy_to_host: not allowed while capturing a graph");
  if (src.nbytes() == 0) return;
  VIREO_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_));
  VIREO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

int CudaBackend::copy_to_host_async(const Tensor& src, void* dst) {
  if (graphs_.capturing()) throw Error("copy_to_host_async: not allowed while capturing a graph");
  if (src.nbytes() == 0) return 0;
  if (src.nbytes() > HostStaging::kSlotBytes) {
    copy_to_host(src, dst);
    return 0;
  }
  if (!(side_copy_mode() & 2)) return staging_->download(src.data, dst, src.nbytes(), stream_);
  return side_->download(src.data, dst, src.nbytes(), stream_);
}

void CudaBackend::wait_copy(int ticket) { staging_->wait(ticket); }


int CudaBackend::fence() {
  if (graphs_.capturing()) throw Error("fence: not allowed while capturing a graph");
  return side_->fence(stream_);
}

void CudaBackend::copy_from_host_after(const void* src, Tensor& dst, int after) {
  if (graphs_.capturing()) throw Error("copy_from_host_after: not allowed while capturing a graph");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  if (n > HostStaging::kSlotBytes || !(side_copy_mode() & 1)) {
    copy_from_host(src, dst);
    return;
  }
  side_->upload_after(src, dst.data, n, after, stream_);
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.nbytes() == 0) return;
  if (dst.nbytes() < src.nbytes()) throw Error("copy: destination is smaller than the source");
  VIREO_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() {
  join_attention();
  VIREO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  side_->synchronize();
}

size_t CudaBackend::free_memory_bytes() const {
  size_t free_b = 0, total = 0;
  VIREO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return free_b + alloc_.cached_bytes();
}
void CudaBackend::tune_gemms(const std::vector<int>& rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = gemm_->pretune(std::vector<int64_t>(rows.begin(), rows.end()));
  if (n > 0)
    log_info("gemm tune: {} GEMM shapes x row buckets timed in {:.1f} s (VIREO_GEMM_TUNE)", n,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

size_t CudaBackend::total_memory_bytes() const {
  size_t free_b = 0, total = 0;
  VIREO_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return total;
}

// One buffer serves every op in turn (stream order; with PDL each kernel waits for its predecessor
// before touching memory); while capturing, the graphs' shared scratch (CudaGraphSet::scratch).
void* CudaBackend::workspace(size_t bytes) {
  if (graphs_.capturing()) return graphs_.scratch(bytes);
  return grow(ws_, ws_bytes_, bytes);
}
// The side stream's scratch: its kernels run beside the main stream's, so never in ws_ (never captured:
// launch_paged_attention forks only eager steps).
void* CudaBackend::side_workspace(size_t bytes) { return grow(side_ws_, side_ws_bytes_, bytes); }

void* CudaBackend::grow(void*& buf, size_t& cap, size_t bytes) {
  if (bytes > cap) {
    // Grow by half at least, and hand the old buffer back to the driver: serving steps ask for slowly
    // growing sizes (attention partials scale with the step's tokens), and each smaller buffer left in
    // the allocator's exact-size cache was stranded there (Qwen3-8B at 256 sequences filled the GPU's
    // headroom that way until a decode graph's capture could not allocate).
    if (buf) alloc_.release_to_driver(buf);  // synchronizes the device: no stream still reads it
    buf = nullptr;
    const size_t n = std::max(bytes, cap + cap / 2);
    buf = alloc_.allocate(n);
    cap = CudaAllocator::round_size(n);
  }
  return buf;
}

void CudaBackend::embedding(const EmbeddingParams& p) {
  require_device(p.table, "embedding", "table");
  launch_embedding(p, stream_);
  mark("embedding");
}
void CudaBackend::rms_norm(const RmsNormParams& p) {
  require_device(p.x, "rms_norm", "x");
  launch_rms_norm(p, stream_);
  mark("rms_norm");
}
void CudaBackend::linear(const LinearParams& p) {
  require_device(p.w, "linear", "w");
  if (p.out_stride != 0) throw Error("cuda linear: out_stride is not supported (no packed weights on CUDA)");
  // A vocabulary-sized linear (the lm_head): what comes before it (the rows' gather, idle) apart.
  if (op_timer_->enabled() && p.w.ndim() == 2 && p.w.dim(0) >= 65536) mark("(until a vocabulary-sized linear)");
  if (p.row_stats.empty()) {
    run_linear(*gemm_, p, [this](size_t b) { return workspace(b); }, stream_, batch_invariant_,
               op_timer_->enabled() && !graphs_.capturing() ? op_timer_.get() : nullptr);
    if (op_timer_->enabled()) mark(linear_label(p));
    return;
  }
  // The batch-1 lm_head writes the statistics in its epilogue; any other linear gets a pass of its own.
  if (!batch_invariant_ && launch_gemv_row_stats(p, stream_)) return;
  LinearParams q = p;
  q.row_stats = Tensor();
  run_linear(*gemm_, q, [this](size_t b) { return workspace(b); }, stream_, batch_invariant_);
  if (op_timer_->enabled()) mark(linear_label(p));
  launch_row_stats(p, stream_);
  mark("row_stats");
}
// VIREO_ROW_STATS=0: the model asks for none (the sample op then makes its own pass over the logits).
int64_t CudaBackend::row_stats_ranges(int64_t m) const {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_ROW_STATS");
    return e == nullptr || e[0] != '0';
  }();
  return on && !batch_invariant_ && m >= 1 ? gemv_row_stats_ranges() : 0;
}
void CudaBackend::mlp(const MlpParams& p) {
  // Mode 3 above 1,024 rows only: in session 46's serving run (H100) its unscaled gate_up GEMM saved ~15-20
  // us a call on the ~2,048-row steps but lost more on the run's smaller ones (110 ms more in total).
  if (fp8_fused_mode() == 3 && supports_fp8_linear() && p.residual.ndim() == 2 && p.residual.dim(0) > 1024 &&
      mlp_fp8_unscaled_ok(*gemm_, p)) {
    run_mlp_fp8(*gemm_, p, [this](size_t b) { return workspace(b); }, stream_,
                op_timer_->enabled() && !graphs_.capturing() ? op_timer_.get() : nullptr);
    mark("mlp fp8 (gate_up unscaled)");
    return;
  }
  Backend::mlp(p);
}
void CudaBackend::silu_and_mul(const SiluAndMulParams& p) {
  launch_silu_and_mul(p, stream_);
  mark("silu_and_mul");
}
void CudaBackend::moe(const MoeParams& p) {
  require_device(p.gate_up_w, "moe", "gate_up_w");
  launch_moe(p, [this](size_t b) { return workspace(b); }, stream_);
  mark("moe");
}
void CudaBackend::short_conv(const ShortConvParams& p) {
  require_device(p.state, "short_conv", "state");
  launch_short_conv(p, stream_);
}
void CudaBackend::gated_delta_net(const GatedDeltaNetParams& p) {
  require_device(p.ssm_state, "gated_delta_net", "ssm_state");
  launch_gated_delta_net(p, stream_);
}
void CudaBackend::sigmoid_gate(const SigmoidGateParams& p) {
  require_device(p.x, "sigmoid_gate", "x");
  launch_sigmoid_gate(p, stream_);
}
void CudaBackend::mla_pack(const MlaPackParams& p) {
  require_device(p.qkv, "mla_pack", "qkv");
  launch_mla_pack(p, stream_);
}
void CudaBackend::add(const AddParams& p) {
  launch_add(p, stream_);
  mark("add");
}
void CudaBackend::softcap(const SoftcapParams& p) { launch_softcap(p, stream_); }
void CudaBackend::gather_rows(const GatherRowsParams& p) {
  launch_gather_rows(p, stream_);
  mark("gather_rows");
}
void CudaBackend::qkv_prepare(const QkvPrepareParams& p) {
  require_device(p.k_cache, "qkv_prepare", "k_cache");
  launch_qkv_prepare(p, stream_, batch_invariant_);
  mark("qkv_prepare");
}
int CudaBackend::graph_context_bucket(int num_seqs, int num_heads, int num_kv_heads, int head_dim, int max_len) const {
  if (batch_invariant_ || (act_ != DType::kBF16 && act_ != DType::kF16)) return 0;  // no cluster kernel there
  return decode_cluster_context_bucket(num_seqs, num_heads, num_kv_heads, head_dim, max_len, info_);
}

// The attention's side lane for eager steps; none while a graph is captured (cuda_kernels.h, SideLane).
const SideLane* CudaBackend::side_lane() const { return graphs_.capturing() ? nullptr : &side_lane_; }

void CudaBackend::join_attention() {
  if (!attention_deferred_) return;
  const bool part = side_lane_.decode_stream != nullptr;
  VIREO_CUDA_CHECK(cudaStreamWaitEvent(stream_, part ? side_lane_.decode_join : side_lane_.join, 0));
  gemm_->set_sm_count_target(0);
  attention_deferred_ = false;
}
// After an attention op: decode rows left running on the SM partition hold its SMs, so the GEMMs issued
// until the join are planned for the rest (VIREO_GEMM_SM_TARGET=0: planned for the whole device).
void CudaBackend::after_attention() {
  if (!attention_deferred_ || !decode_part_) return;
  static const bool target = [] {
    const char* e = std::getenv("VIREO_GEMM_SM_TARGET");
    return !(e && e[0] == '0');
  }();
  if (target) gemm_->set_sm_count_target(info_.num_sms - decode_part_->num_sms());
}
void CudaBackend::paged_attention(const AttentionParams& p) {
  require_device(p.k_cache, "paged_attention", "k_cache");
  join_attention();  // a caller that never joined the last op's decode rows: they finish first
  // FP8 caches in batch-invariant mode: the plain kernel (fixed order; the invariant kernel reads 2-byte caches).
  if (batch_invariant_ && p.window == 0 && p.softcap == 0.f && p.sinks.empty() && p.k_cache.dtype == p.q.dtype) {
    launch_paged_attention_invariant(p, stream_);
    return;
  }
  // Sliding window, soft-capping, sinks: the plain kernel, invariant as it is (the wide kernel's splits
  // follow the batch; the invariant kernel takes none of these).
  if (batch_invariant_) {
    launch_paged_attention_simple(p, stream_);
    return;
  }
  launch_paged_attention(p, [this](size_t b) { return workspace(b); }, info_, stream_, {}, side_lane());
  after_attention();
  mark(p.max_query_len == 1 ? "paged_attention decode" : "paged_attention mixed");
}
void CudaBackend::prepare_attention(const QkvPrepareParams& prep, const AttentionParams& attn) {
  require_device(attn.k_cache, "prepare_attention", "k_cache");
  join_attention();
  if (batch_invariant_) {  // the fused kernel is the decode shape: keep the two invariant ops
    qkv_prepare(prep);
    paged_attention(attn);
    return;
  }
  // Timed, an FP8 cache's two ops (never fused there) are labelled apart.
  if (op_timer_->enabled() && attn.k_cache.dtype == DType::kF8E4M3 && !graphs_.capturing()) {
    launch_qkv_prepare(prep, stream_);
    mark(attn.max_query_len == 1 ? "qkv_prepare decode" : "qkv_prepare mixed");
    paged_attention(attn);
    return;
  }
  launch_prepare_attention(prep, attn, [this](size_t b) { return workspace(b); }, info_, stream_, {}, side_lane());
  after_attention();
  mark(attn.max_query_len == 1 ? "prepare_attention decode" : "prepare_attention mixed");
}
void CudaBackend::add_logit_bias(const LogitBiasParams& p) {
  require_device(p.logits, "add_logit_bias", "logits");
  launch_logit_bias(p, stream_);
}
void CudaBackend::apply_token_bitmask(const TokenBitmaskParams& p) {
  require_device(p.logits, "apply_token_bitmask", "logits");
  launch_token_bitmask(p, stream_);
}
bool CudaBackend::decode_stack_supported(const DecodeStackParams& p) const {
  // Batch-invariant mode keeps its fixed-order ops (the kernel's key splits follow the batch size).
  return !batch_invariant_ && p.residual.device == DeviceKind::kCUDA && cuda::decode_stack_supported(p, info_);
}
bool CudaBackend::offers_decode_stack() const { return !batch_invariant_ && cuda::decode_stack_enabled(); }
void CudaBackend::decode_stack(const DecodeStackParams& p) {
  if (!decode_stack_supported(p)) {
    Backend::decode_stack(p);  // the op sequence
    return;
  }
  launch_decode_stack(p, stack_counters_, kStackCounters, [this](size_t b) { return workspace(b); }, info_, stream_);
}
void CudaBackend::sample(const SampleParams& p) {
  require_device(p.logits, "sample", "logits");
  if (graphs_.capturing()) {  // sampling inside a graph: the graph's own events time it
    launch_sample(p, [this](size_t b) { return workspace(b); }, stream_, batch_invariant_);
    return;
  }
  mark("(until sample starts: the rows' upload, logit bias / bitmask)");
  timer_->before_sample(stream_);
  launch_sample(p, [this](size_t b) { return workspace(b); }, stream_, batch_invariant_);
  timer_->after_sample(stream_);
  mark("sample");
}

bool CudaBackend::prefers_fused_linear(DType weight_dtype, int64_t rows) const {
  return rows <= 4 || (fp8_fused_mode() > 0 && weight_dtype == DType::kF8E4M3 && supports_fp8_linear());
}

bool CudaBackend::prefers_silu_mul_input(DType weight_dtype, int64_t rows) const {
  return fp8_fused_mode() >= 2 && weight_dtype == DType::kF8E4M3 && supports_fp8_linear() && rows > kFp8GemvMaxRows;
}

}  // namespace vireo::cuda

namespace vireo {

std::unique_ptr<Backend> make_cuda_backend(const std::string& dtype_name, bool batch_invariant) {
  DType act = DType::kBF16;
  if (dtype_name != "auto" && !dtype_name.empty()) {
    act = parse_dtype(dtype_name);
    if (!cuda::is_float_dtype(act)) throw Error("--dtype " + dtype_name + ": not a float dtype");
  }
  if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA GPU is visible");
  return std::make_unique<cuda::CudaBackend>(act, 0, batch_invariant);
}

}  // namespace vireo
