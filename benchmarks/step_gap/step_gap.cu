// step_gap: GPU time lost between decode steps to small host<->device copies, on the compute stream
// versus on copy streams of their own (docs/cuda_kernels.md, "Copies between decode steps").
//
// A step is modelled as the engine issues it: the step's metadata upload, the copy of the previous
// step's sampled tokens into the input ids, an ~800 us graph (one spinning block: the forward), the
// sampling rows upload, two small kernels (the sampling), the download of the sampled tokens. 200 steps
// are issued ahead (as async scheduling does); CUDA events give, per step, the gap from the previous
// sampling's end to this graph's start.
//
// Build (here): nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o step_gap benchmarks/step_gap/step_gap.cu
// Run (device): ./step_gap [metadata bytes, default 10240: batch 1 with a 2,560-block table]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e) {                                                                   \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void spin(long long cycles, int* buf) {
  const long long t = clock64();
  while (clock64() - t < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) buf[0] += 1;
}
__global__ void small_kernel(int* a) {
  if (threadIdx.x == 0) a[1] += a[0];
}
__global__ void copy_ids(const int* src, int* dst, int n) {
  if (static_cast<int>(threadIdx.x) < n) dst[threadIdx.x] = src[threadIdx.x];
}

enum Variant { kSameStream, kSameStreamKernelIds, kCopyStreams, kCopyStreamsIdsAfterWait, kNoCopies, kNumVariants };
const char* kNames[] = {"all on the compute stream (D2D ids)", "all on the compute stream (ids by kernel)",
                        "copy streams, ids before the wait", "copy streams, ids after the wait", "no copies (floor)"};

int main(int argc, char** argv) {
  const int meta_bytes = argc > 1 ? std::atoi(argv[1]) : 10240;
  constexpr int N = 200;
  constexpr long long kCycles = 1600000;  // ~800 us at 2 GHz
  constexpr size_t kHostStride = 1 << 16;
  cudaStream_t cs, up, down;
  for (cudaStream_t* s : {&cs, &up, &down}) CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  int *d_meta, *d_rows, *d_out, *d_w;
  CK(cudaMalloc(&d_meta, 1 << 20));
  CK(cudaMalloc(&d_rows, 4096));
  CK(cudaMalloc(&d_out, 4096));
  CK(cudaMalloc(&d_w, 4096));
  char *h_up, *h_down;
  CK(cudaMallocHost(&h_up, N * kHostStride));
  CK(cudaMallocHost(&h_down, N * 64));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  spin<<<1, 32, 0, cs>>>(kCycles, d_w);
  CK(cudaStreamEndCapture(cs, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  std::vector<cudaEvent_t> g_start(N), g_end(N), s_end(N), meta_done(N), rows_done(N), down_done(N);
  for (int i = 0; i < N; ++i) {
    for (auto* v : {&g_start, &g_end, &s_end}) CK(cudaEventCreate(&(*v)[i]));
    for (auto* v : {&meta_done, &rows_done, &down_done}) CK(cudaEventCreateWithFlags(&(*v)[i], cudaEventDisableTiming));
  }
  auto sampling = [&](int i) {
    small_kernel<<<75, 256, 0, cs>>>(d_out);
    small_kernel<<<1, 512, 0, cs>>>(d_out);
    CK(cudaEventRecord(s_end[i], cs));
  };
  for (int v = 0; v < kNumVariants; ++v) {
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < N; ++i) {
      char* hu = h_up + i * kHostStride;
      if (v == kSameStream || v == kSameStreamKernelIds) {
        CK(cudaMemcpyAsync(d_meta + 16, hu, meta_bytes, cudaMemcpyHostToDevice, cs));
        if (v == kSameStream) CK(cudaMemcpyAsync(d_meta, d_out, 4, cudaMemcpyDeviceToDevice, cs));
        else copy_ids<<<1, 32, 0, cs>>>(d_out, d_meta, 1);
        CK(cudaEventRecord(g_start[i], cs));
        CK(cudaGraphLaunch(ge, cs));
        CK(cudaEventRecord(g_end[i], cs));
        CK(cudaMemcpyAsync(d_rows, hu + 60000, 56, cudaMemcpyHostToDevice, cs));
        sampling(i);
        CK(cudaMemcpyAsync(h_down + i * 64, d_out, 8, cudaMemcpyDeviceToHost, cs));
      } else if (v == kNoCopies) {
        CK(cudaEventRecord(g_start[i], cs));
        CK(cudaGraphLaunch(ge, cs));
        CK(cudaEventRecord(g_end[i], cs));
        sampling(i);
      } else {
        // Metadata waits for the previous graph (its last reader), the rows for the previous sampling.
        if (i > 0) CK(cudaStreamWaitEvent(up, g_end[i - 1], 0));
        CK(cudaMemcpyAsync(d_meta + 16, hu, meta_bytes, cudaMemcpyHostToDevice, up));
        CK(cudaEventRecord(meta_done[i], up));
        if (i > 0) CK(cudaStreamWaitEvent(up, s_end[i - 1], 0));
        CK(cudaMemcpyAsync(d_rows, hu + 60000, 56, cudaMemcpyHostToDevice, up));
        CK(cudaEventRecord(rows_done[i], up));
        if (v == kCopyStreams) copy_ids<<<1, 32, 0, cs>>>(d_out, d_meta, 1);
        CK(cudaStreamWaitEvent(cs, meta_done[i], 0));
        if (v == kCopyStreamsIdsAfterWait) copy_ids<<<1, 32, 0, cs>>>(d_out, d_meta, 1);
        CK(cudaEventRecord(g_start[i], cs));
        CK(cudaGraphLaunch(ge, cs));
        CK(cudaEventRecord(g_end[i], cs));
        CK(cudaStreamWaitEvent(cs, rows_done[i], 0));
        if (i > 0) CK(cudaStreamWaitEvent(cs, down_done[i - 1], 0));
        sampling(i);
        CK(cudaStreamWaitEvent(down, s_end[i], 0));
        CK(cudaMemcpyAsync(h_down + i * 64, d_out, 8, cudaMemcpyDeviceToHost, down));
        CK(cudaEventRecord(down_done[i], down));
      }
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> gap, tail;
    for (int i = 1; i < N; ++i) {
      float a, b;
      CK(cudaEventElapsedTime(&a, s_end[i - 1], g_start[i]));
      CK(cudaEventElapsedTime(&b, g_end[i], s_end[i]));
      gap.push_back(a * 1000);
      tail.push_back(b * 1000);
    }
    float total;
    CK(cudaEventElapsedTime(&total, g_start[1], g_start[N - 1]));
    auto median = [](std::vector<float> x) {
      std::sort(x.begin(), x.end());
      return x[x.size() / 2];
    };
    std::printf("%-42s metadata %6d B: step %6.1f us, gap before the graph %5.1f us, graph end -> sampling end %5.1f us\n",
                kNames[v], meta_bytes, total * 1000 / (N - 2), median(gap), median(tail));
  }
  return 0;
}
