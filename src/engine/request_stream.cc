#include "engine/request_stream.h"

namespace vireo {

void QueueRequestStream::push(RequestOutput out) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

std::optional<RequestOutput> QueueRequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (finished_taken_) return std::nullopt;
  if (!cv_.wait_for(lk, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) finished_taken_ = true;
  return out;
}

}  // namespace vireo
