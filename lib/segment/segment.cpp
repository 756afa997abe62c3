// lib/segment/segment.cpp: the shared segment (see include/shmfilter/segment.hpp,
// lib/segment/layout.h for the bytes, docs/FORMAT.md and docs/CONCURRENCY.md).
#include "shmfilter/segment.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "check/checkers.h"
#include "base/hash.h"
#include "base/kill_point.h"
#include "segment/layout.h"
#include "segment/robust_mutex.h"

namespace shmfilter {
namespace internal {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kLockTimeoutMs = 30000;  // a LIVE holder keeping the control lock longer is reported
constexpr uint64_t kSlotBits = 16;

[[noreturn]] void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

std::string errno_text(int e) { return std::string(strerror(e)) + " (errno " + std::to_string(e) + ")"; }

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t now_unix_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string read_boot_id() {
  std::string id;
  int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[64];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) id.assign(buf, static_cast<size_t>(n));
    ::close(fd);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.size() > 39) id.resize(39);
  return id;
}

struct Layout {
  uint64_t undo_offset, free_offset, quarantine_offset, registry_offset, directory_offset, data_offset;
};

Layout compute_layout(uint32_t dir_capacity) {
  Layout l{};
  l.undo_offset = round_up(sizeof(Header), kPage);
  l.free_offset = round_up(l.undo_offset + uint64_t{kUndoCapacity} * sizeof(UndoEntry), 64);
  l.quarantine_offset = round_up(l.free_offset + uint64_t{kFreeCapacity} * sizeof(FreeExtent), 64);
  l.registry_offset = round_up(l.quarantine_offset + uint64_t{kQuarantineCapacity} * sizeof(QuarantineEntry), 64);
  l.directory_offset = round_up(l.registry_offset + uint64_t{kRegistrySlots} * sizeof(RegistrySlot), 64);
  l.data_offset = round_up(l.directory_offset + uint64_t{dir_capacity} * sizeof(DirEntry), kPage);
  return l;
}

void validate_segment_name(std::string_view name) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "segment name is empty: pass a name such as 'freq'");
  if (name.size() > kMaxSegmentNameLength)
    fail(ErrorCode::kNameTooLong, "segment name '" + std::string(name.substr(0, 40)) + "...' is " +
                                      std::to_string(name.size()) + " bytes; the limit is " +
                                      std::to_string(kMaxSegmentNameLength) + ": use a shorter name");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
    fail(ErrorCode::kInvalidArgument, "segment name '" + std::string(name) +
                                          "' contains '/' or NUL: use a plain name (for a file path pass --file)");
  if (name == "." || name == "..")
    fail(ErrorCode::kInvalidArgument, "segment name '" + std::string(name) + "' is reserved: use another name");
}

void validate_structure_name(std::string_view name) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "structure name is empty: pass a name such as 'seen'");
  if (name.size() > kMaxStructureNameLength)
    fail(ErrorCode::kNameTooLong, "structure name '" + std::string(name.substr(0, 40)) + "...' is " +
                                      std::to_string(name.size()) + " bytes; the limit is " +
                                      std::to_string(kMaxStructureNameLength) + ": use a shorter name");
  if (name.find('\0') != std::string_view::npos)
    fail(ErrorCode::kInvalidArgument, "structure name contains a NUL byte: remove it");
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

// fds of every attachment in this process, closed in a forked child so that
// a child never keeps its parent's registry lock (OFD) alive.
constexpr int kMaxTrackedFds = 1024;
std::atomic<int> g_fds[kMaxTrackedFds];
std::once_flag g_atfork_once;

void atfork_child() noexcept {
  for (auto& f : g_fds) {
    int fd = f.load(std::memory_order_relaxed);  // relaxed: the child is single-threaded here
    if (fd > 0) {
      ::close(fd);
      f.store(0, std::memory_order_relaxed);
    }
  }
}

void track_fd(int fd) {
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, atfork_child); });
  for (auto& f : g_fds) {
    int expected = 0;
    if (f.compare_exchange_strong(expected, fd)) return;
  }
}
void untrack_fd(int fd) {
  for (auto& f : g_fds) {
    int expected = fd;
    if (f.compare_exchange_strong(expected, 0)) return;
  }
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

thread_local const SegmentImpl* t_txn_impl = nullptr;  // the attachment whose txn this thread runs

}  // namespace

struct SegmentImpl {
  std::string name;
  std::string path;
  int fd = -1;
  std::byte* base = nullptr;
  uint64_t map_size = 0;
  pid_t attach_pid = 0;
  uint32_t slot = UINT32_MAX;
  uint64_t token = 0;
  uint32_t dir_capacity = 0;
  Layout lay{};  // table offsets, validated at attach
  // Transaction state: touched only by the thread holding the control lock.
  uint64_t txn_owner = 0;          // (generation << 32) | (directory slot + 1) charged for allocations; 0 unattributed
  uint64_t last_recovered = 0;     // undo entries rolled back by this process's last recovery
  bool recovered_in_lock = false;  // the current lock acquisition rolled back a dead holder
  bool last_recovery_forward = false;  // ... or completed its committed transaction
  uint32_t txn_depth = 0;              // nesting of run_txn in the holding thread
  bool commit_reached = false;         // the outermost transaction made its commit-point store

  ~SegmentImpl() {
    bool same_process = getpid() == attach_pid;
    if (base != nullptr && same_process && slot != UINT32_MAX) {
      store_release(&registry()[slot].state, kSlotFree);
    }
    if (base != nullptr) munmap(base, map_size);
    if (fd >= 0 && same_process) {
      untrack_fd(fd);
      ::close(fd);  // drops the OFD lock: the kernel now reports this slot dead
    }
  }

  Header* hdr() const noexcept { return reinterpret_cast<Header*>(base); }
  template <class T>
  T* at(uint64_t off) const noexcept {
    return reinterpret_cast<T*>(base + off);
  }
  // Table addresses come from the layout validated at attach (cached), never
  // from header words read later, so a header damaged after open cannot
  // redirect the allocator's writes.
  UndoEntry* undo() const noexcept { return at<UndoEntry>(lay.undo_offset); }
  FreeExtent* free_table() const noexcept { return at<FreeExtent>(lay.free_offset); }
  QuarantineEntry* quarantine() const noexcept { return at<QuarantineEntry>(lay.quarantine_offset); }
  RegistrySlot* registry() const noexcept { return at<RegistrySlot>(lay.registry_offset); }
  DirEntry* directory() const noexcept { return at<DirEntry>(lay.directory_offset); }
  uint64_t offset_of(const void* p) const noexcept {
    return static_cast<uint64_t>(reinterpret_cast<const std::byte*>(p) - base);
  }

  void check_fork() const {
    if (getpid() != attach_pid)
      fail(ErrorCode::kBusy, "segment '" + name +
                                 "': this Segment was inherited across fork(); an attachment belongs to the "
                                 "process that made it: call Segment::open(\"" + name + "\") in the child");
  }

  // ---- liveness ------------------------------------------------------------
  bool slot_locked_by_other(uint32_t s) const noexcept {
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(kLockBase + s);
    fl.l_len = 1;
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive (safe side)
    return fl.l_type != F_UNLCK;
  }
  bool slot_alive(uint32_t s) const noexcept {
    if (s == slot && getpid() == attach_pid) return true;
    if (getpid() != attach_pid) return true;  // inherited attachment: fd closed at fork; cannot ask
    return slot_locked_by_other(s);
  }
  bool token_alive(uint64_t tok) const noexcept {
    if (tok == 0) return false;
    uint64_t s = tok & ((1u << kSlotBits) - 1);
    if (s >= kRegistrySlots) return false;
    // acquire: pairs with the claimer's increment; a changed incarnation means the owner left.
    if (load_acquire(&registry()[s].incarnation) != (tok >> kSlotBits)) return false;
    if (tok == token) return true;
    return slot_alive(static_cast<uint32_t>(s));
  }

  void quiesce() noexcept {
    if (slot == UINT32_MAX || getpid() != attach_pid) return;
    // acquire: see every free that the epoch counts; release: our earlier reads of freed memory
    // happen before a reclaimer that acquires this epoch reuses that memory.
    uint64_t e = __atomic_load_n(&hdr()->global_epoch, __ATOMIC_ACQUIRE);
    store_release(&registry()[slot].quiescent_epoch, e);
  }

  void claim_slot() {
    for (uint32_t s = 0; s < kRegistrySlots; ++s) {
      struct flock fl{};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      fl.l_start = static_cast<off_t>(kLockBase + s);
      fl.l_len = 1;
      if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        if (errno == EAGAIN || errno == EACCES) continue;
        fail(ErrorCode::kIo, "segment '" + name + "': cannot lock registry slot: " + errno_text(errno));
      }
      RegistrySlot& r = registry()[s];
      uint64_t inc = __atomic_add_fetch(&r.incarnation, 1, __ATOMIC_ACQ_REL);
      if (inc == 0 || inc >= (1ull << (64 - kSlotBits))) {  // wrapped (2^48 claims): restart at 1
        inc = 1;
        store_release(&r.incarnation, inc);
      }
      slot = s;
      token = (inc << kSlotBits) | s;
      store_relaxed(&r.pid, static_cast<int32_t>(getpid()));
      store_relaxed(&r.attached_unix_ns, now_unix_ns());
      store_relaxed(&r.token, token);
      quiesce();
      store_release(&r.state, kSlotAttached);  // release: the fields above are visible with the state
      return;
    }
    fail(ErrorCode::kFull, "segment '" + name + "': all " + std::to_string(kRegistrySlots) +
                               " registry slots are held by live processes: detach some processes");
  }

  // ---- control lock, undo log ----------------------------------------------
  void apply_undo(const UndoEntry& e) noexcept {
    uint64_t off = load_relaxed(&e.offset);
    uint32_t w = load_relaxed(&e.width);
    uint64_t old = load_relaxed(&e.old);
    if (off + w > map_size || off % w != 0 || (w != 4 && w != 8)) return;  // corrupt entry: never write outside
    if (w == 8)
      store_release(at<uint64_t>(off), old);
    else
      store_release(at<uint32_t>(off), static_cast<uint32_t>(old));
  }

  // Stamps the quarantine entries this transaction added (epoch kPendingEpoch)
  // with a fresh epoch. Runs after the transaction's last visible store, so a
  // process that quiesces at that epoch can no longer find what was freed.
  // Unlogged: only entries of this transaction carry kPendingEpoch.
  void stamp_pending_epochs() noexcept {
    Header* h = hdr();
    uint32_t n = std::min(h->quarantine_count, kQuarantineCapacity);
    uint64_t e = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (quarantine()[i].epoch != kPendingEpoch) continue;
      if (e == 0) e = __atomic_add_fetch(&h->global_epoch, 1, __ATOMIC_ACQ_REL);  // never rolled back
      store_release(&quarantine()[i].epoch, e);
    }
  }

  // Finishes the transaction in the undo log (ours on exception, a dead
  // holder's on EOWNERDEAD). If its last entry is a commit point (the store that
  // made a create/drop visible to lock-free readers), that store is (re)done
  // and the transaction completed: what readers may have seen stays true.
  // Otherwise every logged store is undone, newest first. Both directions are
  // idempotent, so a death during recovery is recovered by the next locker.
  // Returns the entries settled; *forward tells which way.
  uint64_t settle_locked(bool* forward = nullptr) noexcept {
    Header* h = hdr();
    uint64_t n = std::min<uint64_t>(load_acquire(&h->undo_count), kUndoCapacity);
    bool fwd = n > 0 && (load_relaxed(&undo()[n - 1].flags) & kUndoCommitPoint) != 0;
    if (fwd) {
      const UndoEntry& e = undo()[n - 1];
      uint64_t off = load_relaxed(&e.offset);
      if (load_relaxed(&e.width) == 8 && off % 8 == 0 && off + 8 <= map_size)
        store_release(at<uint64_t>(off), load_relaxed(&e.value));
      SHMF_KILL_POINT("segment.recovery.mid_undo");
      stamp_pending_epochs();
    } else {
      uint64_t applied = 0;
      for (uint64_t i = n; i-- > 0;) {
        apply_undo(undo()[i]);
        if (++applied == (n + 1) / 2) SHMF_KILL_POINT("segment.recovery.mid_undo");
      }
    }
    store_release(&h->undo_count, uint64_t{0});
    if (forward != nullptr) *forward = fwd;
    return n;
  }

  // Undoes the entries above `mark` (nested savepoint), newest first.
  void rollback_to(uint64_t mark) noexcept {
    Header* h = hdr();
    uint64_t n = std::min<uint64_t>(h->undo_count, kUndoCapacity);
    for (uint64_t i = n; i-- > mark;) apply_undo(undo()[i]);
    store_release(&h->undo_count, std::min(mark, n));
  }

  void lock_control() {
    int err = 0;
    LockResult r = robust_mutex_lock(&hdr()->mutex, kLockTimeoutMs, &err);
    recovered_in_lock = false;
    switch (r) {
      case LockResult::kAcquired: break;
      case LockResult::kOwnerDead: {
        last_recovered = settle_locked(&last_recovery_forward);
        store_relaxed(&hdr()->recoveries, hdr()->recoveries + 1);
        robust_mutex_consistent(&hdr()->mutex);
        recovered_in_lock = true;
        break;
      }
      case LockResult::kTimedOut:
        fail(ErrorCode::kBusy, "segment '" + name + "': the control lock has been held for more than " +
                                   std::to_string(kLockTimeoutMs / 1000) + " s by pid " +
                                   std::to_string(load_relaxed(&hdr()->holder_pid)) +
                                   ", which is alive: find out why that process is stuck (shmtool dump " + name + ")");
      case LockResult::kUnusable:
        if (err == EDEADLK)
          fail(ErrorCode::kBusy, "segment '" + name +
                                     "': this thread already holds the control lock through another attachment: "
                                     "do not nest control-plane calls of two Segment objects");
        fail(ErrorCode::kCorrupt, "segment '" + name + "': the control lock is unusable: " + errno_text(err) +
                                      ": recreate the segment");
    }
    store_relaxed(&hdr()->holder_token, token);
    store_relaxed(&hdr()->holder_pid, static_cast<uint64_t>(getpid()));
  }

  void unlock_control() noexcept {
    store_relaxed(&hdr()->holder_token, uint64_t{0});
    store_relaxed(&hdr()->holder_pid, uint64_t{0});
    robust_mutex_unlock(&hdr()->mutex);
  }

  void logged_store(void* field, uint32_t width, uint64_t value, uint32_t flags = 0) {
    uint64_t off = offset_of(field);
    if (reinterpret_cast<std::byte*>(field) < base || off + width > std::min(load_relaxed(&hdr()->size), map_size) || off % width != 0)
      fail(ErrorCode::kInvalidArgument, "segment '" + name + "': logged store outside the segment or misaligned");
    if (commit_reached)
      fail(ErrorCode::kInvalidArgument, "segment '" + name + "': logged store after the commit point (internal error)");
    Header* h = hdr();
    uint64_t n = h->undo_count;
    if (n >= kUndoCapacity)
      fail(ErrorCode::kFull, "segment '" + name + "': a transaction made more than " +
                                 std::to_string(kUndoCapacity) + " logged stores: split it into smaller ones");
    UndoEntry& e = undo()[n];
    e.offset = off;
    e.width = width;
    e.old = width == 8 ? load_relaxed(static_cast<uint64_t*>(field)) : load_relaxed(static_cast<uint32_t*>(field));
    e.value = value;
    e.flags = flags;
    store_release(&h->undo_count, n + 1);  // release: the entry is complete before it is counted
    if (width == 8)
      store_release(static_cast<uint64_t*>(field), value);
    else
      store_release(static_cast<uint32_t*>(field), static_cast<uint32_t>(value));
  }
  void log64(uint64_t* f, uint64_t v) { logged_store(f, 8, v); }
  // The store that makes an outermost create/drop visible to lock-free readers,
  // and its linearization point: once it is logged, recovery completes the
  // transaction instead of undoing it. Must be the transaction's last logged
  // store. Nested in a larger transact() it is an ordinary logged store (the
  // enclosing transaction decides).
  void commit_store(uint64_t* f, uint64_t v) {
    if (txn_depth != 1) {
      log64(f, v);
      return;
    }
    logged_store(f, 8, v, kUndoCommitPoint);
    commit_reached = true;
  }
  void log32(uint32_t* f, uint32_t v) { logged_store(f, 4, v); }

  template <class Fn>
  void run_txn(Fn&& fn) {
    check_fork();
    if (t_txn_impl == this) {  // nested: part of the enclosing transaction, with a savepoint
      uint64_t mark = hdr()->undo_count;
      ++txn_depth;
      try {
        fn();
      } catch (...) {
        --txn_depth;
        rollback_to(mark);  // a caller that catches this keeps a consistent transaction
        throw;
      }
      --txn_depth;
      return;
    }
    lock_control();
    t_txn_impl = this;
    txn_depth = 1;
    commit_reached = false;
    quiesce();
    hdr()->txn_serial = hdr()->txn_serial + 1;
    try {
      fn();
    } catch (...) {
      settle_locked();  // undoes it (or, past a commit point, completes it)
      txn_owner = 0;
      txn_depth = 0;
      commit_reached = false;
      t_txn_impl = nullptr;
      unlock_control();
      throw;
    }
    stamp_pending_epochs();
    SHMF_KILL_POINT("segment.txn.before_commit");
    store_release(&hdr()->undo_count, uint64_t{0});  // commit
    txn_owner = 0;
    txn_depth = 0;
    commit_reached = false;
    t_txn_impl = nullptr;
    unlock_control();
  }

  // Structures' logged stores must land in allocated space, never in the segment's own tables.
  void require_data(const void* field, uint32_t width) const {
    auto* p = static_cast<const std::byte*>(field);
    Header* h = hdr();
    if (p < base + lay.data_offset || p + width > base + h->top)
      fail(ErrorCode::kInvalidArgument, "segment '" + name +
                                            "': ControlTxn::store to an address outside the allocated space "
                                            "(a field of a structure region is expected)");
  }

  void require_txn() const {
    if (t_txn_impl != this)
      fail(ErrorCode::kBusy, "segment '" + name + "': ControlTxn used outside its transaction");
  }

  // ---- allocator (under the control lock) ---------------------------------------
  void grow_backing(uint64_t want) {
    Header* h = hdr();
    uint64_t cur = load_relaxed(&h->size);
    if (want <= cur) return;
    if (want > map_size)
      fail(ErrorCode::kNoSpace, "segment '" + name + "': the reservation (max_size " + format_size(map_size) +
                                    ") is full; needed " + format_size(want) +
                                    ": recreate the segment with a larger max_size");
    uint64_t target = std::min(map_size, round_up(std::max(want, cur + cur / 8), 1ull << 20));
    int rc = allocate_file_range(fd, cur, target - cur);
    if (rc != 0 && target > want) {
      target = std::min(map_size, round_up(want, kPage));
      rc = allocate_file_range(fd, cur, target - cur);
    }
    if (rc == ENOSPC || rc == EFBIG || rc == EDQUOT)
      fail(ErrorCode::kNoSpace, "segment '" + name + "': no space to grow " + path + " from " + format_size(cur) +
                                    " to " + format_size(target) + ": " + errno_text(rc) +
                                    ": free space on its filesystem (df -h " + parent_dir(path) +
                                    ") or drop structures");
    if (rc != 0)
      fail(ErrorCode::kIo, "segment '" + name + "': cannot grow " + path + ": " + errno_text(rc));
    SHMF_KILL_POINT("segment.grow.after_fallocate");
    store_release(&h->size, target);  // release: the space exists before anyone is told it does
  }

  void remove_free(uint32_t j) {
    Header* h = hdr();
    uint32_t last = h->free_count - 1;
    FreeExtent* f = free_table();
    if (j != last) {
      log64(&f[j].offset, f[last].offset);
      log64(&f[j].size, f[last].size);
    }
    log32(&h->free_count, last);
  }

  void remove_quarantine(uint32_t j) {
    Header* h = hdr();
    uint32_t last = h->quarantine_count - 1;
    QuarantineEntry* q = quarantine();
    if (j != last) {
      log64(&q[j].offset, q[last].offset);
      log64(&q[j].size, q[last].size);
      log64(&q[j].epoch, q[last].epoch);
      log64(&q[j].owner, q[last].owner);
    }
    log32(&h->quarantine_count, last);
  }

  // Puts [off, off+size) into the free table, coalescing with neighbours and
  // giving the tail back to top. Needs one free table entry at most.
  void insert_free(uint64_t off, uint64_t size) {
    Header* h = hdr();
    FreeExtent* f = free_table();
    bool merged = true;
    while (merged) {
      merged = false;
      for (uint32_t j = 0; j < h->free_count; ++j) {
        if (!span_ok(f[j].offset, f[j].size)) continue;
        if (f[j].offset + f[j].size == off) {
          off = f[j].offset;
          size += f[j].size;
          remove_free(j);
          merged = true;
          break;
        }
        if (f[j].offset == off + size) {
          size += f[j].size;
          remove_free(j);
          merged = true;
          break;
        }
      }
    }
    if (off + size == h->top) {
      log64(&h->top, off);
      return;
    }
    // Logged although beyond free_count: an earlier remove in this same
    // transaction may have lowered the count, so this slot may hold an entry
    // that a rollback must bring back.
    uint32_t n = h->free_count;
    log64(&f[n].offset, off);
    log64(&f[n].size, size);
    log32(&h->free_count, n + 1);
  }

  // Smallest quiescent epoch over live attachments (UINT64_MAX when none).
  uint64_t min_live_epoch() const noexcept {
    uint64_t m = UINT64_MAX;
    RegistrySlot* r = registry();
    for (uint32_t s = 0; s < kRegistrySlots; ++s) {
      if (load_acquire(&r[s].state) != kSlotAttached) continue;
      if (!slot_alive(s)) continue;
      m = std::min(m, load_acquire(&r[s].quiescent_epoch));  // acquire: pairs with quiesce()'s release
    }
    return m;
  }

  // Moves quarantined extents that no live process can still read into the free table.
  uint32_t reclaim_quarantine() {
    Header* h = hdr();
    if (h->quarantine_count == 0) return 0;
    uint64_t min_epoch = min_live_epoch();
    uint32_t moved = 0;
    QuarantineEntry* q = quarantine();
    for (uint32_t i = h->quarantine_count; i-- > 0;) {
      // Bounded per transaction: each move costs at most ~12 logged stores.
      if (load_relaxed(&h->undo_count) + 64 > kUndoCapacity / 2) break;
      if (q[i].epoch == kPendingEpoch || q[i].epoch > min_epoch) continue;
      if (h->free_count + 1 > kFreeCapacity) break;
      uint64_t off = q[i].offset, size = q[i].size;
      if (!span_ok(off, size)) continue;
      remove_quarantine(i);
      insert_free(off, size);
      ++moved;
    }
    return moved;
  }

  // A table entry the allocator may act on: inside [data_offset, top), 64-byte granular.
  // Malformed entries (a corrupted segment) are skipped, never followed; check reports them.
  bool span_ok(uint64_t off, uint64_t size) const noexcept {
    const Header* h = hdr();
    return size != 0 && size % 64 == 0 && off % 64 == 0 && off >= lay.data_offset && off <= h->top &&
           size <= h->top - off;
  }

  uint64_t take_free(uint64_t need) {
    Header* h = hdr();
    FreeExtent* f = free_table();
    for (uint32_t j = 0; j < h->free_count; ++j) {
      if (f[j].size < need || !span_ok(f[j].offset, f[j].size)) continue;
      uint64_t off = f[j].offset;
      if (f[j].size == need) {
        remove_free(j);
      } else {
        log64(&f[j].offset, off + need);
        log64(&f[j].size, f[j].size - need);
      }
      return off;
    }
    return 0;
  }

  uint64_t allocate(uint64_t bytes) {
    require_txn();
    Header* h = hdr();
    if (bytes == 0) bytes = 1;
    if (bytes > map_size)
      fail(ErrorCode::kNoSpace, "segment '" + name + "': cannot allocate " + format_size(bytes) +
                                    ", more than the reservation (" + format_size(map_size) +
                                    "): recreate the segment with a larger max_size");
    uint64_t need = round_up(bytes, 64) + sizeof(ExtentHeader);
    if (h->top < lay.data_offset || h->top > load_relaxed(&h->size) || h->free_count > kFreeCapacity ||
        h->quarantine_count > kQuarantineCapacity)
      fail(ErrorCode::kCorrupt, "segment '" + name + "': allocator state is corrupt (top " + std::to_string(h->top) +
                                    "): run shmtool check " + name);
    uint64_t off = take_free(need);
    if (off == 0 && reclaim_quarantine() > 0) off = take_free(need);
    if (off == 0) {
      off = h->top;
      grow_backing(off + need);
      log64(&h->top, off + need);
    }
    SHMF_KILL_POINT("segment.allocate.after_take");
    // Fresh memory of this transaction: unlogged writes (a rollback makes it unreachable).
    uint64_t dirty_end = std::min(off + need, h->dirty_top);
    if (dirty_end > off) std::memset(base + off, 0, dirty_end - off);
    if (off + need > h->dirty_top) h->dirty_top = off + need;
    ExtentHeader* eh = at<ExtentHeader>(off);
    eh->magic = kExtentMagic;
    eh->size = need;
    eh->owner = txn_owner;
    eh->serial = h->txn_serial;
    store_release(&eh->state, kExtentAllocated);
    return off + sizeof(ExtentHeader);
  }

  ExtentHeader* extent_of(uint64_t payload) const {
    Header* h = hdr();
    if (payload < lay.data_offset + sizeof(ExtentHeader) || payload % 64 != 0 || payload >= h->top)
      fail(ErrorCode::kInvalidArgument, "segment '" + name + "': free(" + std::to_string(payload) +
                                            "): not an offset returned by allocate()");
    ExtentHeader* eh = at<ExtentHeader>(payload - sizeof(ExtentHeader));
    if (eh->magic != kExtentMagic || eh->size < sizeof(ExtentHeader) || eh->size % 64 != 0 ||
        payload - sizeof(ExtentHeader) + eh->size > h->top)
      fail(ErrorCode::kCorrupt, "segment '" + name + "': free(" + std::to_string(payload) +
                                    "): no valid extent header there: run shmtool check " + name);
    return eh;
  }

  void free_extent(uint64_t payload) {
    require_txn();
    Header* h = hdr();
    ExtentHeader* eh = extent_of(payload);
    if (eh->state != kExtentAllocated)
      fail(ErrorCode::kInvalidArgument, "segment '" + name + "': free(" + std::to_string(payload) +
                                            "): the extent was already freed (double free)");
    // Reclaim before the table fills (allocate() only reclaims when no hole fits).
    if (h->quarantine_count >= kQuarantineCapacity / 2) reclaim_quarantine();
    // The epoch is stamped at commit (stamp_pending_epochs), after the
    // transaction's visible stores: a free inside drop's on_drop happens before
    // the unpublish, and must not count as "before" a reader's later lookup.
    const uint64_t epoch = kPendingEpoch;
    log32(&eh->state, kExtentQuarantined);
    // Coalesce with adjacent quarantined extents (the merged span waits for the
    // later epoch). While some process does not quiesce, nothing is reused and
    // allocations come from top, so frees are mostly adjacent: the table then
    // holds about one entry per live extent instead of one per free.
    uint64_t start = payload - sizeof(ExtentHeader), len = eh->size;
    QuarantineEntry* qt = quarantine();
    uint32_t left = UINT32_MAX, right = UINT32_MAX;
    for (uint32_t j = 0; j < h->quarantine_count; ++j) {
      if (!span_ok(qt[j].offset, qt[j].size)) continue;
      if (qt[j].offset + qt[j].size == start) left = j;
      if (start + len == qt[j].offset) right = j;
    }
    if (left != UINT32_MAX || right != UINT32_MAX) {
      uint32_t keep = left != UINT32_MAX ? left : right;
      uint64_t new_start = left != UINT32_MAX ? qt[left].offset : start;
      uint64_t new_len = len + (left != UINT32_MAX ? qt[left].size : 0) + (right != UINT32_MAX ? qt[right].size : 0);
      uint64_t e = epoch;  // pending: the merged span waits for this transaction's stamp
      log64(&qt[keep].offset, new_start);
      log64(&qt[keep].size, new_len);
      log64(&qt[keep].epoch, e);
      if (left != UINT32_MAX && right != UINT32_MAX) remove_quarantine(right);
      SHMF_KILL_POINT("segment.free.after_quarantine");
      return;
    }
    if (h->quarantine_count >= kQuarantineCapacity)
      fail(ErrorCode::kFull, "segment '" + name + "': the quarantine of freed extents is full (" +
                                 std::to_string(kQuarantineCapacity) +
                                 " separate extents): some attached process never calls quiesce(); make "
                                 "long-lived workers call it (shmtool dump lists attached processes)");
    uint32_t n = h->quarantine_count;
    QuarantineEntry& q = quarantine()[n];
    // Logged although beyond the count (a reclaim earlier in this transaction may have lowered it).
    log64(&q.offset, payload - sizeof(ExtentHeader));
    log64(&q.size, eh->size);
    log64(&q.epoch, epoch);
    log64(&q.owner, eh->owner);
    log32(&h->quarantine_count, n + 1);
    SHMF_KILL_POINT("segment.free.after_quarantine");
  }

  // ---- directory -------------------------------------------------------------
  // Next directory generation (under the lock; unlogged, never rolls back; 0 is skipped).
  uint64_t next_generation() noexcept {
    Header* h = hdr();
    uint32_t g = static_cast<uint32_t>(h->generation_counter + 1);
    if (g == 0) g = 1;
    store_release(&h->generation_counter, uint64_t{g});
    return g;
  }

  // Seqlock read of entry i. False when it is not live or changed under us.
  bool read_entry(uint32_t i, RegionInfo& out, uint64_t* hash_out = nullptr) const {
    const DirEntry& e = directory()[i];
    for (int attempt = 0; attempt < 1000; ++attempt) {
      uint64_t sg = load_acquire(&e.state_gen);  // acquire: pairs with the publishing release store
      if ((sg & 0xffffffffu) != kEntryLive) return false;
      // Field loads are acquire (free on x86) so the re-check below cannot move
      // before them; this replaces the usual acquire fence, which TSan does not model.
      uint64_t words[8];
      for (int k = 0; k < 8; ++k) words[k] = load_acquire(&e.name[k]);
      uint32_t len = load_acquire(&e.name_len);
      uint32_t kind = load_acquire(&e.kind);
      uint64_t off = load_acquire(&e.offset);
      uint64_t size = load_acquire(&e.size);
      uint64_t hash = load_acquire(&e.hash);
      if (load_relaxed(&e.state_gen) != sg) continue;  // relaxed: ordered after the acquire loads above
      if (len == 0 || len > kMaxStructureNameLength) return false;
      out.name.assign(reinterpret_cast<const char*>(words), len);
      out.kind = static_cast<Kind>(kind);
      out.offset = off;
      out.size = size;
      out.slot = i;
      out.generation = static_cast<uint32_t>(sg >> 32);
      if (hash_out != nullptr) *hash_out = hash;
      return true;
    }
    return false;
  }

  // Lock-free lookup; returns the slot or UINT32_MAX.
  std::optional<RegionInfo> find(std::string_view nm) const {
    if (nm.empty() || nm.size() > kMaxStructureNameLength) return std::nullopt;
    uint64_t h = hash_key(nm, kDirectorySeed);
    uint32_t mask = dir_capacity - 1;
    for (uint32_t probe = 0; probe < dir_capacity; ++probe) {
      uint32_t i = (static_cast<uint32_t>(h) + probe) & mask;
      uint64_t sg = load_acquire(&directory()[i].state_gen);
      uint32_t st = static_cast<uint32_t>(sg & 0xffffffffu);
      if (st == kEntryEmpty) return std::nullopt;
      if (st != kEntryLive) continue;
      RegionInfo info;
      uint64_t eh = 0;
      if (!read_entry(i, info, &eh)) continue;
      if (eh == h && info.name == nm) {
        if (!region_in_bounds(info)) return std::nullopt;
        return info;
      }
    }
    return std::nullopt;
  }

  bool region_in_bounds(const RegionInfo& info) const noexcept {
    uint64_t data = lay.data_offset;
    uint64_t size = std::min(load_acquire(&hdr()->size), map_size);  // never trust a header word past the mapping
    return info.offset >= data && info.offset <= size && info.size <= size - info.offset;
  }

  // ---- attach / detach ---------------------------------------------------------
  // A second open file description of the same file, for mmap only. A mapping
  // holds a reference to the description it was made from, and OFD locks live
  // until the description's last reference goes: mapping through `fd` would let
  // a forked child (which inherits the mapping) keep our registry lock alive
  // after we die. The mapping's description never holds a lock.
  int reopen_for_map() const {
    int m = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
    if (m >= 0) return m;
    m = ::open(path.c_str(), O_RDWR | O_CLOEXEC);  // no /proc: same path, same inode checked below
    struct stat a{}, b{};
    if (m < 0 || fstat(fd, &a) != 0 || fstat(m, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
      if (m >= 0) ::close(m);
      fail(ErrorCode::kIo, "segment '" + name + "': cannot reopen " + path + " for mapping: mount /proc");
    }
    return m;
  }

  void map(uint64_t max_size) {
    int mfd = reopen_for_map();
    void* p = mmap(nullptr, max_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, 0);
    int map_errno = errno;
    ::close(mfd);
    errno = map_errno;
    if (p == MAP_FAILED)
      fail(errno == ENOMEM ? ErrorCode::kNoSpace : ErrorCode::kIo,
           "segment '" + name + "': cannot map " + format_size(max_size) + " of " + path + ": " +
               errno_text(errno) + ": check ulimit -v or recreate with a smaller max_size");
    base = static_cast<std::byte*>(p);
    map_size = max_size;
  }

  // First attacher after a reboot (file-backed segments): the robust mutex may
  // be owned by a thread of the previous boot, and no registry lock survived.
  void reinit_after_reboot_if_needed() {
    std::string boot = read_boot_id();
    if (boot.empty()) return;
    auto same_boot = [&] {
      char cur[40];
      for (int i = 0; i < 40; ++i) cur[i] = load_acquire(&hdr()->boot_id[i]);
      return std::strncmp(cur, boot.c_str(), 40) == 0;
    };
    if (same_boot()) return;
    if (flock(fd, LOCK_EX) != 0)
      fail(ErrorCode::kIo, "segment '" + name + "': flock for reboot recovery: " + errno_text(errno));
    if (!same_boot()) {
      settle_locked();  // a holder of the previous boot may have died mid-transaction
      robust_mutex_init(&hdr()->mutex);
      hdr()->holder_token = 0;
      hdr()->holder_pid = 0;
      for (uint32_t s = 0; s < kRegistrySlots; ++s) store_release(&registry()[s].state, kSlotFree);
      char id[40] = {};
      std::memcpy(id, boot.c_str(), std::min<size_t>(boot.size(), 39));
      for (int i = 0; i < 40; ++i) store_release(&hdr()->boot_id[i], id[i]);
    }
    flock(fd, LOCK_UN);
  }

  void finish_attach() {
    attach_pid = getpid();
    dir_capacity = hdr()->directory_capacity;
    lay = compute_layout(dir_capacity);  // equal to the header's offsets (validated by open / written by create)
    reinit_after_reboot_if_needed();
    claim_slot();
    track_fd(fd);
  }
};

}  // namespace internal

using internal::DirEntry;
using internal::ExtentHeader;
using internal::Header;
using internal::load_acquire;
using internal::load_relaxed;
using internal::SegmentImpl;
using internal::store_release;

using internal::fail;

namespace {

ErrorCode open_errno_code(int e) {
  if (e == ENOENT) return ErrorCode::kNotFound;
  if (e == EACCES || e == EPERM || e == EROFS) return ErrorCode::kPermission;
  return ErrorCode::kIo;
}

std::string what_it_is(std::string_view name, const std::string& path) {
  return "segment '" + std::string(name) + "' (" + path + ")";
}

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
  if (magic == internal::kMagicSwapped)
    fail(ErrorCode::kForeignByteOrder, who + " was written on a machine of the other byte order: "
                                             "rebuild it on this machine (export and re-import the data)");
  if (magic != internal::kMagic)
    fail(ErrorCode::kNotASegment, who + " is not a shmfilter segment (bad magic): check the name or --file path");
  if (n < 16)
    fail(ErrorCode::kTruncated, who + " is truncated (" + std::to_string(file_size) +
                                    " bytes, smaller than its header): remove it and create it again");
  uint32_t version;
  std::memcpy(&version, buf + 8, 4);
  if (version != internal::kFormatVersion)
    fail(ErrorCode::kVersionMismatch, who + " has format version " + std::to_string(version) +
                                          "; this build reads version " + std::to_string(internal::kFormatVersion) +
                                          ": use a shmfilter build of that version, or recreate the segment");
  if (n < sizeof(Header))
    fail(ErrorCode::kTruncated, who + " is truncated (" + std::to_string(file_size) +
                                    " bytes, smaller than its " + std::to_string(sizeof(Header)) +
                                    "-byte header): remove it and create it again");
  Header h;
  std::memcpy(static_cast<void*>(&h), buf, sizeof(Header));
  internal::AbiDescriptor want = internal::current_abi();
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
  if (h.header_bytes != sizeof(Header)) corrupt("header_bytes is " + std::to_string(h.header_bytes));
  if (h.registry_slots != internal::kRegistrySlots) corrupt("registry_slots is " + std::to_string(h.registry_slots));
  uint32_t cap = h.directory_capacity;
  if (cap < internal::kMinDirectoryCapacity || cap > internal::kMaxDirectoryCapacity || (cap & (cap - 1)) != 0)
    corrupt("directory capacity " + std::to_string(cap) + " is not a power of two in range");
  auto l = internal::compute_layout(cap);
  if (h.undo_offset != l.undo_offset || h.free_offset != l.free_offset ||
      h.quarantine_offset != l.quarantine_offset || h.registry_offset != l.registry_offset ||
      h.directory_offset != l.directory_offset || h.data_offset != l.data_offset)
    corrupt("table offsets do not match the layout of a " + std::to_string(cap) + "-entry directory");
  if (h.max_size > internal::kMaxReservation || h.max_size % internal::kPage != 0)
    corrupt("max_size " + std::to_string(h.max_size) + " is out of range");
  if (h.size < h.data_offset || h.size > h.max_size)
    corrupt("size " + std::to_string(h.size) + " is outside [data_offset, max_size]");
  if (h.top < h.data_offset || h.top > h.size) corrupt("allocator top " + std::to_string(h.top) + " is outside the segment");
  if (h.free_count > internal::kFreeCapacity || h.quarantine_count > internal::kQuarantineCapacity ||
      h.undo_count > internal::kUndoCapacity)
    corrupt("allocator or undo-log counts out of range");
  if (file_size < h.size)
    fail(ErrorCode::kTruncated, who + " is truncated: its header says " + std::to_string(h.size) +
                                    " bytes but the file has " + std::to_string(file_size) +
                                    ": restore it from a copy or recreate it");
}

}  // namespace

// ---- create / open ---------------------------------------------------------------

Segment Segment::create(std::string_view name, const CreateOptions& options) {
  using namespace internal;
  validate_segment_name(name);
  const std::string path = backing_path(name, options.file);
  const std::string who = what_it_is(name, path);
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

  auto impl = std::make_shared<SegmentImpl>();
  impl->name = std::string(name);
  impl->path = path;
  const std::string dir = parent_dir(path);
  std::string tmp_path;  // fallback when O_TMPFILE is unsupported
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, options.mode);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string tmpl = path + ".creating.XXXXXX";
    fd = mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd >= 0) tmp_path = tmpl;
  }
  if (fd < 0)
    fail(open_errno_code(errno) == ErrorCode::kNotFound ? ErrorCode::kNotFound : open_errno_code(errno),
         "cannot create " + who + ": " + errno_text(errno) + ": check that " + dir + " exists and is writable");
  impl->fd = fd;
  auto cleanup_tmp = [&] {
    if (!tmp_path.empty()) ::unlink(tmp_path.c_str());
  };
  try {
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
    impl->map(max_size);
    Header* h = impl->hdr();
    h->magic = kMagic;
    h->version = kFormatVersion;
    h->header_bytes = sizeof(Header);
    h->abi = current_abi();
    h->max_size = max_size;
    h->directory_capacity = cap;
    h->registry_slots = kRegistrySlots;
    h->undo_offset = l.undo_offset;
    h->free_offset = l.free_offset;
    h->quarantine_offset = l.quarantine_offset;
    h->registry_offset = l.registry_offset;
    h->directory_offset = l.directory_offset;
    h->data_offset = l.data_offset;
    h->created_unix_ns = now_unix_ns();
    h->mode = options.mode;
    h->file_backed = options.file.empty() ? 0 : 1;
    std::string boot = read_boot_id();
    std::memcpy(h->boot_id, boot.c_str(), std::min<size_t>(boot.size(), 39));
    h->size = size;
    h->top = l.data_offset;
    h->dirty_top = l.data_offset;
    if (int e = robust_mutex_init(&h->mutex); e != 0)
      fail(ErrorCode::kIo, "cannot initialise the control lock of " + who + ": " + errno_text(e));
    SHMF_KILL_POINT("segment.create.before_link");
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
    cleanup_tmp();
    tmp_path.clear();
    SHMF_KILL_POINT("segment.create.after_link");
    impl->finish_attach();
  } catch (...) {
    cleanup_tmp();
    throw;  // impl's destructor unmaps and closes; the unlinked inode vanishes
  }
  return Segment(std::move(impl));
}

Segment Segment::open(std::string_view name, const OpenOptions& options) {
  using namespace internal;
  validate_segment_name(name);
  const std::string path = backing_path(name, options.file);
  const std::string who = what_it_is(name, path);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    ErrorCode c = open_errno_code(e);
    if (c == ErrorCode::kNotFound)
      fail(c, who + " does not exist: create it first (shmtool create " + std::string(name) + ")");
    if (c == ErrorCode::kPermission)
      fail(c, "no permission to open " + who + " read-write: " + errno_text(e) +
                  ": run as its owner or a member of its group");
    fail(c, "cannot open " + who + ": " + errno_text(e));
  }
  auto impl = std::make_shared<SegmentImpl>();
  impl->name = std::string(name);
  impl->path = path;
  impl->fd = fd;
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
  impl->map(hcopy.max_size);
  impl->finish_attach();
  return Segment(std::move(impl));
}

Segment Segment::open_or_create(std::string_view name, const CreateOptions& options) {
  OpenOptions oo;
  oo.file = options.file;
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
  internal::validate_segment_name(name);
  const std::string path = internal::backing_path(name, options.file);
  if (::unlink(path.c_str()) == 0) return true;
  int e = errno;
  if (e == ENOENT) return false;
  fail(open_errno_code(e), "cannot remove " + what_it_is(name, path) + ": " + internal::errno_text(e));
}

bool Segment::exists(std::string_view name, const OpenOptions& options) {
  internal::validate_segment_name(name);
  struct stat st{};
  return ::stat(internal::backing_path(name, options.file).c_str(), &st) == 0;
}

// ---- accessors -----------------------------------------------------------------

const std::string& Segment::name() const { return impl_->name; }
std::byte* Segment::base() const noexcept { return impl_ ? impl_->base : nullptr; }
uint64_t Segment::size() const noexcept { return impl_ ? load_acquire(&impl_->hdr()->size) : 0; }

uint64_t Segment::owner_token() const noexcept { return impl_ ? impl_->token : 0; }
bool Segment::token_alive(uint64_t token) const noexcept { return impl_ && impl_->token_alive(token); }
void Segment::quiesce() noexcept {
  if (impl_) impl_->quiesce();
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
  return *info;
}

std::vector<RegionInfo> Segment::list() const {
  std::vector<RegionInfo> out;
  for (uint32_t i = 0; i < impl_->dir_capacity; ++i) {
    RegionInfo info;
    if (impl_->read_entry(i, info) && impl_->region_in_bounds(info)) out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const RegionInfo& a, const RegionInfo& b) { return a.name < b.name; });
  return out;
}

bool Segment::region_live(uint32_t slot, uint32_t generation) const noexcept {
  if (!impl_ || slot >= impl_->dir_capacity) return false;
  // acquire: a true answer orders the caller's later reads of the region after the publish.
  return load_acquire(&impl_->directory()[slot].state_gen) ==
         ((uint64_t{generation} << 32) | internal::kEntryLive);
}

RegionInfo Segment::create_region(std::string_view name, Kind kind, uint64_t bytes,
                                  const std::function<void(std::byte*, uint64_t, ControlTxn&)>& init) {
  using namespace internal;
  validate_structure_name(name);
  if (kind == Kind::kNone) fail(ErrorCode::kInvalidArgument, "kind none is not a structure kind: pass a real kind");
  if (bytes == 0) fail(ErrorCode::kInvalidArgument, "region of 0 bytes: pass a size >= 1");
  SegmentImpl* im = impl_.get();
  RegionInfo result;
  im->run_txn([&] {
    ControlTxn txn(this);
    uint64_t h = hash_key(name, kDirectorySeed);
    uint32_t mask = im->dir_capacity - 1;
    uint32_t target = UINT32_MAX;
    for (uint32_t probe = 0; probe < im->dir_capacity; ++probe) {
      uint32_t i = (static_cast<uint32_t>(h) + probe) & mask;
      uint32_t st = static_cast<uint32_t>(im->directory()[i].state_gen & 0xffffffffu);
      if (st == kEntryEmpty) {
        if (target == UINT32_MAX) target = i;
        break;
      }
      if (st == kEntryTombstone) {
        if (target == UINT32_MAX) target = i;
        continue;
      }
      RegionInfo info;
      if (im->read_entry(i, info) && info.name == name)
        fail(ErrorCode::kExists, "structure '" + std::string(name) + "' already exists in segment '" + im->name +
                                     "' (a " + std::string(kind_name(info.kind)) +
                                     "): open it, or drop it first (shmtool drop)");
    }
    if (target == UINT32_MAX)
      fail(ErrorCode::kFull, "the directory of segment '" + im->name + "' is full (" +
                                 std::to_string(im->dir_capacity) +
                                 " entries): drop structures or recreate the segment with a larger directory capacity");
    DirEntry& e = im->directory()[target];
    uint64_t gen = im->next_generation();
    struct OwnerScope {  // nested in a larger transact(): restore the caller's owner afterwards
      SegmentImpl* im;
      uint64_t saved;
      ~OwnerScope() { im->txn_owner = saved; }
    } owner_scope{im, im->txn_owner};
    im->txn_owner = (gen << 32) | (target + 1);
    uint64_t payload = im->allocate(bytes);
    SHMF_KILL_POINT("segment.create_region.after_allocate");
    // The entry is not live now, but it may have been at the start of this
    // transaction (a nested drop of the same slot), so its fields are logged.
    // The generation comes from a segment-wide counter that never rolls back,
    // so a rolled-back publish never reappears as the same (generation, live)
    // word that a lock-free reader may have seen.
    im->log64(&e.hash, h);
    im->log32(&e.kind, static_cast<uint32_t>(kind));
    im->log32(&e.name_len, static_cast<uint32_t>(name.size()));
    im->log64(&e.offset, payload);
    im->log64(&e.size, bytes);
    uint64_t words[8] = {};
    std::memcpy(words, name.data(), name.size());
    for (int k = 0; k < 8; ++k) im->log64(&e.name[k], words[k]);  // release stores; published by state_gen below
    if (init) init(im->base + payload, bytes, txn);
    SHMF_KILL_POINT("segment.create_region.before_publish");
    im->log64(&im->hdr()->structures, im->hdr()->structures + 1);
    im->commit_store(&e.state_gen, (gen << 32) | kEntryLive);  // the publish: one release store, the commit point
    SHMF_KILL_POINT("segment.create_region.after_publish");
    result.name = std::string(name);
    result.kind = kind;
    result.offset = payload;
    result.size = bytes;
    result.slot = target;
    result.generation = static_cast<uint32_t>(gen);
  });
  return result;
}

bool Segment::drop(std::string_view name, const std::function<void(std::byte*, uint64_t, ControlTxn&)>& on_drop) {
  using namespace internal;
  validate_structure_name(name);
  SegmentImpl* im = impl_.get();
  bool dropped = false;
  im->run_txn([&] {
    auto info = im->find(name);
    if (!info) return;
    ControlTxn txn(this);
    if (on_drop) on_drop(im->base + info->offset, info->size, txn);
    SHMF_KILL_POINT("segment.drop.after_on_drop");
    DirEntry& e = im->directory()[info->slot];
    im->log64(&im->hdr()->structures, im->hdr()->structures - 1);
    im->free_extent(info->offset);  // quarantined; its epoch is stamped at commit, after the unpublish
    SHMF_KILL_POINT("segment.drop.after_free");
    uint64_t gen = im->next_generation();
    im->commit_store(&e.state_gen, (gen << 32) | kEntryTombstone);  // unpublish: the commit point
    SHMF_KILL_POINT("segment.drop.after_unpublish");
    dropped = true;
  });
  return dropped;
}

void Segment::transact(const std::function<void(ControlTxn&)>& fn) {
  impl_->run_txn([&] {
    ControlTxn txn(this);
    fn(txn);
  });
}

void Segment::resize(uint64_t new_size) {
  using namespace internal;
  SegmentImpl* im = impl_.get();
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

// ---- ControlTxn ----------------------------------------------------------------------

uint64_t ControlTxn::allocate(uint64_t bytes) { return segment_->impl()->allocate(bytes); }
void ControlTxn::free(uint64_t offset) { segment_->impl()->free_extent(offset); }
void ControlTxn::charge_to(const RegionInfo& region) {
  segment_->impl()->require_txn();
  segment_->impl()->txn_owner = (uint64_t{region.generation} << 32) | (uint64_t{region.slot} + 1);
}
void ControlTxn::store_u64(uint64_t* field, uint64_t value) {
  segment_->impl()->require_txn();
  segment_->impl()->require_data(field, 8);
  segment_->impl()->logged_store(field, 8, value);
}
void ControlTxn::store_u32(uint32_t* field, uint32_t value) {
  segment_->impl()->require_txn();
  segment_->impl()->require_data(field, 4);
  segment_->impl()->logged_store(field, 4, value);
}
std::byte* ControlTxn::base() const noexcept { return segment_->base(); }

// ---- check ---------------------------------------------------------------------------

CheckReport Segment::check(bool repair) {
  using namespace internal;
  SegmentImpl* im = impl_.get();
  CheckReport report;
  auto add = [&](std::string where, std::string problem, bool repaired) {
    report.findings.push_back(CheckFinding{std::move(where), std::move(problem), repaired});
  };
  std::vector<RegionInfo> live;
  im->run_txn([&] {
    ControlTxn txn(this);
    Header* h = im->hdr();
    if (im->recovered_in_lock)
      add("control lock",
          im->last_recovery_forward
              ? "its holder died after its transaction's commit point; completed it"
              : "its holder died mid-transaction; rolled back " + std::to_string(im->last_recovered) + " logged stores",
          true);
    // Header: the immutable part must still be what open() validated.
    {
      Layout l = compute_layout(h->directory_capacity);
      AbiDescriptor abi = current_abi();
      if (h->magic != kMagic || h->version != kFormatVersion || std::memcmp(&h->abi, &abi, sizeof abi) != 0 ||
          h->directory_capacity != im->dir_capacity || h->undo_offset != l.undo_offset ||
          h->free_offset != l.free_offset || h->quarantine_offset != l.quarantine_offset ||
          h->registry_offset != l.registry_offset || h->directory_offset != l.directory_offset ||
          im->lay.data_offset != l.data_offset || h->size > h->max_size || h->max_size != im->map_size) {
        add("header", "immutable fields (magic, version, ABI, layout, max_size) changed after creation", false);
        return;
      }
    }
    uint64_t size = h->size;
    struct stat st{};
    if (fstat(im->fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < size)
      add("header", "backing file is " + std::to_string(st.st_size) + " bytes, header says " + std::to_string(size),
          false);
    if (h->top < im->lay.data_offset || h->top > size) {
      add("allocator", "top " + std::to_string(h->top) + " is outside [data_offset, size]", false);
      return;
    }
    if (h->free_count > kFreeCapacity || h->quarantine_count > kQuarantineCapacity) {
      add("allocator", "table counts out of range", false);
      return;
    }
    // Registry: attached slots whose kernel lock is gone.
    RegistrySlot* r = im->registry();
    for (uint32_t s = 0; s < kRegistrySlots; ++s) {
      if (load_acquire(&r[s].state) != kSlotAttached || s == im->slot) continue;
      if (im->slot_locked_by_other(s)) continue;
      bool fixed = false;
      if (repair) {
        // Take the slot's lock ourselves so no claimer races the repair.
        struct flock fl{};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = static_cast<off_t>(kLockBase + s);
        fl.l_len = 1;
        if (fcntl(im->fd, F_OFD_SETLK, &fl) == 0) {
          if (load_acquire(&r[s].state) == kSlotAttached) store_release(&r[s].state, kSlotFree);
          fl.l_type = F_UNLCK;
          fcntl(im->fd, F_OFD_SETLK, &fl);
          fixed = true;
        }
      }
      add("registry[" + std::to_string(s) + "]",
          "process " + std::to_string(load_relaxed(&r[s].pid)) + " died without detaching (its lock is gone)", fixed);
    }
    // Directory entries.
    std::map<uint64_t, uint32_t> region_at;  // extent start -> directory slot
    for (uint32_t i = 0; i < im->dir_capacity; ++i) {
      uint64_t sg = im->directory()[i].state_gen;
      uint32_t state = static_cast<uint32_t>(sg & 0xffffffffu);
      if (state != kEntryEmpty && state != kEntryLive && state != kEntryTombstone) {
        add("directory[" + std::to_string(i) + "]", "unknown state " + std::to_string(state), false);
        continue;
      }
      if (state != kEntryLive) continue;
      RegionInfo info;
      std::string where = "directory[" + std::to_string(i) + "]";
      if (!im->read_entry(i, info)) {
        add(where, "live entry with an invalid name length", false);
        continue;
      }
      where += " '" + info.name + "'";
      uint64_t ext = info.offset - sizeof(ExtentHeader);
      if (info.offset < im->lay.data_offset + sizeof(ExtentHeader) || info.offset > h->top || info.size > h->top - info.offset) {
        add(where, "region [" + std::to_string(info.offset) + ", +" + std::to_string(info.size) +
                       ") lies outside the allocated space", false);
        continue;
      }
      ExtentHeader* eh = im->at<ExtentHeader>(ext);
      if (eh->magic != kExtentMagic || eh->state != kExtentAllocated || eh->size < info.size + sizeof(ExtentHeader)) {
        add(where, "region does not start an allocated extent of its size", false);
        continue;
      }
      if (!region_at.emplace(ext, i).second) {
        add(where, "region shares its extent with directory[" + std::to_string(region_at[ext]) + "]", false);
        continue;
      }
      live.push_back(info);
    }
    // Allocator: every byte in [data_offset, top) is in exactly one extent.
    struct Span {
      uint64_t size;
      int what;  // 0 free, 1 quarantined
    };
    std::map<uint64_t, Span> spans;
    // Malformed table entries are never acted on; --repair removes them (their
    // bytes then show up below as unaccounted, which is reported, not guessed at).
    for (uint32_t i = h->free_count; i-- > 0;) {
      FreeExtent f = im->free_table()[i];
      if (im->span_ok(f.offset, f.size)) continue;
      if (repair) im->remove_free(i);
      add("allocator", "free extent " + std::to_string(i) + " is malformed or outside [data_offset, top)", repair);
    }
    for (uint32_t i = h->quarantine_count; i-- > 0;) {
      QuarantineEntry q = im->quarantine()[i];
      if (im->span_ok(q.offset, q.size)) continue;
      if (repair) im->remove_quarantine(i);
      add("allocator", "quarantine entry " + std::to_string(i) + " is malformed", repair);
    }
    for (uint32_t i = 0; i < h->free_count; ++i) {
      FreeExtent f = im->free_table()[i];
      if (im->span_ok(f.offset, f.size) && !spans.emplace(f.offset, Span{f.size, 0}).second)
        add("allocator", "free extent at " + std::to_string(f.offset) + " is listed twice", false);
    }
    for (uint32_t i = 0; i < h->quarantine_count; ++i) {
      QuarantineEntry q = im->quarantine()[i];
      if (im->span_ok(q.offset, q.size) && !spans.emplace(q.offset, Span{q.size, 1}).second)
        add("allocator", "extent at " + std::to_string(q.offset) + " is both free and quarantined (or twice)", false);
    }
    for (auto it = spans.begin(); it != spans.end(); ++it) {
      auto nx = std::next(it);
      if (nx != spans.end() && it->first + it->second.size > nx->first)
        add("allocator", "extents at " + std::to_string(it->first) + " and " + std::to_string(nx->first) +
                             " overlap (free/quarantine tables)", false);
    }
    uint64_t p = im->lay.data_offset;
    std::vector<uint64_t> leaked;
    uint64_t unattributed = 0;
    while (p < h->top) {
      auto it = spans.find(p);
      if (it != spans.end()) {
        p += it->second.size;
        continue;
      }
      auto next = spans.lower_bound(p);
      ExtentHeader* eh = im->at<ExtentHeader>(p);
      if (eh->magic != kExtentMagic || eh->state != kExtentAllocated || eh->size < 64 || eh->size % 64 ||
          p + eh->size > h->top || (next != spans.end() && p + eh->size > next->first)) {
        add("allocator", "bytes at " + std::to_string(p) + " belong to no extent (or extents overlap)", false);
        break;
      }
      if (eh->owner == 0) {
        ++unattributed;
      } else {
        // Owned by (generation, slot): leaked unless that very publication is still live.
        uint64_t owner_slot = (eh->owner & 0xffffffffu) - 1;
        uint64_t owner_gen = eh->owner >> 32;
        bool owner_live = owner_slot < im->dir_capacity &&
                          im->directory()[owner_slot].state_gen == ((owner_gen << 32) | kEntryLive);
        if (!owner_live) leaked.push_back(p);
      }
      p += eh->size;
    }
    if (p > h->top) add("allocator", "an extent runs past top", false);
    for (uint64_t ext : leaked) {
      bool fixed = false;
      if (repair) {
        im->free_extent(ext + sizeof(ExtentHeader));
        fixed = true;
      }
      add("allocator", "extent at " + std::to_string(ext) + " (" +
                           std::to_string(im->at<ExtentHeader>(ext)->size) +
                           " bytes) belongs to a structure that no longer exists (leak)", fixed);
    }
    (void)unattributed;  // extents allocated in plain transact(): their structures' checkers account for them
    (void)txn;
  });
  for (const auto& info : live) {
    if (CheckerFn fn = checker_for(info.kind)) fn(*this, info, repair, report);
  }
  return report;
}

// ---- sizes ---------------------------------------------------------------------------------

uint64_t parse_size(std::string_view text) {
  auto bad = [&](const std::string& why) {
    fail(ErrorCode::kInvalidArgument, "size '" + std::string(text) + "' " + why +
                                          ": write a number with an optional unit, e.g. 4096, 64k, 512MiB, 2GiB, 1.5G");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num(text.substr(0, i));
  std::string unit(text.substr(i));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  if (num.empty() || num == "." || std::count(num.begin(), num.end(), '.') > 1) bad("is not a number");
  long double value = std::strtold(num.c_str(), nullptr);
  long double mult = 1;
  static const std::pair<const char*, long double> units[] = {
      {"", 1},         {"B", 1},
      {"k", 1024.0L},  {"K", 1024.0L},  {"KiB", 1024.0L},  {"KB", 1e3L},  {"kB", 1e3L},
      {"M", 1048576.0L}, {"MiB", 1048576.0L}, {"MB", 1e6L},
      {"G", 1073741824.0L}, {"GiB", 1073741824.0L}, {"GB", 1e9L},
      {"T", 1099511627776.0L}, {"TiB", 1099511627776.0L}, {"TB", 1e12L}};
  bool found = false;
  for (const auto& [u, m] : units)
    if (unit == u) {
      mult = m;
      found = true;
    }
  if (!found) bad("has an unknown unit '" + unit + "'");
  long double bytes = value * mult;
  if (bytes > 18446744073709549568.0L) bad("is too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace shmfilter
