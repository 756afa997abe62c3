// lib/segment/segment.cpp: the public Segment methods (include/shmfilter/segment.hpp),
// gluing the subsystems of lib/segment (segment_impl.h lists them). The bytes:
// lib/segment/layout.h, docs/FORMAT.md; the protocols: docs/CONCURRENCY.md.
// Segment::check is defined above the structures, in lib/check/check.cpp.
#include "shmfilter/segment.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "segment/backing_file.h"
#include "segment/extents.h"
#include "segment/segment_impl.h"

namespace shmfilter {

using internal::backing_path;
using internal::errno_text;
using internal::ExtentHeader;
using internal::fail;
using internal::Header;
using internal::load_acquire;
using internal::load_relaxed;
using internal::open_errno_code;
using internal::SegmentImpl;
using internal::validate_segment_name;
using internal::what_it_is;

// ---- create / open (mapping.cpp) ---------------------------------------------------

Segment Segment::create(std::string_view name, const CreateOptions& options) {
  return Segment(internal::create_segment(name, options));
}

Segment Segment::open(std::string_view name, const OpenOptions& options) {
  return Segment(internal::open_segment(name, options));
}

Segment Segment::open_or_create(std::string_view name, const CreateOptions& options) {
  OpenOptions oo;
  oo.file = options.file;
  oo.huge_pages = options.huge_pages;
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      return open(name, oo);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound) throw;
    }
    try {
      return create(name, options);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kExists) throw;  // lost the race: open the winner's segment
    }
  }
  fail(ErrorCode::kBusy, "segment '" + std::string(name) +
                             "' keeps appearing and disappearing: another process is removing it; retry later");
}

bool Segment::remove(std::string_view name, const OpenOptions& options) {
  validate_segment_name(name);
  const std::string path = backing_path(name, options.file);
  // Only a segment is removed: a regular file that is empty or starts with
  // the magic (all of it, or as much of it as a file cut short holds; open()
  // says to remove those). Anything else at the path, a text file passed as
  // --file by mistake included, is refused and left alone.
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
  } else {
    if (!S_ISREG(st.st_mode))
      fail(ErrorCode::kNotASegment, what_it_is(name, path) + " is not a regular file (a symlink, directory, "
                                                                "FIFO or device): not removing it");
    if (st.st_size > 0) {
      const size_t want = st.st_size >= 8 ? 8 : static_cast<size_t>(st.st_size);
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
      uint64_t magic = 0, expect = internal::kMagic, swapped = internal::kMagicSwapped;
      bool read_ok = fd >= 0 && ::pread(fd, &magic, want, 0) == static_cast<ssize_t>(want);
      int e = errno;
      if (fd >= 0) ::close(fd);
      if (!read_ok)
        fail(open_errno_code(e), "cannot read " + what_it_is(name, path) + " to see that it is a segment: " +
                                     errno_text(e) + ": not removing it");
      // A file shorter than the magic must be a prefix of it (a segment cut short).
      if (std::memcmp(&magic, &expect, want) != 0 && std::memcmp(&magic, &swapped, want) != 0)
        fail(ErrorCode::kNotASegment, what_it_is(name, path) + " is not a shmfilter segment (bad magic): "
                                                               "not removing it; check the name or --file path");
    }
  }
  const uint64_t lock_id = internal::read_lock_id(path);
  if (::unlink(path.c_str()) == 0) {
    // Its lock file too (attached processes keep theirs open). A segment
    // created again under the name has another id, so another lock file.
    if (lock_id != 0) ::unlink(internal::lock_file_path(path, lock_id).c_str());
    return true;
  }
  int e = errno;
  if (e == ENOENT) return false;
  fail(open_errno_code(e), "cannot remove " + what_it_is(name, path) + ": " + errno_text(e));
}

bool Segment::exists(std::string_view name, const OpenOptions& options) {
  validate_segment_name(name);
  struct stat st{};
  return ::stat(backing_path(name, options.file).c_str(), &st) == 0;
}

// ---- accessors -----------------------------------------------------------------

const std::string& Segment::name() const { return impl_->name; }
std::byte* Segment::base() const noexcept { return impl_ ? impl_->base : nullptr; }
uint64_t Segment::size() const noexcept { return impl_ ? load_acquire(&impl_->hdr()->size) : 0; }

// 0 in a forked child that inherited this attachment: its token is the
// parent's, and writing lock words with it would make a dead child's locks
// look held by the (live) parent forever. Data-plane writers refuse on 0.
uint64_t Segment::owner_token() const noexcept {
  return impl_ && impl_->fork_generation == internal::fork_generation_now() ? impl_->token : 0;
}
bool Segment::read_only() const noexcept { return impl_ && impl_->read_only; }
bool Segment::token_alive(uint64_t token) const noexcept { return impl_ && impl_->token_alive(token); }
void Segment::quiesce() noexcept {
  if (impl_) impl_->quiesce();
}

// This thread's outermost call in flight (its attachment and how many guards of this thread
// on it are open): a guard nested in it joins without a shared write (amortised entry: the
// Roaring batch calls that call add() per value, a window call inside a user's ReadGuard).
namespace {
thread_local internal::SegmentImpl* t_call_impl = nullptr;
thread_local uint32_t t_call_depth = 0;
constexpr uint8_t kRoleShared = 1;  // raised the attachment's count (enter_call)
constexpr uint8_t kRoleOuter = 2;   // ... and owns this thread's record
constexpr uint8_t kRoleNested = 3;  // joined this thread's record only
}  // namespace

ReadGuard::ReadGuard(const Segment& segment) noexcept {
  internal::SegmentImpl* im = segment.impl();
  if (im == nullptr) return;
  if (t_call_depth > 0 && t_call_impl == im) {
    ++t_call_depth;  // this thread already announced a call on this attachment, still in flight
    impl_ = im;
    role_ = kRoleNested;
    return;
  }
  if (!im->enter_call()) return;
  impl_ = im;
  role_ = kRoleShared;
  if (t_call_depth == 0) {
    t_call_impl = im;
    t_call_depth = 1;
    role_ = kRoleOuter;
  }
}
ReadGuard::~ReadGuard() {
  if (impl_ == nullptr) return;
  if (role_ == kRoleNested) {
    --t_call_depth;
    return;
  }
  if (role_ == kRoleOuter) {
    t_call_depth = 0;
    t_call_impl = nullptr;
  }
  impl_->exit_call();
}

std::vector<ProcessInfo> Segment::processes() const {
  std::vector<ProcessInfo> out;
  internal::RegistrySlot* r = impl_->registry();
  for (uint32_t s = 0; s < internal::kRegistrySlots; ++s) {
    if (load_acquire(&r[s].state) != internal::kSlotAttached) continue;
    ProcessInfo p;
    p.slot = s;
    p.pid = load_relaxed(&r[s].pid);
    p.token = load_relaxed(&r[s].token);
    p.attached_unix_ns = load_relaxed(&r[s].attached_unix_ns);
    p.alive = impl_->token_alive(p.token);
    out.push_back(p);
  }
  return out;
}

SegmentStats Segment::stats() const {
  SegmentImpl* im = impl_.get();
  Header* h = im->hdr();
  SegmentStats st;
  st.size = load_acquire(&h->size);
  st.max_size = im->map_size;
  st.format_version = h->version;
  st.directory_capacity = h->directory_capacity;
  // Relaxed loads of lock-protected words: a snapshot that may be slightly stale.
  uint64_t top = std::clamp<uint64_t>(load_relaxed(&h->top), im->lay.data_offset, st.size);
  uint32_t nf = std::min(load_relaxed(&h->free_count), internal::kFreeCapacity);
  uint32_t nq = std::min(load_relaxed(&h->quarantine_count), internal::kQuarantineCapacity);
  uint64_t holes = 0, largest = 0, quarantined = 0;
  for (uint32_t i = 0; i < nf; ++i) {
    uint64_t sz = load_relaxed(&im->free_table()[i].size);
    holes += sz;
    largest = std::max(largest, sz);
  }
  for (uint32_t i = 0; i < nq; ++i) quarantined += load_relaxed(&im->quarantine()[i].size);
  uint64_t tail = st.size - top;
  largest = std::max(largest, tail);
  st.free_bytes = holes + tail;
  st.quarantined_bytes = quarantined;
  uint64_t allocated = top - im->lay.data_offset;
  st.used_bytes = allocated >= holes + quarantined ? allocated - holes - quarantined : 0;
  st.largest_free = largest > sizeof(ExtentHeader) ? largest - sizeof(ExtentHeader) : 0;
  st.free_extents = nf;
  st.structures = static_cast<uint32_t>(load_relaxed(&h->structures));
  for (const auto& p : processes()) st.processes_alive += p.alive ? 1 : 0;
  return st;
}

// ---- directory ---------------------------------------------------------------------

std::optional<RegionInfo> Segment::find(std::string_view name) const { return impl_->find(name); }

RegionInfo Segment::open_region(std::string_view name, Kind kind) const {
  internal::validate_structure_name(name);
  auto info = impl_->find(name);
  if (!info)
    fail(ErrorCode::kNotFound, "no structure '" + std::string(name) + "' in segment '" + impl_->name +
                                   "': create it first (shmtool list " + impl_->name + " shows what exists)");
  if (info->kind != kind)
    fail(ErrorCode::kWrongKind, "structure '" + std::string(name) + "' in segment '" + impl_->name + "' is a " +
                                    std::string(kind_name(info->kind)) + ", not a " + std::string(kind_name(kind)) +
                                    ": open it as a " + std::string(kind_name(info->kind)) + " or use another name");
  // Ownership proved once here for every kind (docs/SECURITY.md rule 1): the region is an
  // allocated extent the allocator's own walk reaches, so no other live extent overlaps it.
  if (std::string why = internal::region_extent_problem(*this, *info); !why.empty())
    fail(ErrorCode::kCorrupt, "structure '" + std::string(name) + "' in segment '" + impl_->name + "' is corrupt: " +
                                  why + ": run shmtool check " + impl_->name +
                                  ", then drop and recreate the structure");
  return *info;
}

std::vector<RegionInfo> Segment::list() const { return impl_->list(); }

bool Segment::region_live(uint32_t slot, uint32_t generation) const noexcept {
  if (!impl_ || slot >= impl_->dir_capacity) return false;
  // acquire: a true answer orders the caller's later reads of the region after the publish.
  const internal::DirEntry& e = impl_->directory()[slot];
  const uint64_t sg = internal::load_acquire(&e.state_gen);
  if (sg == ((uint64_t{generation} << 32) | internal::kEntryLive)) return true;
  // A staged entry (restore --into) is live for its stager; re-read: it may have been published meanwhile.
  return sg == ((uint64_t{generation} << 32) | internal::kEntryStaged) &&
         (impl_->staged_visible(internal::load_acquire(&e.stager)) ||
          internal::load_acquire(&e.state_gen) == ((uint64_t{generation} << 32) | internal::kEntryLive));
}

RegionInfo Segment::create_region(std::string_view name, Kind kind, uint64_t bytes,
                                  const std::function<void(std::byte*, uint64_t, ControlTxn&)>& init) {
  return impl_->create_region(*this, name, kind, bytes, init);
}

bool Segment::drop(std::string_view name, const std::function<void(std::byte*, uint64_t, ControlTxn&)>& on_drop) {
  return impl_->drop(*this, name, on_drop);
}

void Segment::transact(const std::function<void(ControlTxn&)>& fn) {
  impl_->run_txn([&] {
    ControlTxn txn(this);
    fn(txn);
  });
}

void Segment::resize(uint64_t new_size) { impl_->resize(new_size); }

namespace internal {
FileMode segment_file_mode(const Segment& segment) noexcept { return file_mode_of(segment.impl()->fd); }
}  // namespace internal

}  // namespace shmfilter
