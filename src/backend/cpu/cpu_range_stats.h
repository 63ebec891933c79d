// The reference for LinearParams::row_stats (RangeStats in backend/op_params.h): the softmax statistics
// of each output row over the even split into C ranges. The CPU linear writes them when asked; the CUDA
// tests use it as the oracle of the fused GEMV epilogue.
#pragma once
#include <cstdint>

#include "backend/op_params.h"

namespace vireo::cpu {

// stats[c] for the C ranges of row[0, m): max, sum exp(v - max) (in double, rounded once), best value
// and its lowest id. -inf values add nothing; NaN values are skipped.
void range_stats(const float* row, int64_t m, int64_t num_ranges, RangeStats* stats);

// p.out (F32 on the CPU) [N, M] -> p.row_stats [N, C, 4]; checks the shapes.
void linear_row_stats(const LinearParams& p);

}  // namespace vireo::cpu
