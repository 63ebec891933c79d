#include "backend/cuda/op_gpu_timer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/event_util.h"
#include "core/log.h"

namespace vireo::cuda {
namespace {
// Intervals longer than this are the engine waiting for work (no requests), not a step's time.
constexpr float kIdleUs = 50'000.f;
constexpr int64_t kReportEvery = 50'000;
}  // namespace

OpGpuTimer::OpGpuTimer() {
  const char* v = std::getenv("VIREO_OP_TIMING");
  enabled_ = v && std::strcmp(v, "0") != 0;
}

OpGpuTimer::~OpGpuTimer() {
  if (!enabled_) return;
  for (const Mark& m : pending_) cudaEventSynchronize(m.event);
  collect_completed();
  report();
  for (const Mark& m : pending_) cudaEventDestroy(m.event);
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  if (last_) cudaEventDestroy(last_);
}

int OpGpuTimer::label_id(std::string_view label) {
  auto it = ids_.find(std::string(label));
  if (it != ids_.end()) return it->second;
  const int id = static_cast<int>(totals_.size());
  totals_.push_back({std::string(label)});
  ids_.emplace(std::string(label), id);
  return id;
}

void OpGpuTimer::mark(std::string_view label, cudaStream_t s) {
  if (!enabled_) return;
  collect_completed();
  cudaEvent_t e = nullptr;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {
    VIREO_CUDA_CHECK(cudaEventCreate(&e));
  }
  VIREO_CUDA_CHECK(cudaEventRecord(e, s));
  pending_.push_back({e, label_id(label)});
  if (++marks_since_report_ >= kReportEvery) {
    report();
    marks_since_report_ = 0;
  }
}

void OpGpuTimer::collect_completed() {
  while (!pending_.empty() && event_done(pending_.front().event)) {
    const Mark m = pending_.front();
    pending_.pop_front();
    if (last_) {
      const float us = event_elapsed_us(last_, m.event);
      Total& t = us > kIdleUs ? totals_[label_id("(idle: no work)")] : totals_[m.label];
      t.us += std::max(us, 0.f);
      t.max_us = std::max(t.max_us, static_cast<double>(us));
      ++t.count;
      free_.push_back(last_);
    }
    last_ = m.event;
  }
}

void OpGpuTimer::report() {
  std::vector<const Total*> rows;
  double sum = 0;
  for (const Total& t : totals_)
    if (t.count) {
      rows.push_back(&t);
      if (t.name != "(idle: no work)") sum += t.us;
    }
  if (rows.empty()) return;
  std::sort(rows.begin(), rows.end(), [](const Total* a, const Total* b) { return a->us > b->us; });
  log_info("op timing (VIREO_OP_TIMING): {:.1f} ms of stream time over {} labels", sum / 1000.0, rows.size());
  for (const Total* t : rows)
    log_info("  {:>10.1f} ms {:>5.1f}% {:>9} x {:>9.1f} us (max {:>8.1f})  {}", t->us / 1000.0,
             sum > 0 ? 100.0 * t->us / sum : 0.0, t->count, t->us / t->count, t->max_us, t->name);
}

}  // namespace vireo::cuda
