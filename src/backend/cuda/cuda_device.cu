// Device discovery for the factory; the backend itself lives beside this file.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend_factory.h"
#include "core/error.h"

namespace vireo {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const std::string&) { throw Error("CUDA backend not built yet"); }

}  // namespace vireo
