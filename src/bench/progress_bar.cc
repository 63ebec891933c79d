#include "bench/progress_bar.h"

#include <cstdio>
#include <string>

namespace vireo::bench {

ProgressBar::ProgressBar(int total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ProgressBar::update(int done) {
  if (!enabled_ || done == last_done_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::finish(int done) {
  if (!enabled_) return;
  draw(done);
  std::fputc('\n', stderr);
}

void ProgressBar::draw(int done) {
  last_done_ = done;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? done / elapsed : 0;
  double eta = rate > 0 ? (total_ - done) / rate : 0;
  const int width = 30;
  int filled = total_ > 0 ? done * width / total_ : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, ' ');
  auto mmss = [](double s) {
    int t = static_cast<int>(s);
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%02d:%02d", t / 60, t % 60);
    return std::string(buf);
  };
  std::fprintf(stderr, "\r%3d%%|%s| %d/%d [%s<%s, %.2f it/s]", total_ > 0 ? done * 100 / total_ : 100, bar.c_str(),
               done, total_, mmss(elapsed).c_str(), mmss(eta).c_str(), rate);
  std::fflush(stderr);
}

}  // namespace vireo::bench
