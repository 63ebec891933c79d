#include "model/cuda_graph_sizes.h"

#include <algorithm>

namespace vireo {

std::vector<int> graph_capture_sizes(int max_batch) {
  std::vector<int> sizes;
  for (int s : {1, 2, 4})
    if (s <= max_batch) sizes.push_back(s);
  for (int s = 8; s <= std::min(max_batch, 256); s += 8) sizes.push_back(s);
  for (int s = 272; s <= max_batch; s += 16) sizes.push_back(s);
  if (max_batch > 0 && (sizes.empty() || sizes.back() != max_batch)) sizes.push_back(max_batch);
  return sizes;
}

int padded_graph_size(const std::vector<int>& sizes, int num_seqs) {
  if (num_seqs <= 0) return 0;
  auto it = std::lower_bound(sizes.begin(), sizes.end(), num_seqs);
  return it == sizes.end() ? 0 : *it;
}

bool is_decode_only(const StepInput& in) {
  const size_t S = in.seq_lens.size();
  if (S == 0 || in.token_ids.size() != S || in.query_start.size() != S + 1) return false;
  for (size_t s = 0; s < S; ++s)
    if (in.query_start[s + 1] - in.query_start[s] != 1) return false;
  return true;
}

}  // namespace vireo
