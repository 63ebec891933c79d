// The gated MLP's gate activations (Activation in op_params.h), in fp32: one definition for the
// silu_and_mul kernel and the GEMV epilogues that fuse it, so both give the same bits.
#pragma once

#include "backend/op_params.h"

namespace vireo::cuda {

template <Activation kAct>
__device__ __forceinline__ float gate_act(float g) {
  if constexpr (kAct == Activation::kGeluTanh) {
    return 0.5f * g * (1.f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));  // tanhf: not the approximation
  } else {
    return g / (1.f + __expf(-g));
  }
}

// The activation known at run time only (the generic GEMV kernels).
__device__ __forceinline__ float gate_act(Activation act, float g) {
  return act == Activation::kGeluTanh ? gate_act<Activation::kGeluTanh>(g) : gate_act<Activation::kSilu>(g);
}

// GPT-OSS's clamped SwiGLU (MoeParams::swiglu_limit > 0) of gate g and up u, in fp32:
// (clamp(u, -limit, limit) + 1) * g' * sigmoid(alpha * g'), g' = min(g, limit). __expf as in silu above.
__device__ __forceinline__ float clamped_swiglu(float g, float u, float alpha, float limit) {
  g = fminf(g, limit);
  u = fminf(fmaxf(u, -limit), limit);
  return (u + 1.f) * (g / (1.f + __expf(-alpha * g)));
}

// The MoE experts' gated activation (MoeParams) of the rounded gate and up values: the clamped SwiGLU
// when limit > 0, else silu(g) * u (silu_and_mul's element). One definition for the per-slot
// (moe_decode.cu) and grouped (moe_grouped_gemm.cu) kernels, so both give the same bits from the same g, u.
__device__ __forceinline__ float moe_glu(float g, float u, float alpha, float limit) {
  return limit > 0.f ? clamped_swiglu(g, u, alpha, limit) : gate_act<Activation::kSilu>(g) * u;
}

}  // namespace vireo::cuda
