// lib/segment/mapping.cpp: the backing object of a segment and its mapping.
//
// Names and paths (/dev/shm/NAME or --file), create (O_TMPFILE, initialise the
// header, link into place), open (validate the header before mapping), the
// one reservation of max_size (mmap MAP_NORESERVE; offsets never move), and
// growing/shrinking the backing object (posix_fallocate / ftruncate).
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/kill_point.h"
#include "base/text.h"
#include "segment/robust_mutex.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

thread_local size_t t_segment_name_slack = 0;

void validate_segment_name(std::string_view name) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "segment name is empty: pass a name such as 'freq'");
  if (name.size() > kMaxSegmentNameLength + t_segment_name_slack)
    fail(ErrorCode::kNameTooLong, "segment name '" + std::string(name.substr(0, 40)) + "...' is " +
                                      std::to_string(name.size()) + " bytes; the limit is " +
                                      std::to_string(kMaxSegmentNameLength) + ": use a shorter name");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
    fail(ErrorCode::kInvalidArgument, "segment name '" + std::string(name) +
                                          "' contains '/' or NUL: use a plain name (for a file path pass --file)");
  if (name == "." || name == "..")
    fail(ErrorCode::kInvalidArgument, "segment name '" + std::string(name) + "' is reserved: use another name");
}

std::string backing_path(std::string_view name, const std::string& file) {
  if (!file.empty()) return file;
  return "/dev/shm/" + std::string(name);
}

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// posix_fallocate that reports a file-size limit as EFBIG instead of letting
// SIGXFSZ (default action: terminate) kill the process, and retries EINTR.
int allocate_file_range(int fd, uint64_t offset, uint64_t len) noexcept {
  sigset_t xfsz, old, pending;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGXFSZ) == 1;
  pthread_sigmask(SIG_BLOCK, &xfsz, &old);
  int rc;
  do {
    rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(len));
  } while (rc == EINTR);
  sigpending(&pending);
  if (!was_pending && sigismember(&pending, SIGXFSZ) == 1) {
    timespec zero{};
    sigtimedwait(&xfsz, nullptr, &zero);  // consume the signal our own call raised
    if (rc == 0) rc = EFBIG;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc;
}

ErrorCode open_errno_code(int e) {
  if (e == ENOENT) return ErrorCode::kNotFound;
  if (e == EACCES || e == EPERM || e == EROFS) return ErrorCode::kPermission;
  return ErrorCode::kIo;
}

std::string what_it_is(std::string_view name, const std::string& path) {
  return "segment '" + std::string(name) + "' (" + path + ")";
}

namespace {


// Validates the header bytes read from an open file (before mapping).
void validate_header(std::string_view name, const std::string& path, const std::byte* buf, size_t n,
                     uint64_t file_size) {
  const std::string who = what_it_is(name, path);
  if (file_size == 0)
    fail(ErrorCode::kNotASegment, who + " is an empty file (0 bytes), not a shmfilter segment: "
                                        "remove it (shmtool remove " + std::string(name) + ") and create it again");
  if (n < 8)
    fail(ErrorCode::kNotASegment, who + " is " + std::to_string(file_size) +
                                      " bytes, too short to be a shmfilter segment: remove it and create it again");
  uint64_t magic;
  std::memcpy(&magic, buf, 8);
  if (magic == kMagicSwapped)
    fail(ErrorCode::kForeignByteOrder, who + " was written on a machine of the other byte order: "
                                             "rebuild it on this machine (export and re-import the data)");
  if (magic != kMagic)
    fail(ErrorCode::kNotASegment, who + " is not a shmfilter segment (bad magic): check the name or --file path");
  if (n < 16)
    fail(ErrorCode::kTruncated, who + " is truncated (" + std::to_string(file_size) +
                                    " bytes, smaller than its header): remove it and create it again");
  uint32_t version;
  std::memcpy(&version, buf + 8, 4);
  if (version != kFormatVersion && version != kFormatVersionLegacyLocks)
    fail(ErrorCode::kVersionMismatch, who + " has format version " + std::to_string(version) +
                                          "; this build reads versions " + std::to_string(kFormatVersionLegacyLocks) +
                                          " and " + std::to_string(kFormatVersion) +
                                          ": use a shmfilter build of that version, or recreate the segment");
  if (n < sizeof(Header))
    fail(ErrorCode::kTruncated, who + " is truncated (" + std::to_string(file_size) +
                                    " bytes, smaller than its " + std::to_string(sizeof(Header)) +
                                    "-byte header): remove it and create it again");
  Header h;
  std::memcpy(static_cast<void*>(&h), buf, sizeof(Header));
  AbiDescriptor want = current_abi();
  if (std::memcmp(&h.abi, &want, sizeof want) != 0) {
    static const char* names[] = {"header_size",      "header_align",        "dir_entry_size",
                                  "registry_slot_size", "undo_entry_size",   "free_extent_size",
                                  "quarantine_size",  "extent_header_size",  "mutex_size",
                                  "cache_line",       "undo_capacity",       "free_capacity",
                                  "quarantine_capacity", "registry_slots",   "pointer_size",
                                  "reserved"};
    const uint32_t* a = reinterpret_cast<const uint32_t*>(&h.abi);
    const uint32_t* b = reinterpret_cast<const uint32_t*>(&want);
    std::string diff;
    for (int i = 0; i < 16; ++i)
      if (a[i] != b[i]) {
        diff = std::string(names[i]) + " is " + std::to_string(a[i]) + " in the segment, " + std::to_string(b[i]) +
               " in this build";
        break;
      }
    fail(ErrorCode::kAbiMismatch, who + " was written by a build with other struct layouts (" + diff +
                                      "): use the same shmfilter build and platform as its creator, or recreate it");
  }
  auto corrupt = [&](const std::string& what) {
    fail(ErrorCode::kCorrupt, who + " is corrupt: " + what + ": run shmtool check " + std::string(name) +
                                  " or recreate the segment");
  };
  if (h.version == kFormatVersion && (h.lock_id == 0 || h.lock_id_check != ~h.lock_id))
    corrupt("lock_id does not match its check word (the name of its lock file is damaged)");
  if (h.header_bytes != sizeof(Header)) corrupt("header_bytes is " + std::to_string(h.header_bytes));
  if (h.registry_slots != kRegistrySlots) corrupt("registry_slots is " + std::to_string(h.registry_slots));
  uint32_t cap = h.directory_capacity;
  if (cap < kMinDirectoryCapacity || cap > kMaxDirectoryCapacity || (cap & (cap - 1)) != 0)
    corrupt("directory capacity " + std::to_string(cap) + " is not a power of two in range");
  auto l = compute_layout(cap);
  if (h.undo_offset != l.undo_offset || h.free_offset != l.free_offset ||
      h.quarantine_offset != l.quarantine_offset || h.registry_offset != l.registry_offset ||
      h.directory_offset != l.directory_offset || h.data_offset != l.data_offset)
    corrupt("table offsets do not match the layout of a " + std::to_string(cap) + "-entry directory");
  if (h.max_size > kMaxReservation || h.max_size % kPage != 0)
    corrupt("max_size " + std::to_string(h.max_size) + " is out of range");
  if (h.size < h.data_offset || h.size > h.max_size)
    corrupt("size " + std::to_string(h.size) + " is outside [data_offset, max_size]");
  if (h.top < h.data_offset || h.top > h.size) corrupt("allocator top " + std::to_string(h.top) + " is outside the segment");
  if (h.top % 64 != 0) corrupt("allocator top " + std::to_string(h.top) + " is not 64-byte aligned");
  if (h.free_count > kFreeCapacity || h.quarantine_count > kQuarantineCapacity ||
      h.undo_count > kUndoCapacity)
    corrupt("allocator or undo-log counts out of range");
  if (file_size < h.size)
    fail(ErrorCode::kTruncated, who + " is truncated: its header says " + std::to_string(h.size) +
                                    " bytes but the file has " + std::to_string(file_size) +
                                    ": restore it from a copy or recreate it");
}

}  // namespace

// A second open file description of the same file, for mmap only. A mapping
// holds a reference to the description it was made from, and OFD locks live
// until the description's last reference goes: mapping through `fd` would let
// a forked child (which inherits the mapping) keep our registry lock alive
// after we die. The mapping's description never holds a lock.
int SegmentImpl::reopen_for_map() const {
  const int how = read_only ? O_RDONLY : O_RDWR;
  int m = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), how | O_CLOEXEC);
  if (m >= 0) return m;
  m = ::open(path.c_str(), how | O_CLOEXEC | O_NOFOLLOW);  // no /proc: same path, same inode checked below
  struct stat a{}, b{};
  if (m < 0 || fstat(fd, &a) != 0 || fstat(m, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    if (m >= 0) ::close(m);
    fail(ErrorCode::kIo, "segment '" + name + "': cannot reopen " + path + " for mapping: mount /proc");
  }
  return m;
}

void SegmentImpl::map(uint64_t max_size) {
  int mfd = reopen_for_map();
  // Read-only: PROT_READ, so no code path can write what others see (a stray
  // write faults instead); every write entry point refuses first with kReadOnly.
  void* p = mmap(nullptr, max_size, read_only ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, 0);
  int map_errno = errno;
  ::close(mfd);
  errno = map_errno;
  if (p == MAP_FAILED)
    fail(errno == ENOMEM ? ErrorCode::kNoSpace : ErrorCode::kIo,
         "segment '" + name + "': cannot map " + format_size(max_size) + " of " + path + ": " +
             errno_text(errno) + ": check ulimit -v or recreate with a smaller max_size");
  base = static_cast<std::byte*>(p);
  map_size = max_size;
  if (huge_requested) {
    // Advice only: tmpfs honours it when shmem_enabled is advise/within_size/always
    // (or the mount has huge=); never an error (docs/huge-pages.md).
    huge_advise_errno = madvise(p, max_size, MADV_HUGEPAGE) == 0 ? 0 : errno;
  }
}

// ---- create / open ---------------------------------------------------------------

// Removes PATH.creating.* files that a creator killed before it linked its
// segment left behind (the non-O_TMPFILE path). Liveness from the kernel: a
// creator holds flock(LOCK_EX) on its file until it links it, so a leftover
// whose flock we get has no live creator. Only our own regular files.
std::vector<std::string> creating_leftovers(const std::string& path, bool remove) {
  std::vector<std::string> found;
  const std::string dir = parent_dir(path);
  const std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  const std::string prefix = base + ".creating.";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const std::string leftover = dir + "/" + e->d_name;
    int fd = ::open(leftover.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st{};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
      found.push_back(leftover);
      if (remove) ::unlink(leftover.c_str());
    }
    ::close(fd);
  }
  closedir(d);
  return found;
}

namespace {

// What create() lays out: the directory capacity rounded up to a power of
// two, the table layout, the reservation and the first size (page-rounded).
struct CreateGeometry {
  uint32_t cap;
  Layout l;
  uint64_t max_size, size;
};

// The options, checked: each out-of-range one is rejected with its own error.
CreateGeometry check_create_options(const CreateOptions& options) {
  if (options.directory_capacity == 0 || options.directory_capacity > kMaxDirectoryCapacity)
    fail(ErrorCode::kInvalidArgument, "directory capacity " + std::to_string(options.directory_capacity) +
                                          " is invalid: pass 1.." + std::to_string(kMaxDirectoryCapacity));
  uint32_t cap = kMinDirectoryCapacity;
  while (cap < options.directory_capacity) cap <<= 1;
  Layout l = compute_layout(cap);
  uint64_t max_size = round_up(options.max_size, kPage);
  uint64_t size = round_up(std::max<uint64_t>(options.size, l.data_offset + (64u << 10)), kPage);
  if (max_size > kMaxReservation)
    fail(ErrorCode::kInvalidArgument, "max_size " + format_size(options.max_size) + " is above the limit of " +
                                          format_size(kMaxReservation) + ": pass a smaller max_size");
  if (size > max_size)
    fail(ErrorCode::kInvalidArgument, "size " + format_size(size) + " exceeds max_size " + format_size(max_size) +
                                          ": pass a larger max_size or a smaller size");
  if ((options.mode & ~0777u) != 0)
    fail(ErrorCode::kInvalidArgument, "mode " + std::to_string(options.mode) + " is invalid: pass permission bits such as 0600");
  return {cap, l, max_size, size};
}

// The new segment's file, not yet linked at `path`: an O_TMPFILE in `dir`, or
// where that is unsupported a `path`.creating.XXXXXX file (named in tmp_path)
// flocked until the link, which tells creating_leftovers its creator is alive.
int open_unlinked(const std::string& path, const std::string& dir, const std::string& who, uint32_t mode,
                  std::string& tmp_path) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string tmpl = path + ".creating.XXXXXX";
    fd = mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd >= 0) {
      tmp_path = tmpl;
      flock(fd, LOCK_EX | LOCK_NB);  // held until the link: tells creating_leftovers we are alive
    }
  }
  if (fd < 0)
    fail(open_errno_code(errno) == ErrorCode::kNotFound ? ErrorCode::kNotFound : open_errno_code(errno),
         "cannot create " + who + ": " + errno_text(errno) + ": check that " + dir + " exists and is writable");
  return fd;
}

// The file's mode, group and first `size` bytes (allocated, so a full disk fails here, not on a write later).
void size_file(int fd, const CreateOptions& options, uint64_t size, const std::string& who, const std::string& dir) {
  if (fchmod(fd, options.mode) != 0)
    fail(ErrorCode::kPermission, "cannot chmod " + who + ": " + errno_text(errno));
  if (options.group >= 0 && fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(options.group)) != 0)
    fail(ErrorCode::kPermission, "cannot give " + who + " to group " + std::to_string(options.group) + ": " +
                                     errno_text(errno) + ": pass a group this user belongs to");
  int rc = allocate_file_range(fd, 0, size);
  if (rc == ENOSPC || rc == EFBIG || rc == EDQUOT)
    fail(ErrorCode::kNoSpace, "no space to create " + who + " of " + format_size(size) + ": " + errno_text(rc) +
                                  ": free space (df -h " + dir + ") or pass a smaller size");
  if (rc != 0) fail(ErrorCode::kIo, "cannot size " + who + ": " + errno_text(rc));
}

// The header of the new (mapped, zeroed) segment, its control lock initialised.
void write_header(Header* h, const CreateGeometry& g, const CreateOptions& options, const std::string& who) {
  h->magic = kMagic;
  h->version = kFormatVersion;
  h->header_bytes = sizeof(Header);
  h->abi = current_abi();
  h->max_size = g.max_size;
  h->directory_capacity = g.cap;
  h->registry_slots = kRegistrySlots;
  h->undo_offset = g.l.undo_offset;
  h->free_offset = g.l.free_offset;
  h->quarantine_offset = g.l.quarantine_offset;
  h->registry_offset = g.l.registry_offset;
  h->directory_offset = g.l.directory_offset;
  h->data_offset = g.l.data_offset;
  h->created_unix_ns = now_unix_ns();
  h->mode = options.mode;
  h->lock_id = new_lock_id();
  h->lock_id_check = ~h->lock_id;
  h->file_backed = options.file.empty() ? 0 : 1;
  std::string boot = read_boot_id();
  std::memcpy(h->boot_id, boot.c_str(), std::min<size_t>(boot.size(), 39));
  h->size = g.size;
  h->top = g.l.data_offset;
  h->dirty_top = g.l.data_offset;
  if (int e = robust_mutex_init(&h->mutex); e != 0)
    fail(ErrorCode::kIo, "cannot initialise the control lock of " + who + ": " + errno_text(e));
}

// Links the complete file at `path` (the publication: never over an existing segment).
void link_into_place(int fd, const std::string& tmp_path, const std::string& path, std::string_view name,
                     const std::string& who) {
  int lrc;
  if (tmp_path.empty()) {
    std::string proc = "/proc/self/fd/" + std::to_string(fd);
    lrc = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
    if (lrc != 0 && errno == ENOENT) lrc = linkat(fd, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH);
  } else {
    lrc = ::link(tmp_path.c_str(), path.c_str());
  }
  if (lrc != 0) {
    int e = errno;
    if (e == EEXIST)
      fail(ErrorCode::kExists, who + " already exists: open it, or remove it first (shmtool remove " +
                                   std::string(name) + ")");
    fail(open_errno_code(e) == ErrorCode::kPermission ? ErrorCode::kPermission : ErrorCode::kIo,
         "cannot create " + who + ": " + errno_text(e));
  }
}

}  // namespace

std::shared_ptr<SegmentImpl> create_segment(std::string_view name, const CreateOptions& options) {
  validate_segment_name(name);
  const std::string path = backing_path(name, options.file);
  const std::string who = what_it_is(name, path);
  const CreateGeometry g = check_create_options(options);

  (void)creating_leftovers(path, true);
  (void)lock_file_leftovers(path, read_lock_id(path), true);
  auto impl = std::make_shared<SegmentImpl>();
  impl->attach_pid = getpid();  // ours from here: a create that fails below closes what it opened (~SegmentImpl)
  impl->name = std::string(name);
  impl->path = path;
  const std::string dir = parent_dir(path);
  std::string tmp_path;  // fallback when O_TMPFILE is unsupported
  const int fd = open_unlinked(path, dir, who, options.mode, tmp_path);
  impl->fd = fd;
  bool linked = false;
  auto cleanup_tmp = [&] {
    if (!tmp_path.empty()) ::unlink(tmp_path.c_str());
  };
  try {
    size_file(fd, options, g.size, who, dir);
    impl->huge_requested = options.huge_pages;
    impl->map(g.max_size);
    Header* h = impl->hdr();
    write_header(h, g, options, who);
    // Before the link: whoever sees the segment finds its lock file.
    impl->create_lock_file_for(h->lock_id, options.mode, options.group);
    SHMF_KILL_POINT("segment.create.before_link");
    link_into_place(fd, tmp_path, path, name, who);
    linked = true;
    if (!tmp_path.empty()) flock(fd, LOCK_UN);
    cleanup_tmp();
    tmp_path.clear();
    SHMF_KILL_POINT("segment.create.after_link");
    impl->finish_attach();
  } catch (...) {
    cleanup_tmp();
    if (!linked && impl->lock_file_created) ::unlink(impl->lock_path.c_str());  // ours; no segment names it
    throw;  // impl's destructor unmaps and closes; the unlinked inode vanishes
  }
  return impl;
}

std::shared_ptr<SegmentImpl> open_segment(std::string_view name, const OpenOptions& options) {
  validate_segment_name(name);
  const std::string path = backing_path(name, options.file);
  const std::string who = what_it_is(name, path);
  // O_NOFOLLOW: a symlink planted at the path is refused, not followed;
  // O_NONBLOCK: a FIFO or device planted there cannot make open() wait.
  int fd = ::open(path.c_str(), (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == EISDIR)
      fail(ErrorCode::kNotASegment, who + " is a directory, not a segment: check the name or --file path");
    if (e == ELOOP)
      fail(ErrorCode::kPermission, who + " is a symbolic link: shmfilter never follows one to a segment "
                                         "(another user may have planted it): pass the real path with --file");
    ErrorCode c = open_errno_code(e);
    if (c == ErrorCode::kNotFound)
      fail(c, who + " does not exist: create it first (shmtool create " + std::string(name) + ")");
    if (c == ErrorCode::kPermission)
      fail(c, "no permission to open " + who + (options.read_only ? " for reading: " : " read-write: ") +
                  errno_text(e) + ": run as its owner or a member of its group" +
                  (options.read_only ? "" : ", or open it read-only to inspect it (shmtool --read-only)"));
    fail(c, "cannot open " + who + ": " + errno_text(e));
  }
  auto impl = std::make_shared<SegmentImpl>();
  // Ours from here: every failure below (a corrupt or foreign header, the lock file) throws,
  // and ~SegmentImpl closes the descriptors only for the process that owns them. Set only by
  // finish_attach(), each refused open leaked its fd (found by fuzz_segment: the fuzzer ran out
  // of descriptors after ~72,000 corrupt images).
  impl->attach_pid = getpid();
  impl->name = std::string(name);
  impl->path = path;
  impl->fd = fd;
  impl->read_only = options.read_only;
  struct stat seg_st{};
  {
    struct stat& st = seg_st;
    if (fstat(fd, &st) != 0) fail(ErrorCode::kIo, "cannot stat " + who + ": " + errno_text(errno));
    if (!S_ISREG(st.st_mode))
      fail(ErrorCode::kNotASegment, who + " is not a regular file (a directory, FIFO, device or socket): "
                                          "check the name or --file path");
    const uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0 &&
        !(options.trusted_owner >= 0 && static_cast<uint64_t>(st.st_uid) == static_cast<uint64_t>(options.trusted_owner)))
      fail(ErrorCode::kPermission,
           who + " is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) +
               ") or root: its owner can feed you crafted bytes, so it is not attached. If you trust that user, "
               "open it with OpenOptions::trusted_owner = " + std::to_string(st.st_uid) + " (shmtool --trust-owner " + std::to_string(st.st_uid) + ")" +
               "; else remove it (docs/SECURITY.md)");
  }
  std::byte buf[kPage];
  for (int attempt = 0;; ++attempt) {
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    if (n < 0) fail(ErrorCode::kIo, "cannot read " + who + ": " + errno_text(errno));
    struct stat st{};
    if (fstat(fd, &st) != 0) fail(ErrorCode::kIo, "cannot stat " + who + ": " + errno_text(errno));
    if (!S_ISREG(st.st_mode)) fail(ErrorCode::kNotASegment, who + " is not a regular file: check the path");
    try {
      validate_header(name, path, buf, static_cast<size_t>(n), static_cast<uint64_t>(st.st_size));
      break;
    } catch (const Error& err) {
      // A concurrent shrink lowers the header's size before truncating: re-read once or twice.
      if (err.code() != ErrorCode::kTruncated || attempt >= 2 || static_cast<size_t>(n) < sizeof(Header)) throw;
    }
  }
  Header hcopy;
  std::memcpy(static_cast<void*>(&hcopy), buf, sizeof(Header));
  impl->huge_requested = options.huge_pages;
  impl->map(hcopy.max_size);
  if (hcopy.version == kFormatVersionLegacyLocks)
    impl->lock_fd = fd;  // version 1: the registry's locks are on the segment file (docs/SECURITY.md)
  else
    impl->open_lock_file(hcopy.lock_id, seg_st, options.trusted_owner);
  impl->finish_attach();
  return impl;
}

// ---- resize ------------------------------------------------------------------------

void SegmentImpl::resize(uint64_t new_size) {
  SegmentImpl* im = this;
  // A shrink first reclaims quarantined memory in its own committed
  // transaction: reclaiming is undo-logged (it may lower top), while the size
  // store and the truncate below are not, so the two must never share a
  // transaction whose rollback would put top back above a published smaller size.
  if (round_up(new_size, kPage) < load_relaxed(&im->hdr()->size)) im->run_txn([&] { im->reclaim_quarantine(); });
  im->run_txn([&] {
    Header* h = im->hdr();
    uint64_t want = round_up(new_size, kPage);
    uint64_t cur = load_relaxed(&h->size);
    if (want > im->map_size)
      fail(ErrorCode::kNoSpace, "segment '" + im->name + "': cannot resize to " + format_size(want) +
                                    ", above its reservation max_size " + format_size(im->map_size) +
                                    ": recreate the segment with a larger max_size");
    if (want == cur) return;
    if (want > cur) {
      int rc = allocate_file_range(im->fd, cur, want - cur);
      if (rc == ENOSPC || rc == EFBIG || rc == EDQUOT)
        fail(ErrorCode::kNoSpace, "segment '" + im->name + "': no space to grow to " + format_size(want) + ": " +
                                      errno_text(rc) + ": free space on " + parent_dir(im->path));
      if (rc != 0) fail(ErrorCode::kIo, "segment '" + im->name + "': cannot grow: " + errno_text(rc));
      SHMF_KILL_POINT("segment.resize.after_grow");
      store_release(&h->size, want);
      return;
    }
    if (want < im->lay.data_offset || h->top > want) {
      uint64_t floor = std::max(h->top, im->lay.data_offset);
      fail(ErrorCode::kBusy, "segment '" + im->name + "': cannot shrink to " + format_size(want) + ": " +
                                 format_size(floor) + " are in use (structures, or freed memory still quarantined)"
                                 ": drop structures or pass a size >= " + format_size(round_up(floor, kPage)));
    }
    // Shrink: publish the smaller size first, so no file is ever shorter than its header says.
    store_release(&h->size, want);
    SHMF_KILL_POINT("segment.resize.before_truncate");
    if (ftruncate(im->fd, static_cast<off_t>(want)) != 0)
      fail(ErrorCode::kIo, "segment '" + im->name + "': cannot shrink: " + errno_text(errno));
    // Only now are the bytes above `want` gone (a later growth brings zero pages);
    // lowered after the truncate, so a death before it leaves them counted as dirty.
    if (h->dirty_top > want) h->dirty_top = want;
  });
}

}  // namespace shmfilter::internal
