// The exact softmax numerators of the CPU attention paths (prefill GEMM blocks and decode rows).
#pragma once

namespace vireo::cpu {

// sc[0, n) <- e^(sc - max(sc)) (vectorised exp, ~1e-7 relative error); returns their sum.
float softmax_numerators(float* sc, int n);

}  // namespace vireo::cpu
