// qkv_prepare on the CPU: split the fused projection, optional q/k RMSNorm, RoPE, then write
// q to q_out and k/v into the paged cache (see QkvPrepareParams).
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

// In-place RMSNorm of n values with weight w (already widened to F32).
void norm_inplace(float* x, const float* w, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] * inv) * w[i];
}

// Rotates the first rotary_dim values of one head. cs: this position's row [cos(rd/2), sin(rd/2)].
void rope_head(float* x, const float* cs, int rotary_dim, bool neox) {
  const int half = rotary_dim / 2;
  const float* cos = cs;
  const float* sin = cs + half;
  if (neox) {
    for (int i = 0; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * cos[i] - x2 * sin[i];
      x[i + half] = x2 * cos[i] + x1 * sin[i];
    }
  } else {
    for (int i = 0; i < half; ++i) {
      const float x1 = x[2 * i], x2 = x[2 * i + 1];
      x[2 * i] = x1 * cos[i] - x2 * sin[i];
      x[2 * i + 1] = x2 * cos[i] + x1 * sin[i];
    }
  }
}

std::vector<float> widen(const Tensor& t, int64_t expect, const char* what) {
  if (t.empty()) throw Error(std::string("cpu qkv_prepare: ") + what + " is required by the qk_norm mode");
  require_float(t, what);
  if (t.numel() != expect)
    throw Error(std::string("cpu qkv_prepare: ") + what + " has " + std::to_string(t.numel()) + " values, expected " +
                std::to_string(expect));
  std::vector<float> w(expect);
  convert_to_f32(t.data, t.dtype, w.data(), expect);
  return w;
}

}  // namespace

void qkv_prepare(ThreadPool& pool, const QkvPrepareParams& p) {
  require_f32(p.qkv, "qkv_prepare qkv");
  require_f32(p.q_out, "qkv_prepare q_out");
  require_f32(p.rope_cos_sin, "qkv_prepare rope_cos_sin");
  require_i32(p.positions, "qkv_prepare positions");
  require_i32(p.slot_mapping, "qkv_prepare slot_mapping");
  require_kv_cache(p.k_cache, "qkv_prepare k_cache");
  if (p.v_cache.dtype != p.k_cache.dtype) throw Error("cpu qkv_prepare: k_cache and v_cache dtypes differ");
  const int H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_dim, rd = p.rotary_dim;
  if (H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv != 0) throw Error("cpu qkv_prepare: bad head counts");
  if (rd < 0 || rd > D || rd % 2 != 0) throw Error("cpu qkv_prepare: rotary_dim must be even and <= head_dim");
  const int64_t width = static_cast<int64_t>(H + 2 * Hkv) * D;
  const int64_t T = p.positions.numel();
  if (p.qkv.numel() != T * width) throw Error("cpu qkv_prepare: qkv shape " + p.qkv.shape_str() + " does not match heads");
  const int64_t max_pos = p.rope_cos_sin.dim(0);
  if (rd > 0 && p.rope_cos_sin.dim(1) != rd)
    throw Error("cpu qkv_prepare: rope_cos_sin has " + std::to_string(p.rope_cos_sin.dim(1)) + " columns, rotary_dim is " +
                std::to_string(rd));
  const int64_t num_slots = p.k_cache.dim(0) * p.block_size;
  const int32_t* pos = p.positions.ptr<int32_t>();
  const int32_t* slots = p.slot_mapping.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    if (pos[t] < 0 || (rd > 0 && pos[t] >= max_pos))
      throw Error("cpu qkv_prepare: position " + std::to_string(pos[t]) + " outside the RoPE table of " +
                  std::to_string(max_pos));
    if (slots[t] >= num_slots)
      throw Error("cpu qkv_prepare: slot " + std::to_string(slots[t]) + " outside the KV cache of " +
                  std::to_string(num_slots) + " slots");
  }
  std::vector<float> qw, kw;
  if (p.qk_norm == QkNorm::kFullWidth) {
    qw = widen(p.q_norm, int64_t{H} * D, "q_norm");
    kw = widen(p.k_norm, int64_t{Hkv} * D, "k_norm");
  } else if (p.qk_norm != QkNorm::kNone) {
    qw = widen(p.q_norm, D, "q_norm");
    kw = widen(p.k_norm, D, "k_norm");
  }
  const float* table = p.rope_cos_sin.ptr<float>();
  const DType cdt = p.k_cache.dtype;
  pool.parallel_for(T, [&](int64_t b, int64_t e) {
    std::vector<float> buf(width);
    for (int64_t t = b; t < e; ++t) {
      const float* src = p.qkv.ptr<float>() + t * width;
      std::copy(src, src + width, buf.begin());
      float* q = buf.data();
      float* k = q + int64_t{H} * D;
      const float* v = k + int64_t{Hkv} * D;
      const float* cs = rd > 0 ? table + static_cast<int64_t>(pos[t]) * rd : nullptr;
      auto per_head_norm = [&]() {
        for (int h = 0; h < H; ++h) norm_inplace(q + h * D, qw.data(), D, p.norm_eps);
        for (int h = 0; h < Hkv; ++h) norm_inplace(k + h * D, kw.data(), D, p.norm_eps);
      };
      if (p.qk_norm == QkNorm::kFullWidth) {
        norm_inplace(q, qw.data(), int64_t{H} * D, p.norm_eps);
        norm_inplace(k, kw.data(), int64_t{Hkv} * D, p.norm_eps);
      } else if (p.qk_norm == QkNorm::kPerHeadBeforeRope) {
        per_head_norm();
      }
      if (rd > 0) {
        for (int h = 0; h < H; ++h) rope_head(q + h * D, cs, rd, p.neox);
        for (int h = 0; h < Hkv; ++h) rope_head(k + h * D, cs, rd, p.neox);
      }
      if (p.qk_norm == QkNorm::kPerHeadAfterRope) per_head_norm();
      std::copy(q, q + int64_t{H} * D, p.q_out.ptr<float>() + t * int64_t{H} * D);
      if (slots[t] < 0) continue;  // padding / already-cached token: no KV write
      const int64_t base = static_cast<int64_t>(slots[t]) * Hkv * D;  // [block, offset] flattens to slot
      for (int64_t i = 0; i < int64_t{Hkv} * D; ++i) {
        store_elem(p.k_cache.data, cdt, base + i, k[i]);
        store_elem(p.v_cache.data, cdt, base + i, v[i]);
      }
    }
  });
}

}  // namespace vireo::cpu
