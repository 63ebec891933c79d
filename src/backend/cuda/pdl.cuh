// Programmatic dependent launch (PDL, sm_90): a kernel launched with launch_pdl may start while the
// previous kernel of the stream is still running; it must call pdl_wait() before it reads anything a
// previous kernel wrote or writes anything a previous kernel may still read (pdl_wait returns once
// the previous grid has completed and its writes are visible). Work that touches no such memory
// (L2 prefetch of weights, address math) goes before it. pdl_trigger() lets the next kernel launch
// early; it has no effect on memory visibility, so any point is correct.
//
// Rules for every kernel launched through launch_pdl:
//   - pdl_wait() runs in every block before its first dependent access and before any early return
//     (a grid whose blocks all skip the wait could complete before its predecessor, and the kernel
//     after it would wait on it alone);
//   - launched without the attribute (VIREO_NO_PDL=1, or by a plain <<<>>> launch), both are no-ops.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"

namespace vireo::cuda {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// The common prologue: wait for the previous kernel, then let the next one launch.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_trigger();
}
// Hint: bring the 128-byte line holding p into L2 (no data returned; safe before pdl_wait()).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// cudaLaunchKernelEx of kernel(args...) with programmatic stream serialization when `pdl`, in clusters of
// cluster_x x 1 x 1 blocks when cluster_x > 0 (grid.x a multiple of it). `what` names it in a launch error.
template <typename... KArgs, typename... Args>
void launch_ex(bool pdl, unsigned cluster_x, const char* what, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
               cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(std::forward<Args>(args))...), what);
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization when
// `allow` and pdl_enabled(). Arguments are converted to the kernel's parameter types.
template <typename... KArgs, typename... Args>
void launch_maybe_pdl(bool allow, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
  launch_ex(allow && pdl_enabled(), 0, "cudaLaunchKernelEx", kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_maybe_pdl(true, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

// launch_pdl in thread-block clusters of cluster_x x 1 x 1 blocks (grid.x a multiple of cluster_x).
template <typename... KArgs, typename... Args>
void launch_pdl_clusters(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                         unsigned cluster_x, const char* what, Args&&... args) {
  launch_ex(pdl_enabled(), cluster_x, what, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace vireo::cuda
