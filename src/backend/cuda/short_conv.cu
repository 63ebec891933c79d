// short_conv (ShortConvParams): LFM2's B*x -> causal depthwise conv -> C* over the paged bx state.
// One thread per (token, channel): the op is a few multiply-adds per element, memory-bound and small
// next to the in_proj / out_proj GEMMs around it. Graph-capturable: sizes come from device memory
// (query_start, seq_lens), nothing is synchronised or allocated.
//
// A row reads the state only at positions before its sequence's first row in this step and writes
// only its own slot, so the writes of one thread never race with the reads of another.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// The sequence of row t: the last s with query_start[s] <= t (empty sequences share their start).
__device__ __forceinline__ int seq_of_row(const int* __restrict__ qs, int num_seqs, int64_t t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qs[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// T: activation dtype (bcx, out, state). The math follows cpu_short_conv.cc, with the roundings of
// ShortConvParams: bx, the conv output and out are rounded to T.
template <typename T>
__global__ void short_conv_kernel(const T* __restrict__ bcx, const void* __restrict__ weight, DType wt,
                                  const void* __restrict__ bias, DType bt, T* __restrict__ state, T* __restrict__ out,
                                  const int* __restrict__ slots, const int* __restrict__ qs, const int* __restrict__ lens,
                                  const int* __restrict__ tables, int num_seqs, int max_blocks, int block_size, int C,
                                  int L, int64_t max_rows) {
  pdl_enter();
  const int64_t rows = min(static_cast<int64_t>(qs[num_seqs]), max_rows);  // bad inputs stay inside the buffers
  const int64_t n = rows * C;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / C;
    const int c = static_cast<int>(i % C);
    const int s = seq_of_row(qs, num_seqs, t);
    const int row0 = qs[s], first = lens[s] - (qs[s + 1] - row0);
    const int pos = first + static_cast<int>(t - row0);
    const int* table = tables + static_cast<int64_t>(s) * max_blocks;
    float acc = 0.f;
    for (int k = 0; k < L; ++k) {
      const int q = pos - (L - 1) + k;
      if (q < 0) continue;
      float v;
      if (q >= first) {  // a row of this step: bx from bcx, rounded as it is stored
        const T* r = bcx + (row0 + static_cast<int64_t>(q - first)) * 3 * C;
        v = to_f(from_f<T>(to_f(r[c]) * to_f(r[2 * C + c])));
      } else {
        const int64_t slot = static_cast<int64_t>(table[q / block_size]) * block_size + q % block_size;
        v = to_f(state[slot * C + c]);
      }
      acc += load_any(weight, wt, static_cast<int64_t>(c) * L + k) * v;
    }
    if (bias) acc += load_any(bias, bt, c);
    const T* r = bcx + t * 3 * C;
    out[t * C + c] = from_f<T>(to_f(r[C + c]) * to_f(from_f<T>(acc)));
    const int slot = slots[t];
    if (slot >= 0) state[static_cast<int64_t>(slot) * C + c] = from_f<T>(to_f(r[c]) * to_f(r[2 * C + c]));
  }
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error("short_conv: " + msg);
}

}  // namespace

void launch_short_conv(const ShortConvParams& p, cudaStream_t stream) {
  require(p.state.ndim() == 3 && p.state.dim(1) == p.block_size && p.block_size > 0,
          "state must be [num_blocks, block_size, C]");
  const int64_t C = p.state.dim(2);
  require(C > 0 && p.weight.numel() > 0 && p.weight.numel() % C == 0, "weight must be [C, L]");
  const int64_t L = p.weight.numel() / C;
  require(p.bcx.dtype == p.state.dtype && p.out.dtype == p.state.dtype && is_float_dtype(p.state.dtype),
          "bcx, out and state must share the activation dtype");
  require(is_float_dtype(p.weight.dtype) && (p.bias.empty() || (is_float_dtype(p.bias.dtype) && p.bias.numel() == C)),
          "weight and bias must be float tensors, bias [C]");
  require(p.bcx.dim(-1) == 3 * C && p.out.dim(-1) == C, "bcx must be [T, 3C] and out [T, C]");
  require(p.bcx.numel() / (3 * C) == p.out.numel() / C && p.slot_mapping.numel() >= p.out.numel() / C,
          "bcx, out and slot_mapping must have the same rows");
  require(p.slot_mapping.dtype == DType::kI32 && p.query_start.dtype == DType::kI32 && p.seq_lens.dtype == DType::kI32 &&
              p.block_tables.dtype == DType::kI32,
          "slot_mapping, query_start, seq_lens and block_tables must be I32");
  require(p.num_seqs >= 0 && p.query_start.numel() >= p.num_seqs + 1, "query_start must hold num_seqs + 1 entries");
  // The rows the kernel walks are query_start[S] (device memory); the host knows only the buffers' size.
  const int64_t max_rows = p.out.numel() / C;
  if (p.num_seqs == 0 || max_rows == 0) return;
  dispatch_float(p.state.dtype, "short_conv", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>((max_rows * C + kThreads - 1) / kThreads, 132 * 32);
    launch_pdl(short_conv_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, p.bcx.ptr<T>(),
               p.weight.data, p.weight.dtype, p.bias.empty() ? nullptr : p.bias.data, p.bias.dtype, p.state.ptr<T>(),
               p.out.ptr<T>(), p.slot_mapping.ptr<int>(), p.query_start.ptr<int>(), p.seq_lens.ptr<int>(),
               p.block_tables.ptr<int>(), p.num_seqs, p.max_blocks_per_seq, p.block_size, static_cast<int>(C),
               static_cast<int>(L), max_rows);
  });
  check_launch("short_conv");
}

}  // namespace vireo::cuda
