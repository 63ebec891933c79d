// One-pass decode GEMV for the small matrices of latency-bound models (Qwen3-0.6B: qkv, o_proj,
// gate_up and down are 4-13 MB): every warp owns R adjacent rows and loads ALL of its weights
// (R x kVpl 16-byte vectors a lane, at most kMaxVecs) into registers before the PDL wait, so the whole
// weight stream overlaps the previous kernel; after the wait the block stages x' (gemv_common.cuh),
// does the FMAs and writes. One wave of at most 2 blocks an SM (1 where the rows allow it, leaving
// room for the next kernel's blocks to start early and issue their loads in turn).
// The grid-stride kernel in gemv.cu takes matrices whose rows do not fit in one wave of registers.
// kBulk (the default; VIREO_GEMV_BULK=0: registers): the same work, but lane 0 of each warp copies the
// warp's rows into shared memory with cp.async.bulk (one mbarrier a warp) before the wait, and lanes
// read them back after it. Bulk copies are not held to the per-SM cap on outstanding L1-tracked loads
// that bounded the cp.async gathers of the prefill attention, and the block needs far fewer registers.
// H200 (docs/cuda_kernels.md run 10): 0.6B decode graph 835 -> 813 us a step; in isolation, with the
// weights L2-resident across repeats, each GEMV is 0.1-0.4 us slower, so the gain is the HBM stream.
#pragma once
#include <cstdlib>

#include "backend/cuda/gemv_common.cuh"

namespace vireo::cuda {
namespace {

constexpr int kMaxVecs = 16;  // 16-byte weight vectors held per lane (64 registers)

// kVpl: vectors a lane holds per row (K = 32 * kVpl * 16 / sizeof(T)). A warp owns units_per_warp
// units: rows, or with silu_out (gate, up) row pairs held as adjacent rows (even r: gate row, odd r: the
// up row of the same index); rows per warp <= kMaxVecs / kVpl.
template <typename T, int NR, int kVpl, bool kBulk, int kForm = kFormAny>
__global__ void __launch_bounds__(kThreads) gemv_resident_kernel(GemvArgs a, int units_per_warp) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr int kMaxRows = kMaxVecs / kVpl;
  constexpr int kPro = form_prologue(kForm);
  extern __shared__ uint4 xs[];  // x' [NR, K]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nvec = 32 * kVpl, m = a.m;
  const bool silu_out = kForm == kFormAny ? a.silu_out : kForm == kFormNormSilu;
  const int rpu = silu_out ? 2 : 1;                   // rows per unit
  const int64_t half = silu_out ? m / 2 : 0, units = m - half;
  const int64_t unit0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * units_per_warp;
  const int rows_per_warp = units_per_warp * rpu;
  auto unit_of = [&](int r) { return unit0 + r / rpu; };
  auto row_of = [&](int r) { return unit_of(r) + (r % rpu) * half; };  // the weight row
  const uint4* w = static_cast<const uint4*>(a.w);

  // 1. All of this warp's weights, independent of the previous kernel (streamed once: evict-first).
  // kBulk: into the warp's shared rows [rows_per_warp][nvec] after x' (bar: its mbarrier).
  uint4* wsm = xs + NR * nvec + static_cast<int64_t>(warp) * rows_per_warp * nvec;
  uint64_t* bar = reinterpret_cast<uint64_t*>(xs + NR * nvec + int64_t{kWarps} * rows_per_warp * nvec) + warp;
  uint4 wv[kBulk ? 1 : kMaxRows][kVpl];
  if constexpr (kBulk) {
    if (lane == 0) {
      uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      mbar_init(bar);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      int rows = 0;
      for (int r = 0; r < rows_per_warp && unit_of(r) < units; ++r) ++rows;
      mbar_arrive_expect(bar, static_cast<uint32_t>(rows * nvec * 16));
      for (int r = 0; r < rows; ++r) bulk_copy_only(wsm + r * nvec, w + row_of(r) * nvec, nvec * 16, bar, policy);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r) {
      const bool ok = r < rows_per_warp && unit_of(r) < units;
#pragma unroll
      for (int u = 0; u < kVpl; ++u) wv[r][u] = ok ? __ldcs(w + row_of(r) * nvec + lane + 32 * u) : make_uint4(0, 0, 0, 0);
    }
  }

  // 2. x, residual and out may belong to the previous kernel. Each writer lane loads its residuals
  // (and biases) now, so the epilogue after the short FMA pass does not wait on global loads.
  // Writer of (unit i, n): lane (i * NR + n) % 32.
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = kForm == kFormAny || kForm == kFormPlainResidual ? static_cast<const T*>(a.residual) : nullptr;
  T* out = static_cast<T*>(a.out);
  float pre_b[kMaxRows][NR], pre_r[kMaxRows][NR];
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r)
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      const bool mine = r < rows_per_warp && unit_of(r) < units && lane == ((r / rpu) * NR + n) % 32;
      pre_b[r][n] = mine && bias ? to_f(bias[row_of(r)]) : 0.f;
    }
  pdl_enter();
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r)
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      const bool mine = r < rows_per_warp && unit_of(r) < units && lane == (r * NR + n) % 32;
      pre_r[r][n] = mine && res ? to_f(res[n * m + unit0 + r]) : 0.f;  // never with silu_out
    }
  stage_input<T, NR, kPro>(a, xs, nvec);
  if constexpr (kBulk) mbar_wait(bar, 0);

  // 3. Dot products, warp reductions, epilogue.
  float gate[NR];  // silu_out: the reduced gate dots of the current unit (every lane)
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r) {
    if (r >= rows_per_warp) break;  // warp-uniform
    float acc[NR];
#pragma unroll
    for (int n = 0; n < NR; ++n) acc[n] = 0.f;
#pragma unroll
    for (int u = 0; u < kVpl; ++u) {
      V wu;
      if constexpr (kBulk) wu.raw = wsm[r * nvec + lane + 32 * u];  // rows past the warp's units: unused
      else wu.raw = wv[r][u];
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        V xv;
        xv.raw = xs[n * nvec + lane + 32 * u];
#pragma unroll
        for (int e = 0; e < kN; ++e) acc[n] += to_f(wu.v[e]) * to_f(xv.v[e]);
      }
    }
    const int64_t unit = unit_of(r);
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      float v = acc[n];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      const bool writer = unit < units && lane == ((r / rpu) * NR + n) % 32;
      if (silu_out) {
        if (r % 2 == 0) gate[n] = v + pre_b[r][n];
        else if (writer) out[n * half + unit] = act_mul_round<T, kForm == kFormAny>(gate[n], v + pre_b[r][n], a.act);
      } else if (writer) {
        const int64_t idx = n * m + unit;
        T y = from_f<T>(v + pre_b[r][n]);
        if (kForm == kFormPlainResidual || res) y = from_f<T>(pre_r[r][n] + to_f(y));  // the add op's rounding
        out[idx] = y;
      }
    }
  }
}

bool bulk_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_BULK");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// A bulk-resident launch: opts in to its shared memory (the most any shape asks) once per kernel.
template <auto kKernel>
void launch_bulk(dim3 grid, size_t smem, cudaStream_t stream, const GemvArgs& a, int units_per_warp) {
  static const bool attr = [] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(4 * 4096 * 2 + kWarps * (kMaxVecs * 32 * 16 + 8))));
    return true;
  }();
  (void)attr;
  launch_pdl(kKernel, grid, dim3(kThreads), smem, stream, a, units_per_warp);
}

// How the resident kernel would take this shape: vectors a lane, units a warp, blocks.
struct ResidentPlan {
  int64_t vpl = 0, per_warp = 0, blocks = 0;
};

// False when rows do not fit one wave of registers, or K is not a multiple of 32 * 16-byte vectors up
// to kMaxVecs of them.
template <typename T>
bool resident_plan(const GemvArgs& a, int num_sms, ResidentPlan& plan) {
  constexpr int kN = Vec<T>::kN;
  if (a.k % (32 * kN) != 0) return false;
  const int64_t vpl = a.k / (32 * kN);
  if (vpl != 4 && vpl != 8 && vpl != 12 && vpl != 16) return false;
  const int64_t max_rows = kMaxVecs / vpl, rpu = a.silu_out ? 2 : 1, units = a.m / rpu;
  for (int per_sm = 1; per_sm <= 2; ++per_sm) {
    const int64_t warps = int64_t{num_sms} * per_sm * kWarps;
    const int64_t u = (units + warps - 1) / warps;
    if (u * rpu <= max_rows) {
      plan = ResidentPlan{vpl, u, (units + u * kWarps - 1) / (u * kWarps)};
      return true;
    }
  }
  return false;
}

// The resident launch for this shape, or false (resident_plan).
template <typename T, int NR>
bool launch_resident(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  ResidentPlan plan;
  if (!resident_plan<T>(a, num_sms, plan)) return false;
  const int64_t vpl = plan.vpl, per_warp = plan.per_warp, blocks = plan.blocks, rpu = a.silu_out ? 2 : 1;
  // x' is at most 4 x 4096 x 2 bytes: under the 48 KiB that needs no opt-in; kBulk adds the warps' rows
  // (<= 8 x 8 KiB) and their barriers.
  const size_t x_bytes = static_cast<size_t>(NR) * a.k * sizeof(T);
  const dim3 grid(static_cast<unsigned>(blocks));
  const int u = static_cast<int>(per_warp);
  if (!bulk_enabled()) {
    switch (vpl) {
      case 4: launch_pdl(gemv_resident_kernel<T, NR, 4, false>, grid, dim3(kThreads), x_bytes, stream, a, u); break;
      case 8: launch_pdl(gemv_resident_kernel<T, NR, 8, false>, grid, dim3(kThreads), x_bytes, stream, a, u); break;
      case 12: launch_pdl(gemv_resident_kernel<T, NR, 12, false>, grid, dim3(kThreads), x_bytes, stream, a, u); break;
      default: launch_pdl(gemv_resident_kernel<T, NR, 16, false>, grid, dim3(kThreads), x_bytes, stream, a, u); break;
    }
    return true;
  }
  const size_t smem = x_bytes + size_t{kWarps} * (per_warp * rpu * a.k * sizeof(T) + 8);
  // Batch 1 (the latency-bound case): the layer's three forms each get their own code.
  auto launch_form = [&]<int kVplF>() {
    switch (gemv_form_of(a)) {  // kFormPlainOut: no batch-1 layer GEMV takes it, so not instantiated here
      case kFormNormOut: launch_bulk<gemv_resident_kernel<T, NR, kVplF, true, kFormNormOut>>(grid, smem, stream, a, u); break;
      case kFormNormSilu: launch_bulk<gemv_resident_kernel<T, NR, kVplF, true, kFormNormSilu>>(grid, smem, stream, a, u); break;
      case kFormPlainResidual:
        launch_bulk<gemv_resident_kernel<T, NR, kVplF, true, kFormPlainResidual>>(grid, smem, stream, a, u);
        break;
      default: launch_bulk<gemv_resident_kernel<T, NR, kVplF, true>>(grid, smem, stream, a, u); break;
    }
  };
  if constexpr (NR == 1) {
    if (forms_enabled()) {
      switch (vpl) {
        case 4: launch_form.template operator()<4>(); break;
        case 8: launch_form.template operator()<8>(); break;
        case 12: launch_form.template operator()<12>(); break;
        default: launch_form.template operator()<16>(); break;
      }
      return true;
    }
  }
  switch (vpl) {
    case 4: launch_bulk<gemv_resident_kernel<T, NR, 4, true>>(grid, smem, stream, a, u); break;
    case 8: launch_bulk<gemv_resident_kernel<T, NR, 8, true>>(grid, smem, stream, a, u); break;
    case 12: launch_bulk<gemv_resident_kernel<T, NR, 12, true>>(grid, smem, stream, a, u); break;
    default: launch_bulk<gemv_resident_kernel<T, NR, 16, true>>(grid, smem, stream, a, u); break;
  }
  return true;
}

}  // namespace
}  // namespace vireo::cuda
