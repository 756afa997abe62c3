// shmtool/cli/progress.cpp: the progress line (rate, percentage, ETA).
#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "shmfilter/segment.hpp"  // format_size

namespace shmtool {
namespace {

std::string& label_storage() {
  static std::string label = "reading";
  return label;
}

std::string count(double v) {
  static const char* kUnits[] = {"", "k", "M", "G", "T"};
  int u = 0;
  while (u < 4 && v >= 999.5) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.3g%s", v, kUnits[u]);
  return buf;
}

std::string clock(double s) {
  auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

}  // namespace

void set_progress_label(const std::string& label) { label_storage() = label; }
const std::string& progress_label() { return label_storage(); }

Progress::Progress(std::string label, uint64_t total_bytes)
    : label_(std::move(label)), total_(total_bytes), tty_(isatty(2) != 0),
      start_(std::chrono::steady_clock::now()), last_(start_) {
  if (const char* e = std::getenv("SHMTOOL_PROGRESS_AFTER_MS")) after_ = std::chrono::milliseconds(std::atoll(e));
}

std::string Progress::line(const std::string& label, uint64_t done, uint64_t total, uint64_t lines, double seconds) {
  std::string s = label + ": ";
  if (lines) s += count(static_cast<double>(lines)) + " lines  ";
  s += shmfilter::format_size(done);
  if (seconds > 0) {
    s += "  ";
    s += lines ? count(static_cast<double>(lines) / seconds) + " lines/s"
               : shmfilter::format_size(static_cast<uint64_t>(static_cast<double>(done) / seconds)) + "/s";
  }
  if (total > 0) {
    uint64_t pct = std::min<uint64_t>(100, done * 100 / total);
    int filled = static_cast<int>(pct * 20 / 100);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(20, '.');
    char buf[64];
    std::snprintf(buf, sizeof buf, "  [%s] %3llu%%", bar.c_str(), static_cast<unsigned long long>(pct));
    s += buf;
    if (done > 0 && done < total && seconds > 0)
      s += "  ETA " + clock(seconds * static_cast<double>(total - done) / static_cast<double>(done));
  }
  return s;
}

void Progress::show(bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string l = line(label_, done_, final && total_ ? std::max(total_, done_) : total_, lines_, secs);
  std::fprintf(stderr, "\r%s\033[K%s", l.c_str(), final ? "\n" : "");
  std::fflush(stderr);
  shown_ = true;
}

void Progress::update(uint64_t done, uint64_t lines) {
  done_ = done;
  lines_ = lines;
  if (!tty_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < after_) return;                                   // short inputs stay silent
  if (shown_ && now - last_ < std::chrono::milliseconds(200)) return;  // 5 refreshes a second
  last_ = now;
  show(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (tty_ && (shown_ || std::chrono::steady_clock::now() - start_ >= after_)) show(true);
}

Progress::~Progress() { finish(); }

}  // namespace shmtool
