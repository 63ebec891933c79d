// TMA tensor maps over a paged KV cache, for kernels that copy whole pages with
// cp.async.bulk.tensor instead of 16-byte cp.async (attention_wgmma_ws.cuh).
//
// Cache: [num_blocks, block_size, num_kv_heads, D] (op_params.h AttentionParams), seen by the map as a
// 3-D tensor (D, num_kv_heads, slots = num_blocks * block_size). One box is one page of one KV head
// and one 64-column panel: (64, 1, block_size), 128-byte swizzle, i.e. block_size rows of 128 bytes in
// the layout swz128() gives (wgmma_common.cuh) when its destination is 1024-byte aligned.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "core/dtype.h"

namespace vireo::cuda {

struct KvMapShape {
  const void* base = nullptr;
  DType dtype = DType::kBF16;
  int64_t num_slots = 0;
  int num_kv_heads = 0, head_dim = 0, block_size = 0;
};

// True and *out filled when the driver can encode the map for this shape (bf16/f16, D a multiple of
// 64, block_size 8..256, 16-byte aligned base); false otherwise (the caller keeps cp.async). Maps are
// encoded on the host (no GPU work) and cached per shape; VIREO_ATTN_TMA=0 turns this off.
bool kv_tensor_map(const KvMapShape& shape, CUtensorMap* out);

// Queries q [num_tokens, num_heads, D] as a 3-D tensor (D, num_heads, num_tokens) whose box is one 64-column
// panel of 64 GQA-packed rows: (64, group, 64 / group), 128-byte swizzle, i.e. row r = token * group + head
// of the box in swz128's layout. Rows past num_tokens are zero-filled. Needs group | 64.
struct QMapShape {
  const void* base = nullptr;
  DType dtype = DType::kBF16;
  int64_t num_tokens = 0;
  int num_heads = 0, head_dim = 0, group = 0;
};
// As kv_tensor_map (same conditions on dtype, D and alignment, and VIREO_ATTN_TMA); the last map is reused
// while the shape and base stay (every layer of a step).
bool q_tensor_map(const QMapShape& shape, CUtensorMap* out);

// A [rows, cols] byte matrix (FP8 codes: weights, quantized activations) as a 2-D map whose box is one
// 128-byte panel of box_rows rows (128-byte swizzle, swz128's layout); rows past `rows` are zero-filled.
// Needs cols % 16 == 0, a 16-byte aligned base and box_rows <= 256; false when the driver refuses it.
bool u8_rows_tensor_map(const void* base, int64_t rows, int64_t cols, int box_rows, CUtensorMap* out);

}  // namespace vireo::cuda
