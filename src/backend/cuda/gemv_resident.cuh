// One-pass decode GEMV for the small matrices of latency-bound models (Qwen3-0.6B: qkv, o_proj,
// gate_up and down are 4-13 MB): every warp owns R adjacent rows and loads ALL of its weights
// (R x kVpl 16-byte vectors a lane, at most kMaxVecs) into registers before the PDL wait, so the whole
// weight stream overlaps the previous kernel; after the wait the block stages x' (gemv_common.cuh),
// does the FMAs and writes. One wave of at most 2 blocks an SM (1 where the rows allow it, leaving
// room for the next kernel's blocks to start early and issue their loads in turn).
// The grid-stride kernel in gemv.cu takes matrices whose rows do not fit in one wave of registers.
#pragma once
#include "backend/cuda/gemv_common.cuh"

namespace vireo::cuda {
namespace {

constexpr int kMaxVecs = 16;  // 16-byte weight vectors held per lane (64 registers)

// kVpl: vectors a lane holds per row (K = 32 * kVpl * 16 / sizeof(T)). A warp owns units_per_warp
// units: rows, or with silu_out (gate, up) row pairs held as adjacent rows (even r: gate row, odd r: the
// up row of the same index); rows per warp <= kMaxVecs / kVpl.
template <typename T, int NR, int kVpl>
__global__ void __launch_bounds__(kThreads) gemv_resident_kernel(GemvArgs a, int units_per_warp) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr int kMaxRows = kMaxVecs / kVpl;
  extern __shared__ uint4 xs[];  // x' [NR, K]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nvec = 32 * kVpl, m = a.m;
  const int rpu = a.silu_out ? 2 : 1;                   // rows per unit
  const int64_t half = a.silu_out ? m / 2 : 0, units = m - half;
  const int64_t unit0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * units_per_warp;
  const int rows_per_warp = units_per_warp * rpu;
  auto unit_of = [&](int r) { return unit0 + r / rpu; };
  auto row_of = [&](int r) { return unit_of(r) + (r % rpu) * half; };  // the weight row
  const uint4* w = static_cast<const uint4*>(a.w);

  // 1. All of this warp's weights, independent of the previous kernel (streamed once: evict-first).
  uint4 wv[kMaxRows][kVpl];
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r) {
    const bool ok = r < rows_per_warp && unit_of(r) < units;
#pragma unroll
    for (int u = 0; u < kVpl; ++u) wv[r][u] = ok ? __ldcs(w + row_of(r) * nvec + lane + 32 * u) : make_uint4(0, 0, 0, 0);
  }

  // 2. x, residual and out may belong to the previous kernel. Each writer lane loads its residuals
  // (and biases) now, so the epilogue after the short FMA pass does not wait on global loads.
  // Writer of (unit i, n): lane (i * NR + n) % 32.
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = static_cast<const T*>(a.residual);
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
  stage_input<T, NR>(a, xs, nvec);

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
      wu.raw = wv[r][u];
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
      if (a.silu_out) {
        if (r % 2 == 0) gate[n] = v + pre_b[r][n];
        else if (writer) out[n * half + unit] = silu_mul_round<T>(gate[n], v + pre_b[r][n]);
      } else if (writer) {
        const int64_t idx = n * m + unit;
        T y = from_f<T>(v + pre_b[r][n]);
        if (res) y = from_f<T>(pre_r[r][n] + to_f(y));  // the add op's rounding
        out[idx] = y;
      }
    }
  }
}

// The resident launch for this shape, or false (rows do not fit one wave of registers, or K is not a
// multiple of 32 * 16-byte vectors up to kMaxVecs of them).
template <typename T, int NR>
bool launch_resident(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  constexpr int kN = Vec<T>::kN;
  if (a.k % (32 * kN) != 0) return false;
  const int64_t vpl = a.k / (32 * kN);
  if (vpl != 4 && vpl != 8 && vpl != 12 && vpl != 16) return false;
  const int64_t max_rows = kMaxVecs / vpl, rpu = a.silu_out ? 2 : 1, units = a.m / rpu;
  int64_t per_warp = 0, blocks = 0;
  for (int per_sm = 1; per_sm <= 2 && per_warp == 0; ++per_sm) {
    const int64_t warps = int64_t{num_sms} * per_sm * kWarps;
    const int64_t u = (units + warps - 1) / warps;
    if (u * rpu <= max_rows) {
      per_warp = u;
      blocks = (units + u * kWarps - 1) / (u * kWarps);
    }
  }
  if (per_warp == 0) return false;
  // x' is at most 4 x 4096 x 2 bytes: under the 48 KiB that needs no opt-in.
  const size_t smem = static_cast<size_t>(NR) * a.k * sizeof(T);
  const dim3 grid(static_cast<unsigned>(blocks));
  const int u = static_cast<int>(per_warp);
  switch (vpl) {
    case 4: launch_pdl(gemv_resident_kernel<T, NR, 4>, grid, dim3(kThreads), smem, stream, a, u); break;
    case 8: launch_pdl(gemv_resident_kernel<T, NR, 8>, grid, dim3(kThreads), smem, stream, a, u); break;
    case 12: launch_pdl(gemv_resident_kernel<T, NR, 12>, grid, dim3(kThreads), smem, stream, a, u); break;
    default: launch_pdl(gemv_resident_kernel<T, NR, 16>, grid, dim3(kThreads), smem, stream, a, u); break;
  }
  return true;
}

}  // namespace
}  // namespace vireo::cuda
