// Decode-sized linear with BF16 weights: out[r, j] = x[r, :] . w[j, :] for a few rows of x, reading each
// weight row once, straight from BF16 (no widened copy: the weights are half the bytes of F32, and
// decode on the CPU is bound by memory bandwidth). Each dot is summed in the same order whatever the
// row count, so a row's result does not depend on what it is batched with (up to kGemvMaxRows).
#include <cstring>

#include "backend/cpu/cpu_ops.h"

namespace vireo::cpu {
namespace {

constexpr int kLanes = 16;  // independent partial sums per dot: vectorisable, and a fixed order

inline float bf16_bits_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rows [j0, j1) of out for kRows rows of x. x: [kRows, k], w: [m, k] BF16, out: [kRows, m].
// target_clones: AVX-512 (this file prefers 512-bit vectors: a row's 16 partial sums are one register) or
// AVX2 + FMA where the CPU has them (one binary for CI and laptops), else baseline. The partial sums and their
// order are fixed by the code, not by the clone's vector width.
template <int kRows>
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void dot_rows(const float* x, int64_t k,
                                                                          const uint16_t* w, int64_t m, int64_t j0,
                                                                          int64_t j1, float* out) {
  const int64_t k_main = k / kLanes * kLanes;
  for (int64_t j = j0; j < j1; ++j) {
    const uint16_t* wr = w + j * k;
    float acc[kRows][kLanes] = {};
    // Fully unrolled, so that the kRows x kLanes partial sums live in vector registers: with the row
    // loop left rolled, GCC kept them on the stack and every FMA went through a store and a reload
    // (batch 4 decode ran at ~3x batch 1's time instead of ~1x). Same sums in the same order.
    for (int64_t i = 0; i < k_main; i += kLanes) {
      // Ahead of the loads: one core alone keeps too few cache misses in flight to stream at DRAM speed.
      if (i % 32 == 0) __builtin_prefetch(wr + i + 384);
      float wf[kLanes];
#pragma GCC unroll 16
      for (int u = 0; u < kLanes; ++u) wf[u] = bf16_bits_to_f32(wr[i + u]);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
        for (int u = 0; u < kLanes; ++u) acc[r][u] += x[r * k + i + u] * wf[u];
    }
    for (int r = 0; r < kRows; ++r) {
      float tail = 0.f;
      for (int64_t i = k_main; i < k; ++i) tail += x[r * k + i] * bf16_bits_to_f32(wr[i]);
      // Pairwise over the lanes: a fixed tree.
      for (int width = kLanes / 2; width > 0; width /= 2)
        for (int u = 0; u < width; ++u) acc[r][u] += acc[r][u + width];
      out[r * m + j] = acc[r][0] + tail;
    }
  }
}

template <int kRows>
void gemv_rows(ThreadPool& pool, const float* x, int64_t k, const uint16_t* w, int64_t m, float* out) {
  pool.parallel_for(m, [&](int64_t b, int64_t e) { dot_rows<kRows>(x, k, w, m, b, e, out); }, 64);
}

}  // namespace

void gemv_bf16(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint16_t* w, int64_t m, float* out) {
  // Up to six rows share each weight row's loads in one pass (6 x 16 partial sums are 12 of AVX2's 16 vector
  // registers): a decode step with up to 5 speculative drafts reads the weights once (docs/performance.md,
  // session 36). More rows go four at a time (7 or 8 in one pass measured slower), a remainder of 1-3 rows in
  // its own pass.
  if (n == 5) return gemv_rows<5>(pool, x, k, w, m, out);
  if (n == 6) return gemv_rows<6>(pool, x, k, w, m, out);
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) gemv_rows<4>(pool, x + r * k, k, w, m, out + r * m);
  switch (n - r) {
    case 3: gemv_rows<3>(pool, x + r * k, k, w, m, out + r * m); break;
    case 2: gemv_rows<2>(pool, x + r * k, k, w, m, out + r * m); break;
    case 1: gemv_rows<1>(pool, x + r * k, k, w, m, out + r * m); break;
    default: break;
  }
}

}  // namespace vireo::cpu
