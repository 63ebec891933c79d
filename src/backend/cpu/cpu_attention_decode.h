// The decode rows of paged_attention on the CPU (cpu_attention.cc hands them over): sequences with one
// query token, whose keys/values are read straight from the paged cache (no gathered fp32 copy).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/op_params.h"

namespace vireo::cpu {

// out[query_start[s], h, :] for every s in seqs (each with query length 1) and every head h. The
// caller has validated p (dtypes, head counts, seq_lens, block ids). A row's result depends on its
// own query and keys alone: not on the other sequences, the thread count or how heads are split.
// Query head h's attention sink (AttentionParams::sinks), -inf when there are none.
inline float sink_of(const AttentionParams& p, int h) {
  return p.sinks.empty() ? -INFINITY : p.sinks.ptr<float>()[h];
}

void paged_attention_decode(ThreadPool& pool, const AttentionParams& p, const std::vector<int32_t>& seqs);

}  // namespace vireo::cpu
