// The process-wide PDL switch (pdl.cuh): on unless VIREO_NO_PDL=1; benchmarks flip it for A/B runs.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_kernels.h"

namespace vireo::cuda {
namespace {
std::atomic<bool>& pdl_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("VIREO_NO_PDL");
    return !(v && std::strcmp(v, "1") == 0);
  }()};
  return on;
}
}  // namespace

bool pdl_enabled() { return pdl_flag().load(std::memory_order_relaxed); }
void set_pdl_enabled(bool on) { pdl_flag().store(on, std::memory_order_relaxed); }

}  // namespace vireo::cuda
