// Shared helpers of the CUDA backend: error checks and dtype dispatch (host side, no kernels).
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace vireo::cuda {

// On an error the runtime's last-error state is cleared too: a refused launch (a non-sticky error, both
// returned and left pending) must not come back from the next op's check_launch as the failure of a
// later, unrelated kernel or request.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
// After a launch: configuration errors show up here, faults at the next synchronisation.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline bool is_float_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

}  // namespace vireo::cuda

#define VIREO_CUDA_CHECK(expr) ::vireo::cuda::check((expr), #expr)
