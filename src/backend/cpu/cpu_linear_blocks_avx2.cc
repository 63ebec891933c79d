// AVX2 decode-row kernels for the common GGUF block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K): the quants are
// widened to floats in registers and dotted with x, and each sub-block's scale is applied once to its
// partial sum instead of to every weight (K-quants' mins once per sub-block through the sums of x over
// each 32 values). So a dot is the same sum as dequantize-then-dot regrouped: equal up to float rounding
// (tests/backend_cpu/cpu_linear_blocks_test.cc compares with the dequantized weights). The sum order
// depends only on k, never on how many rows of x come (batch invariance up to kGemvMaxRows, as gemv_bf16).
#include "backend/cpu/cpu_linear_blocks_avx2.h"
#include "backend/cpu/row_groups.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <vector>

#include "core/quant_blocks.h"

namespace vireo::cpu {
namespace {

#define VIREO_AVX2 __attribute__((target("avx2,fma,f16c")))
// The block kernels inline into dot_rows, so that the accumulators stay in registers across blocks.
#define VIREO_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define VIREO_AVX2_INLINE_LAMBDA __attribute__((target("avx2,fma,f16c"), always_inline))

constexpr int kPrefetchBytes = 1536;  // ~10 Q4_K blocks: measured best of 0-6144 on the 2-core VM

VIREO_AVX2_INLINE float half(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

VIREO_AVX2_INLINE float sum8(__m256 v) {  // a fixed tree: halves, then pairs
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Bytes [8v, 8v + 8) of q (v < 4) as 8 floats, signed or unsigned.
template <bool kSigned>
VIREO_AVX2_INLINE __m256 widen8(__m256i q, int v) {
  const __m128i half = v < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
  const __m128i part = (v & 1) ? _mm_srli_si128(half, 8) : half;
  return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi8_epi32(part) : _mm256_cvtepu8_epi32(part));
}

// The 32 quants q (bytes as integers) of one sub-block dotted with x[0..32) of each row, times the
// sub-block's scale d: acc[r] += d * (x[r] . q).
template <int kRows, bool kSigned>
VIREO_AVX2_INLINE void dot32(__m256i q, const float* x, int64_t k, __m256 d, __m256* acc) {
  const __m256 q0 = widen8<kSigned>(q, 0), q1 = widen8<kSigned>(q, 1), q2 = widen8<kSigned>(q, 2),
               q3 = widen8<kSigned>(q, 3);
  for (int r = 0; r < kRows; ++r) {
    const float* xr = x + r * k;
    __m256 p = _mm256_mul_ps(_mm256_loadu_ps(xr), q0);
    p = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), q1, p);
    p = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 16), q2, p);
    p = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 24), q3, p);
    acc[r] = _mm256_fmadd_ps(d, p, acc[r]);
  }
}

// As dot32 for 16 quants (the low 16 bytes of q when hi is false, else the high 16) of a Q6_K sub-block.
template <int kRows>
VIREO_AVX2_INLINE void dot16(__m256i q, bool hi, const float* x, int64_t k, __m256 d, __m256* acc) {
  const __m256 q0 = widen8<true>(q, hi ? 2 : 0), q1 = widen8<true>(q, hi ? 3 : 1);
  for (int r = 0; r < kRows; ++r) {
    const float* xr = x + r * k;
    __m256 p = _mm256_mul_ps(_mm256_loadu_ps(xr), q0);
    p = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), q1, p);
    acc[r] = _mm256_fmadd_ps(d, p, acc[r]);
  }
}

template <int kRows>
VIREO_AVX2_INLINE void block_q8_0(const uint8_t* b, const float* x, int64_t k, const float*, int64_t, __m256* acc, float*) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  dot32<kRows, true>(q, x, k, _mm256_set1_ps(half(b)), acc);
}

// Q4_0: value j is (nibble - 8) * d, low nibbles of the 16 bytes values 0-15, high ones 16-31.
template <int kRows>
VIREO_AVX2_INLINE void block_q4_0(const uint8_t* b, const float* x, int64_t k, const float*, int64_t, __m256* acc,
                                  float*) {
  const __m256i low4 = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8);
  __m256 p[kRows];
  for (int r = 0; r < kRows; ++r) p[r] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * v)));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(q, low4), eight));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(q, 4), eight));
    for (int r = 0; r < kRows; ++r) {
      p[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + 8 * v), lo, p[r]);
      p[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + 16 + 8 * v), hi, p[r]);
    }
  }
  const __m256 d = _mm256_set1_ps(half(b));
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(d, p[r], acc[r]);
}

// Q4_K / Q5_K: sub-block j (32 values) is d * sc_j * q - dmin * m_j, so its dot is d * sc_j * (x . q)
// minus dmin * m_j * sum(x over the sub-block) (xsum: [kRows, k / 32] sums of x, row stride xs). A pair
// of sub-blocks shares 32 bytes of qs (low nibbles: the first, high: the second); each 8 bytes are
// widened to 32-bit lanes once and split there, which costs fewer instructions than splitting bytes.
template <int kRows, bool kFiveBit>
VIREO_AVX2_INLINE void block_qk(const uint8_t* b, const float* x, int64_t k, const float* xsum, int64_t xs, __m256* acc,
                         float* mins) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFiveBit ? 48 : 16);
  const __m256i low4 = _mm256_set1_epi32(0x0F), one = _mm256_set1_epi32(1);
#pragma GCC unroll 4
  for (int pair = 0; pair < 4; ++pair) {
    int sc[2], m[2];
    qblocks::k_scale_min(2 * pair, scales, sc[0], m[0]);
    qblocks::k_scale_min(2 * pair + 1, scales, sc[1], m[1]);
    __m256 p[kRows][2];
    for (int r = 0; r < kRows; ++r) p[r][0] = p[r][1] = _mm256_setzero_ps();
    const float* xp = x + 64 * pair;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 32 * pair + 8 * v)));
      __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_srli_epi32(q, 4);
      if (kFiveBit) {  // bit 2 pair (+1) of qh[l] is the fifth bit of value l of the first (second) sub-block
        const __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qh + 8 * v)));
        lo = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * pair), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * pair + 1), one), 4));
      }
      const __m256 flo = _mm256_cvtepi32_ps(lo), fhi = _mm256_cvtepi32_ps(hi);
      for (int r = 0; r < kRows; ++r) {
        p[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + r * k + 8 * v), flo, p[r][0]);
        p[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + r * k + 32 + 8 * v), fhi, p[r][1]);
      }
    }
    const __m256 d0 = _mm256_set1_ps(d * sc[0]), d1 = _mm256_set1_ps(d * sc[1]);
    const float dm0 = dmin * m[0], dm1 = dmin * m[1];
    for (int r = 0; r < kRows; ++r) {
      acc[r] = _mm256_fmadd_ps(d0, p[r][0], acc[r]);
      acc[r] = _mm256_fmadd_ps(d1, p[r][1], acc[r]);
      mins[r] += dm0 * xsum[r * xs + 2 * pair];
      mins[r] += dm1 * xsum[r * xs + 2 * pair + 1];
    }
  }
}

// Q6_K: value l + 32k of half n is d * sc[l / 16 + 2k] * (q - 32), q = 4 bits of ql (k odd: bytes
// 32-63; k >= 2: high nibbles) and bits 2k of qh[l].
template <int kRows>
VIREO_AVX2_INLINE void block_q6_k(const uint8_t* b, const float* x, int64_t k, const float*, int64_t, __m256* acc, float*) {
  const float d = half(b + 208);
  const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b + 64 * n;
    const __m256i qla = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i qlb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * n));
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * n);
#pragma GCC unroll 4
    for (int kk = 0; kk < 4; ++kk) {
      const __m256i base = (kk & 1) ? qlb : qla;
      const __m256i nib = (kk >> 1) ? _mm256_and_si256(_mm256_srli_epi16(base, 4), low4) : _mm256_and_si256(base, low4);
      const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * kk), three), 4);
      const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib, top), bias);
      const float* xv = x + 128 * n + 32 * kk;
      dot16<kRows>(q, false, xv, k, _mm256_set1_ps(d * sc[2 * kk]), acc);
      dot16<kRows>(q, true, xv + 16, k, _mm256_set1_ps(d * sc[2 * kk + 1]), acc);
    }
  }
}

constexpr bool has_kernel(DType t) {
  return t == DType::kQ4_0 || t == DType::kQ8_0 || t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K;
}

template <int kRows, DType kT>
VIREO_AVX2 void dot_rows(const float* x, const float* xsum, int64_t k, const uint8_t* w, int64_t m, int64_t j0,
                         int64_t j1, float* out) {
  constexpr qblocks::Format f = qblocks::format(kT);
  auto kernel = [](const uint8_t* b, const float* x, int64_t k, const float* xsum, int64_t xs, __m256* acc,
                   float* mins) VIREO_AVX2_INLINE_LAMBDA {
    if constexpr (kT == DType::kQ4_0) block_q4_0<kRows>(b, x, k, xsum, xs, acc, mins);
    else if constexpr (kT == DType::kQ8_0) block_q8_0<kRows>(b, x, k, xsum, xs, acc, mins);
    else if constexpr (kT == DType::kQ4_K) block_qk<kRows, false>(b, x, k, xsum, xs, acc, mins);
    else if constexpr (kT == DType::kQ5_K) block_qk<kRows, true>(b, x, k, xsum, xs, acc, mins);
    else block_q6_k<kRows>(b, x, k, xsum, xs, acc, mins);
  };
  const int64_t nb = k / f.values, xs = k / 32;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = w + j * nb * f.bytes;
    __m256 acc[kRows];
    float mins[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps(), mins[r] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      // A few blocks ahead: a core alone keeps too few cache misses in flight to stream at DRAM speed.
      _mm_prefetch(reinterpret_cast<const char*>(row + b * f.bytes) + kPrefetchBytes, _MM_HINT_T0);
      kernel(row + b * f.bytes, x + b * f.values, k, xsum ? xsum + b * (f.values / 32) : nullptr, xs, acc, mins);
    }
    for (int r = 0; r < kRows; ++r) out[r * m + j] = sum8(acc[r]) - mins[r];
  }
}

template <DType kT>
void run(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, int64_t m, float* out) {
  // Sums of x over every 32 values, for the K-quants' mins: [n, k / 32].
  std::vector<float> xsum;
  if (kT == DType::kQ4_K || kT == DType::kQ5_K) {
    xsum.assign(static_cast<size_t>(n * (k / 32)), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < k / 32; ++g) {
        float s = 0.0f;
        for (int u = 0; u < 32; ++u) s += x[r * k + g * 32 + u];
        xsum[r * (k / 32) + g] = s;
      }
  }
  auto pass = [&](auto rows_tag, int64_t r) {
    constexpr int kRows = decltype(rows_tag)::value;
    const float* xs = xsum.empty() ? nullptr : xsum.data() + r * (k / 32);
    pool.parallel_for(m, [&](int64_t b, int64_t e) { dot_rows<kRows, kT>(x + r * k, xs, k, w, m, b, e, out + r * m); },
                      16);
  };
  for_row_groups(n, pass);
}

}  // namespace

bool gemv_blocks_avx2_available(DType t) {
  static const bool cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return cpu && has_kernel(t);
}

void gemv_blocks_avx2(ThreadPool& pool, const float* x, int64_t n, int64_t k, DType t, const uint8_t* w, int64_t m,
                      float* out) {
  switch (t) {
    case DType::kQ4_0: return run<DType::kQ4_0>(pool, x, n, k, w, m, out);
    case DType::kQ8_0: return run<DType::kQ8_0>(pool, x, n, k, w, m, out);
    case DType::kQ4_K: return run<DType::kQ4_K>(pool, x, n, k, w, m, out);
    case DType::kQ5_K: return run<DType::kQ5_K>(pool, x, n, k, w, m, out);
    case DType::kQ6_K: return run<DType::kQ6_K>(pool, x, n, k, w, m, out);
    default: return;
  }
}

}  // namespace vireo::cpu

#else  // not x86-64: the portable kernels of cpu_linear_blocks.cc serve every type

namespace vireo::cpu {
bool gemv_blocks_avx2_available(DType) { return false; }
void gemv_blocks_avx2(ThreadPool&, const float*, int64_t, int64_t, DType, const uint8_t*, int64_t, float*) {}
}  // namespace vireo::cpu

#endif
