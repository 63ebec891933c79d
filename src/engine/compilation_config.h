// vLLM's --compilation-config / -O: the parts with a counterpart here, the decode CUDA graphs. Vireo has no
// torch.compile (its kernels are compiled ahead of time), so of vLLM's CompilationConfig only the CUDA-graph
// settings take effect; the rest (compile mode, passes, custom ops, backends) is accepted and ignored.
#pragma once
#include <string>

#include "engine/engine_config.h"

namespace vireo {

// Applies `value` to c. Accepted forms, as vLLM takes them:
//   - an optimization level 0-3 (`-O0` .. `-O3`): 0 turns the graphs off (vLLM's -O0: no cudagraphs), 1-3
//     keep them;
//   - a JSON object: "cudagraph_mode" NONE turns the graphs off (FULL, FULL_DECODE_ONLY, PIECEWISE,
//     FULL_AND_PIECEWISE keep them: Vireo's graphs are whole decode steps); "cudagraph_capture_sizes"
//     caps the largest graph at the list's largest size ([] turns them off); "max_cudagraph_capture_size" (and
//     the older "max_capture_size") caps it too;
//   - one dotted setting (`-O.cudagraph_mode=NONE`, `-O.max_cudagraph_capture_size=64`).
// Settings only ever restrict: graphs off stays off, a cap takes the smaller of it and c's. "" does nothing.
// Throws vireo::Error naming the flag for a malformed value or an unknown cudagraph_mode.
void apply_compilation_config(const std::string& value, EngineConfig& c);

}  // namespace vireo
