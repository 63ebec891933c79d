// OpenAI logit_bias on the device: logits[row, token] += bias for a few (row, token, bias) entries, in
// place, before the sample op. One thread per entry; the (row, token) pairs of a step are distinct, so
// no two threads touch one element.
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

template <typename T>
__global__ void logit_bias_kernel(T* logits, const int32_t* entries, int64_t num_entries, int64_t rows, int64_t vocab) {
  pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= num_entries) return;
  const int32_t row = entries[3 * i], tok = entries[3 * i + 1];
  if (row < 0 || row >= rows || tok < 0 || tok >= vocab) return;  // validated upstream; never a fault here
  const float bias = __int_as_float(entries[3 * i + 2]);
  T* x = logits + row * vocab + tok;
  *x = from_f<T>(to_f(*x) + bias);
}

}  // namespace

void launch_logit_bias(const LogitBiasParams& p, cudaStream_t stream) {
  if (p.entries.empty()) return;
  if (p.logits.ndim() != 2) throw Error("add_logit_bias: logits must be [M, V]");
  if (p.entries.dtype != DType::kI32 || p.entries.numel() % 3 != 0)
    throw Error("add_logit_bias: entries must be I32 [E, 3]");
  const int64_t n = p.entries.numel() / 3;
  dispatch_float(p.logits.dtype, "add_logit_bias logits", [&](auto t) {
    using T = decltype(t);
    launch_pdl(logit_bias_kernel<T>, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, stream,
               static_cast<T*>(p.logits.data), p.entries.ptr<int32_t>(), n, p.logits.dim(0), p.logits.dim(1));
  });
  check_launch("add_logit_bias");
}

}  // namespace vireo::cuda
