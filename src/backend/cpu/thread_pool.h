// A small persistent worker pool for the CPU backend's data-parallel loops.
// parallel_for splits [0, n) into chunks; the calling thread works too. Exceptions thrown by
// the body are rethrown (the first one) on the calling thread once all chunks are done.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vireo {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads = 0);  // 0: hardware_concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // body(begin, end) over chunks of at least min_chunk items. Not reentrant.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t min_chunk = 1);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // current job
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, next_ = 0;
  int active_ = 0;
  std::exception_ptr error_;
};

}  // namespace vireo
