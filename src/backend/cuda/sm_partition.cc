#include "backend/cuda/sm_partition.h"

#include <cuda.h>

#include <cstdio>

namespace vireo::cuda {
namespace {

// The driver's green-context functions (and the few context calls around them), found through the runtime.
struct GreenApi {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_resource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*split)(CUdevResource*, unsigned*, const CUdevResource*, CUdevResource*, unsigned, unsigned) = nullptr;
  CUresult (*gen_desc)(CUdevResourceDesc*, CUdevResource*, unsigned) = nullptr;
  CUresult (*create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned) = nullptr;
  CUresult (*destroy)(CUgreenCtx) = nullptr;
  CUresult (*stream_create)(CUstream*, CUgreenCtx, unsigned, int) = nullptr;
  CUresult (*to_ctx)(CUcontext*, CUgreenCtx) = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*pop)(CUcontext*) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  bool ok = false;
};

template <typename F>
bool find(const char* name, F*& fn, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || p == nullptr)
    return false;
  fn = reinterpret_cast<F*>(p);
  return true;
}

const GreenApi& api() {
  static const GreenApi a = [] {
    GreenApi g;
    g.ok = find("cuDeviceGet", g.device_get, 12000) && find("cuDeviceGetDevResource", g.get_resource, 12040) &&
           find("cuDevSmResourceSplitByCount", g.split, 12040) && find("cuDevResourceGenerateDesc", g.gen_desc, 12040) &&
           find("cuGreenCtxCreate", g.create, 12040) && find("cuGreenCtxDestroy", g.destroy, 12040) &&
           find("cuGreenCtxStreamCreate", g.stream_create, 12050) && find("cuCtxFromGreenCtx", g.to_ctx, 12040) &&
           find("cuCtxPushCurrent", g.push, 12000) && find("cuCtxPopCurrent", g.pop, 12000) &&
           find("cuEventCreate", g.event_create, 12000);
    return g;
  }();
  return a;
}

}  // namespace

std::unique_ptr<SmPartition> SmPartition::create(int device, int min_sms, int priority) {
  const GreenApi& g = api();
  if (!g.ok || min_sms <= 0) return nullptr;
  CUdevice dev = 0;
  CUdevResource all{}, part{}, rest{};
  unsigned groups = 1;
  CUdevResourceDesc desc = nullptr;
  CUgreenCtx green = nullptr;
  if (g.device_get(&dev, device) != CUDA_SUCCESS || g.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
      g.split(&part, &groups, &all, &rest, 0, static_cast<unsigned>(min_sms)) != CUDA_SUCCESS || groups != 1 ||
      g.gen_desc(&desc, &part, 1) != CUDA_SUCCESS || g.create(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS) {
    std::fprintf(stderr, "vireo: no green context of %d SMs (the decode rows keep the device-wide side stream)\n", min_sms);
    return nullptr;
  }
  std::unique_ptr<SmPartition> p(new SmPartition());
  p->green_ = green;
  p->num_sms_ = static_cast<int>(part.sm.smCount);
  CUstream s = nullptr;
  CUcontext ctx = nullptr, popped = nullptr;
  CUevent e = nullptr;
  const bool made = g.stream_create(&s, green, CU_STREAM_NON_BLOCKING, priority) == CUDA_SUCCESS &&
                    g.to_ctx(&ctx, green) == CUDA_SUCCESS && g.push(ctx) == CUDA_SUCCESS;
  // The event in the green context: an event is recorded only on a stream of its own context.
  const bool evented = made && g.event_create(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (made) g.pop(&popped);
  p->stream_ = s;
  p->done_ = e;
  if (!evented) {
    std::fprintf(stderr, "vireo: green context of %d SMs made no stream or event\n", p->num_sms_);
    return nullptr;  // the destructor frees what was made
  }
  return p;
}

SmPartition::~SmPartition() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (done_) cudaEventDestroy(done_);
  if (green_) api().destroy(static_cast<CUgreenCtx>(green_));
}

}  // namespace vireo::cuda
