// shmfilter/segment.hpp: one memory-mapped segment shared by every process on a host.
//
// A segment is a POSIX shared-memory object (/dev/shm/NAME) or a regular file.
// Each process maps a reserved maximum once, so offsets never move; the
// backing object grows underneath (ftruncate + posix_fallocate), so a full
// /dev/shm is a kNoSpace error when space is requested, never a SIGBUS later.
// Everything inside is addressed by offset from base().
//
// Inside: a header, a process registry (liveness of attached processes, known
// from OFD locks the kernel drops when a process dies, never from bare pids),
// a directory of named structures (lock-free lookups), and a region allocator.
// Control-plane work (create/drop/allocate/resize) runs under one ROBUST
// process-shared mutex with an undo log: if a holder dies mid-operation the
// next locker rolls the operation back and carries on. See docs/FORMAT.md and
// docs/CONCURRENCY.md.
//
// Fork: an attachment belongs to the process that made it. A child created by
// fork() must call Segment::open() itself (the registry slot and its lock are
// per attachment); a Segment object inherited across fork throws kForked on
// control-plane use, and the data-plane writers of its handles answer kForked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/error.hpp"

namespace shmfilter {

namespace internal {
struct SegmentImpl;  // lib/segment/segment_impl.h
}

// Kinds of named structures. Values are part of the on-disk format.
enum class Kind : uint32_t {
  kNone = 0,
  kBloom = 1,
  kCuckoo = 2,
  kRoaring = 3,
  kHll = 4,
  kExactSet = 5,
  kBlob = 6,  // raw bytes (tests, the demo's bookkeeping)
  kWindow = 7,  // (space, item) pairs over time buckets (window.hpp)
  kUv = 8,      // distinct-count sketches per (space, time bucket) (uv.hpp)
};
// The highest kind this build knows: a directory entry above it was written by a
// newer build (or is corrupt). Move it when a kind is added.
inline constexpr Kind kLastKind = Kind::kUv;
std::string_view kind_name(Kind kind) noexcept;  // "bloom", "cuckoo", ...

inline constexpr size_t kMaxSegmentNameLength = 200;   // bytes, without the leading '/'
inline constexpr size_t kMaxStructureNameLength = 63;  // bytes, any byte except NUL

struct CreateOptions {
  uint64_t size = 64ull << 20;          // initial backing size (rounded up to a page)
  uint64_t max_size = 64ull << 30;      // reserved address space; the segment may grow to this
  uint32_t directory_capacity = 4096;   // named structures (8,000 plans x 7 days needs 65536)
  std::string file;                     // non-empty: back by this regular file, not /dev/shm
  uint32_t mode = 0600;                 // permission bits of the backing object
  int64_t group = -1;                   // >= 0: chown to this gid (use mode 0660 to share)
  bool huge_pages = false;              // this process's mapping: madvise(MADV_HUGEPAGE) (docs/huge-pages.md)
};

struct OpenOptions {
  std::string file;         // must match how the segment was created
  bool huge_pages = false;  // this process's mapping: madvise(MADV_HUGEPAGE) (docs/huge-pages.md)
  // Trust rule (docs/SECURITY.md): open() attaches only a regular file, never
  // through a symbolic link, owned by this process's effective uid or by root;
  // anything else fails with kPermission, because whoever owns the file can
  // hand us crafted bytes. Set this to a uid to trust that owner as well.
  int64_t trusted_owner = -1;
  // Inspection only (docs/SECURITY.md): the file is opened O_RDONLY and mapped
  // PROT_READ, no registry slot is claimed and no lock is taken, so a user
  // with read permission only can list, dump, check (without repair), and
  // query structures (contains/seen/stats). Every write, control plane or
  // data plane, fails with kReadOnly (data-plane calls return their
  // "not done" status: see each handle). Liveness of other processes is
  // reported only when the lock file can be opened too (else "alive").
  bool read_only = false;
};

// How much of this process's mapping of the segment is on huge pages, from
// /proc/self/smaps (docs/huge-pages.md). A per-process view: each attachment
// advises its own mapping.
struct HugePageStats {
  bool requested = false;      // huge_pages was set on create/open
  bool advised = false;        // madvise(MADV_HUGEPAGE) succeeded on the mapping
  int advise_errno = 0;        // its errno when it failed (EINVAL: kernel without THP)
  bool smaps_read = false;     // the mapping was found in /proc/self/smaps
  uint64_t resident_bytes = 0; // Rss of the mapping
  uint64_t huge_bytes = 0;     // of it, mapped by huge pages (ShmemPmdMapped + FilePmdMapped + AnonHugePages)
  std::string shmem_enabled;   // /sys/kernel/mm/transparent_hugepage/shmem_enabled, the selected [mode]
  std::string note;            // what to do when huge_bytes is 0 although requested
};

// A named structure as the directory describes it.
struct RegionInfo {
  std::string name;
  Kind kind = Kind::kNone;
  uint64_t offset = 0;      // from base()
  uint64_t size = 0;        // bytes
  uint32_t slot = 0;        // directory slot
  uint32_t generation = 0;  // changes when the slot is dropped or reused
};

struct ProcessInfo {
  uint32_t slot = 0;
  int32_t pid = 0;            // informational only: liveness never trusts it
  uint64_t token = 0;         // owner token of that attachment
  bool alive = false;         // from the kernel (OFD lock held), not from kill(pid, 0)
  uint64_t attached_unix_ns = 0;
};

struct SegmentStats {
  uint64_t size = 0;            // backing bytes now
  uint64_t max_size = 0;        // reservation
  uint64_t used_bytes = 0;      // allocated to live regions
  uint64_t free_bytes = 0;      // free inside size (holes + tail)
  uint64_t quarantined_bytes = 0;
  uint64_t largest_free = 0;    // largest allocatable extent without growth
  uint32_t free_extents = 0;    // holes: fragmentation indicator
  uint32_t structures = 0;
  uint32_t directory_capacity = 0;
  uint32_t processes_alive = 0;
  uint32_t format_version = 0;
};

// One finding of Segment::check().
struct CheckFinding {
  std::string where;     // "header", "directory[12] 'freq:1:2026-11-30'", "allocator", ...
  std::string problem;   // what is wrong
  bool repaired = false; // --repair fixed it
};
struct CheckReport {
  std::vector<CheckFinding> findings;
  bool consistent() const {
    for (const auto& f : findings)
      if (!f.repaired) return false;
    return true;
  }
};

class Segment;

// A control-plane transaction: runs under the segment's robust lock. Every
// write made through it is undo-logged, so if this process dies before the
// transaction returns, the next locker rolls all of it back (allocations
// included). Writes to memory allocated inside the same transaction need no
// logging: rolling back the allocation makes them unreachable. Exception: an
// outermost create_region/drop whose directory store (its last step, the one
// lock-free readers see) was made is completed instead, so what a reader saw
// stays true. Freed memory becomes reusable only after the transaction
// commits and no call that was in flight at the commit is still in flight
// (docs/CONCURRENCY.md "Reader announcements").
class ControlTxn {
 public:
  // Allocates `bytes` (rounded up to 64) of zeroed memory, 64-byte aligned,
  // growing the backing object if needed. Throws kNoSpace.
  uint64_t allocate(uint64_t bytes);
  // Like allocate(), but the payload keeps whatever a freed extent left there (fresh
  // space is zero): for a caller that zeroes a large extent itself in bounded chunks
  // before anything reads it (the Window's spare tables).
  uint64_t allocate_unzeroed(uint64_t bytes);
  // Frees an extent allocated earlier. The memory is quarantined until no
  // library call (or ReadGuard) of a live process that began before the commit
  // is still in flight, then reused.
  void free(uint64_t offset);
  // Charges the allocations made after this call in this transaction to
  // `region` (create_region's init already charges to the new region): once
  // that region is dropped, check() reports any of them not freed as leaked.
  // Without it, allocations in transact() are unattributed and only the
  // structure's own checker can account for them.
  void charge_to(const RegionInfo& region);
  // Logged stores to a field inside the segment (release order).
  void store_u64(uint64_t* field, uint64_t value);
  void store_u32(uint32_t* field, uint32_t value);
  std::byte* base() const noexcept;
  Segment& segment() noexcept { return *segment_; }

 private:
  friend struct internal::SegmentImpl;
  friend class Segment;
  explicit ControlTxn(Segment* s) : segment_(s) {}
  Segment* segment_;
};

// Thin, copyable handle to one attachment (copies share it). Thread-safe.
class Segment {
 public:
  // Control plane. All throw Error.
  static Segment create(std::string_view name, const CreateOptions& options = {});
  static Segment open(std::string_view name, const OpenOptions& options = {});
  // Opens NAME, or creates it if absent; of several racing callers exactly one creates.
  static Segment open_or_create(std::string_view name, const CreateOptions& options = {});
  // Removes the name; attached processes keep their mapping. False if absent.
  static bool remove(std::string_view name, const OpenOptions& options = {});
  static bool exists(std::string_view name, const OpenOptions& options = {});

  Segment() = default;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

  const std::string& name() const;
  std::byte* base() const noexcept;      // lock-free, any thread; stable for the attachment's life
  uint64_t size() const noexcept;        // current backing size (acquire load)
  SegmentStats stats() const;            // lock-free snapshot (may be slightly stale)
  // Reads /proc/self/smaps (a few hundred us): not for the data plane. Never throws.
  HugePageStats huge_page_stats() const;

  // ---- directory ---------------------------------------------------------
  // Lock-free, any process.
  std::optional<RegionInfo> find(std::string_view name) const;
  // find() that throws kNotFound / kWrongKind with a message naming both kinds.
  RegionInfo open_region(std::string_view name, Kind kind) const;
  std::vector<RegionInfo> list() const;
  // True while the slot still holds the same generation (not dropped). Lock-free, noexcept.
  bool region_live(uint32_t slot, uint32_t generation) const noexcept;

  // Control plane: creates a named region of `bytes` zeroed bytes, runs `init`
  // on it under the lock, then publishes the directory entry with one release
  // store. Throws kExists / kNameTooLong / kNoSpace / kFull (directory).
  // If init throws, nothing is published and the memory is freed.
  RegionInfo create_region(std::string_view name, Kind kind, uint64_t bytes,
                           const std::function<void(std::byte* region, uint64_t bytes, ControlTxn& txn)>& init);
  // Control plane: unpublishes and frees (quarantined). Handles to it then see kDropped.
  // `on_drop` runs under the lock first, to free the structure's extra extents.
  bool drop(std::string_view name,
            const std::function<void(std::byte* region, uint64_t bytes, ControlTxn& txn)>& on_drop = {});
  // Control plane: runs fn under the robust lock as one undo-logged transaction.
  void transact(const std::function<void(ControlTxn& txn)>& fn);
  // Control plane: grow (online) or shrink (only a free tail) the backing object.
  void resize(uint64_t new_size);

  // ---- processes -------------------------------------------------------------
  // This attachment's owner token: nonzero, unique among attachments ever made
  // on this segment (slot + incarnation). Store it in lock words. 0 in a child
  // of fork() that inherited this Segment (the token is the parent's): data-plane
  // writers that take lock words refuse then (kForked).
  uint64_t owner_token() const noexcept;
  // Lock-free: is the attachment that owns `token` still attached and alive?
  // Answered from the kernel's OFD lock on its registry slot, so a reused pid
  // cannot fool it. Token 0 is never alive.
  bool token_alive(uint64_t token) const noexcept;
  std::vector<ProcessInfo> processes() const;
  // Marks a quiescent point of this process: it holds no pointer into memory
  // freed before now. Only segments shared with a build that predates reader
  // announcements need it (such a build's processes hold reclamation back until
  // they pass one); with this build, a process holds memory back only while one
  // of its calls (or a ReadGuard) is in flight (docs/CONCURRENCY.md). Cheap.
  void quiesce() noexcept;

  // ---- integrity -------------------------------------------------------------
  // Validates the header, registry, directory, allocator (no overlap, no leak)
  // and every structure's invariants; with repair, fixes what it can.
  // Safe to run while other processes work.
  CheckReport check(bool repair = false);

  // True for an attachment opened with OpenOptions::read_only. Lock-free.
  bool read_only() const noexcept;

  internal::SegmentImpl* impl() const noexcept { return impl_.get(); }

 private:
  explicit Segment(std::shared_ptr<internal::SegmentImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<internal::SegmentImpl> impl_;
};

// A call in flight on this attachment (docs/CONCURRENCY.md "Reader announcements").
// While one exists, no extent freed after its construction is reused, by any process;
// once every ReadGuard of a process is gone, that process holds no memory back. Every
// data-plane call of the library holds one for its duration (nested ones are cheap:
// one CAS and one fetch_sub on this attachment's own registry line). Hold one yourself
// around any use of offsets or pointers into the segment that you read outside a
// library call (Segment::base() plus a RegionInfo's offset): they are valid only
// while the guard that was live when you read them is. Any thread; nests; noexcept.
// Nothing is announced for a read-only attachment (it claims no registry slot) or an
// attachment inherited across fork() (the slot is the parent's): open the segment in
// the process that reads it. The Segment must outlive the guard, and the guards of one
// thread end in the reverse order of their start (as scoped objects do): a guard nested
// in another of the same thread and attachment joins it without touching shared memory.
class ReadGuard {
 public:
  explicit ReadGuard(const Segment& segment) noexcept;
  ~ReadGuard();
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;

 private:
  internal::SegmentImpl* impl_ = nullptr;  // null: nothing announced
  uint8_t role_ = 0;                       // lib/segment/segment.cpp: how the destructor undoes it
};

// Parses "2GiB", "512MiB", "64k", "1.5G", "4096" into bytes. Throws kInvalidArgument. (lib/base/text.cpp)
uint64_t parse_size(std::string_view text);
// Formats bytes as "1.50 GiB".
std::string format_size(uint64_t bytes);

}  // namespace shmfilter
