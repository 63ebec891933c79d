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

}  // namespace vireo::cuda
