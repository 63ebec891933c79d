// Linear with ggml block-quantized weights (GGUF Q4_0 ... Q6_K kept packed): out [n, m] = x [n, k] @ W^T.
// Decode rows (n <= kGemvMaxRows) read each weight byte once and never widen the weights in memory
// (decode on the CPU is bound by memory bandwidth, and a Q4_K weight is 4.5 bits against BF16's 16): the
// AVX2 kernels of cpu_linear_blocks_avx2.cc for Q4_0, Q8_0, Q4_K, Q5_K and Q6_K, else the portable kernel
// here, which decodes every block into 32 or 256 floats on the stack (core/quant_blocks.h: bitwise the
// values a GGUF load dequantizes to) and dots them with up to four rows of x. Each dot is summed in the
// same order whatever n is (as gemv_bf16). More rows dequantize bands of weight rows to F32 for an SGEMM,
// as linear() does for BF16.
#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_linear_blocks_avx2.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/row_groups.h"
#include "core/error.h"
#include "core/quant_blocks.h"

namespace vireo::cpu {
namespace {

constexpr int kLanes = 16;  // partial sums per dot: vectorisable, and a fixed order

// Rows [j0, j1) of out for kRows rows of x [kRows, k]; w: [m, k / values] blocks of type kT.
template <DType kT, int kRows>
__attribute__((target_clones("arch=x86-64-v3", "default"))) void dot_rows(const float* x, int64_t k,
                                                                          const uint8_t* w, int64_t m, int64_t j0,
                                                                          int64_t j1, float* out) {
  constexpr qblocks::Format f = qblocks::format(kT);
  const int64_t nb = k / f.values;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = w + j * nb * f.bytes;
    float acc[kRows][kLanes] = {};
    for (int64_t b = 0; b < nb; ++b) {
      alignas(32) float wf[f.values];
      qblocks::decode(kT, row + b * f.bytes, wf);
      const float* xb = x + b * f.values;
      for (int i = 0; i < f.values; i += kLanes)
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
          for (int u = 0; u < kLanes; ++u) acc[r][u] += xb[r * k + i + u] * wf[i + u];
    }
    for (int r = 0; r < kRows; ++r) {
      for (int width = kLanes / 2; width > 0; width /= 2)  // pairwise: a fixed tree
        for (int u = 0; u < width; ++u) acc[r][u] += acc[r][u + width];
      out[r * m + j] = acc[r][0];
    }
  }
}

template <DType kT>
__attribute__((target_clones("arch=x86-64-v3", "default"))) void dequantize_rows(const uint8_t* w, int64_t num_blocks,
                                                                                 float* out) {
  constexpr qblocks::Format f = qblocks::format(kT);
  for (int64_t b = 0; b < num_blocks; ++b) qblocks::decode(kT, w + b * f.bytes, out + b * f.values);
}

template <DType kT>
void gemv(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, int64_t m, float* out) {
  auto pass = [&](auto rows_tag, int64_t r) {
    constexpr int kRows = decltype(rows_tag)::value;
    pool.parallel_for(m, [&](int64_t b, int64_t e) { dot_rows<kT, kRows>(x + r * k, k, w, m, b, e, out + r * m); },
                      16);
  };
  for_row_groups(n, pass);
}

// Bands of at most 2^22 weights dequantized to F32 (as linear()), each an SGEMM into out's columns.
template <DType kT>
void gemm(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, int64_t m, float* out) {
  constexpr qblocks::Format f = qblocks::format(kT);
  const int64_t nb = k / f.values;
  const int64_t band = std::max<int64_t>(1, std::min<int64_t>(m, (int64_t{1} << 22) / k));
  std::vector<float> wf(static_cast<size_t>(band * k));
  for (int64_t r0 = 0; r0 < m; r0 += band) {
    const int64_t rows = std::min(band, m - r0);
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
      dequantize_rows<kT>(w + (r0 + b) * nb * f.bytes, (e - b) * nb, wf.data() + b * k);
    }, 4);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, k, 1.0f, x, k, wf.data(), k, 0.0f, out + r0, m);
  }
}

template <DType kT>
void run(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, int64_t m, float* out,
         bool portable) {
  if (n > kGemvMaxRows) gemm<kT>(pool, x, n, k, w, m, out);
  else if (!portable && gemv_blocks_avx2_available(kT)) gemv_blocks_avx2(pool, x, n, k, kT, w, m, out);
  else gemv<kT>(pool, x, n, k, w, m, out);
}

}  // namespace

void linear_blocks(ThreadPool& pool, const float* x, int64_t n, int64_t k, const Tensor& w, int64_t m, float* out,
                   bool portable) {
  const qblocks::Format f = qblocks::format(w.dtype);
  if (!dtype_is_blocked(w.dtype) || k % f.values != 0)
    throw Error("cpu linear: " + std::string(dtype_name(w.dtype)) + " weights " + w.shape_str() +
                " need rows of a multiple of " + std::to_string(f.values) + " values");
  const auto* wb = w.ptr<uint8_t>();
  switch (w.dtype) {
    case DType::kQ4_0: return run<DType::kQ4_0>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ4_1: return run<DType::kQ4_1>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ5_0: return run<DType::kQ5_0>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ5_1: return run<DType::kQ5_1>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ8_0: return run<DType::kQ8_0>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ2_K: return run<DType::kQ2_K>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ3_K: return run<DType::kQ3_K>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ4_K: return run<DType::kQ4_K>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ5_K: return run<DType::kQ5_K>(pool, x, n, k, wb, m, out, portable);
    case DType::kQ6_K: return run<DType::kQ6_K>(pool, x, n, k, wb, m, out, portable);
    default: break;
  }
}

}  // namespace vireo::cpu
