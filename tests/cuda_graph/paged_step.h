// Sequences in a paged cache with their blocks fixed up front, and the StepInput of one step over them
// (the GPU model tests that build their own schedules: batch_invariant_model_test.cc, decode_graph_test.cc).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace vireo::testing {

struct PagedSeq {
  std::vector<int32_t> blocks;
  int len = 0;  // tokens in the cache
};

// One step: sequence i of `seqs` adds chunks[i] tokens; logits for each sequence's last token.
inline StepInput make_step(const std::vector<PagedSeq*>& seqs, const std::vector<std::vector<int32_t>>& chunks,
                           int block_size) {
  StepInput in;
  int max_blocks = 1;
  for (size_t i = 0; i < seqs.size(); ++i)
    max_blocks = std::max<int>(max_blocks, (seqs[i]->len + chunks[i].size() + block_size - 1) / block_size);
  in.max_blocks_per_seq = max_blocks;
  in.query_start.push_back(0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    PagedSeq& s = *seqs[i];
    for (int32_t t : chunks[i]) {
      in.token_ids.push_back(t);
      in.positions.push_back(s.len);
      in.slot_mapping.push_back(s.blocks.at(s.len / block_size) * block_size + s.len % block_size);
      ++s.len;
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(s.len);
    for (int b = 0; b < max_blocks; ++b) in.block_tables.push_back(b < static_cast<int>(s.blocks.size()) ? s.blocks[b] : 0);
    in.logits_indices.push_back(static_cast<int32_t>(in.token_ids.size()) - 1);
  }
  return in;
}

}  // namespace vireo::testing
