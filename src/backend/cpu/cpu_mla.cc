// mla_pack on the CPU (semantics in op_params.h MlaPackParams): DeepSeek MLA's projections copied
// into the qkv rows qkv_prepare takes, k_pe broadcast to every head, v zero-padded to the head dim.
#include <algorithm>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {

void mla_pack(ThreadPool& pool, const MlaPackParams& p) {
  require_f32(p.q, "mla_pack q");
  require_f32(p.kv, "mla_pack kv");
  require_f32(p.k_pe, "mla_pack k_pe");
  require_f32(p.qkv, "mla_pack qkv");
  const int64_t H = p.num_heads, R = p.rope_dim, N = p.nope_dim, V = p.v_dim, D = R + N;
  if (H <= 0 || R < 0 || N < 0 || V <= 0 || D <= 0 || V > D)
    throw Error("cpu backend: mla_pack needs num_heads > 0 and 0 < v_dim <= rope_dim + nope_dim");
  const int64_t T = p.q.ndim() > 0 ? p.q.dim(0) : 0;
  if (p.q.numel() != T * H * D || p.kv.numel() != T * H * (N + V) || p.k_pe.numel() != T * R ||
      p.qkv.numel() != T * 3 * H * D)
    throw Error("cpu backend: mla_pack shapes do not agree (q [T, H*D], kv [T, H*(nope+v)], k_pe [T, rope], qkv [T, 3*H*D])");
  const float *q = p.q.ptr<float>(), *kv = p.kv.ptr<float>(), *kpe = p.k_pe.ptr<float>();
  float* out = p.qkv.ptr<float>();
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = out + t * 3 * H * D;
      std::copy_n(q + t * H * D, H * D, row);
      for (int64_t h = 0; h < H; ++h) {
        const float* src = kv + (t * H + h) * (N + V);
        float* k = row + (H + h) * D;
        float* v = row + (2 * H + h) * D;
        std::copy_n(kpe + t * R, R, k);
        std::copy_n(src, N, k + R);
        std::copy_n(src + N, V, v);
        std::fill(v + V, v + D, 0.0f);
      }
    }
  });
}

}  // namespace vireo::cpu
