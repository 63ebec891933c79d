// Host-side planning shared by the warp-specialised W8A8 GEMMs (fp8_gemm_ws.cu, fp8_gemm_pingpong.cu): the
// weights' tensor maps (made once per weight and box), the SM count, and how many row tiles walk together.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace vireo::cuda {

// The tensor map of an FP8 weight [m, k] (row-major codes), boxes of 128 bytes x box_rows rows, 128B-swizzled;
// cached by (w, m, k, box_rows): weights never move once loaded. False if the driver refuses it.
bool fp8_weight_tensor_map(const uint8_t* w, int64_t m, int64_t k, int box_rows, CUtensorMap* out);
// The current device's SM count (read once).
int fp8_gemm_sm_count();
// Row tiles (of tile_rows activation rows, K bytes each) a tile group walks together: as many as keep the
// group's activations within ~8 MiB of L2, at least 1, at most tiles_m.
int fp8_gemm_group_rows(int tiles_m, int tile_rows, int64_t k);

}  // namespace vireo::cuda
