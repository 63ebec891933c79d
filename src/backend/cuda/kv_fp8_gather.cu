// widen_fp8_prefill_pages (kv_fp8_gather.h): one block per (sequence slot, page), each thread 16 codes a
// pass -> 16 halves (bf16 through f32; both exact for E4M3 values).
#include "backend/cuda/kv_fp8_gather.h"

#include <mutex>
#include <vector>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

struct GatherArgs {
  const uint8_t* k8;
  const uint8_t* v8;
  void* k16;
  void* v16;
  int* table2;             // [num_seqs, max_blocks]
  const int* query_start;  // [num_seqs + 1]
  const int* seq_lens;
  const int* block_tables;
  const int* prefill_seqs;  // [num_slots] or nullptr: slot i is sequence i
  int max_blocks, block_size, page_elems, group;
};

template <typename T>
__global__ void __launch_bounds__(256) widen_pages_kernel(GatherArgs a) {
  pdl_enter();  // launched with PDL (pdl.cuh): the cache's new keys come from qkv_prepare
  const int slot = blockIdx.x, b = blockIdx.y;
  const int s = a.prefill_seqs != nullptr ? a.prefill_seqs[slot] : slot;
  const int q_len = a.query_start[s + 1] - a.query_start[s];
  if (q_len * a.group <= 16) return;  // decode shape: its rows read the codes
  if (b * a.block_size >= a.seq_lens[s]) return;
  const int dst = slot * a.max_blocks + b;
  if (threadIdx.x == 0) a.table2[static_cast<int64_t>(s) * a.max_blocks + b] = dst;
  const int64_t src_off = static_cast<int64_t>(a.block_tables[static_cast<int64_t>(s) * a.max_blocks + b]) * a.page_elems;
  const int64_t dst_off = static_cast<int64_t>(dst) * a.page_elems;
  for (int c = threadIdx.x * 16; c < a.page_elems; c += blockDim.x * 16) {
    for (int kv = 0; kv < 2; ++kv) {
      const uint4 raw = *reinterpret_cast<const uint4*>((kv ? a.v8 : a.k8) + src_off + c);
      uint4 lo, hi;
      fp8x16_to_half16(raw, lo, hi);
      T* out = static_cast<T*>(kv ? a.v16 : a.k16) + dst_off + c;
      if constexpr (std::is_same_v<T, __half>) {
        reinterpret_cast<uint4*>(out)[0] = lo;
        reinterpret_cast<uint4*>(out)[1] = hi;
      } else {
        const __half* h = reinterpret_cast<const __half*>(&lo);
        const __half* h2 = reinterpret_cast<const __half*>(&hi);
        Vec<T> o0, o1;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          o0.v[e] = from_f<T>(__half2float(h[e]));
          o1.v[e] = from_f<T>(__half2float(h2[e]));
        }
        reinterpret_cast<uint4*>(out)[0] = o0.raw;
        reinterpret_cast<uint4*>(out)[1] = o1.raw;
      }
    }
  }
}

// The scratch of one (device, stream): grown, never shrunk; freed at exit by the driver.
void* scratch(cudaStream_t stream, size_t bytes) {
  int dev = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  struct Entry {
    int dev;
    cudaStream_t stream;
    void* ptr;
    size_t bytes;
  };
  static std::mutex mu;
  static std::vector<Entry> entries;
  std::lock_guard<std::mutex> lock(mu);
  Entry* e = nullptr;
  for (Entry& x : entries)
    if (x.dev == dev && x.stream == stream) e = &x;
  if (e == nullptr) {
    entries.push_back({dev, stream, nullptr, 0});
    e = &entries.back();
  }
  if (bytes > e->bytes) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    VIREO_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
    if (cap != cudaStreamCaptureStatusNone)
      throw Error("paged_attention: an FP8 cache's prefill rows cannot grow their scratch inside a graph capture");
    VIREO_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old buffer may still be read
    if (e->ptr) VIREO_CUDA_CHECK(cudaFree(e->ptr));
    e->bytes = std::max(bytes, e->bytes + e->bytes / 2);
    VIREO_CUDA_CHECK(cudaMalloc(&e->ptr, e->bytes));
  }
  return e->ptr;
}

}  // namespace

KvFp8Widened widen_fp8_prefill_pages(const AttentionParams& p, cudaStream_t stream) {
  const DType act = p.q.dtype;
  if (p.k_cache.dtype != DType::kF8E4M3 || (act != DType::kBF16 && act != DType::kF16))
    throw Error("widen_fp8_prefill_pages: F8_E4M3 caches and bf16 / f16 queries expected");
  const bool listed = p.num_prefill_seqs >= 0 && !p.prefill_seqs.empty();
  const int slots = listed ? p.num_prefill_seqs : p.num_seqs;
  const int64_t page_elems = int64_t{p.block_size} * p.num_kv_heads * p.head_dim;
  if (page_elems % 16 != 0) throw Error("widen_fp8_prefill_pages: a page must be a multiple of 16 codes");
  // The copy's pages: a power of two of them at least (few distinct shapes for the TMA map cache).
  int64_t pages = 1;
  while (pages < int64_t{std::max(slots, 1)} * p.max_blocks_per_seq) pages *= 2;
  const size_t cache_bytes = static_cast<size_t>(pages * page_elems) * 2;
  const size_t table_bytes = static_cast<size_t>(p.num_seqs) * p.max_blocks_per_seq * sizeof(int);
  char* base = static_cast<char*>(scratch(stream, 2 * cache_bytes + table_bytes));
  KvFp8Widened w;
  const std::vector<int64_t> shape{pages, p.block_size, p.num_kv_heads, p.head_dim};
  w.k_cache = Tensor(base, act, shape, DeviceKind::kCUDA);
  w.v_cache = Tensor(base + cache_bytes, act, shape, DeviceKind::kCUDA);
  w.block_tables = Tensor(base + 2 * cache_bytes, DType::kI32, {p.num_seqs, p.max_blocks_per_seq}, DeviceKind::kCUDA);
  if (slots == 0) return w;
  GatherArgs a{static_cast<const uint8_t*>(p.k_cache.data), static_cast<const uint8_t*>(p.v_cache.data),
               w.k_cache.data, w.v_cache.data, w.block_tables.ptr<int>(), p.query_start.ptr<int>(),
               p.seq_lens.ptr<int>(), p.block_tables.ptr<int>(), listed ? p.prefill_seqs.ptr<int>() : nullptr,
               p.max_blocks_per_seq, p.block_size, static_cast<int>(page_elems), p.num_heads / p.num_kv_heads};
  const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>(p.max_blocks_per_seq));
  if (act == DType::kBF16) launch_pdl(widen_pages_kernel<__nv_bfloat16>, grid, dim3(256), 0, stream, a);
  else launch_pdl(widen_pages_kernel<__half>, grid, dim3(256), 0, stream, a);
  check_launch("paged_attention (FP8 prefill pages)");
  return w;
}

}  // namespace vireo::cuda
