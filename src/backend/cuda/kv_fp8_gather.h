// Prefill rows over an FP8 KV cache (--kv-cache-dtype fp8) run the model-dtype prefill kernels (wgmma)
// on a widened copy of just their sequences' pages: prefill attention is bound by its FLOPs, so one pass
// that reads each page's codes once and writes them as bf16 / f16 costs little beside it, where widening
// every tile inside the mma.sync kernel cost 3x (session 39). Decode rows keep reading the codes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/op_params.h"

namespace vireo::cuda {

// The widened pages of one attention launch: caches [num_blocks, block_size, Hkv, D] in the activation
// dtype and a block table [num_seqs, max_blocks_per_seq] whose rows of prefill-shape sequences name them.
struct KvFp8Widened {
  Tensor k_cache, v_cache, block_tables;
};

// Widens the pages of every sequence with prefill-shape rows (q_len * group > 16) of p (F8_E4M3 caches;
// the listed p.prefill_seqs when given, else all sequences are checked on the device) into a scratch
// buffer kept per stream (grown with cudaMalloc; never while a graph is captured: decode-only steps have
// no prefill rows). Sequence i's pages go to blocks [i * max_blocks_per_seq, ...) of the copy.
KvFp8Widened widen_fp8_prefill_pages(const AttentionParams& p, cudaStream_t stream);

}  // namespace vireo::cuda
