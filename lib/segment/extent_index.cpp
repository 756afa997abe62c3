// lib/segment/extent_index.cpp: the index of the extents the allocator's own walk reaches.
//
// An extent header and the allocator's tables are bytes any writer of the segment could have
// damaged; a structure that checked only its extent's header (magic, state, size, owner) could
// be handed a region or a table that a forged header places inside a neighbour's extent, and
// then each would overwrite the other (fuzz_segment: a neighbour's writes zeroed a window's
// bucket_seconds after its open). The walk below is check's (self_check.cpp walk_extents):
// from data_offset to top, every byte is in exactly one extent or one free/quarantine span,
// each extent ending where the next one or a span starts. An extent it reaches cannot overlap
// another one it reaches, nor a span the allocator may hand out. Segment::open_region, check
// and every kind's table validation (lib/segment/extents.h) accept only such extents.
//
// Cost: one O(extents + table entries) walk per control-plane transaction of any process
// (Header::txn_serial), O(log extents) per lookup; this attachment's own allocate / free keep
// the index current without a walk. Never on a data plane.
#include <sched.h>

#include <algorithm>
#include <atomic>

#include "segment/extents.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

void SegmentImpl::walk_index(ExtentIndex& x) const {
  const Header* h = hdr();
  x.valid = false;
  x.ext.clear();
  x.problem.clear();
  const uint64_t size = std::min(load_acquire(&h->size), map_size);
  const uint64_t top = load_relaxed(&h->top);
  if (top < lay.data_offset || top > size || top % 64 != 0) {
    x.problem = "the allocator's top (" + std::to_string(top) + ") is outside the data area";
    return;
  }
  // The spans the allocator may act on (span_ok's rule), sorted; none may overlap another.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  const auto take = [&](uint64_t off, uint64_t sz) {
    if (sz != 0 && sz % 64 == 0 && off % 64 == 0 && off >= lay.data_offset && off <= top && sz <= top - off)
      spans.emplace_back(off, sz);
  };
  const uint32_t nf = std::min(load_relaxed(&h->free_count), kFreeCapacity);
  const uint32_t nq = std::min(load_relaxed(&h->quarantine_count), kQuarantineCapacity);
  for (uint32_t i = 0; i < nf; ++i) take(load_relaxed(&free_table()[i].offset), load_relaxed(&free_table()[i].size));
  for (uint32_t i = 0; i < nq; ++i) take(load_relaxed(&quarantine()[i].offset), load_relaxed(&quarantine()[i].size));
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i - 1].first + spans[i - 1].second > spans[i].first) {
      x.problem = "the free / quarantine tables list overlapping extents at " + std::to_string(spans[i - 1].first) +
                  " and " + std::to_string(spans[i].first);
      return;
    }
  uint64_t p = lay.data_offset;
  size_t si = 0;
  while (p < top) {
    if (si < spans.size() && spans[si].first == p) {
      p += spans[si].second;
      ++si;
      continue;
    }
    if (si < spans.size() && spans[si].first < p) {
      x.problem = "a free or quarantined span starts at " + std::to_string(spans[si].first) + ", inside an extent";
      break;
    }
    const auto* eh = at<ExtentHeader>(p);
    const uint64_t esz = load_relaxed(&eh->size);
    if (load_relaxed(&eh->magic) != kExtentMagic || load_relaxed(&eh->state) != kExtentAllocated || esz < 64 ||
        esz % 64 != 0 || esz > top - p || (si < spans.size() && p + esz > spans[si].first)) {
      x.problem = "the bytes at " + std::to_string(p) + " are no extent of the allocator's walk (a damaged extent "
                  "header or size, or extents overlap)";
      break;
    }
    x.ext.emplace_back(p, esz);
    p += esz;
  }
  x.valid = true;  // the caller decides whether it was consistent
}

uint64_t SegmentImpl::reached_extent(uint64_t ext, std::string* problem) const {
  const Header* h = hdr();
  const auto lookup = [&](const ExtentIndex& x) -> uint64_t {
    auto it = std::lower_bound(x.ext.begin(), x.ext.end(), std::make_pair(ext, uint64_t{0}));
    if (it != x.ext.end() && it->first == ext) {
      // Its header still says what the walk read (a cached walk is as of the last transaction).
      const auto* eh = at<ExtentHeader>(ext);
      if (load_relaxed(&eh->magic) == kExtentMagic && load_relaxed(&eh->state) == kExtentAllocated &&
          load_relaxed(&eh->size) == it->second)
        return it->second;
      if (problem != nullptr) *problem = "its extent header changed since the allocator's last transaction";
      return 0;
    }
    if (problem != nullptr) *problem = x.problem;
    return 0;
  };
  {
    std::lock_guard<std::mutex> lk(index_mu);
    if (holding_txn()) {  // under the control lock: nothing moves but what this thread does
      if (!index.valid || index.serial != h->txn_serial) {
        walk_index(index);
        index.serial = h->txn_serial;
      }
      return lookup(index);
    }
    if (index.valid && index.serial == load_acquire(&h->txn_serial)) return lookup(index);
    // Lock-free passes, seqlock style: consistent when no transaction was open before or
    // after the walk and txn_serial did not move (every transaction bumps it first).
    ExtentIndex x;
    for (int pass = 0; pass < 64; ++pass) {
      const uint64_t s1 = load_acquire(&h->txn_serial);
      if (load_acquire(&h->undo_count) != 0 || load_acquire(&h->holder_token) != 0) {
        sched_yield();
        continue;
      }
      walk_index(x);
      std::atomic_thread_fence(std::memory_order_acquire);  // the walk's loads before the re-check
      if (load_relaxed(&h->txn_serial) == s1 && load_relaxed(&h->undo_count) == 0 &&
          load_relaxed(&h->holder_token) == 0) {
        x.serial = s1;
        index = std::move(x);
        return lookup(index);
      }
    }
    // Read-only: no lock to take; the last pass answers (not cached).
    if (read_only) {
      walk_index(x);
      return lookup(x);
    }
  }
  // Other processes' transactions kept overlapping the walk: walk under the control lock.
  uint64_t found = 0;
  const_cast<SegmentImpl*>(this)->run_txn([&] { found = reached_extent(ext, problem); });
  return found;
}

void SegmentImpl::index_serial_bumped(uint64_t old_serial) noexcept {
  std::lock_guard<std::mutex> lk(index_mu);
  if (index.valid && index.serial == old_serial) index.serial = old_serial + 1;
}

void SegmentImpl::index_allocated(uint64_t ext, uint64_t size) noexcept {
  std::lock_guard<std::mutex> lk(index_mu);
  if (!index.valid || index.serial != hdr()->txn_serial || !index.problem.empty()) {
    index.valid = false;
    return;
  }
  try {
    auto it = std::lower_bound(index.ext.begin(), index.ext.end(), std::make_pair(ext, uint64_t{0}));
    index.ext.insert(it, std::make_pair(ext, size));
  } catch (...) {
    index.valid = false;
  }
}

void SegmentImpl::index_freed(uint64_t ext) noexcept {
  std::lock_guard<std::mutex> lk(index_mu);
  if (!index.valid || index.serial != hdr()->txn_serial) {
    index.valid = false;
    return;
  }
  auto it = std::lower_bound(index.ext.begin(), index.ext.end(), std::make_pair(ext, uint64_t{0}));
  if (it != index.ext.end() && it->first == ext)
    index.ext.erase(it);
  else
    index.valid = false;
}

void SegmentImpl::index_invalidate() noexcept {
  std::lock_guard<std::mutex> lk(index_mu);
  index.valid = false;
}

uint64_t reached_extent_size(const Segment& seg, uint64_t payload) {
  if (payload < sizeof(ExtentHeader) || payload % 64 != 0) return 0;
  return seg.impl()->reached_extent(payload - sizeof(ExtentHeader));
}

std::string region_extent_problem(const Segment& seg, const RegionInfo& region) {
  return region_extent_problem(*seg.impl(), region);
}

std::string region_extent_problem(const SegmentImpl& seg_impl, const RegionInfo& region) {
  const SegmentImpl* im = &seg_impl;
  if (region.offset % 64 != 0 || region.offset < im->lay.data_offset + sizeof(ExtentHeader))
    return "its region offset " + std::to_string(region.offset) + " is not an extent's payload";
  std::string why;
  const uint64_t got = im->reached_extent(region.offset - sizeof(ExtentHeader), &why);
  if (got == 0)
    return "its region at " + std::to_string(region.offset) + " is not an allocated extent of the allocator's walk" +
           (why.empty() ? std::string(" (a forged extent header)") : " (" + why + ")");
  if (got - sizeof(ExtentHeader) < region.size)
    return "its region of " + std::to_string(region.size) + " bytes is larger than its extent (" +
           std::to_string(got - sizeof(ExtentHeader)) + " bytes)";
  return {};
}

}  // namespace shmfilter::internal
