// A caching device allocator: freed blocks go to per-size free lists and are reused by later
// allocations of the same rounded size (all work is on one stream, so reuse is stream-ordered).
#pragma once
#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

namespace vireo::cuda {

class CudaAllocator {
 public:
  CudaAllocator() = default;
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  void* allocate(size_t bytes);
  void release(void* p);          // back to the cache; nullptr and unknown pointers throw
  void release_to_driver(void* p);  // cudaFree now (after the device is idle): a block no size will reuse
  void empty_cache();             // cudaFree every cached block
  // While a stream capture is open the device must not be synchronised (it invalidates the capture):
  // a failed cudaMalloc then throws instead of emptying the cache and retrying.
  void set_capturing(bool on) { capturing_ = on; }
  size_t cached_bytes() const { return cached_bytes_; }
  size_t live_bytes() const { return live_bytes_; }
  static size_t round_size(size_t bytes);

 private:
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> cached blocks
  std::unordered_map<void*, size_t> live_;     // pointer -> rounded size
  size_t cached_bytes_ = 0, live_bytes_ = 0;
  bool capturing_ = false;
};

}  // namespace vireo::cuda
