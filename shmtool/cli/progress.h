// shmtool/cli/progress.h: progress on stderr for long inputs, with rate and ETA,
// shown only when stderr is a terminal (so pipes, logs and tests never see it)
// and only once the input has taken longer than 0.5 s (short inputs stay silent;
// SHMTOOL_PROGRESS_AFTER_MS overrides the delay). Every stdin-reading command
// gets it through cli/input.h; `roaring import` uses it for its file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace shmtool {

class Progress {
 public:
  // total_bytes 0: unknown (a pipe): lines, bytes and rate, no percentage or ETA.
  Progress(std::string label, uint64_t total_bytes);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();
  void update(uint64_t done_bytes, uint64_t lines = 0);
  void finish();

  // The "12.3M lines  45.6 MiB  1.23M lines/s  [####......] 41%  ETA 0:12" line (tests).
  static std::string line(const std::string& label, uint64_t done, uint64_t total, uint64_t lines, double seconds);

 private:
  void show(bool final);
  std::string label_;
  uint64_t total_ = 0, done_ = 0, lines_ = 0;
  bool tty_ = false, shown_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
  std::chrono::milliseconds after_{500};
};

// The command being run ("bloom add"), named in stdin progress lines; main sets it.
void set_progress_label(const std::string& label);
const std::string& progress_label();

}  // namespace shmtool
