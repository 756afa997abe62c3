// lib/segment/registry.cpp: the process registry and attachment lifetime.
//
// One slot per attachment; its liveness is the kernel's OFD write lock on byte
// kLockBase + slot of the segment file (dropped when the process dies), never
// a bare pid. Also: owner tokens, quiescent epochs, fork detection (a child
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

}  // namespace

SegmentImpl::~SegmentImpl() {
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

void SegmentImpl::check_fork() const {
  if (getpid() != attach_pid)
    fail(ErrorCode::kBusy, "segment '" + name +
                               "': this Segment was inherited across fork(); an attachment belongs to the "
                               "process that made it: call Segment::open(\"" + name + "\") in the child");
}

// ---- liveness ------------------------------------------------------------
bool SegmentImpl::slot_locked_by_other(uint32_t s) const noexcept {
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kLockBase + s);
  fl.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive (safe side)
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

void SegmentImpl::claim_slot() {
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

// Smallest quiescent epoch over live attachments (UINT64_MAX when none).
uint64_t SegmentImpl::min_live_epoch() const noexcept {
  uint64_t m = UINT64_MAX;
  RegistrySlot* r = registry();
  for (uint32_t s = 0; s < kRegistrySlots; ++s) {
    if (load_acquire(&r[s].state) != kSlotAttached) continue;
    if (!slot_alive(s)) continue;
    m = std::min(m, load_acquire(&r[s].quiescent_epoch));  // acquire: pairs with quiesce()'s release
  }
  return m;
}

// ---- attach ----------------------------------------------------------------
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

void SegmentImpl::finish_attach() {
  attach_pid = getpid();
  dir_capacity = hdr()->directory_capacity;
  lay = compute_layout(dir_capacity);  // equal to the header's offsets (validated by open / written by create)
  reinit_after_reboot_if_needed();
  claim_slot();
  track_fd(fd);
}

}  // namespace shmfilter::internal
