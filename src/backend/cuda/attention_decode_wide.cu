// CUDA-core flash-decoding paged attention for the head dims the tensor-core kernels do not take
// (bf16/f16, head_dim 96 or a multiple of 64 up to 256: in practice Qwen3.5 / Qwen3-Next's 256, DeepSeek
// MLA's 192 after mla_pack, Phi-3-mini's 96). Decode and prefill rows alike (every row is independent, causal via its
// position), so the same kernel serves chunked prefill of these models, and sliding windows (a row's
// keys start at its window), soft-capped scores (Gemma 2) and attention sinks (GPT-OSS) route those layers
// here (attention_mma.cu).
//
// One block per (token row, KV head, chunk of GC query heads of that KV head's group) and key split:
//   - grid.x = T * Hkv * (G / GC), grid.y = key splits (chosen on the host so that the grid has >= 2
//     blocks per SM, >= 64 keys a split, at most 128); a row's keys [0, pos] are cut into grid.y
//     equal splits in the kernel from the row's own length (so a graph captured with a smaller or
//     larger max_seq_len hint stays correct; splits past the end are empty);
//   - 4 warps take U-key steps in turn; per key the 32 lanes read the K and V rows coalesced (lane l
//     owns dims [l * D/32, (l+1) * D/32): 2..8 elements, 4-, 8- or 16-byte loads, 2-byte ones for D 96), K and V of all U
//     keys in flight before any math; each lane dots its slice with the GC query heads (q in
//     registers, fp32, pre-scaled by scale * log2 e), a butterfly reduces the scores, an online
//     softmax per head (exp2) rescales the fp32 V accumulator;
//   - the warps combine through shared memory; one split: the normalised output is written directly,
//     else (unnormalised o, m, l) partials go to the workspace and attention_decode_wide_merge_kernel
//     (one block per (row, head)) writes the output. An attention sink (a logit without a value) joins
//     wherever a row is normalised, i.e. in that final combine alone: the partials stay plain softmax
//     partials over their keys, and the denominator gains 2^(sink - M), M over the partial maxima and
//     the sink.
// Each K/V row is read once per block, i.e. once per GC query heads: GC = the largest of 8/4/2/1 that
// divides the GQA group (the q and accumulator registers bound it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_sinks.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMinSplitKeys = 64;
constexpr int kMaxSplits = 128;
constexpr int kBlocksPerSmTarget = 2;
constexpr float kLog2e = 1.4426950408889634f;

struct WideArgs {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int* query_start;
  const int* seq_lens;
  const int* block_tables;
  float* ws_o;    // [T * H][splits][D] unnormalised partial outputs (splits > 1)
  float2* ws_ml;  // [T * H][splits] (running max in log2 units, sum of exp2)
  int num_seqs, max_blocks_per_seq, block_size, num_heads, num_kv_heads, group, chunks, splits;
  int window;    // AttentionParams::window: a row at key count n sees keys [max(0, n - window), n); 0: all
  float qscale;  // softmax scale * log2(e), folded into q
  float softcap_l2;  // AttentionParams::softcap * log2(e) (0: none): a score s becomes c tanh(s / c) in log2 units
  const float* sinks;  // AttentionParams::sinks [H] F32 in natural units (times log2(e) where used), or nullptr
};

// PER consecutive elements of T (one lane's slice of a row) as raw 32-bit words, loaded in the
// widest vectors the slice's size and alignment allow (rows start 128-byte aligned when D % 64 == 0).
// An odd PER of 16-bit elements (D 96: Phi-3-mini) is loaded element by element (2-byte alignment).
template <typename T, int PER>
struct Slice {
  static constexpr int kBytes = PER * static_cast<int>(sizeof(T));
  static constexpr bool kOdd = sizeof(T) == 2 && PER % 2 != 0;
  static constexpr int kWords = kOdd ? 1 : kBytes / 4;
  static constexpr int kChunk = kOdd ? 2 : kBytes % 16 == 0 ? 16 : kBytes % 8 == 0 ? 8 : 4;
  uint32_t w[kWords];
  unsigned short h[kOdd ? PER : 1];

  __device__ __forceinline__ void load(const T* p) {
    if constexpr (kChunk == 2) {
      const unsigned short* v = reinterpret_cast<const unsigned short*>(p);
#pragma unroll
      for (int i = 0; i < PER; ++i) h[i] = __ldg(v + i);
    } else if constexpr (kChunk == 16) {
      const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
      for (int i = 0; i < kBytes / 16; ++i) {
        const uint4 x = __ldg(v + i);
        w[4 * i] = x.x;
        w[4 * i + 1] = x.y;
        w[4 * i + 2] = x.z;
        w[4 * i + 3] = x.w;
      }
    } else if constexpr (kChunk == 8) {
      const uint2* v = reinterpret_cast<const uint2*>(p);
#pragma unroll
      for (int i = 0; i < kBytes / 8; ++i) {
        const uint2 x = __ldg(v + i);
        w[2 * i] = x.x;
        w[2 * i + 1] = x.y;
      }
    } else {
      const unsigned int* v = reinterpret_cast<const unsigned int*>(p);
#pragma unroll
      for (int i = 0; i < kWords; ++i) w[i] = __ldg(v + i);
    }
  }
  __device__ __forceinline__ void zero() {
    if constexpr (kOdd) {
#pragma unroll
      for (int i = 0; i < PER; ++i) h[i] = 0;
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) w[i] = 0u;
    }
  }
  __device__ __forceinline__ void to_float(float (&f)[PER]) const {
    if constexpr (kOdd) {
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        if constexpr (std::is_same_v<T, __nv_bfloat16>) f[i] = __uint_as_float(static_cast<uint32_t>(h[i]) << 16);
        else f[i] = __half2float(__ushort_as_half(h[i]));
      }
    } else {
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        if constexpr (sizeof(T) == 4) {
          f[i] = __uint_as_float(w[i]);
        } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
          f[2 * i] = __uint_as_float(w[i] << 16);
          f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        } else {
          __half2 hh;
          static_assert(sizeof(hh) == 4);
          memcpy(&hh, &w[i], 4);
          const float2 x = __half22float2(hh);
          f[2 * i] = x.x;
          f[2 * i + 1] = x.y;
        }
      }
    }
  }
};

// Keys a warp has in flight per step: 4, or 2 where q and the accumulator already take 128+ registers.
template <int PER, int GC>
constexpr int keys_per_step() {
  return GC * PER >= 32 ? 2 : 4;
}

template <typename T, int PER, int GC>
__global__ void __launch_bounds__(kWarps * 32) attention_decode_wide_kernel(WideArgs a) {
  constexpr int D = PER * 32;
  constexpr int U = keys_per_step<PER, GC>();
  __shared__ float s_acc[kWarps][GC][D];
  __shared__ float s_m[kWarps][GC];
  __shared__ float s_l[kWarps][GC];
  pdl_enter();  // launched with PDL (pdl.cuh): every read below may depend on the previous kernel
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bx = blockIdx.x;
  const int c = static_cast<int>(bx % a.chunks);
  const int hk = static_cast<int>((bx / a.chunks) % a.num_kv_heads);
  const int64_t t = bx / (int64_t{a.chunks} * a.num_kv_heads);
  const int z = blockIdx.y;
  // The sequence of row t: the last s with query_start[s] <= t.
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int s = lo;
  const int q_len = a.query_start[s + 1] - a.query_start[s];
  const int j = static_cast<int>(t - a.query_start[s]);
  const int n = a.seq_lens[s] - q_len + j + 1;  // keys [first, n): all of them, or the sliding window's
  const int first = a.window > 0 ? max(0, n - a.window) : 0;
  // This block's keys: split z of the row's n - first keys cut into a.splits equal parts (>= 64 keys each).
  const int len = max((n - first + a.splits - 1) / a.splits, kMinSplitKeys);
  const int k_begin = first + min(z * len, n - first);  // z * len <= 128 * max(n, 64): no overflow
  const int k_end = min(k_begin + len, n);
  const int h0 = hk * a.group + c * GC;

  float q[GC][PER];
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    Slice<T, PER> r;
    r.load(static_cast<const T*>(a.q) + (t * a.num_heads + h0 + g) * D + lane * PER);
    r.to_float(q[g]);
#pragma unroll
    for (int i = 0; i < PER; ++i) q[g][i] *= a.qscale;
  }
  float m[GC], l[GC], acc[GC][PER];
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < PER; ++i) acc[g][i] = 0.f;
  }

  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const int64_t slot_stride = int64_t{a.num_kv_heads} * D;  // elements per cache slot
  const T* kbase = static_cast<const T*>(a.k_cache) + int64_t{hk} * D + lane * PER;
  const T* vbase = static_cast<const T*>(a.v_cache) + int64_t{hk} * D + lane * PER;
  const int bs = a.block_size;
  for (int kb = k_begin + warp * U; kb < k_end; kb += kWarps * U) {
    Slice<T, PER> kr[U], vr[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = kb + u;
      if (key < k_end) {
        const int64_t slot = static_cast<int64_t>(table[key / bs]) * bs + key % bs;
        kr[u].load(kbase + slot * slot_stride);
        vr[u].load(vbase + slot * slot_stride);
      } else {
        kr[u].zero();
        vr[u].zero();
      }
    }
    float sc[GC][U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[PER];
      kr[u].to_float(kf);
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        float d = 0.f;
#pragma unroll
        for (int i = 0; i < PER; ++i) d = fmaf(q[g][i], kf[i], d);
        sc[g][u] = d;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int g = 0; g < GC; ++g)
#pragma unroll
        for (int u = 0; u < U; ++u) sc[g][u] += __shfl_xor_sync(0xffffffffu, sc[g][u], o);
    if (a.softcap_l2 > 0.f) {  // Gemma 2: c tanh(s / c), in the log2 units the scores are kept in
#pragma unroll
      for (int g = 0; g < GC; ++g)
#pragma unroll
        for (int u = 0; u < U; ++u) sc[g][u] = a.softcap_l2 * tanhf(sc[g][u] / a.softcap_l2);
    }
    float pr[GC][U];
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (kb + u < k_end) mx = fmaxf(mx, sc[g][u]);
      // mx is finite: key kb < k_end always counts (its score is finite for finite inputs).
      const float corr = exp2f(m[g] - mx);  // m = -inf at first: 0
      float ps = 0.f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        pr[g][u] = kb + u < k_end ? exp2f(sc[g][u] - mx) : 0.f;
        ps += pr[g][u];
      }
      l[g] = l[g] * corr + ps;
      m[g] = mx;
#pragma unroll
      for (int i = 0; i < PER; ++i) acc[g][i] *= corr;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[PER];
      vr[u].to_float(vf);
#pragma unroll
      for (int g = 0; g < GC; ++g)
#pragma unroll
        for (int i = 0; i < PER; ++i) acc[g][i] = fmaf(pr[g][u], vf[i], acc[g][i]);
    }
  }

  // Combine the warps: a warp without keys has m = -inf, l = 0, acc = 0.
#pragma unroll
  for (int g = 0; g < GC; ++g) {
#pragma unroll
    for (int i = 0; i < PER; ++i) s_acc[warp][g][lane * PER + i] = acc[g][i];
    if (lane == 0) {
      s_m[warp][g] = m[g];
      s_l[warp][g] = l[g];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < GC * D; e += kWarps * 32) {
    const int g = e / D, d = e % D;
    float mm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, s_m[w][g]);
    // One split: this is the row's final normalisation, so the sink (log2 units, like the scores)
    // joins the max and the sum. Split partials leave it to the merge kernel.
    const bool sink_here = a.splits == 1 && a.sinks != nullptr;
    const float sk = sink_here ? a.sinks[h0 + g] * kLog2e : -INFINITY;
    const float mt = sink_here ? fmaxf(mm, sk) : mm;
    const float mu = mt == -INFINITY ? 0.f : mt;
    float ll = 0.f, oo = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(s_m[w][g] - mu);  // 0 for a warp without keys
      ll += s_l[w][g] * f;
      oo += s_acc[w][g][d] * f;
    }
    if (sink_here) ll += exp2f(sk - mu);
    const int64_t th = t * a.num_heads + h0 + g;
    if (a.splits == 1) {
      static_cast<T*>(a.out)[th * D + d] = from_f<T>(ll > 0.f ? oo / ll : 0.f);
    } else {
      a.ws_o[(th * a.splits + z) * D + d] = oo;
      if (d == 0) a.ws_ml[th * a.splits + z] = make_float2(mm, ll);
    }
  }
}

// One block per (row, head): out = sum_z o_z 2^(m_z - M) / (sum_z l_z 2^(m_z - M) + 2^(sink - M)), M
// the max of the m_z and the sink (log2 units; no sink: -inf, no term). Empty splits (m = -inf, l = 0,
// o = 0) weigh nothing.
template <typename T>
__global__ void attention_decode_wide_merge_kernel(WideArgs a, int d_model) {
  pdl_enter();
  const int64_t th = blockIdx.x;  // row * H + head
  const float2* ml = a.ws_ml + th * a.splits;
  const float sk = a.sinks != nullptr ? a.sinks[th % a.num_heads] * kLog2e : -INFINITY;
  float mm = sk;
  for (int z = 0; z < a.splits; ++z) mm = fmaxf(mm, ml[z].x);
  const float mu = mm == -INFINITY ? 0.f : mm;
  float ll = 0.f;
  for (int z = 0; z < a.splits; ++z) ll += ml[z].y * exp2f(ml[z].x - mu);
  if (a.sinks != nullptr) ll += exp2f(sk - mu);
  const float inv = ll > 0.f ? 1.f / ll : 0.f;
  const float* o = a.ws_o + th * a.splits * d_model;
  for (int d = threadIdx.x; d < d_model; d += blockDim.x) {
    float acc = 0.f;
    for (int z = 0; z < a.splits; ++z) {
      const float f = exp2f(ml[z].x - mu);
      if (f > 0.f) acc = fmaf(o[int64_t{z} * d_model + d], f, acc);
    }
    static_cast<T*>(a.out)[th * d_model + d] = from_f<T>(acc * inv);
  }
}

template <typename T, int PER, int GC>
void launch_wide(const WideArgs& a, int64_t blocks_x, cudaStream_t stream) {
  launch_pdl(attention_decode_wide_kernel<T, PER, GC>, dim3(static_cast<unsigned>(blocks_x), a.splits),
             dim3(kWarps * 32), 0, stream, a);
}

template <typename T, int PER>
void launch_wide_gc(const WideArgs& a, int gc, int64_t blocks_x, cudaStream_t stream) {
  switch (gc) {
    case 8: launch_wide<T, PER, 8>(a, blocks_x, stream); return;
    case 4: launch_wide<T, PER, 4>(a, blocks_x, stream); return;
    case 2: launch_wide<T, PER, 2>(a, blocks_x, stream); return;
    default: launch_wide<T, PER, 1>(a, blocks_x, stream); return;
  }
}

template <typename T>
void launch_wide_typed(const WideArgs& a, int d, int gc, int64_t blocks_x, cudaStream_t stream) {
  switch (d) {
    case 64: launch_wide_gc<T, 2>(a, gc, blocks_x, stream); return;
    case 96: launch_wide_gc<T, 3>(a, gc, blocks_x, stream); return;
    case 128: launch_wide_gc<T, 4>(a, gc, blocks_x, stream); return;
    case 192: launch_wide_gc<T, 6>(a, gc, blocks_x, stream); return;
    default: launch_wide_gc<T, 8>(a, gc, blocks_x, stream); return;
  }
}

}  // namespace

bool decode_wide_supported(const AttentionParams& p) {
  return (p.q.dtype == DType::kBF16 || p.q.dtype == DType::kF16) &&
         (p.head_dim == 96 || (p.head_dim % 64 == 0 && p.head_dim >= 64 && p.head_dim <= 256));
}

int decode_wide_splits(const AttentionParams& p, const DeviceInfo& dev) {
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  const int g = p.num_heads / p.num_kv_heads;
  const int gc = g % 8 == 0 ? 8 : g % 4 == 0 ? 4 : g % 2 == 0 ? 2 : 1;
  const int64_t blocks_x = num_tokens * p.num_kv_heads * (g / gc);
  const int64_t target = int64_t{std::max(dev.num_sms, 1)} * kBlocksPerSmTarget;
  if (blocks_x <= 0 || blocks_x >= target) return 1;
  int64_t max_kv = p.max_seq_len > 0 ? p.max_seq_len : int64_t{p.max_blocks_per_seq} * p.block_size;
  if (p.window > 0) max_kv = std::min<int64_t>(max_kv, p.window);  // a row reads at most the window
  int64_t splits = std::min<int64_t>({(target + blocks_x - 1) / blocks_x, (max_kv + kMinSplitKeys - 1) / kMinSplitKeys,
                                      kMaxSplits});
  // Partials: T * H * splits * (D floats + (m, l)); capped like the tensor-core planner (512 MiB).
  const int64_t per_split = num_tokens * p.num_heads * (int64_t{p.head_dim} * 4 + 8);
  while (splits > 1 && per_split * splits > (int64_t{512} << 20)) --splits;
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

void launch_paged_attention_decode_wide(const AttentionParams& p, const WorkspaceFn& workspace, const DeviceInfo& dev,
                                        cudaStream_t stream) {
  if (!decode_wide_supported(p))
    throw Error("paged_attention (wide decode): bf16/f16 with head_dim 64/96/128/192/256 only");
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0)
    throw Error("paged_attention (wide decode): bad num_heads/num_kv_heads");
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  if (num_tokens == 0 || p.num_seqs == 0) return;
  const int g = p.num_heads / p.num_kv_heads;
  const int gc = g % 8 == 0 ? 8 : g % 4 == 0 ? 4 : g % 2 == 0 ? 2 : 1;
  const int64_t blocks_x = num_tokens * p.num_kv_heads * (g / gc);
  if (blocks_x > 0x7fffffff) throw Error("paged_attention (wide decode): too many rows");
  WideArgs a{};
  a.q = p.q.data;
  a.k_cache = p.k_cache.data;
  a.v_cache = p.v_cache.data;
  a.out = p.out.data;
  a.query_start = p.query_start.ptr<int>();
  a.seq_lens = p.seq_lens.ptr<int>();
  a.block_tables = p.block_tables.ptr<int>();
  a.num_seqs = p.num_seqs;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.block_size = p.block_size;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = g;
  a.chunks = g / gc;
  a.splits = decode_wide_splits(p, dev);
  a.window = p.window;
  a.qscale = p.scale * kLog2e;
  a.softcap_l2 = p.softcap > 0.f ? p.softcap * kLog2e : 0.f;
  a.sinks = checked_sinks(p, "paged_attention (wide decode)");
  if (a.splits > 1) {
    const int64_t rows = num_tokens * p.num_heads * a.splits;
    char* ws = static_cast<char*>(workspace(static_cast<size_t>(rows * (int64_t{p.head_dim} * 4 + 8))));
    a.ws_o = reinterpret_cast<float*>(ws);
    a.ws_ml = reinterpret_cast<float2*>(ws + rows * int64_t{p.head_dim} * 4);  // 8-byte aligned: D % 32 == 0
  }
  dispatch_float(p.q.dtype, "paged_attention (wide decode)", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      launch_wide_typed<T>(a, p.head_dim, gc, blocks_x, stream);
      check_launch("paged_attention_decode_wide");
      if (a.splits > 1) {
        launch_pdl(attention_decode_wide_merge_kernel<T>, dim3(static_cast<unsigned>(num_tokens * p.num_heads)),
                   dim3(std::min(p.head_dim, 256)), 0, stream, a, p.head_dim);
        check_launch("paged_attention_decode_wide merge");
      }
    }
  });
}

}  // namespace vireo::cuda
