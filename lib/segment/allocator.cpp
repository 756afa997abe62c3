// lib/segment/allocator.cpp: the region allocator (always under the control lock).
//
// Extents of 64-byte granules above data_offset, each with an ExtentHeader;
// a free table of holes (coalesced; a hole at top gives it back), and a
// quarantine of freed extents that become reusable only once every live
// process has quiesced past the epoch of the free. Every table store is
// undo-logged (txn.cpp); fresh memory of a transaction is written unlogged.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/kill_point.h"
#include "base/text.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

void SegmentImpl::grow_backing(uint64_t want) {
  Header* h = hdr();
  uint64_t cur = load_relaxed(&h->size);
  if (want <= cur) return;
  if (want > map_size)
    fail(ErrorCode::kNoSpace, "segment '" + name + "': the reservation (max_size " + format_size(map_size) +
                                  ") is full; needed " + format_size(want) +
                                  ": recreate the segment with a larger max_size");
  // Growth steps of 1/16 (at least what is needed, whole MiB): few enough fallocate calls
  // (about 60 from 64 MiB to 2 GiB), and at most ~6% of the file beyond what was asked for,
  // inside the 10% over live bytes a long run may use (bench/reclaim_bench.cpp).
  uint64_t target = std::min(map_size, round_up(std::max(want, cur + cur / 16), 1ull << 20));
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

void SegmentImpl::remove_free(uint32_t j) {
  Header* h = hdr();
  uint32_t last = h->free_count - 1;
  FreeExtent* f = free_table();
  if (j != last) {
    log64(&f[j].offset, f[last].offset);
    log64(&f[j].size, f[last].size);
  }
  log32(&h->free_count, last);
}

void SegmentImpl::remove_quarantine(uint32_t j) {
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
void SegmentImpl::insert_free(uint64_t off, uint64_t size) {
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

// Moves quarantined extents that no live process can still read into the free table.
uint32_t SegmentImpl::reclaim_quarantine() {
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
bool SegmentImpl::span_ok(uint64_t off, uint64_t size) const noexcept {
  const Header* h = hdr();
  return size != 0 && size % 64 == 0 && off % 64 == 0 && off >= lay.data_offset && off <= h->top &&
         size <= h->top - off;
}

uint64_t SegmentImpl::take_free(uint64_t need) {
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

uint64_t SegmentImpl::allocate(uint64_t bytes, bool zero) {
  require_txn();
  Header* h = hdr();
  if (bytes == 0) bytes = 1;
  if (bytes > map_size)
    fail(ErrorCode::kNoSpace, "segment '" + name + "': cannot allocate " + format_size(bytes) +
                                  ", more than the reservation (" + format_size(map_size) +
                                  "): recreate the segment with a larger max_size");
  uint64_t need = round_up(bytes, 64) + sizeof(ExtentHeader);
  if (h->top < lay.data_offset || h->top > load_relaxed(&h->size) || h->top % 64 != 0 ||
      h->free_count > kFreeCapacity || h->quarantine_count > kQuarantineCapacity)
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
  // zero == false (allocate_unzeroed): the caller zeroes the payload itself (in chunks,
  // outside this lock hold); the extent header below is written either way.
  uint64_t dirty_end = std::min(off + need, h->dirty_top);
  if (!zero) dirty_end = std::min(dirty_end, off + sizeof(ExtentHeader));
  if (dirty_end > off) std::memset(base + off, 0, dirty_end - off);
  if (off + need > h->dirty_top) h->dirty_top = off + need;
  ExtentHeader* eh = at<ExtentHeader>(off);
  eh->magic = kExtentMagic;
  eh->size = need;
  eh->owner = txn_owner;
  eh->serial = h->txn_serial;
  store_release(&eh->state, kExtentAllocated);
  index_allocated(off, need);  // the walk reaches it now (extent_index.cpp)
  return off + sizeof(ExtentHeader);
}

ExtentHeader* SegmentImpl::extent_of(uint64_t payload) const {
  Header* h = hdr();
  if (payload < lay.data_offset + sizeof(ExtentHeader) || payload % 64 != 0 || payload >= h->top)
    fail(ErrorCode::kInvalidArgument, "segment '" + name + "': free(" + std::to_string(payload) +
                                          "): not an offset returned by allocate()");
  ExtentHeader* eh = at<ExtentHeader>(payload - sizeof(ExtentHeader));
  if (eh->magic != kExtentMagic || eh->size < sizeof(ExtentHeader) || eh->size % 64 != 0 ||
      payload - sizeof(ExtentHeader) + eh->size > h->top)
    fail(ErrorCode::kCorrupt, "segment '" + name + "': free(" + std::to_string(payload) +
                                  "): no valid extent header there: run shmtool check " + name);
  // The extent must end where the next one starts (top, an extent header, or a free or
  // quarantined span): a damaged size would otherwise free a live neighbour's bytes, which
  // the next allocation hands out over it (found by fuzz_segment: a window's header).
  const uint64_t end = payload - sizeof(ExtentHeader) + eh->size;
  bool boundary = end == h->top ||
                  (h->top - end >= sizeof(ExtentHeader) && at<ExtentHeader>(end)->magic == kExtentMagic);
  for (uint32_t j = 0; !boundary && j < h->free_count && j < kFreeCapacity; ++j) boundary = free_table()[j].offset == end;
  for (uint32_t j = 0; !boundary && j < h->quarantine_count && j < kQuarantineCapacity; ++j)
    boundary = quarantine()[j].offset == end;
  if (!boundary)
    fail(ErrorCode::kCorrupt, "segment '" + name + "': free(" + std::to_string(payload) + "): its extent's size (" +
                                  std::to_string(eh->size) + ") does not end where another extent starts: run shmtool check " +
                                  name);
  return eh;
}

void SegmentImpl::free_extent(uint64_t payload) {
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
  index_freed(payload - sizeof(ExtentHeader));  // a quarantined span now (extent_index.cpp)
  // Coalesce with adjacent quarantined extents (the merged span waits for the
  // later epoch). While some process does not quiesce, nothing is reused and
  // allocations come from top, so frees are mostly adjacent: the table then
  // holds about one entry per live extent instead of one per free.
  uint64_t start = payload - sizeof(ExtentHeader), len = eh->size;
  QuarantineEntry* qt = quarantine();
  uint32_t left = UINT32_MAX, right = UINT32_MAX;
  auto find_neighbours = [&] {
    left = right = UINT32_MAX;
    for (uint32_t j = 0; j < h->quarantine_count; ++j) {
      if (!span_ok(qt[j].offset, qt[j].size)) continue;
      if (qt[j].offset + qt[j].size == start) left = j;
      if (start + len == qt[j].offset) right = j;
    }
  };
  find_neighbours();
  // A neighbour from an earlier transaction (stamped) that is reusable now goes to the
  // free table first: merged into this pending span it would wait for this transaction's
  // stamp, and a window that retires the table next to yesterday's and then allocates
  // its spare in the same transaction would push the whole run of retired tables ahead
  // of it day after day (bench/reclaim_bench.cpp: one table of growth a day, even with
  // no other process attached). Only spans nobody may reuse yet are merged.
  if ((left != UINT32_MAX && qt[left].epoch != kPendingEpoch) ||
      (right != UINT32_MAX && qt[right].epoch != kPendingEpoch)) {
    if (reclaim_quarantine() > 0) find_neighbours();
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

}  // namespace shmfilter::internal
