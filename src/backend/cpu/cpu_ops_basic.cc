// Row-wise CPU ops: embedding, rms_norm, linear (OpenBLAS), silu_and_mul, add, gather_rows.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/quant_blocks.h"
#include "core/error.h"

namespace vireo::cpu {

void require_float(const Tensor& t, const char* what) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    throw Error(std::string("cpu backend: ") + what + " must be F32/F16/BF16, got " + std::string(dtype_name(t.dtype)));
}
void require_kv_cache(const Tensor& t, const char* what) {
  if (t.dtype != DType::kF8E4M3) require_float(t, what);
}
void require_f32(const Tensor& t, const char* what) {
  if (t.dtype != DType::kF32)
    throw Error(std::string("cpu backend: ") + what + " must be F32, got " + std::string(dtype_name(t.dtype)));
}
void require_i32(const Tensor& t, const char* what) {
  if (t.dtype != DType::kI32)
    throw Error(std::string("cpu backend: ") + what + " must be I32, got " + std::string(dtype_name(t.dtype)));
}

void embedding(ThreadPool& pool, const EmbeddingParams& p) {
  const bool blocked = dtype_is_blocked(p.table.dtype);  // GGUF token_embd kept packed: rows of blocks
  if (!blocked) require_float(p.table, "embedding table");
  require_i32(p.ids, "embedding ids");
  require_f32(p.out, "embedding out");
  const int64_t vocab = p.table.dim(0), hidden = p.table.dim(1), n = p.ids.numel();
  const int32_t* ids = p.ids.ptr<int32_t>();
  for (int64_t t = 0; t < n; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      throw Error("cpu embedding: token id " + std::to_string(ids[t]) + " outside vocab of " + std::to_string(vocab));
  float* out = p.out.ptr<float>();
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const auto* row = static_cast<const uint8_t*>(p.table.data) + ids[t] * dtype_row_bytes(p.table.dtype, hidden);
      if (blocked) {
        const qblocks::Format f = qblocks::format(p.table.dtype);
        for (int64_t b = 0; b < hidden / f.values; ++b)
          qblocks::decode(p.table.dtype, row + b * f.bytes, out + t * hidden + b * f.values);
      } else {
        convert_to_f32(row, p.table.dtype, out + t * hidden, hidden);
      }
      if (p.scale != 1.0f)
        for (int64_t c = 0; c < hidden; ++c) out[t * hidden + c] *= p.scale;
    }
  });
}

void rms_norm(ThreadPool& pool, const RmsNormParams& p) {
  require_f32(p.x, "rms_norm x");
  require_f32(p.out, "rms_norm out");
  require_float(p.weight, "rms_norm weight");
  const int64_t c = p.weight.numel();
  const int64_t rows = c ? p.x.numel() / c : 0;
  if (!p.residual.empty()) require_f32(p.residual, "rms_norm residual");
  if (p.add_after_norm && p.residual.empty()) throw Error("rms_norm: add_after_norm needs a residual");
  std::vector<float> w(c);
  convert_to_f32(p.weight.data, p.weight.dtype, w.data(), c);
  const float* x = p.x.ptr<float>();
  float* out = p.out.ptr<float>();
  float* res = p.residual.empty() ? nullptr : p.residual.ptr<float>();
  pool.parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * c;
      float* orow = out + r * c;
      const float* src = xr;
      if (p.add_after_norm) {  // out = residual + rmsnorm(x) * w (out may alias residual or x)
        const float* rr = res + r * c;
        double ss = 0.0;
        for (int64_t i = 0; i < c; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float inv = 1.0f / std::sqrt(static_cast<float>(ss / c) + p.eps);
        for (int64_t i = 0; i < c; ++i) orow[i] = rr[i] + (xr[i] * inv) * w[i];
        continue;
      }
      if (res) {  // fused residual add: residual += x, then normalise the sum
        float* rr = res + r * c;
        for (int64_t i = 0; i < c; ++i) rr[i] += xr[i];
        src = rr;
      }
      double ss = 0.0;
      for (int64_t i = 0; i < c; ++i) ss += static_cast<double>(src[i]) * src[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / c) + p.eps);
      for (int64_t i = 0; i < c; ++i) orow[i] = (src[i] * inv) * w[i];
    }
  }, 1);
}

void linear(ThreadPool& pool, const LinearParams& p) {
  require_f32(p.x, "linear x");
  require_f32(p.out, "linear out");
  const bool packed = dtype_is_blocked(p.w.dtype) || p.w.dtype == DType::kF8E4M3;
  if (!packed) require_float(p.w, "linear w");
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  const int64_t n = k ? p.x.numel() / k : 0;
  if (p.x.numel() != n * k || p.out.numel() != n * m)
    throw Error("cpu linear: shapes x " + p.x.shape_str() + ", w " + p.w.shape_str() + ", out " + p.out.shape_str() +
                " do not agree");
  if (n == 0) return;
  if (p.out_stride != 0 && p.out_stride != m) {  // rows of out apart: compute contiguous, then place the rows
    if (p.out_stride < m) throw Error("cpu linear: out_stride " + std::to_string(p.out_stride) + " < M " + std::to_string(m));
    std::vector<float> dense(static_cast<size_t>(n * m));
    LinearParams q = p;
    q.out = Tensor(dense.data(), DType::kF32, {n, m});
    q.out_stride = 0;
    linear(pool, q);
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(dense.data() + r * m, m, p.out.ptr<float>() + r * p.out_stride);
    return;
  }
  const float* x = p.x.ptr<float>();
  float* out = p.out.ptr<float>();
  if (dtype_is_blocked(p.w.dtype)) {
    linear_blocks(pool, x, n, k, p.w, m, out);
  } else if (p.w.dtype == DType::kF8E4M3) {
    linear_fp8(pool, x, n, k, p.w, m, out);
  } else if (p.w.dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, k, p.w.ptr<float>(), k, 0.0f, out, m);
  } else if (p.w.dtype == DType::kBF16 && n <= kGemvMaxRows) {
    gemv_bf16(pool, x, n, k, p.w.ptr<uint16_t>(), m, out);
  } else {
    // Half-precision weights: widen a band of rows at a time, then GEMM into out's columns.
    const int64_t band = std::max<int64_t>(1, std::min<int64_t>(m, (int64_t{1} << 22) / std::max<int64_t>(k, 1)));
    std::vector<float> wf(band * k);
    for (int64_t r0 = 0; r0 < m; r0 += band) {
      const int64_t rows = std::min(band, m - r0);
      const char* src = static_cast<const char*>(p.w.data) + r0 * k * dtype_size(p.w.dtype);
      pool.parallel_for(rows, [&](int64_t b, int64_t e) {
        convert_to_f32(src + b * k * dtype_size(p.w.dtype), p.w.dtype, wf.data() + b * k, (e - b) * k);
      });
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, k, 1.0f, x, k, wf.data(), k, 0.0f, out + r0, m);
    }
  }
  if (!p.bias.empty()) {
    require_float(p.bias, "linear bias");
    std::vector<float> bias(m);
    convert_to_f32(p.bias.data, p.bias.dtype, bias.data(), m);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < m; ++j) out[r * m + j] += bias[j];
  }
}

void silu_and_mul(ThreadPool& pool, const SiluAndMulParams& p) {
  require_f32(p.x, "silu_and_mul x");
  require_f32(p.out, "silu_and_mul out");
  const int64_t inter = p.out.dim(-1);
  const int64_t rows = inter ? p.out.numel() / inter : 0;
  const float* x = p.x.ptr<float>();
  float* out = p.out.ptr<float>();
  pool.parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = x + r * 2 * inter;
      const float* u = g + inter;
      float* o = out + r * inter;
      if (p.act == Activation::kGeluTanh) {
        constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
        for (int64_t i = 0; i < inter; ++i)
          o[i] = 0.5f * g[i] * (1.0f + std::tanh(kBeta * (g[i] + 0.044715f * g[i] * g[i] * g[i]))) * u[i];
        continue;
      }
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
}

void add(ThreadPool& pool, const AddParams& p) {
  require_f32(p.a, "add a");
  require_f32(p.b, "add b");
  require_f32(p.out, "add out");
  const float* a = p.a.ptr<float>();
  const float* b = p.b.ptr<float>();
  float* out = p.out.ptr<float>();
  pool.parallel_for(p.out.numel(), [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) out[i] = a[i] + b[i];
  }, 4096);
}

void softcap(ThreadPool& pool, const SoftcapParams& p) {
  require_f32(p.x, "softcap x");
  if (!(p.cap > 0.0f)) throw Error("cpu backend: softcap needs cap > 0");
  float* x = p.x.ptr<float>();
  pool.parallel_for(p.x.numel(), [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) x[i] = p.cap * std::tanh(x[i] / p.cap);
  }, 4096);
}

void gather_rows(ThreadPool& pool, const GatherRowsParams& p) {
  require_i32(p.indices, "gather_rows indices");
  const int64_t n = p.x.dim(0), m = p.indices.numel();
  const size_t row_bytes = n ? p.x.nbytes() / n : 0;
  const int32_t* idx = p.indices.ptr<int32_t>();
  for (int64_t i = 0; i < m; ++i)
    if (idx[i] < 0 || idx[i] >= n)
      throw Error("cpu gather_rows: index " + std::to_string(idx[i]) + " outside " + std::to_string(n) + " rows");
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(static_cast<char*>(p.out.data) + i * row_bytes, static_cast<const char*>(p.x.data) + idx[i] * row_bytes,
                row_bytes);
}

}  // namespace vireo::cpu
