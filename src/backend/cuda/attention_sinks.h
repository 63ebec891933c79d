// Attention sinks (GPT-OSS, AttentionParams::sinks) on the CUDA kernels that take them: the plain
// kernel (attention_simple.cu) and the CUDA-core flash-decoding kernel (attention_decode_wide.cu).
// The tensor-core and cluster kernels do not: launch_paged_attention routes sink calls away from them.
#pragma once
#include <string>

#include "backend/op_params.h"
#include "core/error.h"

namespace vireo::cuda {

// The sinks' device pointer ([H] F32), or nullptr when the layer has none. Throws on a tensor the
// kernels would misread (wrong dtype or length, host memory).
inline const float* checked_sinks(const AttentionParams& p, const char* op) {
  if (p.sinks.empty()) return nullptr;
  if (p.sinks.dtype != DType::kF32 || p.sinks.numel() != p.num_heads)
    throw Error(std::string(op) + ": sinks must be F32 [num_heads]");
  if (p.sinks.device != DeviceKind::kCUDA) throw Error(std::string(op) + ": sinks is not a CUDA tensor");
  return p.sinks.ptr<float>();
}

}  // namespace vireo::cuda
