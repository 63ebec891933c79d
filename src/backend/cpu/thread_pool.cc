#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace vireo {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& w : workers_) w.join();
}

// Claims chunks until none are left; records the first exception.
void ThreadPool::run_chunks() {
  for (;;) {
    int64_t begin;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= n_) return;
      begin = next_;
      next_ = std::min(n_, next_ + chunk_);
    }
    int64_t end = std::min(n_, begin + chunk_);
    try {
      (*body_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_ = n_;  // stop handing out work
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --active_;
    }
    cv_done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t min_chunk) {
  if (n <= 0) return;
  int nt = num_threads();
  int64_t chunk = std::max<int64_t>(min_chunk, (n + 4 * nt - 1) / (4 * nt));
  if (nt == 1 || n <= chunk) {
    body(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    body_ = &body;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  cv_start_.notify_all();
  run_chunks();
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Workers that woke late find no chunks left and leave at once; wait for the busy ones.
    cv_done_.wait(lock, [&] { return active_ == 0 && next_ >= n_; });
    err = error_;
    body_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace vireo
