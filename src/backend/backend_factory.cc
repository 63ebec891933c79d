#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/log.h"
#ifdef VIREO_WITH_CUDA
#include "backend/cuda/cuda_backend_factory.h"
#endif

namespace vireo {

bool cuda_available() {
#ifdef VIREO_WITH_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> create_backend(const std::string& device, const std::string& dtype_name,
                                        bool batch_invariant) {
  std::string d = device;
  if (d == "auto") d = cuda_available() ? "cuda" : "cpu";
  if (d == "cpu") {
    // OpenBLAS picks kernels and thread splits by shape, so CPU rows are not guaranteed invariant.
    if (batch_invariant) log_warn("--batch-invariant: the CPU backend has no batch-invariant mode; ignored");
    return make_cpu_backend(dtype_name);
  }
  if (d == "cuda") {
#ifdef VIREO_WITH_CUDA
    if (!cuda_available()) throw Error("--device cuda: no CUDA GPU is visible");
    return make_cuda_backend(dtype_name, batch_invariant);
#else
    throw Error("--device cuda: this build has no CUDA backend (configure with -DVIREO_CUDA=ON)");
#endif
  }
  throw Error("unknown device '" + device + "' (expected auto, cpu or cuda)");
}

}  // namespace vireo
