// Device discovery for the factory; the backend itself is cuda_backend.cc.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend_factory.h"

namespace vireo {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

}  // namespace vireo
