// gated_delta_net (GatedDeltaNetParams): Qwen3-Next / Qwen3.5's Gated DeltaNet token mixer over
// per-sequence state slots. Oracle: backend/cpu/cpu_gated_delta_net.cc. Two kernels:
//
//   gdn_recurrent_kernel: one block per (sequence, value head h). The block holds S_h [dk, dv] fp32 in
//     registers (thread (p, c) = column c, rows [p * rpt, (p + 1) * rpt), 512 threads), loaded before the PDL wait
//     (ssm_state is written only by this kernel, whose previous launch completed before the kernel in
//     front of us passed its own wait), and walks its sequence's rows in tiles of kTile tokens:
//       1. the tile's proj inputs of its channels (q and k of key head h / (Hv / Hk), v of h) join a
//          shared-memory window that starts with the conv state's last L-1 inputs (zeros on a restart);
//          depthwise conv + SiLU, rounded as the spec says (x = round(silu(round(conv))));
//       2. a warp per token: l2norm of q (times dk^-0.5) and k, k.q, beta = sigmoid(b),
//          decay = exp(-exp(A_log) * softplus(a + dt_bias));
//       3. token by token (one __syncthreads each): the two column sums S^T k and S^T q of the old
//          state in one pass (partials of the row parts through shared memory, double-buffered), then
//            kv = decay * S^T k,  delta = (v - kv) * beta,  o = decay * S^T q + (k.q) * delta,
//            S = decay * S + k delta^T
//          (the CPU's S *= decay; kv = S^T k; S += k delta^T; o = S^T q, regrouped: same values up to
//          fp32 rounding);
//       4. a warp per token: o rounded, RMSNorm over dv, * norm_w, * silu(z), rounded into out.
//     S goes back to ssm_state at the end. Padding sequences (slot < 0) get zero rows (as the CPU).
//   gdn_conv_state_kernel: after it (stream order; PDL wait), one thread per (sequence, channel) moves
//     the conv state to the last L-1 inputs. A separate launch because the q / k channels of a key head
//     are read by Hv / Hk blocks: no block may overwrite them while another may still read them.
//
// Graph-capturable: grids from num_seqs and the shapes only, row counts read on the device, no
// allocation, no host sync. Deterministic: fixed reduction orders, no atomics.
// Speed: decode (one row a sequence) reads and writes each S_h once (64 KiB at dk = dv = 128) with
// all of a thread's loads in flight before the PDL wait. Prefill / chunked rows run token by token
// inside the block (one block barrier a token): fine for now; the thing to improve is a chunked
// (WY / UT-transform) algorithm for long prefill chunks.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kTile = 8;        // tokens per tile (conv window, per-token buffers)
constexpr int kMaxHeadDim = 128;
constexpr int kMaxConv = kTile + 1;  // L - 1 <= kTile: the window shift never overlaps itself

__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

template <typename T>
__device__ __forceinline__ float rnd(float v) {
  return to_f(from_f<T>(v));
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }  // torch's threshold

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct GdnArgs {
  const void* proj;      // [T, P] T
  const void* conv_w;    // [C, L]
  DType conv_wt;
  const float* A_log;    // [Hv]
  const float* dt_bias;  // [Hv]
  const void* norm_w;    // [dv]
  DType norm_wt;
  void* conv_state;      // [slots, L-1, C] T
  float* ssm_state;      // [slots, Hv, dk, dv]
  void* out;             // [T, Hv * dv] T
  const int* query_start;
  const int* seq_lens;
  const int* slots;
  int num_seqs, num_slots;
  int Hk, Hv, dk, dv, L, C, P;
  float q_scale, norm_eps;
  int dvp, parts, rpt;  // column slots (power of 2 >= dv), row parts (kThreads / dvp), rows a part
};

// Shared memory (floats) of the recurrent kernel.
struct GdnSmem {
  int wconv, win, xq, xk, xv, beta, decay, kq, obuf, red, normw, z, ba, total;
  __host__ __device__ GdnSmem(int dk, int dv, int L) {
    const int nch = 2 * dk + dv;
    int o = 0;
    auto take = [&](int n) {  // 16-byte aligned pieces (float4 reads of q / k rows)
      const int at = o;
      o += (n + 3) / 4 * 4;
      return at;
    };
    wconv = take(nch * L);
    win = take((L - 1 + kTile) * nch);
    xq = take(kTile * dk);
    xk = take(kTile * dk);
    xv = take(kTile * dv);
    beta = take(kTile);
    decay = take(kTile);
    kq = take(kTile);
    obuf = take(kTile * dv);
    red = take(2 * 2 * kThreads);
    normw = take(dv);
    z = take(kTile * dv);
    ba = take(2 * kTile);
    total = o;
  }
};

// proj column (= conv channel) of block channel ch: q of key head kh, k of kh, v of value head h.
__device__ __forceinline__ int channel_col(const GdnArgs& a, int kh, int h, int ch) {
  if (ch < a.dk) return kh * a.dk + ch;
  if (ch < 2 * a.dk) return a.Hk * a.dk + kh * a.dk + (ch - a.dk);
  return 2 * a.Hk * a.dk + h * a.dv + (ch - 2 * a.dk);
}

// Shared-memory fills from global memory with kB loads a thread in flight: for i < n, sm[dst(i)] =
// load(i) (a loop of one load a pass waits a whole round trip each pass). load(i) returns a float.
template <int kB, typename Dst, typename Load>
__device__ __forceinline__ void gather(float* sm, int n, Dst dst, Load load) {
  for (int i0 = threadIdx.x; i0 < n; i0 += kB * kThreads) {
    float v[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b)
      if (i0 + b * kThreads < n) v[b] = load(i0 + b * kThreads);
#pragma unroll
    for (int b = 0; b < kB; ++b)
      if (i0 + b * kThreads < n) sm[dst(i0 + b * kThreads)] = v[b];
  }
}

// kRpt: state rows a thread holds (>= a.rpt); kVec: dk % 4 == 0 and a.rpt % 4 == 0, so a thread's
// rows of q / k are read from shared memory as float4.
template <typename T, int kRpt, bool kVec>
__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(GdnArgs a) {
  extern __shared__ float4 sm4[];
  float* sm = reinterpret_cast<float*>(sm4);
  const GdnSmem L_(a.dk, a.dv, a.L);
  float* wconv = sm + L_.wconv;
  float* win = sm + L_.win;
  float* xq = sm + L_.xq;
  float* xk = sm + L_.xk;
  float* xv = sm + L_.xv;
  float* sbeta = sm + L_.beta;
  float* sdecay = sm + L_.decay;
  float* skq = sm + L_.kq;
  float* obuf = sm + L_.obuf;
  float* red = sm + L_.red;
  float* normw = sm + L_.normw;
  float* zbuf = sm + L_.z;   // [kTile, dv] the tile's z
  float* sba = sm + L_.ba;   // [kTile, 2] the tile's b, a

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int s = blockIdx.x / a.Hv, h = blockIdx.x % a.Hv, kh = h / (a.Hv / a.Hk);
  const int dk = a.dk, dv = a.dv, L = a.L, nch = 2 * dk + dv;
  const int p = tid / a.dvp, c = tid % a.dvp;
  const bool active = c < dv;
  const int row_lo = p * a.rpt;
  const int nrow = active ? max(0, min(a.rpt, dk - row_lo)) : 0;

  // Before the PDL wait: step metadata (host uploads), the old state (see the file comment), weights.
  const int row0 = a.query_start[s], q_len = a.query_start[s + 1] - row0;
  const int slot = a.slots[s];
  const bool restart = a.seq_lens[s] - q_len == 0;
  const bool valid = q_len > 0 && slot >= 0 && slot < a.num_slots;
  float S[kRpt];
  float* Sg = a.ssm_state + ((static_cast<int64_t>(valid ? slot : 0) * a.Hv + h) * dk + row_lo) * dv + c;
#pragma unroll
  for (int j = 0; j < kRpt; ++j) S[j] = valid && !restart && j < nrow ? Sg[static_cast<int64_t>(j) * dv] : 0.f;
  gather<4>(sm, nch * L + dv, [&](int i) { return i < nch * L ? L_.wconv + i : L_.normw + i - nch * L; },
            [&](int i) {
              if (i >= nch * L) return load_any(a.norm_w, a.norm_wt, i - nch * L);
              return load_any(a.conv_w, a.conv_wt, static_cast<int64_t>(channel_col(a, kh, h, i / L)) * L + i % L);
            });
  const float A = -expf(a.A_log[h]), dt_bias = a.dt_bias[h];

  pdl_enter();  // proj from the previous kernel; conv_state from the previous call's state kernel
  if (q_len <= 0) return;
  const T* proj = static_cast<const T*>(a.proj);
  T* out = static_cast<T*>(a.out);
  const int64_t out_w = static_cast<int64_t>(a.Hv) * dv;
  if (!valid) {  // padding row of a graph (slot < 0): zeros, as the CPU; a slot past the end: NaN (the CPU throws)
    const float fill = slot < 0 ? 0.f : NAN;
    for (int i = tid; i < q_len * dv; i += kThreads)
      out[(row0 + i / dv) * out_w + static_cast<int64_t>(h) * dv + i % dv] = from_f<T>(fill);
    return;
  }
  const T* cstate = static_cast<const T*>(a.conv_state) + static_cast<int64_t>(slot) * (L - 1) * a.C;
  const int zoff = a.C + h * dv, boff = a.C + a.Hv * dv + h, aoff = a.C + a.Hv * dv + a.Hv + h;

  int par = 0;
  for (int j0 = 0; j0 < q_len; j0 += kTile) {
    const int nt = min(kTile, q_len - j0);
    // 1. One gather (8 loads a thread in flight): on the first tile the window's first L-1 rows (the conv
    // inputs of the L-1 positions before this step's first row: conv_state, zeros on a restart), then
    // the tile's proj inputs of the block's channels into the window, its z, its b and a.
    const int nwin = j0 == 0 ? (L - 1) * nch : 0, nx = nt * nch, nz = nt * dv;
    gather<8>(
        sm, nwin + nx + nz + 2 * nt,
        [&](int i) {
          if (i < nwin) return L_.win + i;
          i -= nwin;
          if (i < nx) return L_.win + (L - 1) * nch + i;
          i -= nx;
          return i < nz ? L_.z + i : L_.ba + i - nz;
        },
        [&](int i) -> float {
          if (i < nwin)
            return restart ? 0.f : to_f(cstate[static_cast<int64_t>(i / nch) * a.C + channel_col(a, kh, h, i % nch)]);
          i -= nwin;
          if (i < nx) return to_f(proj[static_cast<int64_t>(row0 + j0 + i / nch) * a.P + channel_col(a, kh, h, i % nch)]);
          i -= nx;
          if (i < nz) return to_f(proj[static_cast<int64_t>(row0 + j0 + i / dv) * a.P + zoff + i % dv]);
          i -= nz;
          return to_f(proj[static_cast<int64_t>(row0 + j0 + i / 2) * a.P + (i % 2 ? aoff : boff)]);
        });
    __syncthreads();
    for (int i = tid; i < nt * nch; i += kThreads) {
      const int jj = i / nch, ch = i % nch;
      float acc = 0.f;
      for (int k = 0; k < L; ++k) acc += wconv[ch * L + k] * win[(jj + k) * nch + ch];
      const float x = rnd<T>(silu_f(rnd<T>(acc)));
      if (ch < dk) xq[jj * dk + ch] = x;
      else if (ch < 2 * dk) xk[jj * dk + ch - dk] = x;
      else xv[jj * dv + ch - 2 * dk] = x;
    }
    __syncthreads();
    // 2. the window's last L-1 rows become the next tile's first (nt == kTile >= L - 1 when a tile
    // follows, so source and destination do not overlap); per-token norms and gates, a warp a token.
    if (j0 + nt < q_len)
      for (int i = tid; i < (L - 1) * nch; i += kThreads) win[i] = win[nt * nch + i];
    for (int jj = warp; jj < nt; jj += kWarps) {
      float* q = xq + jj * dk;
      float* k = xk + jj * dk;
      float ssq = 0.f, ssk = 0.f;
      for (int i = lane; i < dk; i += 32) ssq += q[i] * q[i], ssk += k[i] * k[i];
      ssq = warp_sum(ssq);
      ssk = warp_sum(ssk);
      const float iq = 1.0f / sqrtf(ssq + 1e-6f) * a.q_scale, ik = 1.0f / sqrtf(ssk + 1e-6f);
      __syncwarp();
      for (int i = lane; i < dk; i += 32) q[i] *= iq, k[i] *= ik;
      __syncwarp();
      float kq = 0.f;
      for (int i = lane; i < dk; i += 32) kq += k[i] * q[i];
      kq = warp_sum(kq);
      if (lane == 0) {
        const float b = sba[2 * jj], av = sba[2 * jj + 1];
        sbeta[jj] = 1.0f / (1.0f + expf(-b));
        sdecay[jj] = expf(A * softplus_f(av + dt_bias));
        skq[jj] = kq;
      }
    }
    __syncthreads();
    // 3. the recurrence, token by token.
    for (int jj = 0; jj < nt; ++jj) {
      const float* kr = xk + jj * dk + row_lo;
      const float* qr = xq + jj * dk + row_lo;
      float ak = 0.f, aq = 0.f;
      if constexpr (kVec) {  // nrow is a multiple of 4
#pragma unroll
        for (int j = 0; j < kRpt; j += 4)
          if (j < nrow) {
            const float4 k4 = *reinterpret_cast<const float4*>(kr + j), q4 = *reinterpret_cast<const float4*>(qr + j);
            ak = fmaf(S[j], k4.x, ak), aq = fmaf(S[j], q4.x, aq);
            ak = fmaf(S[j + 1], k4.y, ak), aq = fmaf(S[j + 1], q4.y, aq);
            ak = fmaf(S[j + 2], k4.z, ak), aq = fmaf(S[j + 2], q4.z, aq);
            ak = fmaf(S[j + 3], k4.w, ak), aq = fmaf(S[j + 3], q4.w, aq);
          }
      } else {
#pragma unroll
        for (int j = 0; j < kRpt; ++j)
          if (j < nrow) ak = fmaf(S[j], kr[j], ak), aq = fmaf(S[j], qr[j], aq);
      }
      float* rb = red + par * 2 * kThreads;
      rb[tid] = ak;
      rb[kThreads + tid] = aq;
      __syncthreads();
      float sk = 0.f, sq = 0.f;
      for (int pp = 0; pp < a.parts; ++pp) sk += rb[pp * a.dvp + c], sq += rb[kThreads + pp * a.dvp + c];
      const float dec = sdecay[jj];
      const float v = active ? xv[jj * dv + c] : 0.f;
      const float delta = (v - dec * sk) * sbeta[jj];
      const float o = dec * sq + skq[jj] * delta;
      if (p == 0 && active) obuf[jj * dv + c] = rnd<T>(o);
      if constexpr (kVec) {
#pragma unroll
        for (int j = 0; j < kRpt; j += 4)
          if (j < nrow) {
            const float4 k4 = *reinterpret_cast<const float4*>(kr + j);
            S[j] = fmaf(k4.x, delta, S[j] * dec);
            S[j + 1] = fmaf(k4.y, delta, S[j + 1] * dec);
            S[j + 2] = fmaf(k4.z, delta, S[j + 2] * dec);
            S[j + 3] = fmaf(k4.w, delta, S[j + 3] * dec);
          }
      } else {
#pragma unroll
        for (int j = 0; j < kRpt; ++j)
          if (j < nrow) S[j] = fmaf(kr[j], delta, S[j] * dec);
      }
      par ^= 1;
    }
    __syncthreads();
    // 4. gated RMSNorm of o, a warp a token.
    for (int jj = warp; jj < nt; jj += kWarps) {
      const float* o = obuf + jj * dv;
      float ss = 0.f;
      for (int i = lane; i < dv; i += 32) ss += o[i] * o[i];
      ss = warp_sum(ss);
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(dv) + a.norm_eps);
      const int64_t row = row0 + j0 + jj;
      for (int i = lane; i < dv; i += 32) {
        const float z = zbuf[jj * dv + i];
        const float n = rnd<T>(normw[i] * rnd<T>(o[i] * inv));
        out[row * out_w + static_cast<int64_t>(h) * dv + i] = from_f<T>(n * silu_f(z));
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < kRpt; ++j)
    if (j < nrow) Sg[static_cast<int64_t>(j) * dv] = S[j];
}

// conv_state[slot] = the conv inputs of the sequence's last L-1 positions, one thread per (sequence,
// channel). In place: entry i takes position q_len - (L-1) + i, from proj when >= 0, else from old
// entry q_len + i, or 0 on a restart; a thread reads all its entries before it writes any.
template <typename T>
__global__ void gdn_conv_state_kernel(GdnArgs a) {
  pdl_enter();  // the recurrent kernel has read the old state
  const int s = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= a.C) return;
  const int row0 = a.query_start[s], q_len = a.query_start[s + 1] - row0, slot = a.slots[s];
  if (q_len <= 0 || slot < 0 || slot >= a.num_slots) return;
  const bool restart = a.seq_lens[s] - q_len == 0;
  const T* proj = static_cast<const T*>(a.proj);
  T* st = static_cast<T*>(a.conv_state) + static_cast<int64_t>(slot) * (a.L - 1) * a.C + c;
  T v[kMaxConv - 1];  // all reads before the writes (one round trip)
#pragma unroll
  for (int i = 0; i < kMaxConv - 1; ++i) {
    if (i >= a.L - 1) break;
    const int r = q_len - (a.L - 1) + i;
    if (r >= 0) v[i] = proj[static_cast<int64_t>(row0 + r) * a.P + c];
    else v[i] = restart ? from_f<T>(0.f) : st[static_cast<int64_t>(q_len + i) * a.C];
  }
#pragma unroll
  for (int i = 0; i < kMaxConv - 1; ++i) {
    if (i >= a.L - 1) break;
    st[static_cast<int64_t>(i) * a.C] = v[i];
  }
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error("cuda gated_delta_net: " + msg);
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

template <typename T, int kRpt, bool kVec>
void launch_recurrent(const GdnArgs& a, size_t smem, cudaStream_t stream) {
  auto kernel = gdn_recurrent_kernel<T, kRpt, kVec>;
  // Once per kernel: room for the largest shape launch_gated_delta_net accepts (dims 128, L = kMaxConv).
  static const bool raised = [&] {
    const size_t most = static_cast<size_t>(GdnSmem(kMaxHeadDim, kMaxHeadDim, kMaxConv).total) * sizeof(float);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(most)),
          "cudaFuncSetAttribute(gated_delta_net)");
    return true;
  }();
  (void)raised;
  launch_pdl(kernel, dim3(static_cast<unsigned>(a.num_seqs * a.Hv)), dim3(kThreads), smem, stream, a);
}

}  // namespace

void launch_gated_delta_net(const GatedDeltaNetParams& p, cudaStream_t stream) {
  const int Hk = p.num_k_heads, Hv = p.num_v_heads, dk = p.head_k_dim, dv = p.head_v_dim, L = p.conv_kernel;
  require(Hk > 0 && Hv > 0 && Hv % Hk == 0, "num_v_heads must be a positive multiple of num_k_heads");
  require(dk >= 1 && dk <= kMaxHeadDim && dv >= 1 && dv <= kMaxHeadDim, "head dims must be in [1, 128]");
  require(L >= 1 && L <= kMaxConv, "conv_kernel must be in [1, " + std::to_string(kMaxConv) + "]");
  const int C = 2 * Hk * dk + Hv * dv, P = C + Hv * dv + 2 * Hv;
  const DType at = p.proj.dtype;
  require(is_float(at) && p.out.dtype == at && p.conv_state.dtype == at,
          "proj, out and conv_state must share a float activation dtype");
  require(is_float(p.conv_w.dtype) && is_float(p.norm_w.dtype), "conv_w / norm_w must be float tensors");
  require(p.ssm_state.dtype == DType::kF32 && p.A_log.dtype == DType::kF32 && p.dt_bias.dtype == DType::kF32,
          "ssm_state, A_log and dt_bias must be F32");
  require(p.conv_w.numel() == int64_t{C} * L, "conv_w must be [C, L]");
  require(p.A_log.numel() == Hv && p.dt_bias.numel() == Hv && p.norm_w.numel() == dv,
          "A_log / dt_bias must be [Hv], norm_w [dv]");
  require(p.conv_state.ndim() == 3 && p.conv_state.dim(1) == L - 1 && p.conv_state.dim(2) == C,
          "conv_state must be [slots, L-1, C], got " + p.conv_state.shape_str());
  const int64_t slots = p.conv_state.dim(0);
  require(p.ssm_state.numel() == slots * Hv * dk * dv, "ssm_state must be [slots, Hv, dk, dv]");
  require(p.query_start.dtype == DType::kI32 && p.seq_lens.dtype == DType::kI32 && p.state_slots.dtype == DType::kI32,
          "query_start, seq_lens and state_slots must be I32");
  const int S = p.num_seqs;
  require(S >= 0 && p.query_start.numel() >= S + 1 && p.seq_lens.numel() >= S && p.state_slots.numel() >= S,
          "query_start, seq_lens or state_slots is shorter than num_seqs needs");
  require(p.proj.ndim() == 2 && p.proj.dim(1) == P, "proj must be [T, " + std::to_string(P) + "]");
  const int64_t T = p.proj.dim(0);
  require(p.out.numel() == T * Hv * dv, "out must be [T, Hv * dv]");
  require(p.out.data != p.proj.data, "out must not alias proj");
  if (S == 0 || T == 0) return;

  GdnArgs a{};
  a.proj = p.proj.data;
  a.conv_w = p.conv_w.data;
  a.conv_wt = p.conv_w.dtype;
  a.A_log = p.A_log.ptr<float>();
  a.dt_bias = p.dt_bias.ptr<float>();
  a.norm_w = p.norm_w.data;
  a.norm_wt = p.norm_w.dtype;
  a.conv_state = p.conv_state.data;
  a.ssm_state = p.ssm_state.ptr<float>();
  a.out = p.out.data;
  a.query_start = p.query_start.ptr<int>();
  a.seq_lens = p.seq_lens.ptr<int>();
  a.slots = p.state_slots.ptr<int>();
  a.num_seqs = S;
  a.num_slots = static_cast<int>(slots);
  a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.L = L, a.C = C, a.P = P;
  a.q_scale = 1.0f / std::sqrt(static_cast<float>(dk));  // as the CPU computes it
  a.norm_eps = p.norm_eps;
  a.dvp = 16;
  while (a.dvp < dv) a.dvp *= 2;
  a.parts = kThreads / a.dvp;
  a.rpt = (dk + a.parts - 1) / a.parts;  // <= 32: parts >= 4 at dv <= 128
  const bool vec = dk % 4 == 0;
  if (vec) a.rpt = (a.rpt + 3) / 4 * 4;  // rows of a part start 16-byte aligned; rows past dk are idle
  const size_t smem = static_cast<size_t>(GdnSmem(dk, dv, L).total) * sizeof(float);

  dispatch_float(at, "gated_delta_net", [&](auto tag) {
    using T_ = decltype(tag);
    if (vec && a.rpt <= 8) launch_recurrent<T_, 8, true>(a, smem, stream);
    else if (vec) launch_recurrent<T_, 32, true>(a, smem, stream);
    else launch_recurrent<T_, 32, false>(a, smem, stream);
    check_launch("gated_delta_net recurrent");
    if (L > 1) {
      launch_pdl(gdn_conv_state_kernel<T_>, dim3(static_cast<unsigned>((C + 255) / 256), static_cast<unsigned>(S)),
                 dim3(256), 0, stream, a);
      check_launch("gated_delta_net conv state");
    }
  });
}

}  // namespace vireo::cuda
