// tests/support/corrupt_image.h: helpers of the hardening tests (issue 12):
// a file-backed segment whose bytes a test corrupts after closing it, and a
// forked child with a wall bound that runs the operation under test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "segment/layout.h"
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"
#include "load_clock.h"
#include "test_util.h"

namespace shmf_test {

namespace seg_layout = shmfilter::internal;

// A hang detector, not a speed test: every operation the tests bound returns
// in milliseconds when it works; a child still running after this many
// uncontended seconds (tests/support/load_clock.h: wall time divided by the
// CPU contention, x3 under ASan) is stuck.
constexpr int kBoundSeconds = 20;

// A file-backed segment under /tmp, removed when the test ends.
struct ImageFile {
  std::string path;
  ImageFile() {
    static int n = 0;
    path = "/tmp/shmf-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".seg";
    ::unlink(path.c_str());
  }
  ~ImageFile() {
    ::unlink(path.c_str());
    remove_lock_files(path);
  }
  shmfilter::CreateOptions options(uint64_t max_size = 64ull << 20) const {
    shmfilter::CreateOptions o;
    o.file = path;
    o.size = 0;  // the minimum
    o.max_size = max_size;
    o.directory_capacity = 16;
    return o;
  }
  shmfilter::OpenOptions open_options() const {
    shmfilter::OpenOptions o;
    o.file = path;
    return o;
  }
  shmfilter::Segment open() const { return shmfilter::Segment::open("img", open_options()); }
  uint64_t file_size() const {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  template <class T>
  void poke(uint64_t off, T v) const {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &v, sizeof v, static_cast<off_t>(off)), static_cast<ssize_t>(sizeof v));
    ::close(fd);
  }
  template <class T>
  T peek(uint64_t off) const {
    T v{};
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(pread(fd, &v, sizeof v, static_cast<off_t>(off)), static_cast<ssize_t>(sizeof v));
    ::close(fd);
    return v;
  }
  // The next open will think the machine rebooted (its reboot path replays the undo log).
  void fake_reboot() const { poke<char>(offsetof(seg_layout::Header, boot_id), 'X'); }
};

struct Outcome {
  int status = 0;
  bool hung = false;
  int bound = kBoundSeconds;
  bool ok() const { return !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    if (hung)
      return "the child hung (still running after " + std::to_string(bound * time_scale()) +
             " s uncontended: wall time divided by the CPU contention, tests/support/load_clock.h)";
    if (WIFSIGNALED(status)) return std::string("the child died of signal ") + strsignal(WTERMSIG(status));
    return "the child exited " + std::to_string(WEXITSTATUS(status));
  }
};

// Runs fn in a forked child bounded by `bound` uncontended seconds (the parent
// SIGKILLs it then: hung). fn returns the exit code; a shmfilter::Error
// escaping fn is a clean refusal (exit 0).
inline Outcome in_child(const std::function<int()>& fn, int bound = kBoundSeconds) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 0;
    try {
      rc = fn();
    } catch (const shmfilter::Error& e) {
      fprintf(stderr, "child: refused with a named error (%s): %s\n",
              std::string(shmfilter::error_code_name(e.code())).c_str(), e.what());
      rc = 0;
    } catch (const std::exception& e) {
      fprintf(stderr, "child: unexpected exception: %s\n", e.what());
      rc = 98;
    }
    _exit(rc);
  }
  Outcome o;
  o.hung = !wait_child_bounded(pid, bound, o.status);
  o.bound = bound;
  return o;
}

template <class Fn>
void ignore_errors(Fn&& fn) {
  try {
    fn();
  } catch (const shmfilter::Error&) {
  }
}

// The payload offset of structure `name` in the image.
inline uint64_t region_offset(const ImageFile& img, const std::string& name) {
  shmfilter::Segment s = img.open();
  return s.open_region(name, s.find(name)->kind).offset;
}

}  // namespace shmf_test
