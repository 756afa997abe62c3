// lib/structures/roaring/roaring.cpp: RoaringSet, the handle (over roaring_local.h: reader
// slot, views, compaction; and roaring_impl.h: layout and kernels), and its checker.
// Protocol (who writes what, and why nothing acknowledged is lost): docs/roaring.md.
#include "base/wait_stats.h"
#include "shmfilter/roaring_set.hpp"

#include <roaring/roaring.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "base/kill_point.h"
#include "base/safe_file.h"
#include "segment/backing_file.h"
#include "base/text.h"
#include "structures/region_handle.h"
#include "structures/roaring/roaring_local.h"

static_assert(offsetof(shmfilter::internal::roaring::RoaringHeader, magic) == 0 && offsetof(shmfilter::internal::roaring::RoaringHeader, version) == 4,
              "check_prefix (region_handle.h) reads the magic at byte 0 and the layout version at byte 4");

namespace shmfilter {
namespace internal::roaring {
namespace {

void validate_options(const RoaringOptions& o) {
  if (o.delta_capacity < kMinDeltaCapacity || o.delta_capacity > kMaxDeltaCapacity ||
      (o.delta_capacity & (o.delta_capacity - 1)) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "delta capacity " + std::to_string(o.delta_capacity) +
                    " is invalid: pass a power of two from 64 to 16777216 (--delta-capacity)");
  if (!(o.compact_at > 0.0 && o.compact_at <= 0.9))
    throw Error(ErrorCode::kInvalidArgument, "compact_at " + std::to_string(o.compact_at) +
                                                 " is invalid: pass a fraction in (0, 0.9] (--compact-at)");
  if (o.reader_slots < 1 || o.reader_slots > 65536)
    throw Error(ErrorCode::kInvalidArgument, "reader slots " + std::to_string(o.reader_slots) +
                                                 " is invalid: pass 1 to 65536 (--readers)");
}

}  // namespace
}  // namespace internal::roaring

using internal::roaring::RoaringLocal;
using internal::roaring::View;
using namespace internal::roaring;

// The private operations of RoaringSet (its friend; include/shmfilter/roaring_set.hpp keeps
// only data: the process-local state). Defined below, in this file.
struct RoaringSetOps {
  // A handle bound to INFO, holding this process's reader slot (shared by every handle to the set).
  static RoaringSet attach_handle(Segment& seg, const RegionInfo& info);
  // add (kAdd) or remove (kRemove) of VALUE through the delta chain.
  static RoaringStatus write(RoaringSet& s, uint32_t value, Op op) noexcept;
};

std::string_view roaring_status_name(RoaringStatus s) noexcept {
  switch (s) {
    case RoaringStatus::kOk: return "ok";
    case RoaringStatus::kOutOfRange: return "out-of-range";
    case RoaringStatus::kDropped: return "dropped";
    case RoaringStatus::kFull: return "full";
    case RoaringStatus::kNoSpace: return "no-space";
    case RoaringStatus::kBusy: return "busy";
    case RoaringStatus::kForked: return "forked";
  }
  return "unknown";
}

RoaringSet RoaringSet::create(Segment& seg, std::string_view name, const RoaringOptions& opts) {
  return create_from(seg, name, nullptr, opts);
}

RoaringSet RoaringSet::create_from(Segment& seg, std::string_view name, const roaring_bitmap_t* initial,
                                   const RoaringOptions& opts) {
  validate_options(opts);
  c4::Built b;
  if (initial) {
    BitmapPtr copy(roaring_bitmap_copy(initial));
    if (!copy.p) throw Error(ErrorCode::kNoSpace, "out of process memory copying the initial bitmap");
    build_from_bitmap(b, copy.p, 1);
  }
  RegionInfo info = seg.create_region(
      name, Kind::kRoaring, region_bytes(opts.reader_slots), [&](std::byte* region, uint64_t, ControlTxn& txn) {
        auto* h = reinterpret_cast<RoaringHeader*>(region);
        h->magic = kMagic;
        h->version = kLayoutVersion;
        h->delta_capacity = opts.delta_capacity;
        h->reader_slots = opts.reader_slots;
        h->compact_permille = std::clamp<uint32_t>(static_cast<uint32_t>(opts.compact_at * 1000 + 0.5), 1, 900);
        h->flags = opts.auto_compact ? 0 : kFlagNoAutoCompact;
        h->created_unix_ns = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        const uint32_t cap = next_delta_capacity(b.cardinality, opts.delta_capacity, 0, 500, b.keys.size());
        uint64_t delta = 0;
        c4::Built local = b;  // a retried transaction relocates a fresh copy
        uint64_t snap = allocate_version(txn, local, 1, 0, cap, false, &delta);
        h->current.store(snap);
        h->gen_counter.store(1);
      });
  return RoaringSetOps::attach_handle(seg, info);
}

RoaringSet RoaringSet::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  return RoaringSetOps::attach_handle(seg, seg.open_region(name, Kind::kRoaring));
}

// attach() pins a reader slot in the region: refuse a read-only attachment before it (a PROT_READ mapping).
RoaringSet RoaringSetOps::attach_handle(Segment& seg, const RegionInfo& info) {
  RoaringSet s;
  RoaringSet::refuse_read_only_kind(seg, info);
  s.local_ = attach(seg, info);
  s.bind(seg, info);
  return s;
}

bool RoaringSet::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kRoaring, [](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    if (bytes < sizeof(RoaringHeader)) return;
    auto* h = reinterpret_cast<RoaringHeader*>(region);
    if (h->magic != kMagic) return;
    std::byte* base = txn.base();
    uint64_t size = txn.segment().size();
    std::vector<uint64_t> offs;
    // A snapshot header at o, or nullptr when o is not a snapshot extent inside the segment.
    auto snap_at = [&](uint64_t o) -> const SnapHeader* {
      return snap_header_ok(base, size, o) ? reinterpret_cast<const SnapHeader*>(base + o) : nullptr;
    };
    const uint32_t maxcap = h->delta_capacity;
    // Every table of the chain at `head` (links validated; a bad one is not followed).
    auto add_chain = [&](uint64_t head) {
      if (head == 0) return;
      DeltaHeader* t[kMaxChain];
      uint64_t o[kMaxChain];
      const uint32_t n = delta_chain(base, size, head, maxcap, t, o);
      if (n == 0) offs.push_back(head);  // a bad head: txn.free validates it (or skips)
      for (uint32_t k = 0; k < n; ++k) offs.push_back(o[k]);
    };
    // Every pack a snapshot names or dropped: each pack is in the directory
    // of current, a staged snapshot or its predecessor, or in the dropped
    // area of a retired one (duplicates are removed below).
    auto add_packs = [&](const SnapHeader* sh) {
      if (!sh) return;
      for (uint32_t i = 0; i < sh->npacks; ++i) offs.push_back(snap_dir(sh)[i].off);
      for (uint64_t i = 0; i < sh->ndropped; ++i) offs.push_back(snap_dropped(sh)[i].off);
    };
    auto add_version = [&](uint64_t snap) {
      offs.push_back(snap);
      if (const SnapHeader* sh = snap_at(snap)) {
        add_chain(sh->delta_off);
        add_chain(sh->prev_delta_off);
        add_packs(sh);
      }
    };
    add_version(h->current.load());
    if (h->staged_snap != h->current.load()) {
      // A staged, unpublished version owns its snapshot, active delta and new pack.
      if (h->staged_snap != 0) {
        offs.push_back(h->staged_snap);
        if (const SnapHeader* sh = snap_at(h->staged_snap)) {
          offs.push_back(sh->delta_off);
          add_packs(sh);
        }
      }
    } else if (h->staged_from != 0) {
      // Published but its predecessor not yet retired: the predecessor is garbage too.
      offs.push_back(h->staged_from);
      if (const SnapHeader* sh = snap_at(h->staged_from)) {
        add_chain(sh->prev_delta_off);
        add_packs(sh);
      }
    }
    // A staged link that was linked is in a chain above; one that was not is garbage.
    offs.push_back(h->staged_link);
    for (const auto& p : h->pending) {
      offs.push_back(p.snap_off);
      add_chain(p.delta_off);
      if (p.snap_off != 0 && pending_ok(base, size, p)) add_packs(snap_at(p.snap_off));
    }
    std::sort(offs.begin(), offs.end());
    offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
    for (uint64_t o : offs) {
      if (o == 0 || o >= size || o % 64 != 0) continue;
      try {
        txn.free(o);  // validates the extent header before any store: a corrupt offset is skipped, not followed
      } catch (const Error&) {
      }
    }
  });
}

const RegionInfo& RoaringSet::region() const noexcept { return local_->region; }

namespace {
// Why current_view() gave no view: a handle inherited across fork(), else dropped (or corrupt).
RoaringStatus no_view(const std::shared_ptr<RoaringLocal>& L) noexcept {
  return L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed)  // relaxed: process-local
             ? RoaringStatus::kForked
             : RoaringStatus::kDropped;
}
}  // namespace

RoaringStatus RoaringSetOps::write(RoaringSet& s, uint32_t value, Op op) noexcept {
  if (!s.local_ || !s.local_->live_region()) return RoaringStatus::kDropped;
  View* view = current_view(s.local_);
  if (!view) return no_view(s.local_);
  DeltaHeader* t = nullptr;
  // Every retry follows somebody's publish or link, so a few suffice; the
  // bound keeps a corrupt chain (a link that cannot be followed, a cycle of
  // full tables: fuzz_segment found an add looping forever) from spinning.
  constexpr int kMaxAttempts = 4096;
  for (int attempt = 0;; ++attempt) {
    if (attempt == kMaxAttempts) {
      internal::note_wait_expired("Roaring write, retrying a delta chain that never took the write");
      return RoaringStatus::kBusy;
    }
    t = view->tail();
    if (delta_write(t, value, op, delta_limit(t->capacity)) == WriteResult::kFull) {
      if (const RoaringStatus room = make_room(s.local_, view->snap_off, t); room != RoaringStatus::kOk) return room;
      view = current_view(s.local_);
      if (!view) return no_view(s.local_);
      continue;
    }
    if (op == Op::kAdd)
      SHMF_KILL_POINT("roaring.add.after_commit");
    else
      SHMF_KILL_POINT("roaring.remove.after_commit");
    // If a compaction published meanwhile, our delta may be out of the chain
    // (or hidden under a newer delta): write again into the newest one. The
    // same when a newer table was linked after ours: a write of the same
    // value there would hide ours.
    if (s.local_->hdr->current.load() != view->snap_off) {  // seq_cst: pairs with the publish CAS
      view = current_view(s.local_);
      if (!view) return no_view(s.local_);
      continue;
    }
    // seq_cst: pairs with the link store (Dekker, as with `current`). A link
    // the view cannot follow (corrupt: check reports it) leaves t the tail.
    if (t->next.load() != 0 && view->tail() != t) continue;
    break;
  }
  const uint64_t fill = t->fill.load(std::memory_order_relaxed);  // relaxed: a trigger heuristic
  // Past the trigger: link a newer table (under link_claim, so also while a
  // compaction builds), or, with the chain full, compact (auto_compact, and
  // nobody compacting). The relaxed loads only keep writers from queueing on
  // the claims; try_link_claim / try_claim decide.
  if (fill >= delta_trigger(t->capacity, s.local_->compact_permille) &&
      s.local_->hdr->link_claim.load(std::memory_order_relaxed) == 0 &&  // relaxed: a hint
      (view->chain() < kMaxChain ||
       (s.local_->auto_compact && s.local_->hdr->claim.load(std::memory_order_relaxed) == 0)))  // relaxed: a hint
    grow_chain(s.local_);
  return RoaringStatus::kOk;
}

RoaringStatus RoaringSet::add(uint32_t value) noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  return RoaringSetOps::write(*this, value, Op::kAdd);
}
RoaringStatus RoaringSet::remove(uint32_t value) noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  return RoaringSetOps::write(*this, value, Op::kRemove);
}
RoaringStatus RoaringSet::add_u64(uint64_t value) noexcept {
  return value > UINT32_MAX ? RoaringStatus::kOutOfRange : add(static_cast<uint32_t>(value));
}
RoaringStatus RoaringSet::remove_u64(uint64_t value) noexcept {
  return value > UINT32_MAX ? RoaringStatus::kOutOfRange : remove(static_cast<uint32_t>(value));
}

bool RoaringSet::contains(uint32_t value) const noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_ || !local_->live_region()) return false;
  View* view = current_view(local_);
  return view && view->contains_alone(value);
}
bool RoaringSet::contains_u64(uint64_t value) const noexcept {
  return value <= UINT32_MAX && contains(static_cast<uint32_t>(value));
}

RoaringStatus RoaringSet::add_many(std::span<const uint32_t> values) noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  // Blocks of 16: prefetch (for write) the home slots of the block in the
  // current active delta, then add each (the delta of a large set is far
  // bigger than the cache: one miss per add otherwise, one chain at a time).
  constexpr size_t kBlock = 16;
  for (size_t i0 = 0; i0 < values.size(); i0 += kBlock) {
    const size_t m = std::min(kBlock, values.size() - i0);
    if (local_ && local_->live_region())
      if (View* view = current_view(local_)) {
        DeltaHeader* t = view->tail();
        std::atomic<uint64_t>* slots = delta_slots(t);
        const uint32_t cap = t->capacity;
        for (size_t i = i0; i < i0 + m; ++i) __builtin_prefetch(slots + delta_home(values[i], cap), 1);
      }
    for (size_t i = i0; i < i0 + m; ++i)
      if (auto s = add(values[i]); s != RoaringStatus::kOk) return s;
  }
  return RoaringStatus::kOk;
}
RoaringStatus RoaringSet::add_many(std::span<const uint64_t> values) noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  for (uint64_t v : values)
    if (v > UINT32_MAX) return RoaringStatus::kOutOfRange;
  uint32_t buf[256];
  for (size_t i0 = 0; i0 < values.size(); i0 += 256) {
    const size_t m = std::min<size_t>(256, values.size() - i0);
    for (size_t i = 0; i < m; ++i) buf[i] = static_cast<uint32_t>(values[i0 + i]);
    if (auto s = add_many(std::span<const uint32_t>(buf, m)); s != RoaringStatus::kOk) return s;
  }
  return RoaringStatus::kOk;
}
RoaringStatus RoaringSet::remove_many(std::span<const uint32_t> values) noexcept {
  for (uint32_t v : values)
    if (auto s = remove(v); s != RoaringStatus::kOk) return s;
  return RoaringStatus::kOk;
}

namespace {
// out[i] = contains(values[i]) for i < min(sizes) (0 for a uint64 value >= 2^32, and for
// every value when the set is dropped); returns how many are present.
// Blocks of 16: prefetch every value's first loads, then the containers
// they name, then answer (memory-level parallelism instead of a chain of
// misses per value; bench/RESULTS.md roaring section).
template <class V>
uint64_t contains_each(const std::shared_ptr<RoaringLocal>& L, bool live, std::span<const V> values,
                       std::span<uint8_t> out) noexcept {
  size_t n = std::min(values.size(), out.size());
  View* view = live ? current_view(L) : nullptr;
  uint64_t present = 0;
  constexpr size_t kBlock = 16;
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    const size_t m = std::min(kBlock, n - i0);
    auto in_range = [&](size_t i) {
      if constexpr (sizeof(V) > sizeof(uint32_t)) return values[i] <= UINT32_MAX;
      return true;
    };
    if (!view) {
      for (size_t i = i0; i < i0 + m; ++i) out[i] = 0;
      continue;
    }
    const uint64_t* wp[kBlock];
    uint64_t w[kBlock];
    for (size_t i = i0; i < i0 + m; ++i)
      if (in_range(i)) view->prefetch1(static_cast<uint32_t>(values[i]));
    for (size_t i = i0; i < i0 + m; ++i) wp[i - i0] = in_range(i) ? view->prefetch2(static_cast<uint32_t>(values[i])) : nullptr;
    for (size_t i = i0; i < i0 + m; ++i) w[i - i0] = view->prefetch3(static_cast<uint32_t>(values[i]), wp[i - i0]);
    for (size_t i = i0; i < i0 + m; ++i)
      present += out[i] = in_range(i) && view->contains_word(static_cast<uint32_t>(values[i]), w[i - i0]);
  }
  return present;
}
}  // namespace

uint64_t RoaringSet::contains_many(std::span<const uint32_t> values, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  return contains_each(local_, local_ && local_->live_region(), values, out);
}
uint64_t RoaringSet::contains_many(std::span<const uint64_t> values, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  return contains_each(local_, local_ && local_->live_region(), values, out);
}

RoaringStatus RoaringSet::add_range(uint64_t lo, uint64_t hi) noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (hi > (uint64_t{1} << 32) || lo > hi) return RoaringStatus::kOutOfRange;
  if (!local_ || !local_->live_region()) return RoaringStatus::kDropped;
  if (hi - lo <= 1024) {
    for (uint64_t v = lo; v < hi; ++v)
      if (auto s = add(static_cast<uint32_t>(v)); s != RoaringStatus::kOk) return s;
    return RoaringStatus::kOk;
  }
  try {
    BitmapPtr b(roaring_bitmap_from_range(lo, hi, 1));
    merge(b.p);
    return RoaringStatus::kOk;
  } catch (const Error& e) {
    switch (e.code()) {
      case ErrorCode::kDropped: return RoaringStatus::kDropped;
      case ErrorCode::kNoSpace: return RoaringStatus::kNoSpace;
      case ErrorCode::kBusy: return RoaringStatus::kBusy;
      case ErrorCode::kForked: return RoaringStatus::kForked;
      default: return RoaringStatus::kFull;
    }
  } catch (...) {
    return RoaringStatus::kNoSpace;  // std::bad_alloc
  }
}

uint64_t RoaringSet::cardinality() const noexcept {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_ || !local_->live_region()) return 0;
  View* view = current_view(local_);
  if (!view) return 0;
  int64_t card = static_cast<int64_t>(view->snap->cardinality);
  // card = snapshot + adds not in it - removes in it, over each value's
  // newest entry: one table lookup per entry (sorted, so chunk by chunk).
  try {
    std::vector<uint64_t> ops;
    final_ops(*view, ops);
    for (uint64_t op : ops) {
      const bool in_snap = view->snap_contains(static_cast<uint32_t>(op >> 1));
      card += (op & 1) ? -int64_t{in_snap} : int64_t{!in_snap};
    }
    return static_cast<uint64_t>(std::max<int64_t>(card, 0));
  } catch (...) {
    // out of process memory: the slow path below needs none
  }
  // Every table, newest first; a value counts once, at its newest table.
  DeltaHeader* tables[2 * kMaxChain];
  uint32_t nt = 0;
  view->for_each_table([&](DeltaHeader* d) { tables[nt++] = d; });
  for (uint32_t k = nt; k-- > 0;)
    delta_for_each(tables[k], [&](uint32_t v, Op op) {
      for (uint32_t j = k + 1; j < nt; ++j)
        if (delta_lookup(tables[j], v) != Op::kNone) return;  // a newer table decides v
      bool in_snap = view->snap_contains(v);
      if (op == Op::kAdd && !in_snap) ++card;
      if (op == Op::kRemove && in_snap) --card;
    });
  return static_cast<uint64_t>(std::max<int64_t>(card, 0));
}

bool RoaringSet::compact() {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_) throw Error(ErrorCode::kInvalidArgument, "compact() on an empty RoaringSet handle");
  return compact_impl(local_, nullptr);
}

bool RoaringSet::maintain() {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_) throw Error(ErrorCode::kInvalidArgument, "maintain() on an empty RoaringSet handle");
  return maintain_impl(local_);
}

void RoaringSet::merge(const roaring_bitmap_t* b) {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_) throw Error(ErrorCode::kInvalidArgument, "merge() on an empty RoaringSet handle");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!compact_impl(local_, b)) {
    if (std::chrono::steady_clock::now() > deadline) {
      internal::note_wait_expired("Roaring merge, waiting for the compaction claim");
      throw Error(ErrorCode::kBusy, "Roaring set " + quoted(local_->region.name) +
                                        ": another process has been compacting for 30 s; retry later");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

uint32_t RoaringSet::reclaim() {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  if (!local_ || !local_->live_region()) return 0;
  current_view(local_);  // this thread's cached view moves to the newest version
  if (!try_claim(*local_)) return 0;
  ClaimGuard guard{*local_};
  return reclaim_locked(*local_);
}

roaring_bitmap_t* RoaringSet::to_bitmap() const {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  View* view = current_view(local_);
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + quoted(local_->region.name) + ": snapshot unreadable; run 'shmtool check'");
  roaring_bitmap_t* b = fold_view(*view, nullptr);
  if (!b) throw Error(ErrorCode::kNoSpace, "out of process memory copying Roaring set " + quoted(local_->region.name));
  return b;
}

std::string RoaringSet::export_portable() const {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  BitmapPtr b(to_bitmap());
  roaring_bitmap_run_optimize(b.p);
  std::string out(roaring_bitmap_portable_size_in_bytes(b.p), '\0');
  roaring_bitmap_portable_serialize(b.p, out.data());
  return out;
}

roaring_bitmap_t* RoaringSet::parse_portable(std::string_view bytes) {
  size_t consumed = 0;
  std::string err = portable_validate(bytes.data(), bytes.size(), &consumed);
  if (!err.empty()) throw Error(ErrorCode::kBadInput, err);
  if (consumed != bytes.size())
    throw Error(ErrorCode::kBadInput, "Roaring serialization of " + std::to_string(consumed) + " bytes is followed by " +
                                          std::to_string(bytes.size() - consumed) +
                                          " trailing bytes: pass exactly one serialized bitmap");
  roaring_bitmap_t* b = roaring_bitmap_portable_deserialize_safe(bytes.data(), bytes.size());
  if (!b) throw Error(ErrorCode::kBadInput, "CRoaring rejected the serialization (corrupt container data)");
  return b;
}

void RoaringSet::import_portable(std::string_view bytes) {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  BitmapPtr b(parse_portable(bytes));
  merge(b.p);
}

void RoaringSet::import_portable_file(const std::string& path) {
  std::string bytes = internal::read_regular_file(path, "file");  // a FIFO is refused, never waited on
  try {
    import_portable(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), "'" + path + "': " + e.what());
  }
}

void RoaringSet::export_portable_file(const std::string& path) const {
  // An O_EXCL|O_NOFOLLOW temporary with the segment's mode, renamed into place (lib/base/safe_file.h).
  std::string bytes = export_portable();  // require_valid() there: local_ is set
  internal::write_file_atomically(path, bytes, internal::segment_file_mode(local_->seg));
}

uint32_t RoaringSet::parse_value(std::string_view text) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == text.data() + text.size() && v > UINT32_MAX))
    throw Error(ErrorCode::kBadInput, "value " + internal::clip(text) +
                                          " does not fit in 32 bits: Roaring sets hold 0..4294967295 (map wider ids "
                                          "to 32 bits first, or use an exact set)");
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    throw Error(ErrorCode::kBadInput, "'" + internal::clip(text) + "' is not a decimal id: pass 0..4294967295");
  return static_cast<uint32_t>(v);
}

RoaringStats RoaringSet::stats() const {
  const ReadGuard in_call(seg_of(local_));  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  View* view = current_view(local_);
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + quoted(local_->region.name) + ": snapshot unreadable; run 'shmtool check'");
  RoaringStats s;
  s.snapshot_cardinality = view->snap->cardinality;
  // The table, its directory and every pack it names (packs shared with
  // older snapshots count here, where they are live).
  s.snapshot_bytes = snap_extent_bytes(view->npacks, view->snap->table_bytes) - sizeof(SnapHeader);
  for (uint32_t i = 0; i < view->npacks; ++i) s.snapshot_bytes += view->packs[i].bytes;
  s.snapshot_generation = view->gen;
  const uint32_t na = view->chain();
  s.delta_capacity = view->act[0]->capacity;
  s.delta_max_capacity = local_->max_capacity;
  s.delta_tables = na;
  s.delta_links = local_->hdr->links;
  for (uint32_t i = 0; i < na; ++i) {
    s.delta_fill += view->act[i]->fill.load(std::memory_order_relaxed);  // relaxed: statistics
    s.delta_chain_capacity += view->act[i]->capacity;
    s.delta_bytes += delta_bytes(view->act[i]->capacity);
  }
  for (uint32_t i = 0; i < view->nprv; ++i) {
    s.prev_delta_fill += view->prv[i]->fill.load(std::memory_order_relaxed);  // relaxed: statistics
    s.delta_bytes += delta_bytes(view->prv[i]->capacity);
  }
  s.compactions = local_->hdr->compactions;
  s.claim_owner = local_->hdr->claim.load();
  s.link_claim_owner = local_->hdr->link_claim.load();
  uint64_t pending_bytes = 0;
  for (const auto& p : local_->hdr->pending)
    if (p.snap_off) {
      ++s.pending_free;
      if (!pending_ok(local_->base, local_->seg.size(), p)) continue;  // corrupt: check reports it
      auto* sh = reinterpret_cast<const SnapHeader*>(local_->base + p.snap_off);
      pending_bytes += snap_extent_bytes(sh->npacks, sh->table_bytes);
      for (uint64_t k = 0; k < sh->ndropped; ++k) pending_bytes += snap_dropped(sh)[k].bytes;
      DeltaHeader* chain[kMaxChain];
      const uint32_t n = p.delta_off ? delta_chain(local_->base, local_->seg.size(), p.delta_off, local_->max_capacity, chain) : 0;
      for (uint32_t i = 0; i < n; ++i) pending_bytes += delta_bytes(chain[i]->capacity);
    }
  s.total_bytes = local_->region.size + sizeof(SnapHeader) + s.snapshot_bytes + s.delta_bytes + pending_bytes;
  c4::table_for_each(view->table, [&](uint16_t, uint64_t w) {
    ++s.containers;
    switch (c4::cw_type(w)) {
      case c4::kArray: ++s.array_containers; break;
      case c4::kBitmap: ++s.bitmap_containers; break;
      case c4::kRun: ++s.run_containers; break;
      default: break;
    }
  });
  ReaderSlot* slots = reader_table(local_->hdr);
  for (uint32_t i = 0; i < local_->hdr->reader_slots; ++i) {
    uint64_t t = slots[i].token.load();
    if (t && local_->seg.token_alive(t)) ++s.readers;
  }
  s.cardinality = cardinality();
  return s;
}

// ---- set algebra --------------------------------------------------------------------

roaring_bitmap_t* RoaringSet::compute(Segment& seg, SetOp op, std::span<const std::string> sources) {
  if (sources.empty()) throw Error(ErrorCode::kInvalidArgument, "set operation needs at least one source set");
  BitmapPtr acc(open(seg, sources[0]).to_bitmap());
  for (size_t i = 1; i < sources.size(); ++i) {
    BitmapPtr b(open(seg, sources[i]).to_bitmap());
    switch (op) {
      case SetOp::kUnion: roaring_bitmap_or_inplace(acc.p, b.p); break;
      case SetOp::kIntersection: roaring_bitmap_and_inplace(acc.p, b.p); break;
      case SetOp::kDifference: roaring_bitmap_andnot_inplace(acc.p, b.p); break;
      case SetOp::kXor: roaring_bitmap_xor_inplace(acc.p, b.p); break;
    }
  }
  return acc.release();
}

uint64_t RoaringSet::compute_cardinality(Segment& seg, SetOp op, std::span<const std::string> sources) {
  if (sources.size() == 2) {
    BitmapPtr a(open(seg, sources[0]).to_bitmap()), b(open(seg, sources[1]).to_bitmap());
    switch (op) {
      case SetOp::kUnion: return roaring_bitmap_or_cardinality(a.p, b.p);
      case SetOp::kIntersection: return roaring_bitmap_and_cardinality(a.p, b.p);
      case SetOp::kDifference: return roaring_bitmap_andnot_cardinality(a.p, b.p);
      case SetOp::kXor: return roaring_bitmap_xor_cardinality(a.p, b.p);
    }
  }
  BitmapPtr r(compute(seg, op, sources));
  return roaring_bitmap_get_cardinality(r.p);
}

RoaringSet RoaringSet::store(Segment& seg, std::string_view dest, SetOp op, std::span<const std::string> sources,
                             const RoaringOptions& opts) {
  BitmapPtr r(compute(seg, op, sources));
  return create_from(seg, dest, r.p, opts);
}

bool RoaringSet::contains_any(std::span<const RoaringSet> sets, uint32_t x) noexcept {
  // Up to 16 sets at once: the first loads of every set are issued before any
  // is awaited (prefetch1, 2, 3: rank entry, word, container), so 7 sets cost about one set's
  // latency plus the instructions. A view made on the way may evict another
  // set's cached view (current_view's pointer lives until the next call), so
  // then, and for more sets, the plain loop answers.
  constexpr size_t kMax = 16;
  View* views[kMax];
  bool made = false;
  const size_t n = sets.size();
  if (n <= kMax) {
    std::optional<ReadGuard> in_call[kMax];  // docs/CONCURRENCY.md "Reader announcements" (any attachments)
    for (size_t i = 0; i < n; ++i) {
      const auto& L = sets[i].local_;
      in_call[i].emplace(seg_of(L));
      views[i] = (L && L->live_region()) ? current_view(L, &made) : nullptr;
      if (views[i]) views[i]->prefetch1(x);
    }
    if (!made) {
      const uint64_t* wp[kMax];
      uint64_t w[kMax];
      for (size_t i = 0; i < n; ++i) wp[i] = views[i] ? views[i]->prefetch2(x) : nullptr;
      for (size_t i = 0; i < n; ++i) w[i] = views[i] ? views[i]->prefetch3(x, wp[i]) : 0;
      for (size_t i = 0; i < n; ++i)
        if (views[i] && views[i]->contains_word(x, w[i])) return true;
      return false;
    }
  }
  for (const auto& s : sets)
    if (s.contains(x)) return true;
  return false;
}

// ---- integrity -------------------------------------------------------------------------

namespace internal::roaring {

void check_roaring(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  auto finding = [&](const std::string& problem, bool repaired = false) { scope.add(problem, repaired); };
  RoaringHeader* h = nullptr;
  if (!scope.validated([&] { h = checked_header(seg, region); })) return;
  std::byte* base = seg.base();
  uint64_t size = seg.size();
  uint64_t cur = h->current.load();
  if (!version_ok(base, size, cur, h->delta_capacity))
    return finding("published snapshot offset " + std::to_string(cur) +
                   " is misaligned, outside the segment, or not a snapshot (bad magic or delta offsets)");
  auto* sh = reinterpret_cast<const SnapHeader*>(base + cur);
  {
    uint64_t card = 0;
    std::string err = c4::table_validate(base, size, snap_table(sh), snap_dir(sh), sh->npacks, true, &card);
    if (!err.empty())
      finding("published container table: " + err);
    else if (card != sh->cardinality)
      finding("snapshot cardinality " + std::to_string(card) + " differs from the header's " +
              std::to_string(sh->cardinality));
  }
  for (int which = 0; which < 2; ++which) {
    uint64_t d = which == 0 ? sh->delta_off : sh->prev_delta_off;
    if (which == 1 && d == 0) continue;
    DeltaHeader* chain[kMaxChain];
    bool bad = false;
    const uint32_t n = delta_chain(base, size, d, h->delta_capacity, chain, nullptr, &bad);
    if (n == 0) {  // version_ok passed: only a racing corruption gets here
      finding("delta table offset " + std::to_string(d) + " out of bounds or not a delta table");
      continue;
    }
    if (bad)
      finding(std::string(which == 0 ? "active" : "previous") + " delta chain has a link that is not a delta table or is longer than " +
              std::to_string(kMaxChain) + " tables (not followed: writes in it are invisible)");
    for (uint32_t k = 0; k < n; ++k) {
      uint64_t claimed = 0;
      std::string err = delta_validate(chain[k], h->delta_capacity, &claimed);
      if (!err.empty()) finding(err);
    }
  }
  if (h->staged_link != 0 && !delta_ok(base, size, h->staged_link, h->delta_capacity)) {
    bool fixed = false;
    if (repair) {
      seg.transact([&](ControlTxn& txn) {
        if (!seg.region_live(region.slot, region.generation)) return;
        txn.store_u64(&h->staged_link, 0);
        txn.store_u64(&h->staged_link_onto, 0);
      });
      fixed = true;
    }
    finding("staged delta link names a malformed table (" + std::to_string(h->staged_link) + ")", fixed);
  }
  for (auto& p : h->pending) {
    if (p.snap_off == 0 || pending_ok(base, size, p)) continue;
    bool fixed = false;
    if (repair) {
      seg.transact([&](ControlTxn& txn) {  // forget it: the space it named shows up as a leak, never freed blindly
        if (!seg.region_live(region.slot, region.generation)) return;
        txn.store_u64(&p.snap_off, 0);
        txn.store_u64(&p.delta_off, 0);
        txn.store_u64(&p.generation, 0);
      });
      fixed = true;
    }
    finding("retired-snapshot list holds a malformed offset " + std::to_string(p.snap_off), fixed);
  }
  uint64_t st = h->staged_snap, sf = h->staged_from;
  if (st != 0 && (!version_ok(base, size, st, h->delta_capacity) || !version_ok(base, size, sf, h->delta_capacity))) {
    bool fixed = false;
    if (repair) {
      seg.transact([&](ControlTxn& txn) {
        if (!seg.region_live(region.slot, region.generation)) return;
        txn.store_u64(&h->staged_snap, 0);
        txn.store_u64(&h->staged_from, 0);
      });
      fixed = true;
    }
    finding("staged compaction names a malformed snapshot (" + std::to_string(st) + " from " + std::to_string(sf) + ")",
            fixed);
  }
  uint64_t c = h->claim.load();
  if (c != 0 && !seg.token_alive(c)) {
    bool fixed = repair && h->claim.compare_exchange_strong(c, 0);
    finding("compaction claim held by a dead process (token " + std::to_string(c) +
                "); the next compaction takes it over and finishes or discards its work",
            fixed);
  }
  uint64_t lc = h->link_claim.load();
  if (lc != 0 && !seg.token_alive(lc)) {
    // With a table staged, clearing the claim alone would leak or lose it: --repair does what
    // the next linker would, through maintain() (its takeover frees or keeps the staged table,
    // then releases the claim). Without one, the claim is simply cleared.
    bool fixed = false;
    if (repair && h->staged_link == 0) {
      fixed = h->link_claim.compare_exchange_strong(lc, 0);
    } else if (repair) {
      try {
        RoaringSet::open(seg, region.name).maintain();
      } catch (const Error&) {
        // reported below as not repaired
      }
      fixed = h->link_claim.load() != lc;
    }
    finding("delta link claim held by a dead process (token " + std::to_string(lc) +
                "); the next writer that links a table takes it over and frees or keeps the staged table",
            fixed);
  }
}

}  // namespace internal::roaring
}  // namespace shmfilter

