// tests/support/test_util.h: helpers shared by every test program.
#pragma once

#include <dirent.h>
#include <grp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <sys/mman.h>
#include <vector>

#include "shmfilter/segment.hpp"

namespace shmf_test {

// A segment name unique to this process and call: "shmf-test-<pid>-<n>-<tag>".
inline std::string unique_name(const std::string& tag = "t") {
  static std::atomic<int> counter{0};
  return "shmf-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + tag;
}

// Segment options small enough for tests (a 4 MiB start that may grow).
inline shmfilter::CreateOptions small_options(uint64_t size = 4ull << 20, uint64_t max_size = 256ull << 20,
                                              uint32_t directory_capacity = 64) {
  shmfilter::CreateOptions o;
  o.size = size;
  o.max_size = max_size;
  o.directory_capacity = directory_capacity;
  return o;
}

// The ErrorCode that fn throws, or kOk when it throws nothing.
inline shmfilter::ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const shmfilter::Error& e) {
    return e.code();
  }
  return shmfilter::ErrorCode::kOk;
}

// Unlinks every lock file of the segment at PATH (PATH.lock-<16 hex>, docs/SECURITY.md),
// for tests that remove a segment file themselves. Returns how many.
inline int remove_lock_files(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const std::string prefix = path.substr(slash == std::string::npos ? 0 : slash + 1) + ".lock-";
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0 && std::string(e->d_name).size() == prefix.size() + 16)
        n += ::unlink((dir + "/" + e->d_name).c_str()) == 0;
    closedir(d);
  }
  return n;
}

// Removes the named segment when the test ends, pass or fail.
struct SegmentGuard {
  std::string name;
  explicit SegmentGuard(std::string n) : name(std::move(n)) { shmfilter::Segment::remove(name); }
  ~SegmentGuard() {
    try {
      shmfilter::Segment::remove(name);
    } catch (...) {
    }
    // remove() refuses what is not a segment (docs/SECURITY.md); tests that wrote
    // garbage under their own unique name must still leave nothing behind.
    ::shm_unlink(("/" + name).c_str());
    remove_lock_files("/dev/shm/" + name);
  }
};

// Forks; the child runs fn and _exits with its return value (97 on exception).
inline pid_t fork_child(const std::function<int()>& fn) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 97;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      fprintf(stderr, "child %d: exception: %s\n", getpid(), e.what());
    } catch (...) {
    }
    _exit(rc);
  }
  return pid;
}

// Waits for pid; returns the raw wait status.
inline int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return status;
}
inline bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
inline bool killed_by(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }

struct ToolResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the built shmtool with args (and optional stdin text); captures output.
// AS_UID >= 0 (needs root): the tool runs as that uid, group nogroup (65534), no supplementary groups.
inline ToolResult run_shmtool(const std::vector<std::string>& args, const std::string& input = "", int as_uid = -1) {
  char out_path[] = "/tmp/shmf-tool-out-XXXXXX";
  char err_path[] = "/tmp/shmf-tool-err-XXXXXX";
  char in_path[] = "/tmp/shmf-tool-in-XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path), in_fd = mkstemp(in_path);
  if (!input.empty()) {
    size_t off = 0;
    while (off < input.size()) {
      ssize_t n = write(in_fd, input.data() + off, input.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  lseek(in_fd, 0, SEEK_SET);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (as_uid >= 0 && (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
                        setresuid(static_cast<uid_t>(as_uid), static_cast<uid_t>(as_uid), static_cast<uid_t>(as_uid)) != 0))
      _exit(126);
    std::vector<char*> argv;
    std::string tool = SHMTOOL_PATH;
    argv.push_back(tool.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(tool.c_str(), argv.data());
    _exit(127);
  }
  int status = wait_status(pid);
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const char* path) {
    std::string s;
    if (FILE* f = fopen(path, "rb")) {
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
      fclose(f);
    }
    return s;
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  unlink(out_path);
  unlink(err_path);
  unlink(in_path);
  return r;
}

}  // namespace shmf_test
