// Reference paged attention: one warp per (token, query head), keys scored a warp-width at a time
// with an online softmax. Any float dtype, head dim <= 256, sliding windows, soft-capping, attention
// sinks. Slow but plain; the F32 path, the fallback of the sliding-window / soft-capped / sink layers
// (attention_mma.cu) and of the tensor-core kernels, and batch-invariant mode's kernel for those layers.
// Caches of the activation type or FP8 E4M3 codes (C = KvFp8, --kv-cache-dtype fp8).
#include "backend/cuda/attention_sinks.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

struct SimpleArgs {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int* query_start;
  const int* seq_lens;
  const int* block_tables;
  int num_seqs, max_blocks_per_seq, block_size, num_heads, num_kv_heads, head_dim;
  float scale;
  int window;  // AttentionParams::window
  int64_t num_tokens;
  float softcap;  // AttentionParams::softcap (0: none)
  const float* sinks;  // AttentionParams::sinks [H] F32, or nullptr
};

template <typename T, typename C>
__global__ void attention_simple_kernel(SimpleArgs a) {
  constexpr int kMaxPerLane = 8;  // head_dim <= 256
  pdl_enter();  // launched with PDL (pdl.cuh)
  const int64_t t = blockIdx.x;
  const int hq = blockIdx.y;
  const int lane = threadIdx.x;
  // The sequence of token t: the last s with query_start[s] <= t.
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int s = lo;
  const int q_len = a.query_start[s + 1] - a.query_start[s];
  const int j = static_cast<int>(t - a.query_start[s]);
  const int pos = a.seq_lens[s] - q_len + j;  // attends to keys [first_key, pos]
  const int first_key = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int d = a.head_dim, hk = hq / (a.num_heads / a.num_kv_heads);
  const T* q = static_cast<const T*>(a.q) + (t * a.num_heads + hq) * d;
  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  float acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) acc[i] = 0.f;
  // A sink is one more logit without a value: the softmax starts from it (max = sink, sum = exp(0)),
  // so every later correction rescales its share like any key's. No sink: the empty softmax.
  const float sink = a.sinks != nullptr ? a.sinks[hq] : -INFINITY;
  float m = sink, l = sink > -INFINITY ? 1.f : 0.f;
  for (int base = first_key; base <= pos; base += 32) {
    const int key = base + lane;
    float score = -INFINITY;
    int64_t row = 0;
    if (key <= pos) {
      const int slot = table[key / a.block_size] * a.block_size + key % a.block_size;
      row = (static_cast<int64_t>(slot) * a.num_kv_heads + hk) * d;
      const C* kr = static_cast<const C*>(a.k_cache) + row;
      float dot = 0.f;
      for (int i = 0; i < d; ++i) dot += to_f(q[i]) * to_f(kr[i]);
      score = dot * a.scale;
      if (a.softcap > 0.f) score = a.softcap * tanhf(score / a.softcap);
    }
    float cmax = score;
    for (int o = 16; o > 0; o >>= 1) cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
    const float m_new = fmaxf(m, cmax);
    const float corr = __expf(m - m_new);  // m = -inf at first (no sink): 0
    const float pr = key <= pos ? __expf(score - m_new) : 0.f;
    float psum = pr;
    for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    l = l * corr + psum;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) acc[i] *= corr;
    const int nkeys = min(32, pos + 1 - base);
    for (int kk = 0; kk < nkeys; ++kk) {
      const float pk = __shfl_sync(0xffffffffu, pr, kk);
      const int64_t rk = __shfl_sync(0xffffffffu, row, kk);
      const C* vr = static_cast<const C*>(a.v_cache) + rk;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i)
        if (lane + 32 * i < d) acc[i] += pk * to_f(vr[lane + 32 * i]);
    }
    m = m_new;
  }
  T* o = static_cast<T*>(a.out) + (t * a.num_heads + hq) * d;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i)
    if (lane + 32 * i < d) o[lane + 32 * i] = from_f<T>(acc[i] * inv);
}

}  // namespace

void launch_paged_attention_simple(const AttentionParams& p, cudaStream_t stream) {
  const int64_t t = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  if (t == 0 || p.num_seqs == 0) return;
  if (p.head_dim > 256) throw Error("paged_attention: head_dim > 256 is not supported");
  SimpleArgs a{p.q.data, p.k_cache.data, p.v_cache.data, p.out.data, p.query_start.ptr<int>(), p.seq_lens.ptr<int>(),
               p.block_tables.ptr<int>(), p.num_seqs, p.max_blocks_per_seq, p.block_size, p.num_heads,
               p.num_kv_heads, p.head_dim, p.scale, p.window, t, p.softcap,
               checked_sinks(p, "paged_attention")};
  dispatch_float(p.q.dtype, "paged_attention", [&](auto tag) {
    using T = decltype(tag);
    dispatch_cache<T>(p.k_cache.dtype, [&](auto ctag) {
      using C = decltype(ctag);
      launch_pdl(attention_simple_kernel<T, C>, dim3(static_cast<unsigned>(t), p.num_heads), dim3(32), 0, stream, a);
    });
  });
  check_launch("paged_attention_simple");
}

}  // namespace vireo::cuda
