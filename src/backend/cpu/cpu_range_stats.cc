#include "backend/cpu/cpu_range_stats.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace vireo::cpu {

void range_stats(const float* row, int64_t m, int64_t num_ranges, RangeStats* stats) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < num_ranges; ++c) {
    const int64_t b = range_begin(m, num_ranges, c), e = range_begin(m, num_ranges, c + 1);
    RangeStats s{kNegInf, 0.0f, kNegInf, std::numeric_limits<int32_t>::max()};
    for (int64_t i = b; i < e; ++i)
      if (row[i] > s.max) s.max = row[i], s.best_value = row[i], s.best_id = static_cast<int32_t>(i);
    double sum = 0.0;
    if (s.max > kNegInf)
      for (int64_t i = b; i < e; ++i)
        if (row[i] > kNegInf) sum += std::exp(static_cast<double>(row[i]) - s.max);  // NaN: not > -inf
    s.sum = static_cast<float>(sum);
    stats[c] = s;
  }
}

void linear_row_stats(const LinearParams& p) {
  if (p.out.dtype != DType::kF32) throw Error("cpu linear: row_stats need an F32 output");
  const Tensor& s = p.row_stats;
  const int64_t m = p.out.dim(-1), n = p.out.numel() / (m > 0 ? m : 1);
  if (s.dtype != DType::kF32 || s.ndim() != 3 || s.dim(0) != n || s.dim(1) < 1 || s.dim(2) != 4)
    throw Error("linear: row_stats must be F32 [N, C, 4], got " + s.shape_str());
  const int64_t num_ranges = s.dim(1);
  for (int64_t r = 0; r < n; ++r)
    range_stats(p.out.ptr<float>() + r * m, m, num_ranges, static_cast<RangeStats*>(s.data) + r * num_ranges);
}

}  // namespace vireo::cpu
