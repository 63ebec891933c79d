// A one-line progress bar on stderr ("  37%|#######       | 370/1000 [00:04<00:06, 88.2 it/s]"),
// drawn only when enabled (a terminal and no --disable-tqdm), at most ~10 times a second.
#pragma once
#include <chrono>

namespace vireo::bench {

class ProgressBar {
 public:
  ProgressBar(int total, bool enabled);
  void update(int done);
  void finish(int done);

 private:
  void draw(int done);
  int total_;
  bool enabled_;
  int last_done_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace vireo::bench
