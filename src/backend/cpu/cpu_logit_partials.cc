// LinearParams::out_partials on the CPU: the reference the CUDA GEMV's partials are checked against.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"
#include "core/error.h"

namespace vireo::cpu {

void logit_partials(const Tensor& out, const Tensor& partials) {
  if (out.ndim() < 1 || partials.dtype != DType::kF32 || partials.ndim() != 3 || partials.dim(2) != 4)
    throw Error("linear: out_partials must be F32 [N, P, 4], got " + partials.shape_str());
  const int64_t m = out.dim(-1), n = m > 0 ? out.numel() / m : 0, runs = partials.dim(1);
  if (partials.dim(0) < n || runs < 1 || runs > m)
    throw Error("linear: out_partials " + partials.shape_str() + " does not fit out " + out.shape_str());
  std::vector<float> y(static_cast<size_t>(m));
  const int64_t lo = m / runs, ex = m % runs;
  for (int64_t r = 0; r < n; ++r) {
    convert_to_f32(static_cast<const char*>(out.data) + r * m * dtype_size(out.dtype), out.dtype, y.data(),
                   static_cast<size_t>(m));
    float* dst = partials.ptr<float>() + r * runs * 4;
    for (int64_t j = 0; j < runs; ++j) {
      const int64_t b = j * lo + (j < ex ? j : ex), e = b + lo + (j < ex ? 1 : 0);
      float mx = -std::numeric_limits<float>::infinity(), s = 0.0f;
      int32_t arg = static_cast<int32_t>(b);
      for (int64_t i = b; i < e; ++i) {  // online, as the kernels sum
        if (y[i] > mx) {
          s = s * std::exp(mx - y[i]) + 1.0f;
          mx = y[i];
          arg = static_cast<int32_t>(i);
        } else if (y[i] > -std::numeric_limits<float>::infinity()) {
          s += std::exp(y[i] - mx);
        }
      }
      dst[4 * j] = mx;
      dst[4 * j + 1] = s;
      std::memcpy(&dst[4 * j + 2], &arg, sizeof(arg));
      dst[4 * j + 3] = 0.0f;
    }
  }
}

}  // namespace vireo::cpu
