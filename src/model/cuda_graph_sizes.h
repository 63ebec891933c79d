// Which batch sizes get a CUDA graph, and which steps may use one (no device code here).
#pragma once
#include <vector>

#include "model/model.h"

namespace vireo {

// vLLM's capture sizes: 1, 2, 4, then every 8 up to 256, then every 16, up to max_batch; max_batch
// itself is added when it falls between two sizes, so every batch up to it has a graph.
std::vector<int> graph_capture_sizes(int max_batch);
// The smallest capture size >= num_seqs, or 0 when there is none (the step runs eagerly).
int padded_graph_size(const std::vector<int>& sizes, int num_seqs);
// Every sequence of the step has exactly one token (and there is at least one).
bool is_decode_only(const StepInput& in);

}  // namespace vireo
