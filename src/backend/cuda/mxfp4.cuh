// MXFP4 (E2M1 values, one E8M0 scale per 32 of a row; MoeParams gate_up_scales) to bf16 on the device,
// for the MoE kernels that keep GPT-OSS's experts packed (moe_decode_mxfp4.cu, moe_grouped_gemm.cu).
// A nibble s e1 e0 m moved to bf16 bits 15 | 8..6 is the bf16 of fp4 * 2^-126 (exponent field e1 e0, so
// e = 0 is the subnormal 0.5 * 2^-126 for m = 1, zero for m = 0); one bf16x2 multiply by 2^(s - 1)
// then gives fp4 * 2^(s - 127) exactly: every factor is a power of two times an E2M1 value, so the
// products are exact while they stay in bf16's range (s <= 128 for the one multiply; larger scales
// take a second one). The same values as the host dequantization (src/model/mxfp4.cc) rounded to bf16,
// which is exact for them.
#pragma once
#include <cstdint>

namespace vireo::cuda {

// bf16x2 of nibbles j (low half) and j + 4 (high half) of w, each as fp4 * 2^-126.
__device__ __forceinline__ unsigned fp4_pair_bits(unsigned w, int j) {
  const unsigned t = w >> (4 * j);
  return ((t << 6) & 0x01C001C0u) | ((t << 12) & 0x80008000u);
}

__device__ __forceinline__ unsigned bf16x2_mul(unsigned a, unsigned b) {
  unsigned d;  // a * b + (-0): exactly a * b (subnormals kept)
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// The multipliers that take fp4_pair_bits to fp4 * 2^(s - 127) for an E8M0 scale s.
struct Fp4Scale {
  unsigned m1, m2;  // bf16x2 splats; m2 only when two
  bool two;
};
__device__ __forceinline__ Fp4Scale fp4_scale(unsigned s) {
  if (s <= 128u) {
    const unsigned b = (s + 126u) << 7;  // 2^(s - 1): exponent field s - 1 + 127
    return {b | (b << 16), 0u, false};
  }
  const unsigned b = s << 7;  // 2^(s - 127), after 2^126 (exponent field 253)
  return {0x7E807E80u, b | (b << 16), true};
}
__device__ __forceinline__ unsigned fp4_scaled(unsigned bits, const Fp4Scale& sc) {
  const unsigned v = bf16x2_mul(bits, sc.m1);
  return sc.two ? bf16x2_mul(v, sc.m2) : v;
}

// 32 elements (one block: 16 bytes q, scale s) as bf16 in natural order: out[i] holds elements 2i, 2i + 1.
__device__ __forceinline__ void fp4_block_to_bf16(const uint4& q, unsigned s, unsigned (&out)[16]) {
  const Fp4Scale sc = fp4_scale(s);
  const unsigned* w = &q.x;
#pragma unroll
  for (int qi = 0; qi < 4; ++qi) {
    unsigned p[4];  // p[j]: elements (8 qi + j, 8 qi + j + 4)
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = fp4_scaled(fp4_pair_bits(w[qi], j), sc);
    out[4 * qi + 0] = __byte_perm(p[0], p[1], 0x5410);  // elements 0, 1 of the word
    out[4 * qi + 1] = __byte_perm(p[2], p[3], 0x5410);  // 2, 3
    out[4 * qi + 2] = __byte_perm(p[0], p[1], 0x7632);  // 4, 5
    out[4 * qi + 3] = __byte_perm(p[2], p[3], 0x7632);  // 6, 7
  }
}

}  // namespace vireo::cuda
