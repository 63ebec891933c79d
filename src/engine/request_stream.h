// A thread-safe queue of one request's outputs (engine thread pushes, caller pulls).
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>

#include "engine/async_engine.h"

namespace vireo {

class QueueRequestStream : public RequestStream {
 public:
  void push(RequestOutput out);
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool finished_taken_ = false;
};

}  // namespace vireo
