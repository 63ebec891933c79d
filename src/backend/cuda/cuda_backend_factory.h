// Plain C++ header (no CUDA types) through which backend_factory.cc reaches the CUDA backend.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace vireo {
int cuda_device_count();  // 0 when no driver or no GPU
std::unique_ptr<Backend> make_cuda_backend(const std::string& dtype_name, bool batch_invariant = false);
}  // namespace vireo
