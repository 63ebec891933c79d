// Structured outputs on the device: logits[rows[g], v] = -inf where bit v of bitmask row g is clear, in
// place, before logit_bias and the sample op. Grid (ceil(W / 8), G) of 256 threads: a warp takes one
// 32-bit word (32 tokens), so a block covers 256 tokens of one row; a full word (all allowed, the common
// case inside a JSON string) costs one load and no writes.
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename T>
__global__ void token_bitmask_kernel(T* logits, const int32_t* rows, const uint32_t* bitmask, int64_t num_rows,
                                     int64_t vocab, int64_t words) {
  pdl_enter();
  const int64_t g = blockIdx.y;
  const int64_t word = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  if (word >= words) return;
  const int32_t row = rows[g];
  if (row < 0 || row >= num_rows) return;  // validated upstream; never a fault here
  const uint32_t bits = bitmask[g * words + word];
  const int64_t tok = word * 32 + threadIdx.x % 32;
  if (tok < vocab && !((bits >> (threadIdx.x % 32)) & 1u)) logits[row * vocab + tok] = from_f<T>(-INFINITY);
}

}  // namespace

void launch_token_bitmask(const TokenBitmaskParams& p, cudaStream_t stream) {
  if (p.rows.empty()) return;
  if (p.logits.ndim() != 2) throw Error("apply_token_bitmask: logits must be [M, V]");
  const int64_t v = p.logits.dim(1), words = (v + 31) / 32, g = p.rows.numel();
  if (p.rows.dtype != DType::kI32 || p.bitmask.dtype != DType::kI32 || p.bitmask.numel() != g * words)
    throw Error("apply_token_bitmask: rows must be I32 [G] and bitmask I32 [G, ceil(V / 32)]");
  if (g > 65535) throw Error("apply_token_bitmask: at most 65535 rows");
  dispatch_float(p.logits.dtype, "apply_token_bitmask logits", [&](auto t) {
    using T = decltype(t);
    launch_pdl(token_bitmask_kernel<T>, dim3(static_cast<unsigned>((words + kWarpsPerBlock - 1) / kWarpsPerBlock),
                                             static_cast<unsigned>(g)),
               dim3(32 * kWarpsPerBlock), 0, stream, static_cast<T*>(p.logits.data), p.rows.ptr<int32_t>(),
               reinterpret_cast<const uint32_t*>(p.bitmask.ptr<int32_t>()), p.logits.dim(0), v, words);
  });
  check_launch("apply_token_bitmask");
}

}  // namespace vireo::cuda
