// SmPartition (a green context's stream): kernels launched through the runtime on its stream run, read and
// write memory the primary context allocated, and stay on the partition's SMs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "backend/cuda/sm_partition.h"
#include "cuda_test_util.h"

namespace vireo::cuda {
namespace {

// Each block: spin ~2 us (so blocks overlap and spread over every SM they may use), then out[block] = its SM.
__global__ void record_sm(int* out) {
  const long long t0 = clock64();
  while (clock64() - t0 < 4000) {
  }
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    out[blockIdx.x] = static_cast<int>(sm);
  }
}

std::set<int> sms_used(cudaStream_t s, int blocks) {
  int* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, blocks * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0xff, blocks * sizeof(int), s), cudaSuccess);  // -1: not written
  record_sm<<<blocks, 64, 0, s>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<int> h(blocks);
  EXPECT_EQ(cudaMemcpy(h.data(), d, blocks * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  std::set<int> sms;
  for (int v : h) {
    EXPECT_GE(v, 0) << "a block did not write its SM";
    sms.insert(v);
  }
  return sms;
}

TEST(SmPartitionTest, KernelsStayOnItsSms) {
  VIREO_REQUIRE_GPU();
  int num_sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  cudaStream_t whole = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&whole, cudaStreamNonBlocking), cudaSuccess);
  const size_t all = sms_used(whole, 8192).size();
  auto part = SmPartition::create(0, 16, 0);
  if (!part) GTEST_SKIP() << "the driver made no green context";
  EXPECT_GE(part->num_sms(), 16);
  EXPECT_LT(part->num_sms(), num_sms);
  const size_t used = sms_used(part->stream(), 8192).size();
  std::printf("SMs used: device-wide stream %zu of %d, partition %zu of %d\n", all, num_sms, used, part->num_sms());
  EXPECT_GT(all, static_cast<size_t>(part->num_sms()));
  EXPECT_LE(used, static_cast<size_t>(part->num_sms() + 2));  // + 2: the driver's CDP note (cuda.h)
  // Its event orders a device-wide stream after the partition's work.
  ASSERT_EQ(cudaEventRecord(part->done(), part->stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(whole, part->done(), 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(whole), cudaSuccess);
  cudaStreamDestroy(whole);
}

}  // namespace
}  // namespace vireo::cuda
