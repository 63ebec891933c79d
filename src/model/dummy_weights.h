// --load-format dummy: reproducible random weights. Each value depends only on
// (seed, tensor name, index), so results do not depend on thread count or load order.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace vireo {

// Fills host memory `out` (F32/F16/BF16) with uniform values of standard deviation `stddev`
// (mean 0), or with `stddev` == 0: all ones (norm weights). Multi-threaded.
void fill_dummy(Tensor& out, uint64_t seed, const std::string& name, float stddev);

}  // namespace vireo
