#include "backend/cuda/fp8_gemm_plan.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/fp8_gemm_ws.h"
#include "backend/cuda/kv_tensor_map.h"

namespace vireo::cuda {

bool fp8_weight_tensor_map(const uint8_t* w, int64_t m, int64_t k, int box_rows, CUtensorMap* out) {
  struct Entry {
    const uint8_t* w;
    int64_t m, k;
    int box_rows;
    CUtensorMap map;
  };
  static std::mutex mu;
  static std::vector<Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache)
    if (e.w == w && e.m == m && e.k == k && e.box_rows == box_rows) {
      *out = e.map;
      return true;
    }
  Entry e{w, m, k, box_rows, {}};
  if (!u8_rows_tensor_map(w, m, k, box_rows, &e.map)) return false;
  cache.push_back(e);
  *out = e.map;
  return true;
}

int fp8_gemm_sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    VIREO_CUDA_CHECK(cudaGetDevice(&dev));
    VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

int fp8_gemm_group_rows(int tiles_m, int tile_rows, int64_t k) {
  constexpr int64_t kGroupBytes = int64_t{8} << 20;
  const int64_t rows = kGroupBytes / (int64_t{tile_rows} * std::max<int64_t>(k, 1));
  return static_cast<int>(std::clamp<int64_t>(rows, 1, std::max(tiles_m, 1)));
}

}  // namespace vireo::cuda

namespace vireo::cuda {

Fp8GemmSchedule fp8_gemm_schedule(int64_t n, int64_t m, int64_t k) {
  struct Choice {
    int kernel;  // VIREO_FP8_GEMM_WS: 1 cooperative, 2 ping-pong, 3 ping-pong in block pairs, else none
    int64_t min_rows;
  };
  static const Choice choice = [] {
    const char* on = std::getenv("VIREO_FP8_GEMM_WS");
    const char* e = std::getenv("VIREO_FP8_GEMM_WS_MIN_ROWS");
    return Choice{on ? std::atoi(on) : 0, e ? std::max<int64_t>(1, std::atoll(e)) : int64_t{512}};
  }();
  if (n < choice.min_rows) return Fp8GemmSchedule::kCublasLt;
  if (choice.kernel == 1 && fp8_gemm_ws_ok(n, m, k)) return Fp8GemmSchedule::kCooperative;
  if (choice.kernel == 2 && fp8_gemm_pingpong_ok(n, m, k)) return Fp8GemmSchedule::kPingpong;
  if (choice.kernel == 3 && fp8_gemm_pingpong_ok(n, m, k)) return Fp8GemmSchedule::kPingpongPairs;
  return Fp8GemmSchedule::kCublasLt;
}

}  // namespace vireo::cuda
