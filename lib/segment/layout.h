// lib/segment/layout.h: every struct the segment itself keeps in shared memory.
//
// The byte layout is the on-disk format (docs/FORMAT.md). Rules:
//  - fixed-width fields only; no pointers, only offsets from the segment base;
//  - every field says who writes it and under which protocol;
//  - the ABI descriptor (sizes/alignments below) is written at creation and
//    compared on open, so a build with other layouts refuses to attach.
// Shared words touched by more than one process at once are accessed only
// through the __atomic builtins in the helpers at the end (never plain loads).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace shmfilter::internal {

// "SHMFILT1" read as a native little-endian u64: a big-endian reader sees
// the byte-swapped value, which is how kForeignByteOrder is told apart from
// kNotASegment.
inline constexpr uint64_t kMagic = 0x31544c49464d4853ull;  // bytes 'S','H','M','F','I','L','T','1'
inline constexpr uint64_t kMagicSwapped = __builtin_bswap64(kMagic);
// Version 2 added the writers-only lock file (Header::lock_id, docs/SECURITY.md
// rule 5). Version 1 segments still open: their registry locks live on the
// segment file itself, as before (a build that reads only version 1 refuses
// version 2, so the two locking schemes never share one segment).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kFormatVersionLegacyLocks = 1;
inline constexpr uint32_t kCacheLine = 64;

inline constexpr uint32_t kUndoCapacity = 8192;        // logged stores per transaction
inline constexpr uint32_t kFreeCapacity = 8192;        // free extents (holes) tracked
inline constexpr uint32_t kQuarantineCapacity = 4096;  // freed, not yet reusable extents
inline constexpr uint32_t kRegistrySlots = 1024;       // attached processes at once
inline constexpr uint32_t kMinDirectoryCapacity = 16;
inline constexpr uint32_t kMaxDirectoryCapacity = 1u << 22;
inline constexpr uint64_t kMaxReservation = 1ull << 46;  // 64 TiB of address space
inline constexpr uint64_t kLockBase = 1ull << 40;       // OFD lock byte of registry slot s: kLockBase + s
// OFD write lock held by a creator on its new lock file from creating it until
// its registry slot is locked: a lock file with no lock in
// [kCreatorLockByte, kLockBase + kRegistrySlots) has no live user.
inline constexpr uint64_t kCreatorLockByte = kLockBase - 1;
inline constexpr uint64_t kDirectorySeed = 0x5348'4d46'4449'5231ull;  // hash seed of directory names
inline constexpr uint32_t kExtentMagic = 0x31545845u;  // "EXT1"

// Directory entry states (low 32 bits of DirEntry::state_gen).
inline constexpr uint32_t kEntryEmpty = 0;      // never used: ends a probe chain
inline constexpr uint32_t kEntryLive = 1;       // published
inline constexpr uint32_t kEntryTombstone = 2;  // dropped: probe chains continue through it
// A restore's structure not yet published (restore --into, docs/save-restore.md):
// visible only to its stager (DirEntry::stager) until Header::publishing equals
// that token, when it is live for everyone; probe chains continue through it.
// One whose stager is dead is reclaimed by the next restore or check --repair.
inline constexpr uint32_t kEntryStaged = 3;

// Registry slot states.
inline constexpr uint32_t kSlotFree = 0;
inline constexpr uint32_t kSlotAttached = 1;

// Extent header states.
inline constexpr uint32_t kExtentAllocated = 1;
inline constexpr uint32_t kExtentQuarantined = 2;

// Sizes and alignments of every shared struct, plus the constants that fix
// table sizes. Written by the creator; compared field by field on open.
struct AbiDescriptor {
  uint32_t header_size;         // creator: sizeof(Header)
  uint32_t header_align;        // creator: alignof(Header)
  uint32_t dir_entry_size;      // creator: sizeof(DirEntry)
  uint32_t registry_slot_size;  // creator: sizeof(RegistrySlot)
  uint32_t undo_entry_size;     // creator: sizeof(UndoEntry)
  uint32_t free_extent_size;    // creator: sizeof(FreeExtent)
  uint32_t quarantine_size;     // creator: sizeof(QuarantineEntry)
  uint32_t extent_header_size;  // creator: sizeof(ExtentHeader)
  uint32_t mutex_size;          // creator: sizeof(pthread_mutex_t) (glibc ABI)
  uint32_t cache_line;          // creator: kCacheLine
  uint32_t undo_capacity;       // creator: kUndoCapacity
  uint32_t free_capacity;       // creator: kFreeCapacity
  uint32_t quarantine_capacity; // creator: kQuarantineCapacity
  uint32_t registry_slots;      // creator: kRegistrySlots
  uint32_t pointer_size;        // creator: sizeof(void*) (mutex internals)
  uint32_t reserved;            // creator: 0
};
static_assert(sizeof(AbiDescriptor) == 64, "AbiDescriptor is one cache line of u32s: keep it so the header layout is stable");

// One logged store: written by the transaction holder before the store it
// protects; read by whoever recovers (the next locker after EOWNERDEAD).
struct UndoEntry {
  uint64_t offset;  // holder: offset of the stored field from the base
  uint32_t width;   // holder: 4 or 8
  uint32_t flags;   // holder: kUndoCommitPoint on the store that makes a create/drop visible
  uint64_t old;     // holder: the value before the store (rollback)
  uint64_t value;   // holder: the value stored (roll forward past a commit point)
};
static_assert(sizeof(UndoEntry) == 32 && alignof(UndoEntry) == 8, "UndoEntry: four naturally aligned words");
inline constexpr uint32_t kUndoCommitPoint = 1;
// Epoch of a quarantine entry whose transaction has not committed yet (stamped at commit).
inline constexpr uint64_t kPendingEpoch = ~0ull;

// A hole in the allocated space (below top). Unsorted table; changed only
// by logged stores under the control lock.
struct FreeExtent {
  uint64_t offset;  // lock holder (logged): extent start
  uint64_t size;    // lock holder (logged): bytes, multiple of 64
};
static_assert(sizeof(FreeExtent) == 16, "FreeExtent: two u64");

// A freed extent that readers may still be using. Changed only by logged
// stores under the control lock.
struct QuarantineEntry {
  uint64_t offset;  // lock holder (logged): extent start (its ExtentHeader)
  uint64_t size;    // lock holder (logged): bytes including the header
  uint64_t epoch;   // lock holder (logged): kPendingEpoch until its transaction commits, then (unlogged)
                    // a fresh global epoch stamped after the transaction's last visible store
  uint64_t owner;   // lock holder (logged): owner of the extent when freed (diagnostics)
};
static_assert(sizeof(QuarantineEntry) == 32, "QuarantineEntry: four u64");

// In-band header of every allocated extent; the payload handed out starts
// 64 bytes after it. Lets check() walk the space below top and account every
// byte, and lets free() validate its argument.
struct alignas(64) ExtentHeader {
  uint32_t magic;     // allocator (unlogged: fresh memory of the allocating txn): kExtentMagic
  uint32_t state;     // allocator / free (logged): kExtentAllocated or kExtentQuarantined
  uint64_t size;      // allocator (unlogged, fresh): bytes including this header, multiple of 64
  uint64_t owner;     // allocator (unlogged, fresh): (generation << 32) | (directory slot + 1) of the
                      // structure that owns it, 0 unattributed
  uint64_t serial;    // allocator (unlogged, fresh): transaction serial that made it (diagnostics)
  uint64_t reserved[4];
};
static_assert(sizeof(ExtentHeader) == 64 && alignof(ExtentHeader) == 64,
              "ExtentHeader is one cache line so payloads stay 64-byte aligned");

// A directory entry. Published by one release store of state_gen; read
// lock-free seqlock-style (load state_gen, read fields, re-load state_gen).
struct alignas(64) DirEntry {
  uint64_t state_gen;  // lock holder: (generation << 32) | state. Publish/drop: logged release store;
                       // each publish and drop takes a fresh generation from Header::generation_counter
  uint64_t hash;       // lock holder (logged), only while the entry is not live: hash_key(name, kDirectorySeed)
  uint32_t kind;       // lock holder (logged), only while not live: Kind
  uint32_t name_len;   // lock holder (logged), only while not live: bytes of name, 1..63
  uint32_t reserved0;
  uint32_t reserved1;
  uint64_t offset;     // lock holder (logged), only while not live: region payload offset from base
  uint64_t size;       // lock holder (logged), only while not live: region bytes as requested
  uint64_t stager;     // lock holder (logged), only while not live: owner token of the restoring
                       // attachment of a kEntryStaged entry; 0 for entries made live by create_region
  uint64_t reserved3;
  uint64_t name[8];    // lock holder (logged), only while not live: name bytes, NUL padded (64 bytes)
};
static_assert(sizeof(DirEntry) == 128 && alignof(DirEntry) == 64, "DirEntry is two cache lines");
static_assert(offsetof(DirEntry, name) == 64, "the name is the second cache line of an entry");

// One attached process. A slot belongs to the attachment that holds the OFD
// write lock on byte kLockBase + slot of the segment's lock file (version 2:
// PATH.lock-<lock_id>, which only writers can open; version 1: the segment
// file itself); only that holder
// writes the slot (no control lock needed).
struct alignas(64) RegistrySlot {
  uint64_t incarnation;      // slot holder: atomically incremented on each claim; only grows
  uint64_t quiescent_epoch;  // slot holder: release store of the global epoch at each quiescent point
  uint64_t attached_unix_ns; // slot holder: at claim
  int32_t pid;               // slot holder: at claim (informational; liveness never trusts it)
  uint32_t state;            // slot holder: kSlotAttached at claim, kSlotFree at detach;
                             // check --repair frees slots whose lock is gone (dead owner)
  uint64_t token;            // slot holder: (incarnation << 16) | slot, at claim
  // Reader announcements (docs/CONCURRENCY.md "Reader announcements"): taken from the
  // reserved words of format version 2, so the layout and version are unchanged.
  uint64_t calls;            // slot holder (any thread of it): (announced epoch << kCallCountBits) | calls in
                             // flight. Entry: CAS (seq_cst); the epoch is the global epoch loaded by the
                             // call that raised the count from 0 (later entries keep it). Exit: fetch_sub 1
                             // (release). 0 at claim (before announce_incarnation).
  uint64_t announce_incarnation;  // slot holder: release store of `incarnation` at claim, after `calls` = 0:
                                  // equal to incarnation = this holder announces its calls, so only a call
                                  // in flight holds reclamation back; else (a build without announcements
                                  // holds the slot) the reclaimer uses quiescent_epoch alone
  uint64_t reserved;
};
static_assert(sizeof(RegistrySlot) == 64, "RegistrySlot is one cache line (owners write their own line)");
static_assert(offsetof(RegistrySlot, calls) == 40 && offsetof(RegistrySlot, announce_incarnation) == 48,
              "calls / announce_incarnation took reserved[0..1] of format version 2 (docs/FORMAT.md)");
// RegistrySlot::calls: the low bits count calls in flight, the high bits hold the epoch.
inline constexpr uint32_t kCallCountBits = 16;
inline constexpr uint64_t kCallCountMask = (1ull << kCallCountBits) - 1;  // saturates: never decremented there
inline constexpr uint64_t kMaxCallEpoch = ~0ull >> kCallCountBits;        // larger epochs announce as this (safe side)

// The segment header at offset 0.
struct alignas(64) Header {
  // ---- immutable after creation (creator, before the file is linked) ----
  uint64_t magic;               // kMagic
  uint32_t version;             // kFormatVersion
  uint32_t header_bytes;        // sizeof(Header)
  AbiDescriptor abi;            // see above
  uint64_t max_size;            // reserved mapping size; size never exceeds it
  uint32_t directory_capacity;  // entries, a power of two
  uint32_t registry_slots;      // kRegistrySlots
  uint64_t undo_offset;         // UndoEntry[kUndoCapacity]
  uint64_t free_offset;         // FreeExtent[kFreeCapacity]
  uint64_t quarantine_offset;   // QuarantineEntry[kQuarantineCapacity]
  uint64_t registry_offset;     // RegistrySlot[kRegistrySlots]
  uint64_t directory_offset;    // DirEntry[directory_capacity]
  uint64_t data_offset;         // first allocatable byte (page aligned)
  uint64_t created_unix_ns;     // creator
  uint32_t mode;                // creator: permission bits asked for
  uint32_t file_backed;         // creator: 1 when CreateOptions::file was used
  char boot_id[40];             // creator; rewritten under flock by the first attacher of a new boot
  uint64_t lock_id;             // creator (version 2): random, nonzero; names the lock file PATH.lock-<16 hex>
  uint64_t lock_id_check;       // creator (version 2): ~lock_id (a damaged lock_id is kCorrupt, never a new lock file)
  // Not immutable: the one control word in this line (it was reserved, 0, in older segments).
  uint64_t publishing;          // lock holder: owner token of the restore whose staged entries are being
                                // published (logged commit point of publish_staged), 0 otherwise; readers
                                // treat kEntryStaged entries of that stager as live (docs/save-restore.md)
  uint64_t reserved0;

  // ---- backing size: its own line ----
  alignas(64) uint64_t size;    // grower (under the control lock): release store AFTER the space
                                // exists (fallocate); shrink stores it BEFORE ftruncate. Unlogged.

  // ---- the control lock ----
  alignas(64) pthread_mutex_t mutex;  // robust, process-shared, errorcheck

  // ---- control state: written only under the control lock ----
  alignas(64) uint64_t undo_count;  // holder: release store count+1 after filling an entry; 0 = commit
  uint64_t holder_token;            // holder: owner token of the lock holder (diagnostics), 0 when free
  uint64_t holder_pid;              // holder: pid of the lock holder (diagnostics)
  uint64_t recoveries;              // recoverer: rollbacks of dead holders so far; only grows
  uint64_t txn_serial;              // holder: transactions started; only grows (unlogged)
  uint64_t top;                     // holder (logged): end of the allocated space; data_offset <= top <= size
  uint64_t dirty_top;               // holder (unlogged, only grows; lowered only by shrink): bytes at and
                                    // above it were never handed out, so they are still zero
  uint64_t structures;              // holder (logged): live directory entries
  uint32_t free_count;              // holder (logged): used entries of the free table
  uint32_t quarantine_count;        // holder (logged): used entries of the quarantine table
  uint64_t generation_counter;      // holder (unlogged: never rolls back, so no publish repeats a
                                    // (generation, live) word): last directory generation handed out

  // ---- epoch of frees ----
  alignas(64) uint64_t global_epoch;  // holder: atomic increment at each commit that freed (unlogged: never rolls
                                      // back, so an epoch value is never handed out twice)
};
static_assert(alignof(Header) == 64, "Header is cache-line aligned");
static_assert(offsetof(Header, size) % 64 == 0 && offsetof(Header, mutex) % 64 == 0 &&
                  offsetof(Header, undo_count) % 64 == 0 && offsetof(Header, global_epoch) % 64 == 0,
              "hot header words start their own cache line");
static_assert(offsetof(Header, lock_id) == 200 && offsetof(Header, lock_id_check) == 208,
              "lock_id took the first reserved words after boot_id (docs/FORMAT.md): version 1 has zeros there");
static_assert(offsetof(Header, publishing) == 216, "publishing took the first reserved word after lock_id_check");
static_assert(sizeof(Header) <= 4096, "the header fits one page (pread on open reads one page)");

// ---- atomic access helpers for shared words -----------------------------
template <class T>
inline T load_acquire(const T* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <class T>
inline T load_relaxed(const T* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <class T>
inline void store_release(T* p, T v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
template <class T>
inline void store_relaxed(T* p, T v) noexcept {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

inline AbiDescriptor current_abi() noexcept {
  AbiDescriptor a{};
  a.header_size = sizeof(Header);
  a.header_align = alignof(Header);
  a.dir_entry_size = sizeof(DirEntry);
  a.registry_slot_size = sizeof(RegistrySlot);
  a.undo_entry_size = sizeof(UndoEntry);
  a.free_extent_size = sizeof(FreeExtent);
  a.quarantine_size = sizeof(QuarantineEntry);
  a.extent_header_size = sizeof(ExtentHeader);
  a.mutex_size = sizeof(pthread_mutex_t);
  a.cache_line = kCacheLine;
  a.undo_capacity = kUndoCapacity;
  a.free_capacity = kFreeCapacity;
  a.quarantine_capacity = kQuarantineCapacity;
  a.registry_slots = kRegistrySlots;
  a.pointer_size = sizeof(void*);
  a.reserved = 0;
  return a;
}

}  // namespace shmfilter::internal
