// The CPU reference implementations of the backend ops (semantics in backend/op_params.h).
// Activations are F32; weights and tables may be F32, F16 or BF16; KV caches F32, F16, BF16 or F8_E4M3
// (--kv-cache-dtype fp8: codes of the values, scale 1).
// Inputs are validated on the calling thread; bad indices throw vireo::Error.
#pragma once
#include "backend/cpu/thread_pool.h"
#include "backend/op_params.h"
#include "core/fp8.h"

namespace vireo::cpu {

void embedding(ThreadPool& pool, const EmbeddingParams& p);
void rms_norm(ThreadPool& pool, const RmsNormParams& p);
void linear(ThreadPool& pool, const LinearParams& p);  // plain x @ w^T + bias (no fusions)
// linear with the decode fusions of LinearParams (input_norm / silu_mul_input / residual), composed.
void linear_fused(ThreadPool& pool, const LinearParams& p);
// out [n, m] = x [n, k] @ w^T for BF16 w [m, k], n <= kGemvMaxRows (cpu_gemv_bf16.cc): decode steps.
constexpr int64_t kGemvMaxRows = 8;
void gemv_bf16(ThreadPool& pool, const float* x, int64_t n, int64_t k, const uint16_t* w, int64_t m, float* out);
// out [n, m] = x [n, k] @ w^T for w [m, k] in a ggml block type (Q4_0 ... Q6_K, cpu_linear_blocks.cc).
// portable: the plain C++ decode-row kernels even where AVX2 ones exist (tests compare both).
void linear_blocks(ThreadPool& pool, const float* x, int64_t n, int64_t k, const Tensor& w, int64_t m, float* out,
                   bool portable = false);
// out [n, m] = (x [n, k] @ codes^T) * w.row_scale for F8_E4M3 w [m, k] with per-row scales (--quantization
// fp8; cpu_linear_fp8.cc), k % 16 == 0. The decode-row kernel: the widest the CPU has (AVX-512, AVX2 + F16C)
// or, for tests, at most AVX2 or the portable table kernel; all give the same bits.
enum class Fp8Kernel : uint8_t { kAuto, kAvx2, kPortable };
void linear_fp8(ThreadPool& pool, const float* x, int64_t n, int64_t k, const Tensor& w, int64_t m, float* out,
                Fp8Kernel kernel = Fp8Kernel::kAuto);
// out [n, m] = x [n, k] @ W^T + bias for MXFP4 W (cpu_mxfp4.cc; MoeParams' expert layout): blocks U8
// [m, k / 2] (byte j of a row: element 2j in the low nibble, 2j + 1 in the high one), E8M0 scales U8
// [m, k / 32] (value = fp4 * 2^(s - 127)); k a multiple of 32; bias [m] (F32/F16/BF16) or empty. Up to
// kGemvMaxRows rows decode the weights on the fly; more dequantize bands of rows for an SGEMM. kPortable:
// the plain C++ kernels even where AVX2 is present (tests compare both).
enum class Mxfp4Kernel : uint8_t { kAuto, kPortable };
void linear_mxfp4(ThreadPool& pool, const Tensor& x, const Tensor& blocks, const Tensor& scales, const Tensor& bias,
                  const Tensor& out, Mxfp4Kernel kernel = Mxfp4Kernel::kAuto);
void silu_and_mul(ThreadPool& pool, const SiluAndMulParams& p);
void add(ThreadPool& pool, const AddParams& p);
void softcap(ThreadPool& pool, const SoftcapParams& p);
void gather_rows(ThreadPool& pool, const GatherRowsParams& p);
void qkv_prepare(ThreadPool& pool, const QkvPrepareParams& p);
void paged_attention(ThreadPool& pool, const AttentionParams& p);
void moe(ThreadPool& pool, const MoeParams& p);  // cpu_moe.cc
// MoeParams' routing alone, from router logits [T, E] (fp32): ids / weights [T, top_k], best first.
void moe_route(const MoeParams& p, const float* logits, int64_t T, int64_t E, int32_t* ids, float* weights);
// Throws vireo::Error (prefixed by `who`) unless top_k, n_group, topk_group and score_bias agree with E.
void validate_moe_routing(const MoeParams& p, int64_t E, const char* who);
void mla_pack(ThreadPool& pool, const MlaPackParams& p);  // cpu_mla.cc
void short_conv(ThreadPool& pool, const ShortConvParams& p);  // cpu_short_conv.cc
void gated_delta_net(ThreadPool& pool, const GatedDeltaNetParams& p);  // cpu_gated_delta_net.cc
void sigmoid_gate(ThreadPool& pool, const SigmoidGateParams& p);        // cpu_gated_delta_net.cc

// dst [n] = the E4M3 codes src [n] as floats times scale (AVX2 + F16C 16 codes at a time where the CPU
// has them; cpu_linear_fp8.cc): FP8 weights' rows, FP8 KV cache rows (scale 1).
void fp8_e4m3_widen(const uint8_t* src, int64_t n, float scale, float* dst);

// Element access shared by the op files.
inline float load_elem(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF8E4M3: return fp8_e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    default: return 0.0f;
  }
}
inline void store_elem(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); break;
    case DType::kF8E4M3: static_cast<uint8_t*>(base)[i] = f32_to_fp8_e4m3(v); break;  // RNE, saturating
    default: break;
  }
}
// Throws unless t is F32/F16/BF16; `what` names the op argument.
void require_float(const Tensor& t, const char* what);
void require_f32(const Tensor& t, const char* what);
// A KV cache: F32/F16/BF16, or F8_E4M3 (--kv-cache-dtype fp8).
void require_kv_cache(const Tensor& t, const char* what);
void require_i32(const Tensor& t, const char* what);

}  // namespace vireo::cpu
