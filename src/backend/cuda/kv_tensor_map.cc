#include "backend/cuda/kv_tensor_map.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace vireo::cuda {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's encoder, found through the runtime so that nothing links libcuda directly.
EncodeTiledFn encode_fn() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<EncodeTiledFn>(nullptr);
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

bool enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_ATTN_TMA");
    return !(e && e[0] == '0');
  }();
  return on;
}

bool same(const KvMapShape& a, const KvMapShape& b) {
  return a.base == b.base && a.dtype == b.dtype && a.num_slots == b.num_slots && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.block_size == b.block_size;
}

struct Entry {
  KvMapShape shape;
  CUtensorMap map;
};

// A 16-bit tensor (dims[0] contiguous elements, then dims[1], then dims[2]) whose box is one 64-element
// (128-byte) panel of box1 x box2 rows, 128-byte swizzled; false when the driver refuses it.
bool encode_3d(const void* base, DType dtype, const cuuint64_t (&dims)[3], cuuint32_t box1, cuuint32_t box2,
               CUtensorMap* out) {
  const EncodeTiledFn encode = encode_fn();
  if (!encode) return false;
  const cuuint64_t row = dims[0] * 2;  // bytes of one innermost row
  const cuuint64_t strides[2] = {row, row * dims[1]};
  const cuuint32_t box[3] = {64, box1, box2};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  return encode(out, dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
                const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

bool kv_tensor_map(const KvMapShape& s, CUtensorMap* out) {
  if (!enabled() || (s.dtype != DType::kBF16 && s.dtype != DType::kF16) || s.head_dim % 64 != 0 ||
      s.block_size < 8 || s.block_size > 256 || s.num_slots <= 0 || s.num_kv_heads <= 0 ||
      reinterpret_cast<uintptr_t>(s.base) % 16 != 0)
    return false;
  // One entry per (layer, K or V) cache buffer; a reallocated cache (another engine in the process)
  // only adds entries, so the list is bounded by the buffers ever seen and rarely exceeds a few hundred.
  static std::mutex mu;
  static std::vector<Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache)
    if (same(e.shape, s)) {
      *out = e.map;
      return true;
    }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(s.head_dim), static_cast<cuuint64_t>(s.num_kv_heads),
                              static_cast<cuuint64_t>(s.num_slots)};
  Entry e{s, {}};
  if (!encode_3d(s.base, s.dtype, dims, 1, static_cast<cuuint32_t>(s.block_size), &e.map)) return false;
  cache.push_back(e);
  *out = e.map;
  return true;
}

bool q_tensor_map(const QMapShape& s, CUtensorMap* out) {
  if (!enabled() || (s.dtype != DType::kBF16 && s.dtype != DType::kF16) || s.head_dim % 64 != 0 || s.group <= 0 ||
      64 % s.group != 0 || s.num_heads % s.group != 0 || s.num_tokens <= 0 ||
      reinterpret_cast<uintptr_t>(s.base) % 16 != 0)
    return false;
  static std::mutex mu;
  static QMapShape last;
  static CUtensorMap last_map;
  std::lock_guard<std::mutex> lock(mu);
  if (last.base == s.base && last.dtype == s.dtype && last.num_tokens == s.num_tokens && last.num_heads == s.num_heads &&
      last.head_dim == s.head_dim && last.group == s.group) {
    *out = last_map;
    return true;
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(s.head_dim), static_cast<cuuint64_t>(s.num_heads),
                              static_cast<cuuint64_t>(s.num_tokens)};
  CUtensorMap m;
  if (!encode_3d(s.base, s.dtype, dims, static_cast<cuuint32_t>(s.group), static_cast<cuuint32_t>(64 / s.group), &m))
    return false;
  last = s;
  last_map = m;
  *out = m;
  return true;
}

// A [rows, cols] byte matrix (row-major, cols contiguous) whose box is 128 bytes of box_rows rows, 128-byte
// swizzled. Not cached: encoding is a few hundred nanoseconds of host work, and the callers' activation
// buffers move between steps.
bool u8_rows_tensor_map(const void* base, int64_t rows, int64_t cols, int box_rows, CUtensorMap* out) {
  const EncodeTiledFn encode = encode_fn();
  if (!encode || rows <= 0 || cols <= 0 || cols % 16 != 0 || box_rows < 1 || box_rows > 256 ||
      reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols)};
  const cuuint32_t box[2] = {128, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace vireo::cuda
