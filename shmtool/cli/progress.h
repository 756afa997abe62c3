// shmtool/cli/progress.h: a progress bar on stderr for long inputs, shown only
// when stderr is a terminal (so pipes and tests never see it).
#pragma once

#include <cstdint>
#include <string>

namespace shmtool {

class Progress {
 public:
  Progress(std::string label, uint64_t total_bytes);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();
  void update(uint64_t done_bytes);
  void finish();

 private:
  std::string label_;
  uint64_t total_ = 0;
  uint64_t last_shown_ = 0;
  bool tty_ = false;
  bool finished_ = false;
};

}  // namespace shmtool
