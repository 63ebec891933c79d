#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace vireo {
// The reference backend: fp32 activations over F32/F16/BF16 weights, OpenBLAS GEMMs, threads.
std::unique_ptr<Backend> make_cpu_backend(const std::string& dtype_name);
}  // namespace vireo
