// shmtool/cli/progress.cpp: the progress bar.
#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace shmtool {

Progress::Progress(std::string label, uint64_t total_bytes)
    : label_(std::move(label)), total_(total_bytes), tty_(isatty(2) != 0) {}

void Progress::update(uint64_t done) {
  if (!tty_ || total_ == 0) return;
  uint64_t pct = std::min<uint64_t>(100, done * 100 / total_);
  if (pct == last_shown_ && done != 0) return;
  last_shown_ = pct;
  int width = 40, filled = static_cast<int>(pct * width / 100);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width), '.');
  std::fprintf(stderr, "\r%s [%s] %3llu%%", label_.c_str(), bar.c_str(), static_cast<unsigned long long>(pct));
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && !finished_) {
    update(total_);
    std::fprintf(stderr, "\n");
  }
  finished_ = true;
}

Progress::~Progress() { finish(); }

}  // namespace shmtool
