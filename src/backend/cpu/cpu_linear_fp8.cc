// Linear with FP8 E4M3 weights and one F32 scale a row (--quantization fp8; Tensor::row_scale):
// out [n, m] = (x [n, k] @ codes^T) * scale [m] (+ bias). Decode rows (n <= kGemvMaxRows) read each weight
// byte once, half BF16's bytes (decode on the CPU is bound by memory bandwidth), and sum each dot in 16
// lanes in a fixed order whatever n is (as gemv_bf16). More rows dequantize bands of rows to F32 (code x
// scale) for an SGEMM, as linear() does for BF16.
//
// Decoding: an E4M3 byte s eeee mmm placed as the half-precision bits s 0eeee mmm0000000 is its value
// times 2^-8, subnormals included (E4M3's exponent bias is 7, half precision's 15; both have subnormals at
// exponent 0). So the AVX-512 and AVX2 kernels widen 16 bytes to 16 halves with shifts and masks and
// convert them with F16C (no table lookups, no f32 subnormals), and the 2^8 goes into the row's scale. The
// portable kernel decodes through a 256-entry table of the same values times 2^-8: the same products and
// the same per-lane FMAs, so all three give the same bits.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/row_groups.h"
#include "core/error.h"
#include "core/fp8.h"

namespace vireo::cpu {
namespace {

constexpr int kLanes = 16;
constexpr float kUnscale = 256.f;  // the decoded values are the codes' values x 2^-8

const std::array<float, 256>& decode_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c) v[c] = fp8_e4m3_to_f32(static_cast<uint8_t>(c)) / kUnscale;
    return v;
  }();
  return t;
}

// Rows [j0, j1) of out for kRows rows of x [kRows, k]; w: [m, k] codes, k % 16 == 0.
template <int kRows>
void dot_rows_portable(const float* x, int64_t k, const uint8_t* w, const float* scale, int64_t m, int64_t j0,
                       int64_t j1, float* out) {
  const std::array<float, 256>& t = decode_table();
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = w + j * k;
    float acc[kRows][kLanes] = {};
    for (int64_t i = 0; i < k; i += kLanes) {
      float wf[kLanes];
      for (int u = 0; u < kLanes; ++u) wf[u] = t[wr[i + u]];
      for (int r = 0; r < kRows; ++r)
        for (int u = 0; u < kLanes; ++u) acc[r][u] = std::fma(x[r * k + i + u], wf[u], acc[r][u]);
    }
    for (int r = 0; r < kRows; ++r) {
      for (int width = kLanes / 2; width > 0; width /= 2)  // pairwise: a fixed tree
        for (int u = 0; u < width; ++u) acc[r][u] += acc[r][u + width];
      out[r * m + j] = acc[r][0] * (scale[j] * kUnscale);
    }
  }
}

#if defined(__x86_64__)
bool avx2_f16c() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return ok;
}

// 16 codes -> their half-precision bits s 0eeee mmm0000000 (value x 2^-8 each).
__attribute__((target("avx2,fma,f16c"))) inline __m256i half_bits16(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
  return _mm256_or_si256(sign, mag);
}

// 16 codes -> two vectors of 8 floats (value x 2^-8 each), lanes 0-7 and 8-15.
__attribute__((target("avx2,fma,f16c"))) inline void decode16(const uint8_t* p, __m256& lo, __m256& hi) {
  const __m256i h = half_bits16(p);
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// As dot_rows_portable, the 16 lanes as two 8-float registers a row (the same sums in the same order).
template <int kRows>
__attribute__((target("avx2,fma,f16c"))) void dot_rows_avx2(const float* x, int64_t k, const uint8_t* w,
                                                             const float* scale, int64_t m, int64_t j0, int64_t j1,
                                                             float* out) {
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = w + j * k;
    __m256 acc[kRows][2];
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += kLanes) {
      if (i % 64 == 0) __builtin_prefetch(wr + i + 512);  // enough misses in flight to stream from DRAM
      __m256 lo, hi;
      decode16(wr + i, lo, hi);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + i), lo, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + i + 8), hi, acc[r][1]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      alignas(32) float a[kLanes];
      _mm256_store_ps(a, acc[r][0]);
      _mm256_store_ps(a + 8, acc[r][1]);
      for (int width = kLanes / 2; width > 0; width /= 2)
        for (int u = 0; u < width; ++u) a[u] += a[u + width];
      out[r * m + j] = a[0] * (scale[j] * kUnscale);
    }
  }
}

bool avx512() {
  static const bool ok = avx2_f16c() && __builtin_cpu_supports("avx512f");
  return ok;
}

// As dot_rows_avx2 with the 16 lanes in one 512-bit register a row: half the FMA and x-load instructions,
// which is what bounds a step of several rows on few cores. Each lane's FMAs and the final tree are the
// same, so the sums are the same bits.
template <int kRows>
__attribute__((target("avx512f,avx2,fma,f16c"))) void dot_rows_avx512(const float* x, int64_t k, const uint8_t* w,
                                                                        const float* scale, int64_t m, int64_t j0,
                                                                        int64_t j1, float* out) {
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = w + j * k;
    __m512 acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += kLanes) {
      if (i % 64 == 0) __builtin_prefetch(wr + i + 512);
      const __m512 wv = _mm512_cvtph_ps(half_bits16(wr + i));
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + i), wv, acc[r]);
    }
    for (int r = 0; r < kRows; ++r) {
      alignas(64) float a[kLanes];
      _mm512_store_ps(a, acc[r]);
      for (int width = kLanes / 2; width > 0; width /= 2)
        for (int u = 0; u < width; ++u) a[u] += a[u + width];
      out[r * m + j] = a[0] * (scale[j] * kUnscale);
    }
  }
}

// dst [k] = code x s (s already times 2^8), k % 16 == 0.
__attribute__((target("avx2,fma,f16c"))) void dequantize_row_avx2(const uint8_t* src, int64_t k, float s, float* dst) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < k; i += kLanes) {
    __m256 lo, hi;
    decode16(src + i, lo, hi);
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(lo, vs));
    _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(hi, vs));
  }
}
#endif

// Row r of the weights as F32 (code x scale): the same products whichever kernel decodes.
void dequantize_row(const uint8_t* src, int64_t k, float scale, float* dst) {
  const float s = scale * kUnscale;
#if defined(__x86_64__)
  if (avx2_f16c()) return dequantize_row_avx2(src, k, s, dst);
#endif
  const std::array<float, 256>& t = decode_table();
  for (int64_t i = 0; i < k; ++i) dst[i] = t[src[i]] * s;
}

}  // namespace

void fp8_e4m3_widen(const uint8_t* src, int64_t n, float scale, float* dst) {
  const int64_t n16 = n / kLanes * kLanes;
  dequantize_row(src, n16, scale, dst);
  for (int64_t i = n16; i < n; ++i) dst[i] = fp8_e4m3_to_f32(src[i]) * scale;
}

namespace {

template <int kRows>
void dot_rows(const float* x, int64_t k, const uint8_t* w, const float* scale, int64_t m, int64_t j0, int64_t j1,
              float* out, Fp8Kernel kernel) {
#if defined(__x86_64__)
  if (kernel == Fp8Kernel::kAuto && avx512()) return dot_rows_avx512<kRows>(x, k, w, scale, m, j0, j1, out);
  if (kernel != Fp8Kernel::kPortable && avx2_f16c()) return dot_rows_avx2<kRows>(x, k, w, scale, m, j0, j1, out);
#endif
  dot_rows_portable<kRows>(x, k, w, scale, m, j0, j1, out);
}

void gemv(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, const float* scale, int64_t m,
          float* out, Fp8Kernel kernel) {
  auto pass = [&](auto rows_tag, int64_t r) {
    constexpr int kRows = decltype(rows_tag)::value;
    pool.parallel_for(m, [&](int64_t b, int64_t e) {
      dot_rows<kRows>(x + r * k, k, w, scale, m, b, e, out + r * m, kernel);
    }, 32);
  };
  // 5 and 6 rows (a decode step with n-gram drafts) in one pass over the weights, as gemv_bf16; else fours
  // and a remainder.
  if (n == 5) return pass(std::integral_constant<int, 5>{}, 0);
  if (n == 6) return pass(std::integral_constant<int, 6>{}, 0);
  for_row_groups(n, pass);
}

// Bands of at most 2^22 weights dequantized to F32 (code x scale), each an SGEMM into out's columns.
void gemm(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint8_t* w, const float* scale, int64_t m,
          float* out) {
  const int64_t band = std::max<int64_t>(1, std::min<int64_t>(m, (int64_t{1} << 22) / k));
  std::vector<float> wf(static_cast<size_t>(band * k));
  for (int64_t r0 = 0; r0 < m; r0 += band) {
    const int64_t rows = std::min(band, m - r0);
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) dequantize_row(w + (r0 + r) * k, k, scale[r0 + r], wf.data() + r * k);
    }, 4);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, k, 1.0f, x, k, wf.data(), k, 0.0f, out + r0, m);
  }
}

}  // namespace

void linear_fp8(ThreadPool& pool, const float* x, int64_t n, int64_t k, const Tensor& w, int64_t m, float* out,
                Fp8Kernel kernel) {
  if (w.dtype != DType::kF8E4M3 || w.row_scale == nullptr || k % kLanes != 0)
    throw Error("cpu linear: F8_E4M3 weights " + w.shape_str() + " need row scales and rows of a multiple of 16");
  const auto* codes = w.ptr<uint8_t>();
  if (n > kGemvMaxRows) gemm(pool, x, n, k, codes, w.row_scale, m, out);
  else gemv(pool, x, n, k, codes, w.row_scale, m, out, kernel);
}

}  // namespace vireo::cpu
