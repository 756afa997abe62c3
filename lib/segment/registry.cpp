// lib/segment/registry.cpp: the process registry and attachment lifetime.
//
// One slot per attachment; its liveness is the kernel's OFD write lock on byte
// kLockBase + slot of the segment's lock file (lock_file.cpp; the segment file
// itself for version 1), dropped when the process dies, never a bare pid. Also: owner tokens, quiescent epochs, fork detection (a child
// closes inherited attachment fds), and the first attach after a reboot.
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "base/wait_stats.h"
#include "segment/robust_mutex.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

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

namespace {

constexpr uint64_t kSlotBits = 16;  // owner token = (incarnation << kSlotBits) | slot

// fds of every attachment in this process, closed in a forked child so that
// a child never keeps its parent's registry lock (OFD) alive.
constexpr int kMaxTrackedFds = 1024;
// Bumped in every forked child (after the first attach in this process):
// an attachment made before the fork sees a generation that is not its own.
std::atomic<uint64_t> g_fork_generation{0};
std::atomic<int> g_fds[kMaxTrackedFds];
std::once_flag g_atfork_once;

void atfork_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);  // relaxed: the child is single-threaded here
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

}  // namespace

SegmentImpl::~SegmentImpl() {
  bool same_process = getpid() == attach_pid;
  if (base != nullptr && same_process && slot != UINT32_MAX) {
    store_release(&registry()[slot].state, kSlotFree);
  }
  if (base != nullptr) munmap(base, map_size);
  if (lock_fd >= 0 && lock_fd != fd && same_process) {
    untrack_fd(lock_fd);
    ::close(lock_fd);  // drops the OFD lock: the kernel now reports this slot dead
  }
  if (fd >= 0 && same_process) {
    untrack_fd(fd);
    ::close(fd);  // version 1: drops the OFD lock
  }
}

uint64_t fork_generation_now() noexcept { return g_fork_generation.load(std::memory_order_relaxed); }  // relaxed: changes only in a single-threaded child

void SegmentImpl::check_fork() const {
  if (getpid() != attach_pid)
    fail(ErrorCode::kForked, "segment '" + name +
                               "': this Segment was inherited across fork(); an attachment belongs to the "
                               "process that made it: call Segment::open(\"" + name + "\") in the child");
}

// ---- liveness ------------------------------------------------------------
// Queried as F_RDLCK: the kernel then reports only WRITE locks (a read lock
// does not conflict with a read lock), and a write lock needs the file open
// for writing. So a user who can only read the segment cannot make a dead
// slot look alive by read-locking its byte.
bool SegmentImpl::slot_locked_by_other(uint32_t s) const noexcept {
  struct flock fl{};
  fl.l_type = F_RDLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kLockBase + s);
  fl.l_len = 1;
  if (lock_fd < 0 || fcntl(lock_fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive (safe side)
  return fl.l_type != F_UNLCK;
}

bool SegmentImpl::slot_alive(uint32_t s) const noexcept {
  if (s == slot && getpid() == attach_pid) return true;
  if (getpid() != attach_pid) return true;  // inherited attachment: fd closed at fork; cannot ask
  return slot_locked_by_other(s);
}

bool SegmentImpl::token_alive(uint64_t tok) const noexcept {
  if (tok == 0) return false;
  uint64_t s = tok & ((1u << kSlotBits) - 1);
  if (s >= kRegistrySlots) return false;
  // acquire: pairs with the claimer's increment; a changed incarnation means the owner left.
  if (load_acquire(&registry()[s].incarnation) != (tok >> kSlotBits)) return false;
  if (tok == token) return true;
  return slot_alive(static_cast<uint32_t>(s));
}

void SegmentImpl::quiesce() noexcept {
  if (slot == UINT32_MAX || getpid() != attach_pid) return;
  // acquire: see every free that the epoch counts; release: our earlier reads of freed memory
  // happen before a reclaimer that acquires this epoch reuses that memory.
  uint64_t e = __atomic_load_n(&hdr()->global_epoch, __ATOMIC_ACQUIRE);
  store_release(&registry()[slot].quiescent_epoch, e);
}

// A claim's incarnation step: 1 plus 20 bits of this claim's own entropy, so
// the token of the next attachment cannot be predicted from the segment's
// bytes. A lock word that a copy of a segment (or a crafted one) carries
// then never equals a fresh attachment's token, which would make that
// attachment wait for "itself" forever. Incarnations still only grow.
static uint64_t incarnation_step() noexcept {
  uint64_t x = now_unix_ns() ^ (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&x);
  x ^= x >> 33;  // murmur3 fmix64
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return 1 + (x & 0xfffff);
}

void SegmentImpl::claim_slot() {
  uint32_t read_locked = 0;  // slots a process that is not attached holds read locks on
  pid_t squatter = 0;
  for (uint32_t s = 0; s < kRegistrySlots; ++s) {
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(kLockBase + s);
    fl.l_len = 1;
    if (fcntl(lock_fd, F_OFD_SETLK, &fl) != 0) {
      if (errno != EAGAIN && errno != EACCES)
        fail(ErrorCode::kIo, "segment '" + name + "': cannot lock registry slot: " + errno_text(errno));
      struct flock q{};
      q.l_type = F_WRLCK;
      q.l_whence = SEEK_SET;
      q.l_start = fl.l_start;
      q.l_len = 1;
      if (!slot_locked_by_other(s) && fcntl(lock_fd, F_OFD_GETLK, &q) == 0 && q.l_type != F_UNLCK) {
        ++read_locked;  // no attachment holds it: only someone's read lock
        squatter = q.l_pid;
      }
      continue;
    }
    RegistrySlot& r = registry()[s];
    uint64_t inc = __atomic_add_fetch(&r.incarnation, incarnation_step(), __ATOMIC_ACQ_REL);
    if (inc >= (1ull << (64 - kSlotBits))) {  // past 2^48 (2^28 claims at the least): restart low
      inc = incarnation_step();
      store_release(&r.incarnation, inc);
    }
    slot = s;
    token = (inc << kSlotBits) | s;
    store_relaxed(&r.pid, static_cast<int32_t>(getpid()));
    store_relaxed(&r.attached_unix_ns, now_unix_ns());
    store_relaxed(&r.token, token);
    quiesce();
    // Announcements (docs/CONCURRENCY.md "Reader announcements"): no call in flight, then
    // the marker that says this holder announces (a stale `calls` of a dead holder is never
    // read as ours: the marker names our incarnation and is stored after the reset).
    store_relaxed(&r.calls, uint64_t{0});
    store_release(&r.announce_incarnation, inc);
    store_release(&r.state, kSlotAttached);  // release: the fields above are visible with the state
    return;
  }
  if (read_locked > 0)
    fail(ErrorCode::kBusy, "segment '" + name + "': " + std::to_string(read_locked) + " of the " +
                               std::to_string(kRegistrySlots) +
                               " registry slots are read-locked by a process that is not attached (pid " +
                               std::to_string(squatter) + "): someone with read access to " + path +
                               " is blocking attachment; stop that process and give read access only to "
                               "trusted users (see docs/SECURITY.md)");
  fail(ErrorCode::kFull, "segment '" + name + "': all " + std::to_string(kRegistrySlots) +
                             " registry slots are held by live processes: detach some processes");
}

// ---- reader announcements -------------------------------------------------------
// A call in flight in this attachment (docs/CONCURRENCY.md "Reader announcements").
// One word per attachment, shared by its threads: (epoch << kCallCountBits) | count.
// The call that raises the count from 0 stores the global epoch it loaded; a call that
// joins one in flight keeps the older epoch (the safe side: whatever the first call may
// still read, the joiner may too). Returns false (nothing to undo) where this attachment
// has no slot of its own: read-only, or inherited across fork (the slot is the parent's;
// a child killed between its CAS and its exit would leave the parent's count raised).
bool SegmentImpl::enter_call() noexcept {
  if (slot == UINT32_MAX || fork_generation != fork_generation_now()) return false;
  uint64_t* w = &registry()[slot].calls;
  // acquire: every free that this epoch counts is visible, so are the stores it followed
  // (unpublish, retire): a call that announces E finds nothing freed at or before E.
  uint64_t g = std::min(__atomic_load_n(&hdr()->global_epoch, __ATOMIC_ACQUIRE), kMaxCallEpoch);
  uint64_t cur = __atomic_load_n(w, __ATOMIC_RELAXED);  // relaxed: the CAS below decides
  for (;;) {
    const uint64_t n = cur & kCallCountMask;
    if (n == kCallCountMask) return false;  // saturated (65,535 calls in flight): stays held, the safe side
    const uint64_t want = n == 0 ? (g << kCallCountBits) | 1 : cur + 1;
    // seq_cst: the announcement is ordered before every load this call makes (on x86-64
    // the locked CMPXCHG is a full barrier); a reclaimer that then misses it (loads it as
    // idle or older) made its unpublish visible before, so this call cannot find what it frees.
    if (__atomic_compare_exchange_n(w, &cur, want, /*weak=*/true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) break;
  }
#if !defined(__x86_64__)
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // store-load order where a seq_cst RMW is not a full barrier
#endif
  return true;
}

void SegmentImpl::exit_call() noexcept {
  // release: this call's reads of segment memory happen before a reclaimer that loads the
  // lowered count (acquire) reuses that memory.
  __atomic_fetch_sub(&registry()[slot].calls, uint64_t{1}, __ATOMIC_RELEASE);
}

// The epoch slot s holds reclamation back at: extents stamped above it stay quarantined.
// A holder that announces (announce_incarnation == incarnation): UINT64_MAX with no call in
// flight, else the epoch its calls announced. Otherwise (an older build): its quiescent epoch.
uint64_t SegmentImpl::slot_epoch(uint32_t s) const noexcept {
  const RegistrySlot& r = registry()[s];
  // acquire (the marker): pairs with the claim's release; the reset of `calls` is then visible.
  const uint64_t marker = load_acquire(&r.announce_incarnation);
  if (marker != 0 && marker == load_acquire(&r.incarnation)) {
    // seq_cst: pairs with enter_call's CAS (the store-load order; see there).
    const uint64_t c = __atomic_load_n(&r.calls, __ATOMIC_SEQ_CST);
    return (c & kCallCountMask) == 0 ? UINT64_MAX : c >> kCallCountBits;
  }
  return load_acquire(&r.quiescent_epoch);  // acquire: pairs with quiesce()'s release
}

// Smallest epoch any live attachment holds reclamation back at (UINT64_MAX when none).
uint64_t SegmentImpl::min_live_epoch() const noexcept {
  // seq_cst: the unpublish / retire stores of the frees we may reuse come before the loads of
  // the announcements below (the reclaimer's half of the store-load order; enter_call has the other).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  uint64_t m = UINT64_MAX;
  RegistrySlot* r = registry();
  for (uint32_t s = 0; s < kRegistrySlots; ++s) {
    if (load_acquire(&r[s].state) != kSlotAttached) continue;
    if (!slot_alive(s)) continue;
    m = std::min(m, slot_epoch(s));
  }
  return m;
}

// ---- attach ----------------------------------------------------------------
// flock(LOCK_EX) serialises first-attach recoveries. Bounded: anyone who can
// open the file (a read-only user too) can hold a flock, and must not make
// opens hang; past the bound the caller gets false.
static bool flock_bounded(int fd) noexcept {
  SlowWait wait("first-attach flock");
  for (int i = 0; i < 200; ++i) {  // ~2 s
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    wait.start();
    usleep(10000);
  }
  note_wait_expired("first-attach flock");
  return false;
}

// True when no attachment holds its registry lock (one query for the whole
// range: the kernel reports the first write lock in it, ignoring read locks).
bool SegmentImpl::nobody_attached() const noexcept {
  struct flock fl{};
  fl.l_type = F_RDLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kLockBase);
  fl.l_len = kRegistrySlots;
  return lock_fd >= 0 && fcntl(lock_fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

// Nobody is attached (the kernel says so) but the control lock's bytes are not
// an unlocked mutex of ours: a copy taken while a transaction held it (its
// owner thread id names a thread that never existed here, so the kernel never
// marks it dead: every locker would wait the full bound and fail, forever),
// or a kind bit glibc aborts on. With nobody attached no one can hold it: the
// first opener settles the undo log and re-initialises the lock, under flock
// so that two first openers do not race (a later opener sees our slot).
void SegmentImpl::reinit_unattended_lock_if_needed() {
  if (robust_mutex_pristine(&hdr()->mutex) || !nobody_attached()) return;
  if (!flock_bounded(lock_fd)) return;  // someone holds flock: leave it; lock_control reports a bad lock by name
  if (!robust_mutex_pristine(&hdr()->mutex) && nobody_attached()) {
    settle_locked();
    robust_mutex_init(&hdr()->mutex);
    store_relaxed(&hdr()->holder_token, uint64_t{0});
    store_relaxed(&hdr()->holder_pid, uint64_t{0});
    store_relaxed(&hdr()->recoveries, hdr()->recoveries + 1);
  }
  flock(lock_fd, LOCK_UN);
}

// First attacher after a reboot (file-backed segments): the robust mutex may
// be owned by a thread of the previous boot, and no registry lock survived.
void SegmentImpl::reinit_after_reboot_if_needed() {
  std::string boot = read_boot_id();
  if (boot.empty()) return;
  auto same_boot = [&] {
    char cur[40];
    for (int i = 0; i < 40; ++i) cur[i] = load_acquire(&hdr()->boot_id[i]);
    return std::strncmp(cur, boot.c_str(), 40) == 0;
  };
  if (same_boot()) return;
  if (!flock_bounded(lock_fd))
    fail(ErrorCode::kBusy, "segment '" + name + "': the first open after a reboot recovers the segment under "
                               "flock, and another process has held flock on " + path +
                               " for seconds: stop it (fuser " + (lock_path.empty() ? path : lock_path) + ") and retry");
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
  flock(lock_fd, LOCK_UN);
}

void SegmentImpl::finish_attach() {
  attach_pid = getpid();
  fork_generation = fork_generation_now();
  dir_capacity = hdr()->directory_capacity;
  lay = compute_layout(dir_capacity);  // equal to the header's offsets (validated by open / written by create)
  if (read_only) return;  // an inspector: writes nothing, takes no slot, holds no lock
  reinit_after_reboot_if_needed();
  reinit_unattended_lock_if_needed();
  claim_slot();
  if (lock_file_created) set_creator_lock(lock_fd, false);  // our slot's lock now says the file is in use
  track_fd(fd);
  if (lock_fd != fd) track_fd(lock_fd);
}

void SegmentImpl::require_writable(const char* what) const {
  if (read_only)
    fail(ErrorCode::kReadOnly, "segment '" + name + "' was opened read-only (OpenOptions::read_only): " + what +
                                   " needs a read-write attachment: open it without read_only, as a user who may "
                                   "write " + path);
}

}  // namespace shmfilter::internal
