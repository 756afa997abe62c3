// shmfilter/snapshot.hpp: save a segment (or chosen structures) to a file and
// restore it: how a host is warmed after a reboot (/dev/shm is empty then) and
// how a day is archived. The file format is docs/save-restore.md.
//
// save() runs while workers keep writing. "Consistent" means, per kind: every
// operation acknowledged before save() began is in the file (Bloom: its bits;
// HLL: its registers; ExactSet and Cuckoo: their keys, and acknowledged erases
// are absent; Roaring: snapshot + delta as one bitmap; Window: every
// acknowledged mark and forget whose bucket is still in the window, the slot
// ring and the per-space counts). A cuckoo filter (and each bucket table of a
// cuckoo window) is copied under its writer lock (its writers wait; readers
// never do). Operations running concurrently with the save may or may not be
// in it. Structures created after the save began are not in it. A window
// save must not run beside another thread of the saving process that calls
// quiesce() or a control-plane function on the same Segment (a table freed
// meanwhile could then be reused under the copy); shmtool save is one thread.
//
// restore() checks the whole file (magic, format version, byte order, every
// entry's checksum, the trailer) BEFORE it creates anything, so a truncated,
// corrupted or future-version file is one clear error (kBadInput,
// kVersionMismatch, kForeignByteOrder) and changes nothing. A new segment is
// built under a temporary name and renamed into place only when complete
// (no-replace: an existing segment of that name is kExists); adding into an
// existing segment refuses any name clash before creating anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/segment.hpp"

namespace shmfilter {

inline constexpr uint32_t kSnapshotFormatVersion = 1;

struct SaveOptions {
  std::vector<std::string> structures;  // empty: every structure of a kind that can be saved
};

struct SnapshotEntry {
  std::string name;
  Kind kind = Kind::kNone;
  uint64_t bytes = 0;  // of its data in the file
};

struct SnapshotInfo {
  uint32_t format_version = 0;
  uint64_t created_unix_ns = 0;
  std::string source_segment;
  uint64_t segment_size = 0, segment_max_size = 0;
  uint32_t directory_capacity = 0;
  uint64_t file_bytes = 0;
  std::vector<SnapshotEntry> entries;
  std::vector<std::string> skipped;  // save(): structures left out (a kind this build does not know), with why
};

// Control plane (reads structures lock-free, except a cuckoo filter's writer lock). Writes PATH
// atomically (a temporary file in the same folder, fsync, rename): a crash
// mid-save leaves the old file or none, never a partial one. Throws kIo,
// kNotFound (a named structure is absent), kDropped (dropped during the save).
SnapshotInfo save(Segment& seg, const std::string& path, const SaveOptions& options = {});

// Validates PATH completely and returns what it holds. Throws kIo, kBadInput
// (not a save, truncated, checksum mismatch), kVersionMismatch, kForeignByteOrder.
SnapshotInfo read_snapshot_info(const std::string& path);

struct RestoreOptions {
  bool into_existing = false;           // add the structures to existing segment NAME
  std::vector<std::string> structures;  // empty: all entries of the file
  CreateOptions create;                 // a new segment: file, mode, group; size/max/directory from the
                                        // save when left at their defaults, bounded (size_limit)
  // A new segment's sizes recorded in the file are honoured only as far as the file's content
  // justifies: backing at most 2 x content + 64 MiB, reservation at most CreateOptions' default
  // (64 GiB), directory at most half the backing. Nonzero: both bounds are raised to this.
  uint64_t size_limit = 0;
};

// Creates segment NAME from PATH (or adds to it with into_existing). Throws as
// read_snapshot_info, plus kExists (segment or structure name clash), kNoSpace.
SnapshotInfo restore(const std::string& path, std::string_view segment_name, const RestoreOptions& options = {});

}  // namespace shmfilter
