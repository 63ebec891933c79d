// The persistent decode-stack kernel (decode_stack.h): every layer of a dense pre-norm decoder for a
// decode step in one launch. Per layer five phases, each ended by a grid-wide barrier:
//   qkv     x' = rmsnorm(h) * input_norm (every block, into shared memory); qkv = x' Wqkv^T + b
//   attn    q/k norm + RoPE, k/v into the cache, flash decoding (decode_stack_attention.cuh)
//   o       h += round(attn Wo^T)
//   gate_up x' = rmsnorm(h) * post_norm; act = silu(round(x' Wg^T)) * round(x' Wu^T)
//   down    h += round(act Wd^T)
// Each block owns the same rows of every matrix in every layer; its producer warp streams them through
// the ring while the consumers wait at barriers, so HBM keeps streaming across phase and layer
// boundaries where separate kernels drain and relaunch (docs/cuda_kernels.md, session 10).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/cuda_common.h"
#include "backend/decode_stack_qkv.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_stack_attention.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every consumer thread of every block: arrive (a release reduction: no round trip), then wait until
// `target` arrivals (G per barrier). stamp: null or this block's (arrival, release) slots.
__device__ __forceinline__ void grid_barrier(unsigned* ctr, unsigned target, unsigned long long* stamp) {
  consumers_sync();
  if (threadIdx.x == 0) {
    if (stamp) stamp[0] = global_ns();
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(ctr) : "memory");
    while (ld_acquire(ctr) < target) {
    }
    if (stamp) stamp[1] = global_ns();
  }
  consumers_sync();
}

struct StackSmem {
  int64_t ring, xs, attn, bars, total;
};

__host__ __device__ inline StackSmem stack_smem(int stages, int nr, int64_t kmax, int r, int d, int es) {
  StackSmem s{};
  s.ring = 0;
  s.xs = int64_t{stages} * kStackStageBytes;
  s.attn = s.xs + (int64_t{nr} * kmax * es + 127) / 128 * 128;
  s.bars = s.attn + (stack_attn_floats(r, d) * 4 + 127) / 128 * 128;
  s.total = s.bars + 2 * int64_t{stages} * 8 + 16;  // + the attention gate word
  return s;
}

template <typename T, int NR, int kE>
__global__ void __launch_bounds__(kStackThreads, 1) decode_stack_kernel(const __grid_constant__ StackArgs a) {
  extern __shared__ __align__(128) char smem[];
  constexpr int es = sizeof(T), kN = Vec<T>::kN;
  const int64_t hd0 = int64_t{a.H} * a.D, kmax0 = a.hidden > hd0 ? a.hidden : hd0;
  const int64_t kmax = kmax0 > a.inter ? kmax0 : a.inter;
  const StackSmem lay = stack_smem(a.stages, NR, kmax, a.H / a.Hkv, a.D, es);
  char* ring = smem + lay.ring;
  uint4* xs = reinterpret_cast<uint4*>(smem + lay.xs);
  float* attn_sm = reinterpret_cast<float*>(smem + lay.attn);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + lay.bars);
  uint64_t* empty = full + a.stages;
  volatile int* gate = reinterpret_cast<volatile int*>(empty + a.stages);
  const int xstride = static_cast<int>(kmax / kN);
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      mbar_init_count(&full[s], 1);
      mbar_init_count(&empty[s], kStackConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    *gate = 0;
  }
  for (int64_t i = threadIdx.x; i < int64_t{NR} * xstride; i += kStackThreads) xs[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  if (threadIdx.x / 32 == kStackConsumerWarps) {  // the producer warp: weights only, no PDL wait needed
    if (threadIdx.x % 32 == 0) stack_producer<T>(a, ring, full, empty, gate);
    return;
  }

  pdl_wait();  // the residual (embeddings) comes from the previous kernel
  // Kernel parameters are read through a generic pointer: everything used in loops goes to registers once.
  unsigned* bar = a.counters;
  const unsigned G = gridDim.x;
  const int T_ = a.T, stages = a.stages, num_layers = a.num_layers;
  const int64_t hidden = a.hidden, inter = a.inter;
  const float eps = a.eps;
  T* const res = static_cast<T*>(a.residual);
  T* const qkv_out = static_cast<T*>(a.qkv);
  T* const act_out = static_cast<T*>(a.act);
  const T* const attn_in = static_cast<const T*>(a.attn);
  unsigned long long* const prof = a.prof;
  unsigned n_bar = 0;
  RingPos rp;
  const int64_t qkv_w = int64_t{a.H + 2 * a.Hkv} * a.D, hd = int64_t{a.H} * a.D;
  const int lane = threadIdx.x % 32;
  auto add_residual = [&](int64_t unit, float (&acc)[2][NR]) {  // h += round(dot), the add op's rounding
#pragma unroll
    for (int n = 0; n < NR; ++n)
      if (lane == n && n < T_) {
        T* at = res + n * hidden + unit;
        *at = from_f<T>(to_f(__ldcg(at)) + to_f(from_f<T>(acc[0][n])));
      }
  };
  for (int l = 0; l < num_layers; ++l) {
    const StackLayerArgs L = a.layers[l];
    unsigned long long* st = prof ? prof + (int64_t{blockIdx.x} * num_layers + l) * kStackStamps : nullptr;
    if (st && threadIdx.x == 0) st[0] = global_ns();
    auto stamp = [&](int phase) { return st ? st + 1 + 2 * phase : nullptr; };
    const T* const qkv_b = static_cast<const T*>(L.qkv_b);
    stack_stage_norm<T, NR>(res, static_cast<const T*>(L.input_norm), T_, hidden, eps, xs, xstride, attn_sm);
    stack_gemv<T, NR>(stack_job(a, l, kQkvPhase, es), xs, xstride, ring, full, empty, rp, stages,
                      [&](int64_t unit, float (&acc)[2][NR]) {
                        const float b = qkv_b ? to_f(qkv_b[unit]) : 0.f;
#pragma unroll
                        for (int n = 0; n < NR; ++n)
                          if (lane == n && n < T_) qkv_out[n * qkv_w + unit] = from_f<T>(acc[0][n] + b);
                      });
    grid_barrier(bar, ++n_bar * G, stamp(0));
    stack_attention<T, kE>(a, L, attn_sm, st ? st + 11 : nullptr);
    grid_barrier(bar, ++n_bar * G, stamp(1));
    if (threadIdx.x == 0) *gate = l + 1;  // the producer may stream this layer's o_proj on
    stack_stage_copy<T>(attn_in, T_, hd, xs, xstride);
    stack_gemv<T, NR>(stack_job(a, l, kOPhase, es), xs, xstride, ring, full, empty, rp, stages, add_residual);
    grid_barrier(bar, ++n_bar * G, stamp(2));
    stack_stage_norm<T, NR>(res, static_cast<const T*>(L.post_norm), T_, hidden, eps, xs, xstride, attn_sm);
    stack_gemv<T, NR>(stack_job(a, l, kGateUpPhase, es), xs, xstride, ring, full, empty, rp, stages,
                      [&](int64_t unit, float (&acc)[2][NR]) {
#pragma unroll
                        for (int n = 0; n < NR; ++n)
                          if (lane == n && n < T_) act_out[n * inter + unit] = act_mul_round<T>(acc[0][n], acc[1][n]);
                      });
    grid_barrier(bar, ++n_bar * G, stamp(3));
    stack_stage_copy<T>(act_out, T_, inter, xs, xstride);
    if (l == num_layers - 1) pdl_trigger();
    stack_gemv<T, NR>(stack_job(a, l, kDownPhase, es), xs, xstride, ring, full, empty, rp, stages, add_residual);
    if (l + 1 < num_layers) {
      grid_barrier(bar, ++n_bar * G, stamp(4));
    } else if (st) {
      consumers_sync();
      if (threadIdx.x == 0) st[9] = st[10] = global_ns();
    }
  }
  // The last block out zeroes the barrier for the next launch (every block has passed every barrier).
  consumers_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&bar[1], 1u) == G - 1) {
      bar[0] = 0;
      bar[1] = 0;
      __threadfence();
    }
  }
}

bool is_act(const Tensor& t, DType dt, int64_t numel) { return t.dtype == dt && t.numel() == numel && t.data != nullptr; }

// The plan for p on dev, or false when the kernel does not take p (the model then runs its ops).
struct StackPlan {
  int nr = 0, stages = 0, splits = 1;
  int64_t smem = 0;
};

bool plan_stack(const DecodeStackParams& p, const DeviceInfo& dev, StackPlan* plan) {
  if (!decode_stack_enabled() || p.layers.empty() || static_cast<int>(p.layers.size()) > kStackMaxLayers) return false;
  const DType dt = p.residual.dtype;
  if (dt != DType::kBF16 || p.residual.ndim() != 2) return false;
  const int64_t T = p.residual.dim(0), hidden = p.residual.dim(1);
  const int H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  if (T < 1 || T > kStackMaxTokens || H <= 0 || Hkv <= 0 || H % Hkv != 0 || H / Hkv > kStackMaxGqa) return false;
  if (D != 64 && D != 128) return false;
  if (p.qk_norm == QkNorm::kFullWidth || p.rotary_dim < 0 || p.rotary_dim > D || p.rotary_dim % 2 != 0) return false;
  if (p.rotary_dim > 0 && (p.rope_cos_sin.dtype != DType::kF32 || p.rope_cos_sin.ndim() != 2 ||
                           p.rope_cos_sin.dim(1) != p.rotary_dim))
    return false;
  if (p.seq_lens.numel() != T || p.positions.numel() != T || p.slot_mapping.numel() != T) return false;
  if (p.block_tables.numel() != T * p.max_blocks_per_seq || p.block_size <= 0) return false;
  const int64_t inter = p.layers[0].gate_up_w.numel() / 2 / (hidden > 0 ? hidden : 1);
  const int64_t qkv_rows = int64_t{H + 2 * Hkv} * D;
  if (hidden % 8 != 0 || inter % 8 != 0 || inter <= 0) return false;
  for (const DecodeStackLayer& l : p.layers) {
    if (!is_act(l.input_norm, dt, hidden) || !is_act(l.post_attn_norm, dt, hidden)) return false;
    if (!is_act(l.qkv_w, dt, qkv_rows * hidden) || !is_act(l.o_w, dt, hidden * H * D)) return false;
    if (!is_act(l.gate_up_w, dt, 2 * inter * hidden) || !is_act(l.down_w, dt, hidden * inter)) return false;
    if (!l.qkv_b.empty() && !is_act(l.qkv_b, dt, qkv_rows)) return false;
    if (p.qk_norm != QkNorm::kNone && (l.q_norm.numel() != D || l.k_norm.numel() != D)) return false;
    if (l.k_cache.dtype != dt || l.v_cache.dtype != dt || l.k_cache.data == nullptr || l.v_cache.data == nullptr)
      return false;
  }
  plan->nr = T == 1 ? 1 : T == 2 ? 2 : T <= 4 ? 4 : 8;
  const int64_t kmax = std::max({hidden, int64_t{H} * D, inter});
  const int es = 2, r = H / Hkv;
  const StackSmem base = stack_smem(0, plan->nr, kmax, r, D, es);
  const int64_t room = static_cast<int64_t>(dev.max_smem_per_block) - base.total;
  plan->stages = static_cast<int>(std::min<int64_t>(8, room / (kStackStageBytes + 16)));
  if (const char* e = std::getenv("VIREO_STACK_STAGES")) plan->stages = std::min(plan->stages, std::atoi(e));  // tuning
  if (plan->stages < 3) return false;
  plan->smem = stack_smem(plan->stages, plan->nr, kmax, r, D, es).total;
  plan->splits = std::max<int>(1, std::min<int>(32, dev.num_sms / static_cast<int>(T * Hkv)));
  if (const char* e = std::getenv("VIREO_STACK_SPLITS")) plan->splits = std::max(1, std::min(64, std::atoi(e)));  // tuning
  return true;
}

template <int NR, int kE>
void launch_typed(const StackArgs& a, const StackPlan& plan, const DeviceInfo& dev, cudaStream_t stream) {
  auto kernel = decode_stack_kernel<__nv_bfloat16, NR, kE>;
  static const bool attr = [&] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(dev.max_smem_per_block)));
    return true;
  }();
  (void)attr;
  // One block an SM, all resident at once (the grid barriers need it): one wave of num_sms blocks.
  launch_pdl(kernel, dim3(static_cast<unsigned>(dev.num_sms)), dim3(kStackThreads), static_cast<size_t>(plan.smem),
             stream, a);
}

// VIREO_STACK_PROFILE=1: every launch records %globaltimer stamps (decode_stack.h, kStackStamps) into
// one device buffer (diagnostics only: allocated at the first eager launch, before any graph capture);
// report_decode_stack_profile prints the last launch's phase and barrier times.
struct StackProfile {
  unsigned long long* buf = nullptr;
  size_t n = 0;
  int blocks = 0, layers = 0;
};
StackProfile& stack_profile() {
  static StackProfile p;
  return p;
}
bool profile_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_STACK_PROFILE");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

}  // namespace

void report_decode_stack_profile(cudaStream_t stream) {
  StackProfile& pr = stack_profile();
  if (pr.buf == nullptr) return;
  VIREO_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned long long> h(pr.n);
  VIREO_CUDA_CHECK(cudaMemcpy(h.data(), pr.buf, pr.n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  // Per phase, averaged over layers 1..L-1: the slowest block's work (its arrival minus its release from
  // the previous barrier) and the barrier (first release minus last arrival).
  const char* names[5] = {"qkv", "attention", "o_proj", "gate_up", "down"};
  double work[5] = {}, wait[5] = {}, work_med[5] = {};
  int used = 0;
  for (int l = 1; l < pr.layers; ++l, ++used)
    for (int ph = 0; ph < 5; ++ph) {
      std::vector<double> w;
      double last_arrive = 0, first_release = 1e30;
      for (int b = 0; b < pr.blocks; ++b) {
        const unsigned long long* st = h.data() + (size_t(b) * pr.layers + l) * kStackStamps;
        const double begin = ph == 0 ? st[0] : st[2 * ph], arrive = st[1 + 2 * ph], release = st[2 + 2 * ph];
        w.push_back(arrive - begin);
        last_arrive = std::max(last_arrive, arrive);
        first_release = std::min(first_release, release);
      }
      std::sort(w.begin(), w.end());
      work[ph] += w.back();
      work_med[ph] += w[w.size() / 2];
      wait[ph] += first_release - last_arrive;
    }
  if (used == 0) return;
  // The attention phase's parts, median over the blocks that had an item (stamps 11..13).
  double sub[3] = {};
  for (int l = 1; l < pr.layers; ++l) {
    std::vector<double> d[3];
    for (int b = 0; b < pr.blocks; ++b) {
      const unsigned long long* st = h.data() + (size_t(b) * pr.layers + l) * kStackStamps;
      if (st[11] == 0 || st[11] < st[2]) continue;
      d[0].push_back(double(st[11]) - st[2]);
      if (st[12] >= st[11]) d[1].push_back(double(st[12]) - st[11]);
      if (st[13] >= st[12] && st[12] > 0) d[2].push_back(double(st[13]) - st[12]);
    }
    for (int k = 0; k < 3; ++k)
      if (!d[k].empty()) {
        std::sort(d[k].begin(), d[k].end());
        sub[k] += k == 2 ? d[k].back() : d[k][d[k].size() / 2];
      }
  }
  double prep = 0, allw = 0;
  for (int l = 1; l < pr.layers; ++l) {
    std::vector<double> a0, a1;
    for (int b = 0; b < pr.blocks; ++b) {
      const unsigned long long* st = h.data() + (size_t(b) * pr.layers + l) * kStackStamps;
      if (st[14] == 0 || st[14] < st[2]) continue;
      a0.push_back(double(st[14]) - st[2]);
      if (st[15] >= st[14]) a1.push_back(double(st[15]) - st[14]);
    }
    std::sort(a0.begin(), a0.end());
    std::sort(a1.begin(), a1.end());
    if (!a0.empty()) prep += a0[a0.size() / 2];
    if (!a1.empty()) allw += a1[a1.size() / 2];
  }
  std::fprintf(stderr, "decode_stack profile: attention: prepare %.2f us, all warps' pages %.2f us (medians)\n",
               prep / used / 1e3, allw / used / 1e3);
  std::fprintf(stderr,
               "decode_stack profile: attention parts: prepare + pages %.2f us (median), partial + arrival %.2f us "
               "(median), merge %.2f us (max)\n",
               sub[0] / used / 1e3, sub[1] / used / 1e3, sub[2] / used / 1e3);
  double total = 0;
  for (int ph = 0; ph < 5; ++ph) {
    std::fprintf(stderr, "decode_stack profile: %-9s work max %7.2f us (median %7.2f), barrier %6.2f us\n", names[ph],
                 work[ph] / used / 1e3, work_med[ph] / used / 1e3, wait[ph] / used / 1e3);
    total += (work[ph] + wait[ph]) / used / 1e3;
  }
  std::fprintf(stderr, "decode_stack profile: ~%.2f us a layer, %d blocks, %d layers\n", total, pr.blocks, pr.layers);
}

bool decode_stack_enabled() {
  // Opt-in (VIREO_DECODE_STACK=1) until it beats the op-by-op path end to end (docs/cuda_kernels.md).
  static const bool on = [] {
    const char* e = std::getenv("VIREO_DECODE_STACK");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

bool decode_stack_supported(const DecodeStackParams& p, const DeviceInfo& dev) {
  StackPlan plan;
  return plan_stack(p, dev, &plan);
}

void launch_decode_stack(const DecodeStackParams& p, unsigned* counters, size_t num_counters,
                         const WorkspaceFn& workspace, const DeviceInfo& dev, cudaStream_t stream) {
  StackPlan plan;
  if (!plan_stack(p, dev, &plan)) throw Error("decode_stack: this step or model is not supported by the kernel");
  const int T = static_cast<int>(p.residual.dim(0)), H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_dim;
  if (2 + static_cast<size_t>(T) * Hkv > num_counters) throw Error("decode_stack: too many KV heads");
  StackArgs a{};
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const DecodeStackLayer& l = p.layers[i];
    a.layers[i] = {l.input_norm.data, l.qkv_w.data, l.qkv_b.data, l.q_norm.data, l.k_norm.data, l.o_w.data,
                   l.post_attn_norm.data, l.gate_up_w.data, l.down_w.data, l.k_cache.data, l.v_cache.data};
  }
  a.num_layers = static_cast<int>(p.layers.size());
  a.residual = p.residual.data;
  a.qkv = p.qkv.data;
  a.attn = p.attn.data;
  a.act = p.act.data;
  a.counters = counters;
  a.seq_lens = p.seq_lens.ptr<int>();
  a.block_tables = p.block_tables.ptr<int>();
  a.qa = make_qkv_args(decode_stack_qkv_params(p, p.layers[0]));  // checks the q/k path's shapes and dtypes
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.block_size = p.block_size;
  a.T = T;
  a.hidden = static_cast<int>(p.residual.dim(1));
  a.inter = static_cast<int>(p.layers[0].gate_up_w.dim(0) / 2);
  a.H = H;
  a.Hkv = Hkv;
  a.D = D;
  a.J = plan.splits;
  a.eps = p.norm_eps;
  a.scale = p.scale;
  a.stages = plan.stages;
  a.gate_attention = [] {  // VIREO_STACK_GATE=1 holds the weights back during attention (measured slower)
    const char* e = std::getenv("VIREO_STACK_GATE");
    return e != nullptr && e[0] == '1';
  }();
  if (profile_enabled()) {
    StackProfile& pr = stack_profile();
    const size_t n = size_t(dev.num_sms) * p.layers.size() * kStackStamps;
    if (pr.buf == nullptr) {
      VIREO_CUDA_CHECK(cudaMalloc(&pr.buf, n * sizeof(unsigned long long)));
      VIREO_CUDA_CHECK(cudaMemset(pr.buf, 0, n * sizeof(unsigned long long)));
      pr.n = n;
    }
    if (n <= pr.n) {
      a.prof = pr.buf;
      pr.blocks = dev.num_sms;
      pr.layers = static_cast<int>(p.layers.size());
    }
  }
  if (a.J > 1) a.part = static_cast<float*>(workspace(static_cast<size_t>(T) * H * a.J * (2 + D) * sizeof(float)));
  const int ke = D / 32;
  switch (plan.nr) {
    case 1: ke == 2 ? launch_typed<1, 2>(a, plan, dev, stream) : launch_typed<1, 4>(a, plan, dev, stream); break;
    case 2: ke == 2 ? launch_typed<2, 2>(a, plan, dev, stream) : launch_typed<2, 4>(a, plan, dev, stream); break;
    case 4: ke == 2 ? launch_typed<4, 2>(a, plan, dev, stream) : launch_typed<4, 4>(a, plan, dev, stream); break;
    default: ke == 2 ? launch_typed<8, 2>(a, plan, dev, stream) : launch_typed<8, 4>(a, plan, dev, stream); break;
  }
  check_launch("decode_stack");
}

}  // namespace vireo::cuda
