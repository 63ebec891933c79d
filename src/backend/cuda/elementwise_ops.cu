// Memory-bound row ops: embedding gather, fused residual-add + RMSNorm, SiLU-and-mul, add,
// gather_rows, dtype conversion, bias add. Math in fp32; 16-byte accesses where rows allow.
#include <algorithm>
#include <type_traits>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

// Reads element i of a float tensor whose dtype is known only at run time (small weights).
__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

template <typename T>
bool aligned16(const T* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// out[t, :] = table[ids[t], :]; one block per token.
template <typename TOut, typename TTab>
__global__ void embedding_kernel(const TTab* __restrict__ table, const int* __restrict__ ids, TOut* __restrict__ out,
                                 int64_t hidden, int64_t vocab, float scale) {
  pdl_enter();  // every kernel here: launched with PDL (pdl.cuh), first thing
  const int64_t t = blockIdx.x;
  const int id = ids[t];
  TOut* o = out + t * hidden;
  if (id < 0 || id >= vocab) {  // an out-of-range id yields NaN rows, never a fault
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) o[c] = from_f<TOut>(__int_as_float(0x7fc00000));
    return;
  }
  const TTab* row = table + static_cast<int64_t>(id) * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) o[c] = from_f<TOut>(to_f(row[c]) * scale);
}

// Same dtype, 16-byte copies.
__global__ void copy_rows_vec_kernel(const uint4* __restrict__ src, const int* __restrict__ idx, uint4* __restrict__ out,
                                     int64_t row_vecs, int64_t num_src_rows) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int i = idx[r];
  uint4* o = out + r * row_vecs;
  if (i < 0 || i >= num_src_rows) {
    for (int64_t c = threadIdx.x; c < row_vecs; c += blockDim.x) o[c] = make_uint4(0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u);
    return;
  }
  const uint4* s = src + static_cast<int64_t>(i) * row_vecs;
  for (int64_t c = threadIdx.x; c < row_vecs; c += blockDim.x) o[c] = s[c];
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nw = blockDim.x / 32;
  float s = 0.f;
  for (int w = 0; w < nw; ++w) s += scratch[w];
  __syncthreads();
  return s;
}

// One block per row. Vectorised over 16-byte chunks of T (C % kN == 0 checked by the host); the
// row's first kKeep chunks per thread stay in registers between the sum-of-squares and the scaling
// pass, so the row is read from memory once.
// add_after: out = residual + round(rmsnorm(x) * w), the residual read only (RmsNormParams::add_after_norm).
template <typename T>
__global__ void rms_norm_kernel(const T* __restrict__ x, T* __restrict__ residual, const void* __restrict__ weight,
                                DType wt, T* __restrict__ out, int64_t cols, float eps, bool add_after) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr int kKeep = 4;
  __shared__ float scratch[32];
  pdl_enter();
  const int64_t row = blockIdx.x;
  const int64_t nvec = cols / kN;
  const uint4* xv = reinterpret_cast<const uint4*>(x + row * cols);
  uint4* rv = residual ? reinterpret_cast<uint4*>(residual + row * cols) : nullptr;
  V keep[kKeep];
  float ss = 0.f;
  auto load_sum = [&](int64_t c, V& a) {
    a.raw = xv[c];
    if (rv && !add_after) {
      V r;
      r.raw = rv[c];
#pragma unroll
      for (int k = 0; k < kN; ++k) r.v[k] = from_f<T>(to_f(a.v[k]) + to_f(r.v[k]));
      rv[c] = r.raw;
      a = r;
    }
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float f = to_f(a.v[k]);
      ss += f * f;
    }
  };
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c < nvec) load_sum(c, keep[i]);
  }
  for (int64_t c = threadIdx.x + static_cast<int64_t>(kKeep) * blockDim.x; c < nvec; c += blockDim.x) {
    V a;
    load_sum(c, a);
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(cols) + eps);
  const uint4* src = rv && !add_after ? rv : xv;
  uint4* ov = reinterpret_cast<uint4*>(out + row * cols);
  const bool w_same = wt == (sizeof(T) == 4 ? DType::kF32 : std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16);
  auto scale = [&](int64_t c, V& a) {
    if (w_same) {
      V wv;
      wv.raw = reinterpret_cast<const uint4*>(weight)[c];
#pragma unroll
      for (int k = 0; k < kN; ++k) a.v[k] = from_f<T>(to_f(a.v[k]) * inv * to_f(wv.v[k]));
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) a.v[k] = from_f<T>(to_f(a.v[k]) * inv * load_any(weight, wt, c * kN + k));
    }
    if (add_after) {
      V r;
      r.raw = rv[c];
#pragma unroll
      for (int k = 0; k < kN; ++k) a.v[k] = from_f<T>(to_f(r.v[k]) + to_f(a.v[k]));
    }
    ov[c] = a.raw;
  };
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c < nvec) scale(c, keep[i]);
  }
  for (int64_t c = threadIdx.x + static_cast<int64_t>(kKeep) * blockDim.x; c < nvec; c += blockDim.x) {
    V a;
    a.raw = src[c];
    scale(c, a);
  }
}

// Scalar fallback for widths that are not a multiple of the vector.
template <typename T>
__global__ void rms_norm_scalar_kernel(const T* __restrict__ x, T* __restrict__ residual, const void* __restrict__ weight,
                                       DType wt, T* __restrict__ out, int64_t cols, float eps, bool add_after) {
  __shared__ float scratch[32];
  pdl_enter();
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* rr = residual ? residual + row * cols : nullptr;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float f = to_f(xr[c]);
    if (rr && !add_after) {
      T s = from_f<T>(f + to_f(rr[c]));
      rr[c] = s;
      f = to_f(s);
    }
    ss += f * f;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(cols) + eps);
  const T* src = rr && !add_after ? rr : xr;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const T y = from_f<T>(to_f(src[c]) * inv * load_any(weight, wt, c));
    out[row * cols + c] = add_after ? from_f<T>(to_f(rr[c]) + to_f(y)) : y;
  }
}

// x = cap * tanh(x / cap) over the logits (grid-stride; fp32 math, one rounding).
template <typename T>
__global__ void softcap_kernel(T* __restrict__ x, int64_t n, float cap) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = from_f<T>(cap * tanhf(to_f(x[i]) / cap));
}

template <typename T, Activation kAct>
__global__ void silu_and_mul_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t inter) {
  // Grid-stride over 16-byte chunks of the output when inter % kN == 0, else elements.
  using V = Vec<T>;
  constexpr int kN = V::kN;
  pdl_enter();
  const bool vec = inter % kN == 0;
  const int64_t per_row = vec ? inter / kN : inter;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = i % per_row;
    if (vec) {
      V g, u, o;
      g.raw = reinterpret_cast<const uint4*>(x + r * 2 * inter)[c];
      u.raw = reinterpret_cast<const uint4*>(x + r * 2 * inter + inter)[c];
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        o.v[k] = from_f<T>(gate_act<kAct>(to_f(g.v[k])) * to_f(u.v[k]));
      }
      reinterpret_cast<uint4*>(out + r * inter)[c] = o.raw;
    } else {
      const float gf = to_f(x[r * 2 * inter + c]);
      out[r * inter + c] = from_f<T>(gate_act<kAct>(gf) * to_f(x[r * 2 * inter + inter + c]));
    }
  }
}

template <typename T>
__global__ void add_vec_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ out, int64_t n) {
  using V = Vec<T>;
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    V x, y;
    x.raw = a[i];
    y.raw = b[i];
#pragma unroll
    for (int k = 0; k < V::kN; ++k) x.v[k] = from_f<T>(to_f(x.v[k]) + to_f(y.v[k]));
    out[i] = x.raw;
  }
}

template <typename T>
__global__ void add_scalar_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

template <typename TS, typename TD>
__global__ void convert_kernel(const TS* __restrict__ src, TD* __restrict__ dst, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_f<TD>(to_f(src[i]));
}

template <typename T>
__global__ void bias_add_kernel(T* __restrict__ out, const void* __restrict__ bias, DType bt, int64_t rows, int64_t cols) {
  pdl_enter();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(out[i]) + load_any(bias, bt, i % cols));
}

// sigmoid_gate (SigmoidGateParams): out = [residual +] round(x * round(sigmoid(gate))), gate [N, C] or [N, 1]
// (gc = 1: broadcast over the row). Grid-stride over elements; out may alias x or residual (each element
// is read, then written, by one thread).
template <typename T>
__global__ void sigmoid_gate_kernel(const T* x, const T* gate, const T* residual, T* out, int64_t n, int64_t C,
                                    int64_t gc) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f(gate[gc == 1 ? i / C : i]);
    const float sg = to_f(from_f<T>(1.0f / (1.0f + expf(-g))));
    float v = to_f(from_f<T>(to_f(x[i]) * sg));
    if (residual) v += to_f(residual[i]);
    out[i] = from_f<T>(v);
  }
}

int grid_for(int64_t n, int threads) {
  int64_t g = (n + threads - 1) / threads;
  if (g > 132 * 16) g = 132 * 16;
  return static_cast<int>(g < 1 ? 1 : g);
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error(msg);
}

}  // namespace

void launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  require(p.table.ndim() == 2 && p.ids.dtype == DType::kI32, "embedding: table must be [vocab, hidden], ids I32");
  const int64_t t = p.ids.numel(), hidden = p.table.dim(1), vocab = p.table.dim(0);
  require(p.out.numel() == t * hidden, "embedding: out must be [T, hidden]");
  if (t == 0) return;
  if (p.table.dtype == p.out.dtype && p.scale == 1.0f && (hidden * dtype_size(p.out.dtype)) % 16 == 0) {
    launch_pdl(copy_rows_vec_kernel, dim3(static_cast<unsigned>(t)), dim3(128), 0, stream,
               static_cast<const uint4*>(p.table.data), p.ids.ptr<int>(), static_cast<uint4*>(p.out.data),
               hidden * static_cast<int64_t>(dtype_size(p.out.dtype)) / 16, vocab);
    check_launch("embedding");
    return;
  }
  dispatch_float(p.out.dtype, "embedding out", [&](auto o) {
    using TO = decltype(o);
    dispatch_float(p.table.dtype, "embedding table", [&](auto w) {
      using TW = decltype(w);
      launch_pdl(embedding_kernel<TO, TW>, dim3(static_cast<unsigned>(t)), dim3(256), 0, stream, p.table.ptr<TW>(),
                 p.ids.ptr<int>(), p.out.ptr<TO>(), hidden, vocab, p.scale);
    });
  });
  check_launch("embedding");
}

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  const int64_t cols = p.x.dim(-1), rows = p.x.numel() / cols;
  require(p.weight.numel() == cols, "rms_norm: weight must be [C]");
  require(p.out.numel() == p.x.numel() && p.out.dtype == p.x.dtype, "rms_norm: out must match x");
  require(p.residual.empty() || (p.residual.numel() == p.x.numel() && p.residual.dtype == p.x.dtype),
          "rms_norm: residual must match x");
  require(!p.add_after_norm || !p.residual.empty(), "rms_norm: add_after_norm needs a residual");
  if (rows == 0) return;
  dispatch_float(p.x.dtype, "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kN = Vec<T>::kN;
    T* res = p.residual.empty() ? nullptr : p.residual.ptr<T>();
    const bool vec = cols % kN == 0 && aligned16(p.x.ptr<T>()) && aligned16(p.out.ptr<T>()) && (!res || aligned16(res)) &&
                     aligned16(static_cast<const char*>(p.weight.data));
    const int64_t work = vec ? cols / kN : cols;
    // Vector path: ~4 chunks per thread held in registers (several loads in flight per thread, small
    // blocks so that many rows are resident per SM). Scalar path: one element per thread-iteration.
    int threads = vec ? static_cast<int>(std::min<int64_t>(1024, ((work + 3) / 4 + 31) / 32 * 32))
                      : (work >= 1024 ? 1024 : work >= 512 ? 512 : work >= 256 ? 256 : 128);
    if (vec)
      launch_pdl(rms_norm_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, p.x.ptr<T>(), res,
                 p.weight.data, p.weight.dtype, p.out.ptr<T>(), cols, p.eps, p.add_after_norm);
    else
      launch_pdl(rms_norm_scalar_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, p.x.ptr<T>(),
                 res, p.weight.data, p.weight.dtype, p.out.ptr<T>(), cols, p.eps, p.add_after_norm);
  });
  check_launch("rms_norm");
}

void launch_silu_and_mul(const SiluAndMulParams& p, cudaStream_t stream) {
  const int64_t two_i = p.x.dim(-1), rows = p.x.numel() / two_i, inter = two_i / 2;
  require(two_i % 2 == 0 && p.out.numel() == rows * inter && p.out.dtype == p.x.dtype,
          "silu_and_mul: x must be [N, 2I] and out [N, I] of the same dtype");
  if (rows == 0) return;
  dispatch_float(p.x.dtype, "silu_and_mul", [&](auto tag) {
    using T = decltype(tag);
    const int64_t work = rows * inter / (inter % Vec<T>::kN == 0 ? Vec<T>::kN : 1);
    auto kernel = p.act == Activation::kGeluTanh ? silu_and_mul_kernel<T, Activation::kGeluTanh>
                                                 : silu_and_mul_kernel<T, Activation::kSilu>;
    launch_pdl(kernel, dim3(grid_for(work, 256)), dim3(256), 0, stream, p.x.ptr<T>(), p.out.ptr<T>(), rows, inter);
  });
  check_launch("silu_and_mul");
}

void launch_sigmoid_gate(const SigmoidGateParams& p, cudaStream_t stream) {
  require(p.x.ndim() == 2, "sigmoid_gate: x must be [N, C], got " + p.x.shape_str());
  const int64_t N = p.x.dim(0), C = p.x.dim(1);
  const int64_t gc = p.gate.ndim() == 2 ? p.gate.dim(1) : 0;
  require(p.gate.ndim() == 2 && p.gate.dim(0) == N && (gc == C || gc == 1),
          "sigmoid_gate: gate must be [N, C] or [N, 1], got " + p.gate.shape_str());
  require(p.out.numel() == N * C && (p.residual.empty() || p.residual.numel() == N * C),
          "sigmoid_gate: out and residual must be [N, C]");
  const DType dt = p.x.dtype;
  require(p.gate.dtype == dt && p.out.dtype == dt && (p.residual.empty() || p.residual.dtype == dt),
          "sigmoid_gate: x, gate, residual and out must share the activation dtype");
  const int64_t n = N * C;
  if (n == 0) return;
  dispatch_float(dt, "sigmoid_gate", [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(sigmoid_gate_kernel<T>, dim3(grid_for(n, 256)), dim3(256), 0, stream, p.x.ptr<T>(), p.gate.ptr<T>(),
               p.residual.empty() ? nullptr : p.residual.ptr<T>(), p.out.ptr<T>(), n, C, gc);
  });
  check_launch("sigmoid_gate");
}

void launch_softcap(const SoftcapParams& p, cudaStream_t stream) {
  require(p.cap > 0.f, "softcap: cap must be > 0");
  const int64_t n = p.x.numel();
  if (n == 0) return;
  dispatch_float(p.x.dtype, "softcap", [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(softcap_kernel<T>, dim3(grid_for(n, 256)), dim3(256), 0, stream, p.x.ptr<T>(), n, p.cap);
  });
  check_launch("softcap");
}

void launch_add(const AddParams& p, cudaStream_t stream) {
  require(p.a.numel() == p.b.numel() && p.a.numel() == p.out.numel() && p.a.dtype == p.b.dtype &&
              p.a.dtype == p.out.dtype,
          "add: a, b, out must have the same shape and dtype");
  const int64_t n = p.a.numel();
  if (n == 0) return;
  dispatch_float(p.a.dtype, "add", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kN = Vec<T>::kN;
    if (n % kN == 0 && aligned16(p.a.ptr<T>()) && aligned16(p.b.ptr<T>()) && aligned16(p.out.ptr<T>()))
      launch_pdl(add_vec_kernel<T>, dim3(grid_for(n / kN, 256)), dim3(256), 0, stream, static_cast<const uint4*>(p.a.data),
                 static_cast<const uint4*>(p.b.data), static_cast<uint4*>(p.out.data), n / kN);
    else
      launch_pdl(add_scalar_kernel<T>, dim3(grid_for(n, 256)), dim3(256), 0, stream, p.a.ptr<T>(), p.b.ptr<T>(),
                 p.out.ptr<T>(), n);
  });
  check_launch("add");
}

void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream) {
  require(p.indices.dtype == DType::kI32 && p.x.dtype == p.out.dtype, "gather_rows: indices I32, out dtype == x dtype");
  const int64_t cols = p.x.dim(-1), m = p.indices.numel();
  require(p.out.numel() == m * cols, "gather_rows: out must be [M, C]");
  if (m == 0) return;
  const int64_t row_bytes = cols * static_cast<int64_t>(dtype_size(p.x.dtype));
  if (row_bytes % 16 == 0) {
    launch_pdl(copy_rows_vec_kernel, dim3(static_cast<unsigned>(m)), dim3(128), 0, stream,
               static_cast<const uint4*>(p.x.data), p.indices.ptr<int>(), static_cast<uint4*>(p.out.data),
               row_bytes / 16, p.x.numel() / cols);
  } else {
    dispatch_float(p.x.dtype, "gather_rows", [&](auto tag) {
      using T = decltype(tag);
      launch_pdl(embedding_kernel<T, T>, dim3(static_cast<unsigned>(m)), dim3(128), 0, stream, p.x.ptr<T>(),
                 p.indices.ptr<int>(), p.out.ptr<T>(), cols, p.x.numel() / cols, 1.0f);
    });
  }
  check_launch("gather_rows");
}

void launch_convert(const void* src, DType st, void* dst, DType dt, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float(st, "convert src", [&](auto s) {
    using TS = decltype(s);
    dispatch_float(dt, "convert dst", [&](auto d) {
      using TD = decltype(d);
      launch_pdl(convert_kernel<TS, TD>, dim3(grid_for(static_cast<int64_t>(n), 256)), dim3(256), 0, stream,
                 static_cast<const TS*>(src), static_cast<TD*>(dst), static_cast<int64_t>(n));
    });
  });
  check_launch("convert");
}

void launch_bias_add(void* out, DType ot, const void* bias, DType bt, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  dispatch_float(ot, "bias_add", [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(bias_add_kernel<T>, dim3(grid_for(rows * cols, 256)), dim3(256), 0, stream, static_cast<T*>(out), bias, bt,
               rows, cols);
  });
  check_launch("bias_add");
}

}  // namespace vireo::cuda
