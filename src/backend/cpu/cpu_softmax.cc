// softmax_numerators: four floats at a time (GCC/Clang vector extensions; SSE2 on any x86-64): the
// softmax's exp is most of the CPU time of a long prefill next to the GEMMs, and the scalar std::exp
// does not vectorize. Compiled for the baseline target only, so prefill and decode rows share it.
#include "backend/cpu/cpu_softmax.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace vireo::cpu {
namespace {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

// e^x for x <= 0 (a score minus its row's max), ~1e-7 relative error (Cephes expf): x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, e^r by its degree-7 minimax polynomial, 2^n built in the exponent
// bits. x < -87.3 (e^x < 1.2e-38, beside the row max's e^0 = 1) gives exactly 0.
inline F4 exp_nonpositive(F4 x) {
  const F4 zero{0, 0, 0, 0};
  const I4 under = x < -87.3f;  // lanes of all ones where e^x is taken as 0
  x = under ? zero : x;
  const F4 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (|.| < 2^22)
  const F4 r = x - n * 0.693359375f - n * -2.12194440e-4f;               // x - n ln2, ln2 in two parts
  F4 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F4 er = p * r * r + r + 1.0f;
  const I4 bits = (__builtin_convertvector(n, I4) + 127) << 23;  // 2^n, n in [-126, 0]
  F4 two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return under ? zero : er * two_n;
}

}  // namespace

float softmax_numerators(float* sc, int n, float sink) {
  float mx = sink;
  for (int i = 0; i < n; ++i) mx = std::max(mx, sc[i]);
  F4 acc{0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 v;
    std::memcpy(&v, sc + i, sizeof v);
    v = exp_nonpositive(v - mx);
    std::memcpy(sc + i, &v, sizeof v);
    acc += v;
  }
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  if (i < n) {  // the last 1-3 scores, padded with the max (e^0, not added)
    F4 v = F4{0, 0, 0, 0} + mx;
    std::memcpy(&v, sc + i, (n - i) * sizeof(float));
    v = exp_nonpositive(v - mx);
    for (int j = 0; i + j < n; ++j) sum += (sc[i + j] = v[j]);
  }
  if (sink > -std::numeric_limits<float>::infinity()) sum += std::exp(sink - mx);
  return sum;
}

}  // namespace vireo::cpu
