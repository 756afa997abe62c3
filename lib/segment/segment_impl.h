// lib/segment/segment_impl.h: SegmentImpl, one attachment of a segment, and
// the helpers every subsystem of lib/segment shares.
//
// The state is one struct (an attachment: fd, mapping, registry slot, the
// holding thread's transaction state); its methods live with their subsystem:
//   mapping.cpp    create/open the backing object, map it, grow/shrink it
//   registry.cpp   registry slots, OFD-lock liveness, quiescence, fork, reboot
//   lock_file.cpp  the writers-only lock file that holds the registry's OFD locks
//   txn.cpp        robust control lock, undo log, recovery, ControlTxn
//   allocator.cpp  extents, free table, quarantine
//   directory.cpp  lock-free lookups, publish (create_region), drop
//   self_check.cpp the segment's own part of Segment::check
//   extent_index.cpp the extents the allocator's walk reaches (ownership, lib/segment/extents.h)
// Bytes in shared memory: layout.h. Internal to lib/segment (and lib/check's
// Segment::check through self_check.h); nothing above may include it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "segment/layout.h"
#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

inline constexpr uint64_t kPage = 4096;

[[noreturn]] inline void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

inline std::string errno_text(int e) { return std::string(strerror(e)) + " (errno " + std::to_string(e) + ")"; }

inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Offsets of the segment's tables for a directory of dir_capacity entries
// (the header stores them; open() checks that they match).
struct Layout {
  uint64_t undo_offset, free_offset, quarantine_offset, registry_offset, directory_offset, data_offset;
};

inline Layout compute_layout(uint32_t dir_capacity) {
  Layout l{};
  l.undo_offset = round_up(sizeof(Header), kPage);
  l.free_offset = round_up(l.undo_offset + uint64_t{kUndoCapacity} * sizeof(UndoEntry), 64);
  l.quarantine_offset = round_up(l.free_offset + uint64_t{kFreeCapacity} * sizeof(FreeExtent), 64);
  l.registry_offset = round_up(l.quarantine_offset + uint64_t{kQuarantineCapacity} * sizeof(QuarantineEntry), 64);
  l.directory_offset = round_up(l.registry_offset + uint64_t{kRegistrySlots} * sizeof(RegistrySlot), 64);
  l.data_offset = round_up(l.directory_offset + uint64_t{dir_capacity} * sizeof(DirEntry), kPage);
  return l;
}

// ---- mapping.cpp: names, paths, the backing object ------------------------------
void validate_segment_name(std::string_view name);
// Bytes a name may pass kMaxSegmentNameLength by in this thread: a restore's temporary
// NAME.restoring-PID of a NAME at the limit (lib/ops/snapshot.cpp). 0 otherwise.
extern thread_local size_t t_segment_name_slack;
std::string backing_path(std::string_view name, const std::string& file);
std::string parent_dir(const std::string& path);
ErrorCode open_errno_code(int e);
std::string what_it_is(std::string_view name, const std::string& path);
// posix_fallocate that reports a file-size limit as EFBIG (never SIGXFSZ) and retries EINTR.
int allocate_file_range(int fd, uint64_t offset, uint64_t len) noexcept;
struct SegmentImpl;
// The bodies of Segment::create / Segment::open: a new attachment, mapped and registered.
std::shared_ptr<SegmentImpl> create_segment(std::string_view name, const CreateOptions& options);
std::shared_ptr<SegmentImpl> open_segment(std::string_view name, const OpenOptions& options);
// PATH.creating.* files of creators that died before linking (no flock held),
// ours; removed when REMOVE. Returns their paths.
std::vector<std::string> creating_leftovers(const std::string& path, bool remove);

// ---- registry.cpp ----------------------------------------------------------------
uint64_t now_unix_ns();
// How many fork()s this process descends from since its first attach (cheap:
// a relaxed load). An attachment whose fork_generation differs was inherited.
uint64_t fork_generation_now() noexcept;
std::string read_boot_id();  // this boot's id, at most 39 bytes ("" without /proc)

// ---- lock_file.cpp: PATH.lock-<16 hex>, the registry's OFD locks (version 2) --------
std::string lock_file_path(const std::string& segment_path, uint64_t lock_id);
uint64_t new_lock_id();                                // random, nonzero
uint32_t lock_file_mode(uint32_t segment_mode) noexcept;  // rw for each class that may write the segment
bool set_creator_lock(int fd, bool on) noexcept;     // the creator byte (kCreatorLockByte)
bool lock_file_in_use(int fd) noexcept;              // any lock in the creator/registry range
// Lock files of the segment at SEGMENT_PATH other than KEEP_ID's, ours, with
// no user left (removed when REMOVE). Returns their paths.
std::vector<std::string> lock_file_leftovers(const std::string& segment_path, uint64_t keep_id, bool remove);
uint64_t read_lock_id(const std::string& segment_path) noexcept;
// PATH.restoring-<pid> segments no live process is attached to (a restore
// that died before its rename), ours; removed with their lock file when REMOVE.
std::vector<std::string> restoring_leftovers(const std::string& path, bool remove);  // 0: none / version 1 / unreadable

// ---- directory.cpp ---------------------------------------------------------------
void validate_structure_name(std::string_view name);

struct SegmentImpl {
  std::string name;
  std::string path;
  int fd = -1;
  // Where the registry's OFD locks live: the lock file (version 2), or fd
  // itself (version 1); -1 in a read-only attachment that may not open the
  // lock file (liveness unknown: every slot answers "alive", the safe side).
  int lock_fd = -1;
  std::string lock_path;           // "" for version 1
  bool lock_file_created = false;  // this attachment created it: its creator byte is locked until the claim
  bool read_only = false;          // OpenOptions::read_only: O_RDONLY, PROT_READ, no registry slot
  std::byte* base = nullptr;
  uint64_t map_size = 0;
  bool huge_requested = false;  // CreateOptions/OpenOptions::huge_pages (this process's mapping)
  int huge_advise_errno = -1;   // -1: not asked; 0: madvise(MADV_HUGEPAGE) succeeded; else its errno
  pid_t attach_pid = 0;
  uint64_t fork_generation = 0;  // fork_generation_now() at attach
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
  // Process-local: nonzero while this attachment restores into the segment (restore --into):
  // create_region then makes kEntryStaged entries of this stager token, visible to this
  // attachment only until publish_staged (docs/save-restore.md).
  uint64_t staging = 0;

  SegmentImpl() = default;
  SegmentImpl(const SegmentImpl&) = delete;
  SegmentImpl& operator=(const SegmentImpl&) = delete;
  ~SegmentImpl();  // registry.cpp: frees the slot, unmaps, closes (drops the OFD lock)

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

  // ---- mapping.cpp -----------------------------------------------------------
  int reopen_for_map() const;
  // ---- lock_file.cpp -----------------------------------------------------------
  void create_lock_file_for(uint64_t lock_id, uint32_t segment_mode, int64_t gid);
  void open_lock_file(uint64_t lock_id, const struct stat& seg, int64_t trusted_owner);
  // kReadOnly naming WHAT when this attachment is read-only.
  void require_writable(const char* what) const;
  void map(uint64_t max_size);
  void resize(uint64_t new_size);

  // ---- registry.cpp: liveness, quiescence, attach -------------------------------
  void check_fork() const;
  bool slot_locked_by_other(uint32_t s) const noexcept;
  bool slot_alive(uint32_t s) const noexcept;
  bool token_alive(uint64_t tok) const noexcept;
  void quiesce() noexcept;
  bool enter_call() noexcept;  // announce a call in flight; false: nothing announced (no slot of ours)
  void exit_call() noexcept;   // after enter_call() returned true
  uint64_t slot_epoch(uint32_t s) const noexcept;
  void claim_slot();
  uint64_t min_live_epoch() const noexcept;
  void reinit_after_reboot_if_needed();
  bool nobody_attached() const noexcept;
  void reinit_unattended_lock_if_needed();
  void finish_attach();

  // ---- txn.cpp: control lock, undo log -------------------------------------------
  uint64_t file_length() const noexcept;  // the backing file's size now (fstat), at most map_size
  bool undo_target_ok(uint64_t off, uint32_t width, uint64_t limit) const noexcept;
  void apply_undo(const UndoEntry& e, uint64_t limit) noexcept;
  void stamp_pending_epochs() noexcept;
  uint64_t settle_locked(bool* forward = nullptr) noexcept;
  void rollback_to(uint64_t mark) noexcept;
  void lock_control();
  void unlock_control() noexcept;
  void logged_store(void* field, uint32_t width, uint64_t value, uint32_t flags = 0);
  void log64(uint64_t* f, uint64_t v) { logged_store(f, 8, v); }
  void commit_store(uint64_t* f, uint64_t v);
  void log32(uint32_t* f, uint32_t v) { logged_store(f, 4, v); }
  // Runs fn as one transaction under the control lock (nested: a savepoint of the enclosing one).
  void run_txn(const std::function<void()>& fn);
  void require_data(const void* field, uint32_t width) const;
  void require_txn() const;

  // ---- allocator.cpp (under the control lock) ------------------------------------
  void grow_backing(uint64_t want);
  void remove_free(uint32_t j);
  void remove_quarantine(uint32_t j);
  void insert_free(uint64_t off, uint64_t size);
  uint32_t reclaim_quarantine();
  bool span_ok(uint64_t off, uint64_t size) const noexcept;
  uint64_t take_free(uint64_t need);
  uint64_t allocate(uint64_t bytes, bool zero = true);
  ExtentHeader* extent_of(uint64_t payload) const;
  void free_extent(uint64_t payload);

  // ---- directory.cpp ---------------------------------------------------------------
  uint64_t next_generation() noexcept;
  bool read_entry(uint32_t i, RegionInfo& out, uint64_t* hash_out = nullptr) const;
  std::optional<RegionInfo> find(std::string_view nm) const;
  bool region_in_bounds(const RegionInfo& info) const noexcept;
  std::vector<RegionInfo> list() const;
  RegionInfo create_region(Segment& seg, std::string_view nm, Kind kind, uint64_t bytes,
                           const std::function<void(std::byte*, uint64_t, ControlTxn&)>& init);
  bool drop(Segment& seg, std::string_view nm, const std::function<void(std::byte*, uint64_t, ControlTxn&)>& on_drop);
  // Staged entries (restore --into): visible to their stager, and to everyone once being published.
  bool staged_visible(uint64_t stager) const noexcept;
  // Publishes every staged entry of STAGER in one transaction (one commit store of
  // Header::publishing); kExists, nothing published, when a live entry took one of their names.
  uint32_t publish_staged(Segment& seg, uint64_t stager, const std::string& target);
  // After publish_staged's commit store (and by recovery): the entries become plain live ones.
  void finish_publish() noexcept;
  // Removes staged entries by identity, with every extent they own: STAGER's (0: those of
  // dead stagers). Small transactions; a death between them leaves entries the next call takes.
  uint32_t drop_staged(Segment& seg, uint64_t stager);

  // ---- self_check.cpp ----------------------------------------------------------------
  std::vector<RegionInfo> check_own(Segment& seg, bool repair, CheckReport& report);

  // ---- extent_index.cpp: ownership proved against the allocator's own walk ------------
  // The extents the allocator's walk reaches (check's walk: from data_offset to top, past the
  // free and quarantine tables' spans, each extent ending where the next one or a span starts),
  // built once per control-plane transaction of any process (keyed by Header::txn_serial) and
  // kept up to date by this attachment's own allocate / free. Every region a structure opens
  // and every table a structure follows must be one of them (docs/SECURITY.md rule 1): so no
  // two live extents overlap, whatever an extent header or a table entry says.
  struct ExtentIndex {
    bool valid = false;
    uint64_t serial = 0;                             // Header::txn_serial it was built at
    std::vector<std::pair<uint64_t, uint64_t>> ext;  // (start, size) of each allocated extent reached, sorted
    std::string problem;                             // why the walk stopped before top ("" when it reached top)
  };
  mutable std::mutex index_mu;  // guards index (threads of this process)
  mutable ExtentIndex index;
  // One walk of the allocator's extents into OUT (lock-free: the caller decides whether it is consistent).
  void walk_index(ExtentIndex& out) const;
  // The size of the allocated extent starting at EXT (its ExtentHeader) when the allocator's walk
  // reaches one there; 0 otherwise (*problem, if given, says why the walk fell short, if it did).
  uint64_t reached_extent(uint64_t ext, std::string* problem = nullptr) const;
  bool holding_txn() const noexcept;           // this thread runs a transaction of this attachment
  void index_serial_bumped(uint64_t old_serial) noexcept;  // run_txn: nothing changed since old_serial
  void index_allocated(uint64_t ext, uint64_t size) noexcept;  // allocate(): the walk reaches it now
  void index_freed(uint64_t ext) noexcept;                     // free_extent(): it is a quarantined span now
  void index_invalidate() noexcept;                            // rollback / recovery: rebuild on next use
};

// lib/segment/extents.h's region_extent_problem for the segment's own checks.
std::string region_extent_problem(const SegmentImpl& im, const RegionInfo& region);

}  // namespace shmfilter::internal
