// lib/segment/lock_file.cpp: the writers-only lock file of a segment.
//
// Registry liveness is an OFD write lock per slot (registry.cpp). Taken on
// the segment file itself, anyone who may READ the segment could take OFD
// read locks on the registry bytes and so block every new attach (a read
// lock conflicts with the write lock a claimer needs). Since format version 2
// the locks live on a companion file PATH.lock-<16 hex of Header::lock_id>,
// whose mode grants read+write exactly to the classes (user, group, other)
// that may write the segment and nothing to the others: a user who can only
// read the segment cannot open it, so cannot lock anything in it.
// The lock file is validated like the segment (O_NOFOLLOW, regular file, one
// link, a trusted owner, no access for non-writers). The id in its name ties
// it to one segment: a removed and recreated segment gets another id, so a
// lock file is never replaced under its users; a missing one (a copied
// segment, a restore renamed into place) is created by the first writer.
#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "segment/lock_file.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

std::string lock_file_path(const std::string& segment_path, uint64_t lock_id) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, lock_id);
  return segment_path + ".lock-" + hex;
}

uint64_t new_lock_id() {
  uint64_t id = 0;
  while (id == 0) {
    if (getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) id = now_unix_ns() ^ (uint64_t(getpid()) << 40);
  }
  return id;
}

uint32_t lock_file_mode(uint32_t segment_mode) noexcept {
  uint32_t m = 0;
  if (segment_mode & 0200) m |= 0600;
  if (segment_mode & 0020) m |= 0060;
  if (segment_mode & 0002) m |= 0006;
  return m;
}

bool set_creator_lock(int fd, bool on) noexcept {
  struct flock fl{};
  fl.l_type = on ? F_WRLCK : F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kCreatorLockByte);
  fl.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

bool lock_file_in_use(int fd) noexcept {
  struct flock fl{};
  fl.l_type = F_WRLCK;  // reports any lock (read or write) of another open file description
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kCreatorLockByte);
  fl.l_len = static_cast<off_t>(kLockBase + kRegistrySlots - kCreatorLockByte);
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: in use (safe side)
  return fl.l_type != F_UNLCK;
}

// Creates LPATH (never replacing anything), with the creator byte locked
// before the name exists where O_TMPFILE allows. Returns the fd, or -1 with
// errno EEXIST when LPATH exists. Throws on other errors.
static int create_lock_file(const std::string& lpath, uint32_t mode, int64_t gid, const std::string& who) {
  const std::string dir = parent_dir(lpath);
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  bool linked = false;
  if (fd < 0) {
    fd = ::open(lpath.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST) return -1;
    linked = true;
  }
  if (fd < 0)
    fail(open_errno_code(errno), "cannot create the lock file " + lpath + " of " + who + ": " + errno_text(errno) +
                                     ": check that " + dir + " is writable");
  uint32_t m = mode;
  if (gid >= 0 && fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(gid)) != 0)
    m &= ~0070u;  // not that group's: give the group nothing rather than our own group access
  if (fchmod(fd, m) != 0 || !set_creator_lock(fd, true)) {
    int e = errno;
    ::close(fd);
    if (linked) ::unlink(lpath.c_str());
    fail(ErrorCode::kIo, "cannot prepare the lock file " + lpath + " of " + who + ": " + errno_text(e));
  }
  if (!linked) {
    std::string proc = "/proc/self/fd/" + std::to_string(fd);
    int rc = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, lpath.c_str(), AT_SYMLINK_FOLLOW);
    if (rc != 0 && errno == ENOENT) rc = linkat(fd, "", AT_FDCWD, lpath.c_str(), AT_EMPTY_PATH);
    if (rc != 0) {
      int e = errno;
      ::close(fd);
      if (e == EEXIST) {
        errno = EEXIST;
        return -1;
      }
      fail(open_errno_code(e), "cannot create the lock file " + lpath + " of " + who + ": " + errno_text(e));
    }
  }
  return fd;
}

void SegmentImpl::create_lock_file_for(uint64_t lock_id, uint32_t segment_mode, int64_t gid) {
  lock_path = lock_file_path(path, lock_id);
  int lfd = create_lock_file(lock_path, lock_file_mode(segment_mode), gid, what_it_is(name, path));
  if (lfd < 0)  // a random 64-bit id already taken: someone planted it
    fail(ErrorCode::kExists, "the lock file " + lock_path + " of " + what_it_is(name, path) +
                                 " already exists: remove it (it belongs to no segment) and create again");
  lock_fd = lfd;
  lock_file_created = true;
}

// Opens (or, when absent and we may write, creates) the lock file of a
// version 2 segment and validates it. SEG: fstat of the segment file.
void SegmentImpl::open_lock_file(uint64_t lock_id, const struct stat& seg, int64_t trusted_owner) {
  const std::string who = what_it_is(name, path);
  lock_path = lock_file_path(path, lock_id);
  int lfd = -1;
  for (int attempt = 0; attempt < 4 && lfd < 0; ++attempt) {
    lfd = ::open(lock_path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (lfd >= 0) break;
    int e = errno;
    if (read_only) return;  // no liveness for this inspector: processes() says "unknown" (alive, safe side)
    if (e == ELOOP)
      fail(ErrorCode::kPermission, "the lock file " + lock_path + " of " + who + " is a symbolic link: shmfilter "
                                   "never follows one (another user may have planted it): remove it");
    if (e == EACCES || e == EPERM)
      fail(ErrorCode::kPermission, "no permission to open the lock file " + lock_path + " of " + who +
                                       " read-write: only users who may write the segment can attach (after a "
                                       "chgrp/chmod of the segment, its owner or root re-syncs the lock file by "
                                       "opening the segment once); to inspect it, open it read-only "
                                       "(OpenOptions::read_only, shmtool --read-only)");
    if (e != ENOENT) fail(open_errno_code(e), "cannot open the lock file " + lock_path + " of " + who + ": " + errno_text(e));
    // Absent (a copied segment, a restore renamed into place): the first writer creates it.
    lfd = create_lock_file(lock_path, lock_file_mode(seg.st_mode), static_cast<int64_t>(seg.st_gid), who);
    if (lfd >= 0) lock_file_created = true;
  }
  if (lfd < 0)
    fail(ErrorCode::kBusy, "the lock file " + lock_path + " of " + who + " keeps appearing and vanishing: "
                                                                         "is something removing it? retry");
  lock_fd = lfd;
  struct stat st{};
  if (fstat(lfd, &st) != 0) fail(ErrorCode::kIo, "cannot stat the lock file " + lock_path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
    fail(ErrorCode::kPermission, "the lock file " + lock_path + " of " + who +
                                     " is not a regular file with one name (a FIFO, device, directory or hard "
                                     "link): remove it; the next writer to open the segment creates it again");
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0 && st.st_uid != seg.st_uid &&
      !(trusted_owner >= 0 && static_cast<uint64_t>(st.st_uid) == static_cast<uint64_t>(trusted_owner)))
    fail(ErrorCode::kPermission, "the lock file " + lock_path + " of " + who + " is owned by uid " +
                                     std::to_string(st.st_uid) + ", neither you (uid " + std::to_string(me) +
                                     "), root nor the segment's owner (uid " + std::to_string(seg.st_uid) +
                                     "): its owner could fake or block attachments; if you trust that user, pass "
                                     "OpenOptions::trusted_owner = " + std::to_string(st.st_uid) +
                                     ", else remove it (docs/SECURITY.md)");
  // The lock file follows the segment's writers: after a chgrp/chmod of the
  // segment (how docs/nginx.md shares one with workers), its owner or root
  // re-syncs it on the next open: the segment's group, rw for each class that
  // may write the segment. Access for anyone else is refused: they could
  // read-lock the registry (an inspector only reads, so it never refuses).
  const uint32_t allowed = lock_file_mode(seg.st_mode);
  auto extra_access = [&] {
    uint32_t extra = static_cast<uint32_t>(st.st_mode) & 0777u & ~allowed;
    if (st.st_gid != seg.st_gid) extra |= static_cast<uint32_t>(st.st_mode) & 0070u;  // another group's access
    return extra;
  };
  if (!read_only && (st.st_uid == me || me == 0) &&
      ((static_cast<uint32_t>(st.st_mode) & 0777u) != allowed || st.st_gid != seg.st_gid)) {
    uint32_t m = allowed;
    if (st.st_gid != seg.st_gid && fchown(lfd, static_cast<uid_t>(-1), seg.st_gid) != 0) m &= ~0070u;
    (void)fchmod(lfd, m);
    if (fstat(lfd, &st) != 0) fail(ErrorCode::kIo, "cannot stat the lock file " + lock_path + ": " + errno_text(errno));
  }
  if (!read_only && extra_access() != 0) {
    char modes[48];
    std::snprintf(modes, sizeof modes, "%04o, group %u; at most %04o, group %u",
                  static_cast<unsigned>(st.st_mode & 0777u), static_cast<unsigned>(st.st_gid), allowed,
                  static_cast<unsigned>(seg.st_gid));
    fail(ErrorCode::kPermission, "the lock file " + lock_path + " of " + who +
                                     " grants access to users who cannot write the segment (mode " + modes +
                                     "): they could block attaches; open the segment once as the lock file's "
                                     "owner (uid " + std::to_string(st.st_uid) + ") or root, which re-syncs it "
                                     "(docs/SECURITY.md)");
  }
}

// PATH.lock-<16 hex> files other than KEEP_ID's whose users are all gone
// (no lock in the creator/registry range) and that we own: a creator killed
// before it linked its segment, or a segment removed without its lock file.
std::vector<std::string> lock_file_leftovers(const std::string& segment_path, uint64_t keep_id, bool remove) {
  std::vector<std::string> found;
  const std::string dir = parent_dir(segment_path);
  const auto slash = segment_path.rfind('/');
  const std::string prefix = segment_path.substr(slash == std::string::npos ? 0 : slash + 1) + ".lock-";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    const size_t n = std::strlen(e->d_name);
    if (n != prefix.size() + 16 || std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const char* hex = e->d_name + prefix.size();
    if (std::strspn(hex, "0123456789abcdef") != 16) continue;
    if (keep_id != 0 && std::strtoull(hex, nullptr, 16) == keep_id) continue;
    const std::string p = dir + "/" + e->d_name;
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st{};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !lock_file_in_use(fd)) {
      found.push_back(p);
      if (remove) ::unlink(p.c_str());
    }
    ::close(fd);
  }
  closedir(d);
  return found;
}

// The lock id of the segment at PATH (0: none, version 1, or unreadable).
uint64_t read_lock_id(const std::string& path) noexcept {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  Header h{};
  ssize_t n = pread(fd, &h, sizeof h, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof h) || h.magic != kMagic || h.version != kFormatVersion) return 0;
  return h.lock_id != 0 && h.lock_id_check == ~h.lock_id ? h.lock_id : 0;
}

}  // namespace shmfilter::internal

namespace shmfilter::internal {

// PATH.restoring-<pid> segments of restores that died before renaming them
// into place: segments (version 2) whose lock file no process holds a lock
// in, ours. Removed (with their lock file) when REMOVE. A live restorer is
// attached to its segment, so its registry slot's lock is held.
std::vector<std::string> restoring_leftovers(const std::string& path, bool remove) {
  std::vector<std::string> found;
  const std::string dir = parent_dir(path);
  const auto slash = path.rfind('/');
  const std::string prefix = path.substr(slash == std::string::npos ? 0 : slash + 1) + ".restoring-";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    const size_t n = std::strlen(e->d_name);
    if (n <= prefix.size() || std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (std::strspn(e->d_name + prefix.size(), "0123456789") != n - prefix.size()) continue;
    const std::string p = dir + "/" + e->d_name;
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    const uint64_t id = read_lock_id(p);
    if (id == 0) continue;  // not a version 2 segment: not ours to judge
    const std::string lp = lock_file_path(p, id);
    int lfd = ::open(lp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    const bool alive = lfd >= 0 && lock_file_in_use(lfd);
    if (lfd >= 0) ::close(lfd);
    if (alive) continue;
    found.push_back(p);
    if (remove && ::unlink(p.c_str()) == 0) ::unlink(lp.c_str());
  }
  closedir(d);
  return found;
}

}  // namespace shmfilter::internal

namespace shmfilter::internal {

void move_lock_file(const std::string& from, const std::string& to) noexcept {
  const uint64_t id = read_lock_id(to);
  if (id == 0) return;
  (void)::renameat2(AT_FDCWD, lock_file_path(from, id).c_str(), AT_FDCWD, lock_file_path(to, id).c_str(),
                    RENAME_NOREPLACE);
}

}  // namespace shmfilter::internal
