// DeferredCopyBackend: a backend that runs every op on an inner one (the CPU backend) but performs each
// copy_to_host_async only at wait_copy, reading its source then: the latest a device's side-stream
// download may run (Backend::copy_to_host_async). A caller that writes the source again before waiting
// for the copy gets the later data back, so tests of async scheduling catch that hazard on the host.
#pragma once
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "../model/forwarding_backend.h"

namespace vireo::testing {

class DeferredCopyBackend final : public ForwardingBackend {  // every other op: the inner backend's
 public:
  explicit DeferredCopyBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}
  std::string name() const override { return "deferred-" + in_->name(); }

  int copy_to_host_async(const Tensor& src, void* dst) override {
    pending_.push_back({next_ticket_, src.data, dst, static_cast<size_t>(src.nbytes())});
    return next_ticket_++;
  }
  void wait_copy(int ticket) override {
    while (!pending_.empty() && pending_.front().ticket <= ticket) {
      const Pending& p = pending_.front();
      std::memcpy(p.dst, p.src, p.n);
      pending_.pop_front();
    }
  }
  int fence() override { return ++fences_; }
  void copy_from_host_after(const void* src, Tensor& dst, int after) override {
    if (after > fences_) throw Error("copy_from_host_after: a fence that was never issued");
    in_->copy_from_host(src, dst);
  }
  size_t num_pending_copies() const { return pending_.size(); }

 private:
  struct Pending {
    int ticket;
    const void* src;
    void* dst;
    size_t n;
  };
  std::deque<Pending> pending_;
  int next_ticket_ = 1, fences_ = 0;
};

}  // namespace vireo::testing
