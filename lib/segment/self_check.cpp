// lib/segment/self_check.cpp: the segment's own integrity checks.
//
// Header, registry, directory entries and allocator (every byte in
// [data_offset, top) in exactly one extent; extents of dropped structures are
// leaks). The structures' own checkers run above, in lib/check/check.cpp,
// over the regions this returns.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <map>

#include "segment/segment_impl.h"
#include "segment/self_check.h"

namespace shmfilter::internal {

namespace {

void add(CheckReport& report, std::string where, std::string problem, bool repaired) {
  report.findings.push_back(CheckFinding{std::move(where), std::move(problem), repaired});
}

// The control lock: this acquisition recovered a dead holder's transaction.
void check_recovery(const SegmentImpl& im, CheckReport& report) {
  if (im.recovered_in_lock)
    add(report, "control lock",
        im.last_recovery_forward
            ? "its holder died after its transaction's commit point; completed it"
            : "its holder died mid-transaction; rolled back " + std::to_string(im.last_recovered) + " logged stores",
        true);
}

// Header: the immutable part must still be what open() validated. Then the
// bounds every check below relies on: the file's size, top, the table counts.
// False when the checks below cannot run.
bool check_header(const SegmentImpl& im, CheckReport& report) {
  Header* h = im.hdr();
  {
    Layout l = compute_layout(h->directory_capacity);
    AbiDescriptor abi = current_abi();
    if (h->magic != kMagic || (h->version != kFormatVersion && h->version != kFormatVersionLegacyLocks) ||
        std::memcmp(&h->abi, &abi, sizeof abi) != 0 ||
        h->directory_capacity != im.dir_capacity || h->undo_offset != l.undo_offset ||
        h->free_offset != l.free_offset || h->quarantine_offset != l.quarantine_offset ||
        h->registry_offset != l.registry_offset || h->directory_offset != l.directory_offset ||
        im.lay.data_offset != l.data_offset || h->size > h->max_size || h->max_size != im.map_size) {
      add(report, "header", "immutable fields (magic, version, ABI, layout, max_size) changed after creation", false);
      return false;
    }
  }
  uint64_t size = h->size;
  struct stat st{};
  if (fstat(im.fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < size)
    add(report, "header",
        "backing file is " + std::to_string(st.st_size) + " bytes, header says " + std::to_string(size), false);
  if (h->top < im.lay.data_offset || h->top > size || h->top % 64 != 0) {
    add(report, "allocator",
        "top " + std::to_string(h->top) + " is outside [data_offset, size] or not 64-byte aligned", false);
    return false;
  }
  if (h->free_count > kFreeCapacity || h->quarantine_count > kQuarantineCapacity) {
    add(report, "allocator", "table counts out of range", false);
    return false;
  }
  return true;
}

// Registry: attached slots whose kernel lock is gone.
void check_registry(SegmentImpl& im, bool repair, CheckReport& report) {
  RegistrySlot* r = im.registry();
  for (uint32_t s = 0; s < kRegistrySlots; ++s) {
    if (load_acquire(&r[s].state) != kSlotAttached || s == im.slot) continue;
    if (im.slot_locked_by_other(s)) continue;
    bool fixed = false;
    if (repair) {
      // Take the slot's lock ourselves so no claimer races the repair.
      struct flock fl{};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      fl.l_start = static_cast<off_t>(kLockBase + s);
      fl.l_len = 1;
      if (fcntl(im.lock_fd, F_OFD_SETLK, &fl) == 0) {
        if (load_acquire(&r[s].state) == kSlotAttached) store_release(&r[s].state, kSlotFree);
        fl.l_type = F_UNLCK;
        fcntl(im.lock_fd, F_OFD_SETLK, &fl);
        fixed = true;
      }
    }
    add(report, "registry[" + std::to_string(s) + "]",
        "process " + std::to_string(load_relaxed(&r[s].pid)) + " died without detaching (its lock is gone)", fixed);
  }
}

// Directory entries: each live one names a known kind and an allocated extent
// of its own. Appends the ones that do to `live`.
// A staged entry (restore --into, docs/save-restore.md) whose restorer is dead: unpublished,
// never visible; --repair tombstones it (in this transaction) and the leak walk below then
// frees its extents. One of a live restorer is its business, not a finding.
void check_staged(SegmentImpl& im, uint32_t i, bool repair, CheckReport& report) {
  DirEntry& e = im.directory()[i];
  const uint64_t stager = load_relaxed(&e.stager);
  if (stager == im.token || im.token_alive(stager) || stager == load_acquire(&im.hdr()->publishing)) return;
  const uint32_t len = std::min<uint32_t>(load_relaxed(&e.name_len), kMaxStructureNameLength);
  const std::string nm(reinterpret_cast<const char*>(e.name), len);
  if (repair) im.log64(&e.state_gen, (im.next_generation() << 32) | kEntryTombstone);
  add(report, "directory[" + std::to_string(i) + "] '" + nm + "'",
      "an unpublished structure of a restore whose process died (never visible; the next restore or "
      "--repair removes it)", repair);
}

void check_directory(SegmentImpl& im, bool repair, CheckReport& report, std::vector<RegionInfo>& live) {
  Header* h = im.hdr();
  std::map<uint64_t, uint32_t> region_at;  // extent start -> directory slot
  // Under the lock, after recovery, no publish is in flight: a set word is damage (or a
  // crafted segment); --repair finishes the publish it names (its entries become live).
  if (!im.read_only && load_relaxed(&h->publishing) != 0) {
    add(report, "header", "the publish of a restore's staged structures was left unfinished", repair);
    if (repair) im.finish_publish();
  }
  for (uint32_t i = 0; i < im.dir_capacity; ++i) {
    uint64_t sg = im.directory()[i].state_gen;
    uint32_t state = static_cast<uint32_t>(sg & 0xffffffffu);
    if (state != kEntryEmpty && state != kEntryLive && state != kEntryTombstone && state != kEntryStaged) {
      add(report, "directory[" + std::to_string(i) + "]", "unknown state " + std::to_string(state), false);
      continue;
    }
    if (state == kEntryStaged) {  // a restore's unpublished structure: a finding only when its restorer is dead
      const uint64_t pub = load_acquire(&h->publishing);
      if (pub == 0 || load_relaxed(&im.directory()[i].stager) != pub) {
        check_staged(im, i, repair, report);
        continue;
      }
      // being published: live for every reader, so checked as live
    }
    if (state != kEntryLive && state != kEntryStaged) continue;
    RegionInfo info;
    std::string where = "directory[" + std::to_string(i) + "]";
    if (!im.read_entry(i, info)) {
      add(report, where, "live entry with an invalid name length", false);
      continue;
    }
    where += " '" + info.name + "'";
    if (info.kind < Kind::kBloom || info.kind > kLastKind) {
      add(report, where, "unknown kind " + std::to_string(static_cast<uint32_t>(info.kind)) +
                             " (not a structure this build knows: written by a newer build, or corrupt)", false);
      continue;
    }
    uint64_t ext = info.offset - sizeof(ExtentHeader);
    if (info.offset % 64 != 0) {  // the allocator hands out 64-byte aligned payloads only
      add(report, where, "region offset " + std::to_string(info.offset) + " is not 64-byte aligned", false);
      continue;
    }
    if (info.offset < im.lay.data_offset + sizeof(ExtentHeader) || info.offset > h->top ||
        info.size > h->top - info.offset) {
      add(report, where, "region [" + std::to_string(info.offset) + ", +" + std::to_string(info.size) +
                             ") lies outside the allocated space", false);
      continue;
    }
    ExtentHeader* eh = im.at<ExtentHeader>(ext);
    if (eh->magic != kExtentMagic || eh->state != kExtentAllocated || eh->size < info.size + sizeof(ExtentHeader)) {
      add(report, where, "region does not start an allocated extent of its size", false);
      continue;
    }
    if (std::string why = region_extent_problem(im, info); !why.empty()) {
      add(report, where, why + " (its bytes may be another extent's)", false);
      continue;
    }
    if (!region_at.emplace(ext, i).second) {
      add(report, where, "region shares its extent with directory[" + std::to_string(region_at[ext]) + "]", false);
      continue;
    }
    live.push_back(info);
  }
}

// ---- Allocator: every byte in [data_offset, top) is in exactly one extent. ----

struct TableSpan {
  uint64_t size;
  int what;  // 0 free, 1 quarantined
};
using TableSpans = std::map<uint64_t, TableSpan>;  // extent start -> its free / quarantine entry

// Malformed table entries are never acted on; --repair removes them (their
// bytes then show up below as unaccounted, which is reported, not guessed at).
void check_malformed_table_entries(SegmentImpl& im, bool repair, CheckReport& report) {
  Header* h = im.hdr();
  for (uint32_t i = h->free_count; i-- > 0;) {
    FreeExtent f = im.free_table()[i];
    if (im.span_ok(f.offset, f.size)) continue;
    if (repair) im.remove_free(i);
    add(report, "allocator", "free extent " + std::to_string(i) + " is malformed or outside [data_offset, top)",
        repair);
  }
  for (uint32_t i = h->quarantine_count; i-- > 0;) {
    QuarantineEntry q = im.quarantine()[i];
    if (im.span_ok(q.offset, q.size)) continue;
    if (repair) im.remove_quarantine(i);
    add(report, "allocator", "quarantine entry " + std::to_string(i) + " is malformed", repair);
  }
}

// The well-formed free and quarantine entries, each extent listed once and none overlapping.
TableSpans table_spans(const SegmentImpl& im, CheckReport& report) {
  Header* h = im.hdr();
  TableSpans spans;
  for (uint32_t i = 0; i < h->free_count; ++i) {
    FreeExtent f = im.free_table()[i];
    if (im.span_ok(f.offset, f.size) && !spans.emplace(f.offset, TableSpan{f.size, 0}).second)
      add(report, "allocator", "free extent at " + std::to_string(f.offset) + " is listed twice", false);
  }
  for (uint32_t i = 0; i < h->quarantine_count; ++i) {
    QuarantineEntry q = im.quarantine()[i];
    if (im.span_ok(q.offset, q.size) && !spans.emplace(q.offset, TableSpan{q.size, 1}).second)
      add(report, "allocator", "extent at " + std::to_string(q.offset) + " is both free and quarantined (or twice)",
          false);
  }
  for (auto it = spans.begin(); it != spans.end(); ++it) {
    auto nx = std::next(it);
    if (nx != spans.end() && it->first + it->second.size > nx->first)
      add(report, "allocator", "extents at " + std::to_string(it->first) + " and " + std::to_string(nx->first) +
                                   " overlap (free/quarantine tables)", false);
  }
  return spans;
}

// Walks the extents from data_offset to top past the tables' spans; returns
// the allocated extents whose owner is no longer live (leaks).
std::vector<uint64_t> walk_extents(const SegmentImpl& im, const TableSpans& spans, CheckReport& report) {
  Header* h = im.hdr();
  uint64_t p = im.lay.data_offset;
  std::vector<uint64_t> leaked;
  uint64_t unattributed = 0;
  while (p < h->top) {
    auto it = spans.find(p);
    if (it != spans.end()) {
      p += it->second.size;
      continue;
    }
    auto next = spans.lower_bound(p);
    ExtentHeader* eh = im.at<ExtentHeader>(p);
    if (eh->magic != kExtentMagic || eh->state != kExtentAllocated || eh->size < 64 || eh->size % 64 ||
        p + eh->size > h->top || (next != spans.end() && p + eh->size > next->first)) {
      add(report, "allocator", "bytes at " + std::to_string(p) + " belong to no extent (or extents overlap)", false);
      break;
    }
    if (eh->owner == 0) {
      ++unattributed;
    } else {
      // Owned by (generation, slot): leaked unless that very publication is still live.
      uint64_t owner_slot = (eh->owner & 0xffffffffu) - 1;
      uint64_t owner_gen = eh->owner >> 32;
      bool owner_live = owner_slot < im.dir_capacity &&
                        (im.directory()[owner_slot].state_gen == ((owner_gen << 32) | kEntryLive) ||
                         im.directory()[owner_slot].state_gen == ((owner_gen << 32) | kEntryStaged));
      if (!owner_live) leaked.push_back(p);
    }
    p += eh->size;
  }
  if (p > h->top) add(report, "allocator", "an extent runs past top", false);
  (void)unattributed;  // extents allocated in plain transact(): their structures' checkers account for them
  return leaked;
}

// Leaks: reported, freed with --repair.
void check_leaks(SegmentImpl& im, const std::vector<uint64_t>& leaked, bool repair, CheckReport& report) {
  for (uint64_t ext : leaked) {
    bool fixed = false;
    if (repair) {
      im.free_extent(ext + sizeof(ExtentHeader));
      fixed = true;
    }
    add(report, "allocator", "extent at " + std::to_string(ext) + " (" +
                                 std::to_string(im.at<ExtentHeader>(ext)->size) +
                                 " bytes) belongs to a structure that no longer exists (leak)", fixed);
  }
}

void check_allocator(SegmentImpl& im, bool repair, CheckReport& report) {
  check_malformed_table_entries(im, repair, report);
  const TableSpans spans = table_spans(im, report);
  const std::vector<uint64_t> leaked = walk_extents(im, spans, report);
  check_leaks(im, leaked, repair, report);
}

// Leftovers next to the segment's file, of creators and restores that died
// (liveness from the kernel: flock / lock-file locks), and lock files of
// segments gone: findings, removed with --repair. Only our own files.
void check_leftovers(const SegmentImpl& im, bool repair, CheckReport& report) {
  for (const std::string& p : creating_leftovers(im.path, repair))
    add(report, "leftover " + p, "a segment being created whose creator died before linking it", repair);
  for (const std::string& p : restoring_leftovers(im.path, repair))
    add(report, "leftover " + p, "a restore's segment whose restorer died before renaming it into place", repair);
  for (const std::string& p : lock_file_leftovers(im.path, load_relaxed(&im.hdr()->lock_id), repair))
    add(report, "leftover " + p, "a lock file of no segment (its creator died, or its segment was removed)", repair);
}

}  // namespace

std::vector<RegionInfo> SegmentImpl::check_own(Segment& seg, bool repair, CheckReport& report) {
  std::vector<RegionInfo> live;
  auto body = [&] {
    ControlTxn txn(&seg);
    index_invalidate();  // check proves ownership on a walk of its own, never a cached one
    check_recovery(*this, report);
    if (!check_header(*this, report)) return;
    check_registry(*this, repair, report);
    check_directory(*this, repair, report, live);
    check_allocator(*this, repair, report);
    (void)txn;
  };
  if (!read_only) {
    run_txn(body);
    check_leftovers(*this, repair, report);
    return live;
  }
  // Read-only: the control lock cannot be taken (it is a write), so the same
  // checks run lock-free and are retried while a transaction ran meanwhile
  // (txn_serial moved, the lock was held or an undo log was open): a finding is reported only
  // from a pass that no control-plane transaction overlapped, or, after 8
  // overlapped passes, from the last one, saying so.
  if (repair) require_writable("check --repair");
  const size_t before = report.findings.size();
  for (int pass = 0;; ++pass) {
    report.findings.resize(before);
    live.clear();
    const uint64_t serial = load_acquire(&hdr()->txn_serial);
    auto in_txn = [&] { return load_acquire(&hdr()->undo_count) != 0 || load_acquire(&hdr()->holder_token) != 0; };
    const bool open_txn = in_txn();
    body();
    const bool overlapped = open_txn || in_txn() || load_acquire(&hdr()->txn_serial) != serial;
    if (!overlapped) break;
    if (pass == 7) {
      if (report.findings.size() > before)
        report.findings.push_back({"segment", "checked read-only while other processes ran control-plane "
                                              "transactions: findings above may be transient; run check again", false});
      break;
    }
  }
  check_leftovers(*this, repair, report);
  return live;
}

std::vector<RegionInfo> check_segment_only(Segment& seg, bool repair, CheckReport& report) {
  return seg.impl()->check_own(seg, repair, report);
}

}  // namespace shmfilter::internal
