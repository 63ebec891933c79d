// Hopper warpgroup MMA (wgmma, sm_90a) building blocks: shared-memory matrix descriptors for the
// 128-byte swizzled layout, the fence / commit / wait wrappers, and m64nNk16 (N = 64, 128) wrappers
// with fp32 accumulators for bf16 / f16 operands, A from shared memory (ss) or from registers (rs).
//
// Layout used throughout (PTX ISA "Shared Memory Matrix Layout", 128B swizzle): a matrix whose
// contiguous dimension is 64 elements (128 bytes) wide is stored as rows of 128 bytes; the 16-byte
// chunk c of row r sits at chunk c ^ (r % 8) of that row. Eight rows form a 1024-byte swizzle atom,
// and the hardware applies the XOR on address bits [4,7) from bits [7,10), so every tile base must be
// 1024-byte aligned. A wider contiguous dimension (D = 128) is split into 64-element panels, one
// after the other. The same bytes serve both majorness cases:
//   K-major (A = Q [64 rows, D], B = K [keys, D]): SBO = 1024 (next 8 rows), LBO unused (set to 16);
//     the k16 step kk of a panel starts at +32 * kk bytes (within the atom; the swizzle follows the
//     address bits).
//   MN-major (B = V [keys (= k), D (= n)], transpose bit set): SBO = 1024 (next 8 keys), LBO = the
//     panel stride (next 64 columns of n); the k16 step ks starts at +16 * 128 * ks bytes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace vireo::cuda {
namespace {

// Byte offset of the 16-byte chunk `chunk` (0..7) of row `row` in a 128B-swizzled panel.
__device__ __forceinline__ uint32_t swz128(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

// Matrix descriptor: start address, leading / stride byte offsets (all >> 4), 128B swizzle (1 << 62).
// Base offset (bits 49-51) stays 0: every start address used is a 1024-byte aligned atom base plus
// an offset below 128 bytes.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}

// The descriptor of the address `bytes` (a multiple of 16) past desc's: the start address field is
// bits 0-13 (address >> 4) and every shared address is below 228 KiB (< 2^14 * 16), so the sum never
// carries out of the field. A tile's k-steps then cost one add of a constant each, not the masking and
// shifting of wgmma_desc (ncu, session 51: ~150 uniform-datapath instructions a consumer warp a step).
__device__ __forceinline__ uint64_t wgmma_desc_add(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Orders this warpgroup's register / shared-memory writes before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy shared-memory writes (cp.async, st.shared) made visible to the async proxy that
// wgmma reads through; each writing thread runs it after its writes landed, before the barrier.
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Pins accumulator registers at this point of the program: after a wgmma_wait, so that no read of
// them is scheduled before the wait (the wait itself names no registers).
template <int R>
__device__ __forceinline__ void reg_fence(float (&d)[R][4]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// The wrappers below: d (the m64nN fp32 accumulator, N / 8 groups of the mma.sync m16n8 C layout;
// warp w of the warpgroup holds rows 16w + lane / 4 (+ 8), columns 8i + 2 (lane % 4) (+ 1) in d[i])
// += A * B; scale_d = 0 ignores d's old value. ss: A K-major in shared memory (desc_a); rs: A in
// registers as the mma.sync m16n8k16 A fragment of the warp's 16 rows. B K-major (kTransB = 0) or
// MN-major (kTransB = 1) in shared memory (desc_b).
// The accumulator operands: d[i][0..3] for i < 8 (n64) or < 16 (n128), %0.. in that order.
#define VIREO_WGMMA_ACC4(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define VIREO_WGMMA_ACC_N64                                                                           \
  VIREO_WGMMA_ACC4(0), VIREO_WGMMA_ACC4(1), VIREO_WGMMA_ACC4(2), VIREO_WGMMA_ACC4(3), VIREO_WGMMA_ACC4(4), \
      VIREO_WGMMA_ACC4(5), VIREO_WGMMA_ACC4(6), VIREO_WGMMA_ACC4(7)
#define VIREO_WGMMA_ACC_N128                                                                          \
  VIREO_WGMMA_ACC_N64, VIREO_WGMMA_ACC4(8), VIREO_WGMMA_ACC4(9), VIREO_WGMMA_ACC4(10), VIREO_WGMMA_ACC4(11), \
      VIREO_WGMMA_ACC4(12), VIREO_WGMMA_ACC4(13), VIREO_WGMMA_ACC4(14), VIREO_WGMMA_ACC4(15)
#define VIREO_WGMMA_REGS_N64                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}, "
#define VIREO_WGMMA_REGS_N128                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "

// One instruction per (shape, operand source) for element type TY ("bf16" or "f16"); the predicate p
// is scale_d != 0.
#define VIREO_WGMMA_SS_N64(TY)                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " VIREO_WGMMA_REGS_N64         \
               "%32, %33, p, 1, 1, 0, 0;\n}\n"                                                           \
               : VIREO_WGMMA_ACC_N64                                                                     \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define VIREO_WGMMA_SS_N128(TY)                                                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " VIREO_WGMMA_REGS_N128       \
               "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                           \
               : VIREO_WGMMA_ACC_N128                                                                    \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define VIREO_WGMMA_RS_N64(TY)                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " VIREO_WGMMA_REGS_N64         \
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                                           \
               : VIREO_WGMMA_ACC_N64                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#define VIREO_WGMMA_RS_N128(TY)                                                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " VIREO_WGMMA_REGS_N128       \
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                                           \
               : VIREO_WGMMA_ACC_N128                                                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB))

template <typename T>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) VIREO_WGMMA_SS_N64("bf16");
  else VIREO_WGMMA_SS_N64("f16");
}

template <typename T>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) VIREO_WGMMA_SS_N128("bf16");
  else VIREO_WGMMA_SS_N128("f16");
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[8][4], const unsigned (&a)[4], uint64_t desc_b,
                                             int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) VIREO_WGMMA_RS_N64("bf16");
  else VIREO_WGMMA_RS_N64("f16");
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[16][4], const unsigned (&a)[4], uint64_t desc_b,
                                              int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) VIREO_WGMMA_RS_N128("bf16");
  else VIREO_WGMMA_RS_N128("f16");
}

#undef VIREO_WGMMA_SS_N64
#undef VIREO_WGMMA_SS_N128
#undef VIREO_WGMMA_RS_N64
#undef VIREO_WGMMA_RS_N128
#undef VIREO_WGMMA_REGS_N64
#undef VIREO_WGMMA_REGS_N128
#undef VIREO_WGMMA_ACC_N64
#undef VIREO_WGMMA_ACC_N128
#undef VIREO_WGMMA_ACC4


}  // namespace
}  // namespace vireo::cuda
