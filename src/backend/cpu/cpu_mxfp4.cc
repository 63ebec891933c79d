// Linear with MXFP4 weights (GPT-OSS's experts kept packed): out [n, m] = x [n, k] @ W^T + bias, W as 32-value
// blocks of E2M1 nibbles (16 bytes) with one E8M0 scale each. A weight decodes to fp4 * 2^(s - 127), computed
// as (2 * fp4) * 2^(s - 128): an integer in [-12, 12] times a power of two, so every weight is the float
// mxfp4_dequantize gives (s = 0: 2^-128 is a subnormal, exact; s = 255: 2^127, so 6 * 2^128 is inf as
// ldexp gives) up to the sign of zero (nibble 8, -0, decodes to +0; products and sums are unchanged).
// Decode rows (n <= kGemvMaxRows) read each weight byte once and never widen the matrix: bandwidth is what
// a decode step costs, and MXFP4 is a quarter of BF16's bytes. Each dot is summed in the same order whatever
// n is, as in gemv_bf16. More rows dequantize a band of rows to F32 and run an SGEMM, as linear() does.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

constexpr int64_t kBlock = 32;       // values per scale
constexpr int64_t kBlockBytes = 16;  // two nibbles a byte
// 2 * E2M1 by nibble (bit 3 the sign): integers, so a weight is one product with the block's 2^(s - 128).
constexpr int8_t kTwiceE2M1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(s - 128) for every scale byte s.
struct HalfScales {
  float v[256];
  HalfScales() {
    for (int s = 0; s < 256; ++s) v[s] = std::ldexp(1.0f, s - 128);
  }
};
const HalfScales kHalfScale;

// ---- portable kernels ----

// The 32 weights of one block: out[2j] from byte j's low nibble, out[2j + 1] from its high one.
inline void decode_block(const uint8_t* b, uint8_t s, float* out) {
  const float d = kHalfScale.v[s];
  for (int j = 0; j < 16; ++j) {
    out[2 * j] = static_cast<float>(kTwiceE2M1[b[j] & 0x0F]) * d;
    out[2 * j + 1] = static_cast<float>(kTwiceE2M1[b[j] >> 4]) * d;
  }
}

// out rows [j0, j1) for kRows rows of x [kRows, k]: 32 partial sums per dot (one per position in a block),
// folded pairwise at the end.
template <int kRows>
void dot_rows_portable(const float* x, int64_t k, const uint8_t* blocks, const uint8_t* scales, int64_t m,
                       int64_t j0, int64_t j1, float* out) {
  const int64_t groups = k / kBlock;
  for (int64_t j = j0; j < j1; ++j) {
    float acc[kRows][kBlock] = {};
    for (int64_t g = 0; g < groups; ++g) {
      float w[kBlock];
      decode_block(blocks + (j * groups + g) * kBlockBytes, scales[j * groups + g], w);
      for (int r = 0; r < kRows; ++r)
        for (int u = 0; u < kBlock; ++u) acc[r][u] += x[r * k + g * kBlock + u] * w[u];
    }
    for (int r = 0; r < kRows; ++r) {
      for (int width = kBlock / 2; width > 0; width /= 2)
        for (int u = 0; u < width; ++u) acc[r][u] += acc[r][u + width];
      out[r * m + j] = acc[r][0];
    }
  }
}

void dequantize_rows_portable(const uint8_t* blocks, const uint8_t* scales, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) decode_block(blocks + b * kBlockBytes, scales[b], out + b * kBlock);
}

// ---- AVX2 kernels (x86-64 CPUs that have AVX2 and FMA; picked at run time) ----
#if defined(__x86_64__)
#define VIREO_AVX2 __attribute__((target("avx2,fma")))

// The block's 32 weights as four vectors of 8 (values 0-7, 8-15, 16-23, 24-31): the nibbles split and
// interleaved back into element order, looked up as int8 by a byte shuffle, widened and scaled.
VIREO_AVX2 inline void decode_block_avx2(const uint8_t* b, uint8_t s, __m256 w[4]) {
  const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i lo = _mm_and_si128(raw, low4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
  const __m128i v0 = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));  // values 0..15 as int8
  const __m128i v1 = _mm_shuffle_epi8(table, _mm_unpackhi_epi8(lo, hi));  // values 16..31
  const __m256 d = _mm256_set1_ps(kHalfScale.v[s]);
  w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v0)), d);
  w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v0, 8))), d);
  w[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v1)), d);
  w[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v1, 8))), d);
}

VIREO_AVX2 inline float sum8(__m256 v) {  // a fixed tree: halves, then pairs
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// As dot_rows_portable, with two 8-lane accumulators per row of x (the block's vectors 0, 2 into the
// first, 1, 3 into the second): 2 * kRows registers, so kRows = 4 fits AVX2's 16 with the weights.
template <int kRows>
VIREO_AVX2 void dot_rows_avx2(const float* x, int64_t k, const uint8_t* blocks, const uint8_t* scales, int64_t m,
                              int64_t j0, int64_t j1, float* out) {
  const int64_t groups = k / kBlock;
  for (int64_t j = j0; j < j1; ++j) {
    __m256 acc[kRows][2];
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const uint8_t* wb = blocks + j * groups * kBlockBytes;
    const uint8_t* ws = scales + j * groups;
    for (int64_t g = 0; g < groups; ++g) {
      __m256 w[4];
      decode_block_avx2(wb + g * kBlockBytes, ws[g], w);
      for (int r = 0; r < kRows; ++r) {
        const float* xr = x + r * k + g * kBlock;
        acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xr), w[0], acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), w[1], acc[r][1]);
        acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 16), w[2], acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 24), w[3], acc[r][1]);
      }
    }
    for (int r = 0; r < kRows; ++r) out[r * m + j] = sum8(_mm256_add_ps(acc[r][0], acc[r][1]));
  }
}

VIREO_AVX2 void dequantize_rows_avx2(const uint8_t* blocks, const uint8_t* scales, int64_t num_blocks, float* out) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    __m256 w[4];
    decode_block_avx2(blocks + b * kBlockBytes, scales[b], w);
    for (int u = 0; u < 4; ++u) _mm256_storeu_ps(out + b * kBlock + u * 8, w[u]);
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#else
bool has_avx2() { return false; }
#endif

template <int kRows>
void gemv_rows(ThreadPool& pool, bool avx2, const float* x, int64_t k, const uint8_t* blocks, const uint8_t* scales,
               int64_t m, float* out) {
  pool.parallel_for(m, [&](int64_t b, int64_t e) {
#if defined(__x86_64__)
    if (avx2) return dot_rows_avx2<kRows>(x, k, blocks, scales, m, b, e, out);
#endif
    dot_rows_portable<kRows>(x, k, blocks, scales, m, b, e, out);
  }, 16);
}

// Up to kGemvMaxRows rows of x: four at a time share each weight row's decode; then 1-3.
void gemv(ThreadPool& pool, bool avx2, const float* x, int64_t n, int64_t k, const uint8_t* blocks,
          const uint8_t* scales, int64_t m, float* out) {
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) gemv_rows<4>(pool, avx2, x + r * k, k, blocks, scales, m, out + r * m);
  switch (n - r) {
    case 3: gemv_rows<3>(pool, avx2, x + r * k, k, blocks, scales, m, out + r * m); break;
    case 2: gemv_rows<2>(pool, avx2, x + r * k, k, blocks, scales, m, out + r * m); break;
    case 1: gemv_rows<1>(pool, avx2, x + r * k, k, blocks, scales, m, out + r * m); break;
    default: break;
  }
}

// More rows: bands of weight rows dequantized to F32 (at most 2^22 values, as linear()), each an SGEMM
// into out's columns.
void gemm(ThreadPool& pool, bool avx2, const float* x, int64_t n, int64_t k, const uint8_t* blocks,
          const uint8_t* scales, int64_t m, float* out) {
  const int64_t groups = k / kBlock;
  const int64_t band = std::max<int64_t>(1, std::min<int64_t>(m, (int64_t{1} << 22) / k));
  std::vector<float> wf(static_cast<size_t>(band * k));
  for (int64_t r0 = 0; r0 < m; r0 += band) {
    const int64_t rows = std::min(band, m - r0);
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
      const int64_t first = (r0 + b) * groups, count = (e - b) * groups;
#if defined(__x86_64__)
      if (avx2) return dequantize_rows_avx2(blocks + first * kBlockBytes, scales + first, count, wf.data() + b * k);
#endif
      dequantize_rows_portable(blocks + first * kBlockBytes, scales + first, count, wf.data() + b * k);
    }, 16);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, k, 1.0f, x, k, wf.data(), k, 0.0f, out + r0, m);
  }
}

}  // namespace

void linear_mxfp4(ThreadPool& pool, const Tensor& x, const Tensor& blocks, const Tensor& scales, const Tensor& bias,
                  const Tensor& out, Mxfp4Kernel kernel) {
  require_f32(x, "linear_mxfp4 x");
  require_f32(out, "linear_mxfp4 out");
  if (blocks.dtype != DType::kU8 || scales.dtype != DType::kU8 || blocks.ndim() != 2 || scales.ndim() != 2)
    throw Error("cpu backend: linear_mxfp4 expects U8 blocks [m, k / 2] and U8 scales [m, k / 32]");
  const int64_t m = blocks.dim(0), k = blocks.dim(1) * 2;
  const int64_t n = k ? x.numel() / k : 0;
  if (k % kBlock != 0 || scales.dim(0) != m || scales.dim(1) != k / kBlock || x.numel() != n * k ||
      out.numel() != n * m)
    throw Error("cpu backend: linear_mxfp4 shapes x " + x.shape_str() + ", blocks " + blocks.shape_str() +
                ", scales " + scales.shape_str() + ", out " + out.shape_str() +
                " do not agree (k a multiple of 32, blocks [m, k / 2], scales [m, k / 32])");
  if (!bias.empty()) {
    require_float(bias, "linear_mxfp4 bias");
    if (bias.numel() != m) throw Error("cpu backend: linear_mxfp4 bias must be [m]");
  }
  if (n == 0 || m == 0) return;
  const bool avx2 = kernel == Mxfp4Kernel::kAuto && has_avx2();
  const auto* b = blocks.ptr<uint8_t>();
  const auto* s = scales.ptr<uint8_t>();
  float* o = out.ptr<float>();
  if (n <= kGemvMaxRows) {
    gemv(pool, avx2, x.ptr<float>(), n, k, b, s, m, o);
  } else {
    gemm(pool, avx2, x.ptr<float>(), n, k, b, s, m, o);
  }
  if (bias.empty()) return;
  std::vector<float> bf(static_cast<size_t>(m));
  convert_to_f32(bias.data, bias.dtype, bf.data(), m);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < m; ++j) o[r * m + j] += bf[j];
}

}  // namespace vireo::cpu
