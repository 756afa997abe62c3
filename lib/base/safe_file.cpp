// lib/base/safe_file.cpp: see safe_file.h.
#include "base/safe_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "shmfilter/error.hpp"

namespace shmfilter::internal {
namespace {

[[noreturn]] void io_fail(const std::string& m) { throw Error(ErrorCode::kIo, m); }

std::string errtext(int e) { return std::strerror(e); }

}  // namespace

FileMode file_mode_of(int fd) noexcept {
  FileMode m;
  struct stat st{};
  if (fd >= 0 && fstat(fd, &st) == 0) {
    m.mode = st.st_mode & 0777;
    m.uid = st.st_uid;
    m.gid = st.st_gid;
  } else {
    m.mode = 0600;  // unknown source: the narrowest
  }
  return m;
}

FileMode default_file_mode() noexcept {
  const mode_t u = ::umask(0);  // read by setting; restored at once
  ::umask(u);
  FileMode m;
  m.mode = 0666 & ~static_cast<uint32_t>(u);
  return m;
}

void write_file_atomically(const std::string& path, std::string_view bytes, const FileMode& fm) {
  if (path.empty()) io_fail("no file name given: pass a path");
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") io_fail("'" + path + "' names a folder: pass a file path");
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) io_fail("cannot open folder '" + dir + "' of '" + path + "': " + errtext(errno) + "; check the path");
  // ".<name>.tmp-<pid>-<random>": O_EXCL|O_NOFOLLOW, so nothing planted under that name is ever written through.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) r ^= static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull + attempt;
    char suffix[48];
    std::snprintf(suffix, sizeof suffix, ".tmp-%d-%016llx", static_cast<int>(getpid()), static_cast<unsigned long long>(r));
    tmp = "." + base.substr(0, 200) + suffix;
    fd = ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    const int e = errno;
    ::close(dfd);
    io_fail("cannot create a temporary file in '" + dir + "' for '" + path + "': " + errtext(e) + "; check the folder");
  }
  auto cleanup = [&] {
    ::close(fd);
    ::unlinkat(dfd, tmp.c_str(), 0);
    ::close(dfd);
  };
  try {
    if (geteuid() == 0 && (fm.uid >= 0 || fm.gid >= 0) &&
        fchown(fd, fm.uid >= 0 ? static_cast<uid_t>(fm.uid) : static_cast<uid_t>(-1),
               fm.gid >= 0 ? static_cast<gid_t>(fm.gid) : static_cast<gid_t>(-1)) != 0)
      io_fail("cannot give '" + path + "' its owner: " + errtext(errno));
    if (fchmod(fd, fm.mode & 0777) != 0) io_fail("cannot set the mode of '" + path + "': " + errtext(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) io_fail("cannot write '" + path + "': " + errtext(errno) + " (disk full?)");
      done += static_cast<size_t>(w);
    }
    if (fsync(fd) != 0) io_fail("cannot fsync '" + path + "': " + errtext(errno));
    if (::renameat(dfd, tmp.c_str(), dfd, base.c_str()) != 0)
      io_fail("cannot rename the temporary file to '" + path + "': " + errtext(errno));
  } catch (...) {
    cleanup();
    throw;
  }
  ::close(fd);
  const int sync_rc = fsync(dfd);  // the rename itself survives a crash
  const int e = errno;
  ::close(dfd);
  if (sync_rc != 0 && e != EINVAL) io_fail("cannot fsync folder '" + dir + "' after writing '" + path + "': " + errtext(e));
}

int open_regular_file(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) io_fail("cannot open " + what + " '" + path + "': " + errtext(errno) + "; check the path");
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kBadInput, what + " '" + path + "' is not a regular file (" +
                                          (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                                           : S_ISSOCK(st.st_mode) ? "a socket" : "a device or special file") +
                                          "): pass a regular file");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& what) {
  int fd = open_regular_file(path, what);
  std::string s;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      io_fail("cannot read " + what + " '" + path + "': " + errtext(e));
    }
    if (n == 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return s;
}

}  // namespace shmfilter::internal
