// run_linear_fp8 (fp8_linear.h): a linear whose weight is F8_E4M3 with per-row scales, in every form
// LinearParams has (input_norm / silu_mul_input prologues, residual / silu_mul_output epilogues). Steps of
// fewer than fp8_gemm_min_rows rows run one GEMV kernel with the norm and the epilogues inside
// (silu_mul_input still a kernel of its own). Larger steps quantize the activation with the prologue on the
// way (rms_norm or silu_and_mul: no x' pass), run the W8A8 GEMM with the residual add in its epilogue, and
// SiLU-and-mul of the output as a pass over y; one scratch request: [x'] [y] [xq, scales] [F32 sums, where
// the GEMM runs unscaled].
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/fp8_gemm_small.h"
#include "backend/cuda/fp8_gemm_ws.h"
#include "backend/cuda/fp8_linear.h"

namespace vireo::cuda {
namespace {

size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

void run_linear_fp8(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                    OpGpuTimer* timer) {
  const bool norm = !p.input_norm.empty(), silu_in = p.silu_mul_input, res = !p.residual.empty();
  const bool silu_out = p.silu_mul_output;
  if (p.w.ndim() != 2 || p.w.row_scale == nullptr) throw Error("linear: an F8_E4M3 weight must be [M, K] with row scales");
  if (!p.row_stats.empty()) throw Error("linear: row_stats are not computed for FP8 weights");
  if (p.out_stride != 0) throw Error("linear: out_stride is not supported with FP8 weights");
  if (norm && silu_in) throw Error("linear: input_norm and silu_mul_input cannot be combined");
  if (silu_out && (silu_in || res)) throw Error("linear: silu_mul_output cannot be combined with silu_mul_input or residual");
  const int64_t m = p.w.dim(0), k = p.w.dim(1), in_k = silu_in ? 2 * k : k;
  if (k % 16 != 0 || m % 16 != 0) throw Error("linear: FP8 weights need M and K multiples of 16");
  if (k == 0 || p.x.dim(-1) != in_k || p.x.numel() % in_k != 0)
    throw Error("linear: x " + p.x.shape_str() + " must be [N, " + std::to_string(in_k) + "]");
  const int64_t n = p.x.numel() / in_k;
  const DType t = p.x.dtype;
  if (t != DType::kBF16 && t != DType::kF16) throw Error("linear: FP8 weights take bf16 or f16 activations");
  const int64_t out_cols = silu_out ? m / 2 : m;
  if (p.out.numel() != n * out_cols || p.out.dtype != t) throw Error("linear: out must be [N, M] in the activation dtype");
  if (norm && p.input_norm.numel() != k) throw Error("linear: input_norm must be [K]");
  if (res && (p.residual.numel() != n * m || p.residual.dtype != t))
    throw Error("linear: residual must be [N, M] in the activation dtype");
  if (!p.bias.empty() && (p.bias.numel() != m || p.bias.dtype != t))
    throw Error("linear: bias must be [M] in the activation dtype");
  if (n == 0 || m == 0) return;

  const size_t es = dtype_size(t);
  const void* bias = p.bias.empty() ? nullptr : p.bias.data;
  const auto* w = static_cast<const uint8_t*>(p.w.data);
  const bool gemv = n < fp8_gemm_min_rows(m, k);
  if (gemv && !silu_in && (!norm || p.input_norm.dtype == t)) {
    // Decode rows: the norm prologue and the residual / SiLU epilogues inside the GEMV, one kernel.
    Fp8GemvArgs g{p.x.data, w, p.w.row_scale, bias, p.out.data, n, m, k, t};
    g.norm_w = norm ? p.input_norm.data : nullptr;
    g.eps = p.norm_eps;
    g.residual = res ? p.residual.data : nullptr;
    g.silu_out = silu_out;
    g.act = p.act;
    launch_gemv_fp8(g, stream);
    return;
  }
  if (!gemv) {
    // W8A8: the prologue (rms_norm / silu_and_mul) inside the activation's quantization, the residual add
    // in the GEMM's epilogue (beta = 1, C = residual, in place where out aliases it); SiLU-and-mul of the
    // output still a pass of its own over y.
    const bool pro_norm = norm && p.input_norm.dtype == t;
    const size_t x_bytes = norm && !pro_norm ? round_up(static_cast<size_t>(n * k) * es) : 0;
    const size_t y_bytes = silu_out ? round_up(static_cast<size_t>(n * m) * es) : 0;
    const size_t q_bytes = round_up(static_cast<size_t>(n * k));
    const size_t s_bytes = round_up(static_cast<size_t>(n) * 4);
    // Decode batches on the wgmma kernel (fp8_gemm_small.h; its scratch: the K splits' partial sums), else
    // cuBLASLt (its scratch: F32 sums where it has no outer-vector algorithm).
    const bool small = fp8_small_gemm_preferred(n, m, k);
    const size_t a_bytes = small                            ? round_up(fp8_small_gemm_scratch(n, m, k))
                           : gemm.fp8_outer_vec(n, m, k, t) ? 0
                                                            : round_up(static_cast<size_t>(n * m) * 4);
    char* s = static_cast<char*>(scratch(x_bytes + y_bytes + q_bytes + s_bytes + a_bytes));
    const void* x = p.x.data;
    if (x_bytes) {  // a norm weight in another dtype: the separate rms_norm kernel
      Tensor xn(s, t, {n, k}, DeviceKind::kCUDA);
      launch_rms_norm({p.x, p.input_norm, xn, Tensor(), p.norm_eps}, stream);
      x = xn.data;
    }
    auto* xq = reinterpret_cast<uint8_t*>(s + x_bytes + y_bytes);
    auto* xs = reinterpret_cast<float*>(s + x_bytes + y_bytes + q_bytes);
    launch_fp8_quantize_rows(x, t, n, k, xq, xs, stream, pro_norm ? p.input_norm.data : nullptr, p.norm_eps, silu_in);
    if (timer) {
      const char* what = silu_in ? "fp8 quantize + silu_and_mul, K " : norm ? "fp8 quantize + rms_norm, K " : "fp8 quantize, K ";
      timer->mark(what + std::to_string(k), stream);
    }
    void* y = silu_out ? s + x_bytes : p.out.data;
    auto* acc = a_bytes ? reinterpret_cast<float*>(s + x_bytes + y_bytes + q_bytes + s_bytes) : nullptr;
    CublasLtGemm::Fp8Args g{w, p.w.row_scale, xq, xs, bias, y, n, m, k, t, acc};
    g.residual = res ? p.residual.data : nullptr;
    const Fp8GemmSchedule own = small ? Fp8GemmSchedule::kCublasLt : fp8_gemm_schedule(n, m, k);
    if (small) launch_fp8_small_gemm(g, acc, stream);
    else if (own == Fp8GemmSchedule::kCooperative) launch_fp8_gemm_ws(g, stream);
    else if (own == Fp8GemmSchedule::kPingpong) launch_fp8_gemm_pingpong(g, stream);
    else if (own == Fp8GemmSchedule::kPingpongPairs) launch_fp8_gemm_pingpong(g, stream, 2);
    else gemm.run_fp8(g, stream);
    if (silu_out) launch_silu_and_mul({Tensor(y, t, {n, m}, DeviceKind::kCUDA), p.out, p.act}, stream);
    return;
  }
  // GEMV rows with a prologue the GEMV kernel does not take (silu_mul_input, a norm weight in another dtype):
  // the separate kernels through scratch, [x'] [y].
  const size_t x_bytes = (norm || silu_in) ? round_up(static_cast<size_t>(n * k) * es) : 0;
  const size_t y_bytes = (res || silu_out) ? round_up(static_cast<size_t>(n * m) * es) : 0;
  char* s = x_bytes + y_bytes ? static_cast<char*>(scratch(x_bytes + y_bytes)) : nullptr;
  Tensor x = p.x;
  if (norm || silu_in) {
    x = Tensor(s, t, {n, k}, DeviceKind::kCUDA);
    if (norm) launch_rms_norm({p.x, p.input_norm, x, Tensor(), p.norm_eps}, stream);
    else launch_silu_and_mul({p.x, x}, stream);
  }
  void* y = (res || silu_out) ? s + x_bytes : p.out.data;
  launch_gemv_fp8({x.data, w, p.w.row_scale, bias, y, n, m, k, t}, stream);
  const Tensor yt(y, t, {n, m}, DeviceKind::kCUDA);
  if (silu_out) launch_silu_and_mul({yt, p.out, p.act}, stream);
  else if (res) launch_add({p.residual, yt, p.out}, stream);  // elementwise: out may alias residual
}

}  // namespace vireo::cuda
