// Softmax statistics of a range of values (RangeStats, backend/op_params.h) computed by one warp over
// values it can read twice (the streaming lm_head's own outputs, parked in shared memory as it stores
// them: gemv_stream_rows.cuh; or an output row in global memory: range_stats.cu).
//
// Two passes, not an online merge: the max first (fmaxf and shuffles), then the sum of exp(v - max)
// with independent exponentials. An online (max, sum) merge chains two expf a value; inside the
// lm_head's latency-bound loop that chain cost ~1 us of its 75 (ncu, session 23).
#pragma once
#include <cfloat>
#include <climits>
#include <cstdint>

namespace vireo::cuda {
namespace {

// load(i) for i in [0, n): the range's values; id0: the id of value 0. Every lane returns the
// statistics (max, sum, best value, best id as int bits); NaN values are skipped, -inf add nothing.
template <typename Load>
__device__ __forceinline__ float4 warp_range_stats(int n, int64_t id0, Load load) {
  const int lane = threadIdx.x & 31;
  float mx = -INFINITY;
  for (int i = lane; i < n; i += 32) mx = fmaxf(mx, load(i));  // fmaxf drops NaN
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
  int id = INT_MAX;
  if (mx > -INFINITY) {
    for (int i = lane; i < n; i += 32) {
      const float v = load(i);
      if (v > -INFINITY) sum += expf(v - mx);
      if (v == mx && id == INT_MAX) id = static_cast<int>(id0 + i);  // a lane's ids increase
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    id = min(id, __shfl_xor_sync(0xffffffffu, id, o));
  }
  return make_float4(mx, sum, mx, __int_as_float(id));
}

}  // namespace
}  // namespace vireo::cuda
