// lib/segment/txn.cpp: control-plane transactions.
//
// One ROBUST process-shared mutex (robust_mutex.h) serialises the control
// plane; every store a transaction makes is undo-logged first, so the next
// locker after a holder's death settles it (rolls it back, or completes it
// past its commit point). Also ControlTxn, the structures' view of a transaction.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/wait_stats.h"
#include "base/kill_point.h"
#include "segment/robust_mutex.h"
#include "segment/segment_impl.h"

namespace shmfilter {
namespace internal {
namespace {

constexpr uint32_t kLockTimeoutMs = 30000;  // a LIVE holder keeping the control lock longer is reported

thread_local const SegmentImpl* t_txn_impl = nullptr;  // the attachment whose txn this thread runs

}  // namespace

// The bytes a replayed undo entry may write: only where logged_store ever
// writes (the header's allocator words, the free and quarantine tables, the
// directory and the data area), only inside the FILE as the kernel sizes it
// (never the header's own `size` or the reservation, which a corrupt or
// crafted segment controls: a store past the file's end is a SIGBUS), aligned.
uint64_t SegmentImpl::file_length() const noexcept {
  struct stat st{};
  if (fstat(fd, &st) != 0 || st.st_size < 0) return 0;
  return std::min<uint64_t>(static_cast<uint64_t>(st.st_size), map_size);
}

bool SegmentImpl::undo_target_ok(uint64_t off, uint32_t w, uint64_t limit) const noexcept {
  if ((w != 4 && w != 8) || off % w != 0 || off > limit || w > limit - off) return false;
  const uint64_t hdr_lo = offsetof(Header, top), hdr_hi = offsetof(Header, quarantine_count) + sizeof(uint32_t);
  if (off >= hdr_lo && off + w <= hdr_hi) return true;
  if (off == offsetof(Header, publishing) && w == 8) return true;  // publish_staged's commit point
  if (off >= lay.free_offset && off + w <= lay.registry_offset) return true;  // free + quarantine tables
  return off >= lay.directory_offset;                                           // directory, data area
}

void SegmentImpl::apply_undo(const UndoEntry& e, uint64_t limit) noexcept {
  uint64_t off = load_relaxed(&e.offset);
  uint32_t w = load_relaxed(&e.width);
  uint64_t old = load_relaxed(&e.old);
  if (!undo_target_ok(off, w, limit)) return;  // corrupt entry: never write outside (check reports the damage)
  if (w == 8)
    store_release(at<uint64_t>(off), old);
  else
    store_release(at<uint32_t>(off), static_cast<uint32_t>(old));
}

// Stamps the quarantine entries this transaction added (epoch kPendingEpoch)
// with a fresh epoch. Runs after the transaction's last visible store, so a
// process that quiesces at that epoch can no longer find what was freed.
// Unlogged: only entries of this transaction carry kPendingEpoch.
void SegmentImpl::stamp_pending_epochs() noexcept {
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
uint64_t SegmentImpl::settle_locked(bool* forward) noexcept {
  Header* h = hdr();
  index_invalidate();  // a dead holder's (or our own failed) allocations and frees are undone or completed
  uint64_t n = std::min<uint64_t>(load_acquire(&h->undo_count), kUndoCapacity);
  bool fwd = n > 0 && (load_relaxed(&undo()[n - 1].flags) & kUndoCommitPoint) != 0;
  const uint64_t limit = n > 0 ? file_length() : 0;
  if (fwd) {
    const UndoEntry& e = undo()[n - 1];
    uint64_t off = load_relaxed(&e.offset);
    if (load_relaxed(&e.width) == 8 && undo_target_ok(off, 8, limit))
      store_release(at<uint64_t>(off), load_relaxed(&e.value));
    SHMF_KILL_POINT("segment.recovery.mid_undo");
    finish_publish();  // a publish_staged past its commit point: its entries become live (idempotent)
    stamp_pending_epochs();
  } else {
    uint64_t applied = 0;
    for (uint64_t i = n; i-- > 0;) {
      apply_undo(undo()[i], limit);
      if (++applied == (n + 1) / 2) SHMF_KILL_POINT("segment.recovery.mid_undo");
    }
  }
  store_release(&h->undo_count, uint64_t{0});
  if (forward != nullptr) *forward = fwd;
  return n;
}

// Undoes the entries above `mark` (nested savepoint), newest first.
void SegmentImpl::rollback_to(uint64_t mark) noexcept {
  Header* h = hdr();
  index_invalidate();  // undone stores may have been allocations or frees
  uint64_t n = std::min<uint64_t>(h->undo_count, kUndoCapacity);
  const uint64_t limit = n > mark ? file_length() : 0;
  for (uint64_t i = n; i-- > mark;) apply_undo(undo()[i], limit);
  store_release(&h->undo_count, std::min(mark, n));
}

void SegmentImpl::lock_control() {
  if (!robust_mutex_kind_ok(&hdr()->mutex))  // glibc would abort (PI bit) or misbehave on a foreign kind
    fail(ErrorCode::kCorrupt, "segment '" + name + "': the control lock's bytes are corrupt (mutex kind " +
                                  std::to_string(hdr()->mutex.__data.__kind) +
                                  "): detach every process (shmtool dump " + name +
                                  " lists them); the next open re-initialises the lock when nobody is attached");
  int err = 0;
  LockResult r;
  {
    SlowWait wait("control lock");
    wait.start();
    r = robust_mutex_lock(&hdr()->mutex, kLockTimeoutMs, &err);
  }
  if (r == LockResult::kTimedOut) note_wait_expired("control lock");
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

void SegmentImpl::unlock_control() noexcept {
  store_relaxed(&hdr()->holder_token, uint64_t{0});
  store_relaxed(&hdr()->holder_pid, uint64_t{0});
  robust_mutex_unlock(&hdr()->mutex);
}

void SegmentImpl::logged_store(void* field, uint32_t width, uint64_t value, uint32_t flags) {
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

// The store that makes an outermost create/drop visible to lock-free readers,
// and its linearization point: once it is logged, recovery completes the
// transaction instead of undoing it. Must be the transaction's last logged
// store. Nested in a larger transact() it is an ordinary logged store (the
// enclosing transaction decides).
void SegmentImpl::commit_store(uint64_t* f, uint64_t v) {
  if (txn_depth != 1) {
    log64(f, v);
    return;
  }
  logged_store(f, 8, v, kUndoCommitPoint);
  commit_reached = true;
}

bool SegmentImpl::holding_txn() const noexcept { return t_txn_impl == this; }

void SegmentImpl::run_txn(const std::function<void()>& fn) {
  check_fork();
  require_writable("a control-plane transaction (create, drop, resize, grow, repair)");
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
  index_serial_bumped(hdr()->txn_serial - 1);  // the extent index stays current (extent_index.cpp)
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
void SegmentImpl::require_data(const void* field, uint32_t width) const {
  auto* p = static_cast<const std::byte*>(field);
  Header* h = hdr();
  if (p < base + lay.data_offset || p + width > base + h->top)
    fail(ErrorCode::kInvalidArgument, "segment '" + name +
                                          "': ControlTxn::store to an address outside the allocated space "
                                          "(a field of a structure region is expected)");
}

void SegmentImpl::require_txn() const {
  if (t_txn_impl != this)
    fail(ErrorCode::kBusy, "segment '" + name + "': ControlTxn used outside its transaction");
}

}  // namespace internal

// ---- ControlTxn ----------------------------------------------------------------------


uint64_t ControlTxn::allocate(uint64_t bytes) { return segment_->impl()->allocate(bytes); }
uint64_t ControlTxn::allocate_unzeroed(uint64_t bytes) { return segment_->impl()->allocate(bytes, false); }
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

}  // namespace shmfilter
