// lib/structures/uv/uv.cpp: the UvFamily handle over uv_impl.h (include/shmfilter/uv.hpp):
// open/validate, the clock and rotation, the data plane (add, promotion), the reads
// (count, count_hll, count_all, export), drop, stats and the checker check_uv.
#include "shmfilter/uv.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <vector>

#include "base/kill_point.h"
#include "structures/region_handle.h"
#include "structures/uv/uv_impl.h"

namespace shmfilter {

using namespace internal::uv;
namespace hllk = internal::hll;

std::string_view uv_status_name(UvStatus s) noexcept {
  switch (s) {
    case UvStatus::kChanged: return "changed";
    case UvStatus::kUnchanged: return "unchanged";
    case UvStatus::kSpacesFull: return "spaces_full";
    case UvStatus::kNoSpace: return "no_space";
    case UvStatus::kDropped: return "dropped";
    case UvStatus::kBusy: return "busy";
    case UvStatus::kForked: return "forked";
    case UvStatus::kReadOnly: return "read_only";
    case UvStatus::kStale: return "stale";
    case UvStatus::kCorrupt: return "corrupt";
  }
  return "unknown";
}

namespace {

inline uint64_t* as_u64(std::atomic<uint64_t>* a) {
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "atomic<u64> must be a plain u64 in memory");
  return reinterpret_cast<uint64_t*>(a);
}

int64_t system_now() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return ts.tv_sec;
}

int64_t bucket_number(int64_t unix_s, int64_t utc_offset, uint64_t bucket_seconds) noexcept {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t t = std::min(std::max(unix_s, -kLimit), kLimit) + utc_offset;
  if (t < 0) return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(t) / bucket_seconds);
}

}  // namespace

std::string internal::uv::options_problem(const UvOptions& o) {
  if (o.retention < 1 || o.retention > kMaxRetention) return "retention must be 1.." + std::to_string(kMaxRetention);
  if (o.bucket_seconds < 1) return "bucket_seconds must be >= 1";
  if (o.utc_offset <= -(int64_t{1} << 40) || o.utc_offset >= (int64_t{1} << 40)) return "utc_offset must be within +-2^40 seconds";
  if (o.max_spaces < 1 || o.max_spaces > kMaxSpaces) return "max_spaces must be 1.." + std::to_string(kMaxSpaces);
  if (o.exact_max < 1 || o.exact_max > kMaxExactMax) return "exact_max must be 1.." + std::to_string(kMaxExactMax);
  if (o.chunk_bytes < kMinChunkBytes || o.chunk_bytes > kMaxChunkBytes || o.chunk_bytes % 64 != 0)
    return "chunk_bytes must be a multiple of 64 in 64 KiB..256 MiB";
  if (exact_block_bytes(exact_final_cap(o.exact_max)) > o.chunk_bytes || dense_block_bytes() > o.chunk_bytes)
    return "chunk_bytes is smaller than one block (raise it or lower exact_max)";
  return {};
}

namespace {

// Region header validation (throws kCorrupt / kVersionMismatch).
void validate(const RegionInfo& info, std::byte* region, uint64_t segment_size) {
  internal::validate_prefix(info, region, sizeof(UvHeader), segment_size, kMagic, kVersion);
  const auto* h = reinterpret_cast<const UvHeader*>(region);
  UvOptions o;
  o.retention = h->retention;
  o.bucket_seconds = h->bucket_seconds;
  o.utc_offset = h->utc_offset;
  o.max_spaces = h->max_spaces;
  o.exact_max = h->exact_max;
  o.chunk_bytes = h->chunk_bytes;
  std::string p = options_problem(o);
  if (!p.empty()) throw internal::corrupt_error(info.kind, info.name, "parameters out of range (" + p + ")");
  if (h->space_table != space_table_for(h->max_spaces))
    throw internal::corrupt_error(info.kind, info.name, "space table size does not match max_spaces");
  if (h->region_offset != info.offset || h->region_bytes != region_bytes_for(h->retention) || h->region_bytes > info.size)
    throw internal::corrupt_error(info.kind, info.name, "region offset or size does not match the directory");
}

}  // namespace

namespace internal::uv {

Pin::Pin(const Segment& seg, UvHeader* h) noexcept {
  if (seg.read_only()) return;
  const uint64_t tok = seg.owner_token();
  if (tok == 0) return;
  Announce& a = announces(h)[(tok & 0xffff) % kAnnounceSlots];
  if (a.token.load(std::memory_order_acquire) != tok) {
    // First use by this attachment: a dead predecessor in this registry slot may have left
    // calls "in flight"; reset them before claiming the entry (the process's threads wait here).
    static std::mutex m;
    std::lock_guard<std::mutex> g(m);
    if (a.token.load(std::memory_order_acquire) != tok) {
      a.word.store(0, std::memory_order_relaxed);
      a.token.store(tok, std::memory_order_release);
    }
  }
  uint64_t w = a.word.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t nw = (w & 0xffff) == 0 ? (h->epoch.load(std::memory_order_seq_cst) << 16) | 1 : w + 1;
    // seq_cst: the announcement is ordered before every descriptor load of the call (see Announce).
    if (a.word.compare_exchange_weak(w, nw, std::memory_order_seq_cst, std::memory_order_relaxed)) break;
  }
  word_ = &a.word;
}

Pin::~Pin() {
  if (word_ != nullptr) word_->fetch_sub(1, std::memory_order_release);
}

}  // namespace internal::uv

// Every private operation of UvFamily (lib/structures/README.md).
struct UvOps {
  static UvHeader* header(const UvFamily& f) { return reinterpret_cast<UvHeader*>(f.region_); }

  // A day extent named by a slot, validated (bounds, magic, parameters); nullptr if bad.
  static DayHeader* day_at(const UvFamily& f, uint64_t off, int64_t bucket) {
    const UvHeader* h = header(f);
    const uint64_t size = f.seg_.size();
    const uint64_t bytes = day_extent_bytes(h->space_table);
    if (off == 0 || off % 64 != 0 || off > size || bytes > size - off) return nullptr;
    auto* d = reinterpret_cast<DayHeader*>(f.base_ + off);
    if (d->magic != kDayMagic || d->space_table != h->space_table || d->bucket != bucket ||
        d->chunk_bytes != h->chunk_bytes || d->extent_bytes != bytes)
      return nullptr;
    // The day must not overlap the family's own region.
    if (off < f.offset_ + h->region_bytes && f.offset_ < off + bytes) return nullptr;
    // Its allocation state: bump (acquire) first, then the chunk count, which a bump position
    // never passes (chunks are committed before a block is carved from them).
    const uint64_t bump = d->bump.load(std::memory_order_acquire);
    const uint32_t chunks = d->chunk_count.load(std::memory_order_acquire);
    if (chunks > kMaxChunks || bump > uint64_t{chunks} * d->chunk_bytes + kFirstBlock) return nullptr;
    return d;
  }

  // The block a desc names, validated against the day's chunks; nullptr if bad.
  static BlockHead* block_at(const UvFamily& f, DayHeader* d, uint64_t desc, uint64_t space, uint32_t exact_max,
                             bool any_space = false) {
    const uint64_t cb = d->chunk_bytes, pos = desc & ~uint64_t{63};
    const uint32_t enc = static_cast<uint32_t>(desc & kEncMask);
    if (cb == 0) return nullptr;  // a divisor read from the segment (day_at compared it with the header's only)
    const uint64_t c = pos / cb, in = pos % cb;
    if (c >= d->chunk_count.load(std::memory_order_acquire) || c >= kMaxChunks) return nullptr;
    if (pos + sizeof(BlockHead) > d->bump.load(std::memory_order_acquire)) return nullptr;
    const uint64_t chunk = day_chunks(d)[c];
    const uint64_t size = f.seg_.size();
    if (chunk == 0 || chunk % 64 != 0 || chunk > size || cb > size - chunk) return nullptr;
    if (in + sizeof(BlockHead) > cb) return nullptr;
    auto* b = reinterpret_cast<BlockHead*>(f.base_ + chunk + in);
    if (b->magic != kBlockMagic || b->enc != enc || (!any_space && b->space != space)) return nullptr;
    uint64_t bytes;
    if (enc == kEncExact) {
      if (b->cap < kMinExactSlots || b->cap > exact_final_cap(exact_max)) return nullptr;
      bytes = exact_block_bytes(b->cap);
    } else if (enc == kEncDense) {
      if (b->cap != kDenseWords) return nullptr;
      bytes = dense_block_bytes();
    } else if (enc == kEncSparse) {
      if (b->cap < 64 || b->cap % 64 != 0 || sparse_block_bytes(b->cap) > kSparseMaxBlock) return nullptr;
      bytes = sparse_block_bytes(b->cap);
    } else {
      return nullptr;
    }
    if (in + bytes > cb) return nullptr;
    return b;
  }
  static uint64_t* body(BlockHead* b) { return reinterpret_cast<uint64_t*>(b + 1); }

  // The slot of SPACE in the day's table; claims a free one when `claim` (nullptr: absent / full).
  static SpaceSlot* find_space(const UvHeader* h, DayHeader* d, uint64_t space, bool claim, bool* full) {
    SpaceSlot* t = day_spaces(d);
    const uint32_t mask = h->space_table - 1;
    uint32_t i = static_cast<uint32_t>(space_mix(space)) & mask;
    const uint64_t key = space + 1;
    for (uint32_t n = 0; n < h->space_table; ++n, i = (i + 1) & mask) {
      uint64_t cur = t[i].key.load(std::memory_order_acquire);
      if (cur == key) return &t[i];
      if (cur != 0) continue;
      if (!claim) return nullptr;
      if (d->spaces.load(std::memory_order_relaxed) >= h->max_spaces) {
        if (full) *full = true;
        return nullptr;
      }
      // acq_rel: the key is the whole claim; its desc is published later by release stores.
      if (t[i].key.compare_exchange_strong(cur, key, std::memory_order_acq_rel)) {
        d->spaces.fetch_add(1, std::memory_order_relaxed);
        return &t[i];
      }
      if (cur == key) return &t[i];
    }
    if (full) *full = true;
    return nullptr;
  }

  // The current day for a write to bucket b: rotates the slot under the segment lock if it
  // holds an older bucket. Throws Error (kNoSpace, kForked, ...); returns nullptr for kStale.
  static DayHeader* day_for_write(UvFamily& f, int64_t b, UvStatus* st) {
    UvHeader* h = header(f);
    DaySlot& slot = day_slots(h)[static_cast<uint64_t>(b) % f.retention_];
    const uint64_t want = static_cast<uint64_t>(b) + 1;
    for (int attempt = 0; attempt < 4; ++attempt) {
      uint64_t tag = slot.tag.load(std::memory_order_acquire);
      if (tag == want) {
        DayHeader* d = day_at(f, slot.day, b);
        if (d == nullptr) *st = UvStatus::kCorrupt;
        return d;
      }
      if (tag > want) {
        h->stale.fetch_add(1, std::memory_order_relaxed);
        *st = UvStatus::kStale;
        return nullptr;
      }
      rotate(f, b);
    }
    *st = UvStatus::kBusy;
    return nullptr;
  }

  static void free_day(ControlTxn& txn, UvFamily& f, uint64_t off, uint64_t bytes_expected) {
    const uint64_t size = f.seg_.size();
    if (off == 0 || off % 64 != 0 || off > size || bytes_expected > size - off) return;  // check() reports it
    auto* d = reinterpret_cast<DayHeader*>(f.base_ + off);
    if (d->magic == kDayMagic) {
      const uint32_t n = std::min<uint32_t>(d->chunk_count.load(std::memory_order_acquire), kMaxChunks);
      for (uint32_t c = 0; c < n; ++c) {
        const uint64_t ch = day_chunks(d)[c];
        if (ch == 0 || ch % 64 != 0 || ch >= size) continue;
        try { txn.free(ch); } catch (const Error&) {}  // not an extent: check() reports it
      }
    }
    try { txn.free(off); } catch (const Error&) {}
  }

  static void rotate(UvFamily& f, int64_t b) {
    f.seg_.transact([&](ControlTxn& txn) {
      UvHeader* h = header(f);
      DaySlot& slot = day_slots(h)[static_cast<uint64_t>(b) % f.retention_];
      const uint64_t want = static_cast<uint64_t>(b) + 1;
      const uint64_t tag = slot.tag.load(std::memory_order_acquire);
      if (tag >= want) return;
      const uint64_t bytes = day_extent_bytes(h->space_table);
      txn.charge_to(f.identity());
      if (slot.day != 0) {
        txn.store_u64(as_u64(&slot.tag), 0);  // readers of the old bucket drop their answer
        free_day(txn, f, slot.day, bytes);     // quarantined: readers that hold it stay safe
        txn.store_u64(&slot.day, 0);
      }
      SHMF_KILL_POINT("uv.rotate.after_free");
      const uint64_t off = txn.allocate(bytes);
      auto* d = reinterpret_cast<DayHeader*>(txn.base() + off);
      d->magic = kDayMagic;
      d->space_table = h->space_table;
      d->bucket = b;
      d->chunk_bytes = h->chunk_bytes;
      d->extent_bytes = bytes;
      d->bump.store(kFirstBlock, std::memory_order_relaxed);  // position 0 is "none" in the retired lists
      txn.store_u64(&slot.day, off);
      txn.store_u64(as_u64(&slot.tag), want);  // release (ControlTxn's stores are release)
      h->rotations.fetch_add(1, std::memory_order_relaxed);
    });
  }

  // Ensures the day's chunks can hand out `bytes` at its bump position (own transaction, committed
  // before any block is carved from a new chunk, so no rollback can free a chunk a block lives in).
  static void ensure_chunk(UvFamily& f, DayHeader* d, uint64_t bytes) {
    f.seg_.transact([&](ControlTxn& txn) {
      const uint64_t cb = d->chunk_bytes;
      uint64_t pos = d->bump.load(std::memory_order_acquire);
      if (pos % cb + bytes > cb) pos = (pos / cb + 1) * cb;
      const uint64_t need = pos / cb + 1;
      if (need > kMaxChunks)
        throw Error(ErrorCode::kNoSpace, "UV family '" + f.name_ + "': a bucket holds at most " +
                                             std::to_string(kMaxChunks) + " chunks: raise chunk_bytes");
      txn.charge_to(f.identity());
      uint32_t have = d->chunk_count.load(std::memory_order_acquire);
      while (have < need) {
        const uint64_t off = txn.allocate_unzeroed(cb);
        // Logged: a rollback frees the chunk and forgets it together.
        txn.store_u64(&day_chunks(d)[have], off);
        ++have;
        txn.store_u32(reinterpret_cast<uint32_t*>(&d->chunk_count), have);
      }
    });
  }

  // Carves a block of `bytes` (zeroed here) from the day, under the segment lock; 0 when the
  // current chunk has no room (the caller runs ensure_chunk and retries). Unlogged: the bump
  // position only grows; a holder killed after it leaves unused bytes, never a shared block.
  static uint64_t carve(UvFamily& f, DayHeader* d, uint64_t bytes, std::byte** out) {
    const uint64_t cb = d->chunk_bytes;
    uint64_t pos = d->bump.load(std::memory_order_acquire);
    if (pos % cb + bytes > cb) pos = (pos / cb + 1) * cb;
    const uint64_t c = pos / cb;
    if (c >= kMaxChunks)
      throw Error(ErrorCode::kNoSpace, "UV family '" + f.name_ + "': a bucket holds at most " +
                                           std::to_string(kMaxChunks) + " chunks: raise chunk_bytes");
    if (c >= d->chunk_count.load(std::memory_order_acquire)) return ~uint64_t{0};
    const uint64_t chunk = day_chunks(d)[c];
    const uint64_t size = f.seg_.size();
    if (chunk == 0 || chunk % 64 != 0 || chunk > size || cb > size - chunk)
      throw internal::corrupt_error(Kind::kUv, f.name_, "a chunk offset lies outside the segment");
    std::byte* p = f.base_ + chunk + pos % cb;
    std::memset(p, 0, bytes);  // chunks are allocated unzeroed
    d->bump.store(pos + bytes, std::memory_order_release);
    *out = p;
    return pos;
  }

  // The least epoch any live process announced with calls in flight (UINT64_MAX: none).
  static uint64_t safe_epoch(const UvFamily& f) {
    Announce* a = announces(header(f));
    uint64_t lo = ~uint64_t{0};
    for (uint32_t i = 0; i < kAnnounceSlots; ++i) {
      const uint64_t w = a[i].word.load(std::memory_order_seq_cst);
      if ((w & 0xffff) == 0 || (w >> 16) >= lo) continue;
      if (f.seg_.token_alive(a[i].token.load(std::memory_order_acquire))) lo = w >> 16;
    }
    return lo;
  }

  // Bytes of a block by its header (0: not a block of a known encoding).
  static uint64_t block_bytes(const BlockHead* b) {
    if (b->enc == kEncExact) return exact_block_bytes(b->cap);
    if (b->enc == kEncDense) return dense_block_bytes();
    if (b->enc == kEncSparse) return sparse_block_bytes(b->cap);
    return 0;
  }

  // The head of a retired list (exact class CLS, or sparse class CLS when sparse) that no
  // process can still hold and that is at least `bytes` long, taken off its list and zeroed;
  // ~0 when none. *got: its bytes. Under the segment lock. A list that fails validation is
  // dropped (its blocks stay unused until the bucket goes).
  static uint64_t take_list(UvFamily& f, DayHeader* d, bool sparse, int cls, uint64_t bytes, uint64_t& safe,
                            std::byte** out, uint64_t* got) {
    const UvHeader* h = header(f);
    std::atomic<uint64_t>& head = sparse ? d->sparse_head[cls] : d->free_head[cls];
    std::atomic<uint64_t>& tail = sparse ? d->sparse_tail[cls] : d->free_tail[cls];
    // First fit among the first kScan blocks (FIFO: retirement order, so the first one some
    // process may still hold ends the scan). Unlinking is one store (prev's next, or head);
    // a holder killed between it and the tail's store loses blocks from the list, never links
    // a live one.
    constexpr int kScan = 8;
    uint64_t pos = head.load(std::memory_order_acquire), prev_pos = 0;
    BlockHead* prev = nullptr;
    BlockHead* b = nullptr;
    uint64_t old_bytes = 0;
    for (int n = 0; pos != 0 && n < kScan; ++n) {
      BlockHead* c = block_at(f, d, pos | (sparse ? kEncSparse : kEncExact), 0, h->exact_max, true);
      if (c != nullptr && (c->retired.load(std::memory_order_relaxed) == 0 ||
                           (sparse ? static_cast<int>(sparse_class(block_bytes(c))) != cls
                                   : exact_class(c->cap, h->exact_max) != cls)))
        c = nullptr;
      if (c == nullptr) {
        // A bad link: the list is dropped from here (its blocks stay unused until the bucket goes).
        if (prev == nullptr) head.store(0, std::memory_order_release);
        else prev->next.store(0, std::memory_order_release);
        tail.store(prev_pos, std::memory_order_release);
        return ~uint64_t{0};
      }
      if (safe == 0) safe = safe_epoch(f);
      if (c->retired.load(std::memory_order_relaxed) - 1 >= safe) return ~uint64_t{0};  // someone may still read it
      if (block_bytes(c) >= bytes) {
        b = c;
        old_bytes = block_bytes(c);
        break;
      }
      prev = c;
      prev_pos = pos;
      pos = c->next.load(std::memory_order_relaxed);
    }
    if (b == nullptr) return ~uint64_t{0};
    const uint64_t next = b->next.load(std::memory_order_relaxed);
    if (prev == nullptr) head.store(next, std::memory_order_release);
    else prev->next.store(next, std::memory_order_release);
    if (next == 0) tail.store(prev_pos, std::memory_order_release);
    std::memset(static_cast<void*>(b), 0, old_bytes);
    d->retired_bytes.fetch_sub(std::min(old_bytes, d->retired_bytes.load(std::memory_order_relaxed)),
                               std::memory_order_relaxed);
    d->reused.fetch_add(1, std::memory_order_relaxed);
    *out = reinterpret_cast<std::byte*>(b);
    *got = old_bytes;
    return pos;
  }
  // The bytes of an exact table of class CLS (0: the class is unused for this exact_max).
  static uint64_t exact_class_bytes(const UvFamily& f, int cls) {
    const uint32_t final_cap = exact_final_cap(header(f)->exact_max);
    if (cls == static_cast<int>(kExactClasses) - 1) return exact_block_bytes(final_cap);
    uint32_t c = kMinExactSlots;
    for (int k = 0; k < cls && c < final_cap; ++k) c *= kExactGrowth;
    return c < final_cap ? exact_block_bytes(c) : 0;
  }
  static uint64_t take_retired(UvFamily& f, DayHeader* d, int cls, uint64_t bytes, uint64_t& safe, std::byte** out) {
    uint64_t got = 0;
    return take_list(f, d, false, cls, bytes, safe, out, &got);
  }
  // A retired block for a sparse block of at least `bytes`: a sparse class that holds it or
  // any bigger one, then a retired final exact table. ~0 when none.
  // A block bigger than needed by at least the least sparse block (2,624 bytes) is split: its tail becomes a retired
  // sparse block of its own (stamped as the block was: no process can hold either part).
  static constexpr uint64_t kSplitMin = kSparseFixed + hllk::kHllRegisters / 8;  // the least sparse block: every register 0
  static uint64_t take_for_sparse(UvFamily& f, DayHeader* d, uint64_t bytes, uint64_t& safe, std::byte** out,
                                  uint64_t* got) {
    uint64_t pos = ~uint64_t{0};
    // From the class that may hold a block this big (its head is checked for the size) upward.
    for (uint32_t c = sparse_class(bytes); c < kSparseClasses && pos == ~uint64_t{0}; ++c)
      pos = take_list(f, d, true, static_cast<int>(c), bytes, safe, out, got);
    // Then retired exact tables big enough, smallest class first (at the mission's day the
    // 4,160-byte tables every plan leaves early hold most mid-size sparse blocks).
    for (uint32_t c = 0; c < kExactClasses && pos == ~uint64_t{0}; ++c)
      if (exact_class_bytes(f, static_cast<int>(c)) >= bytes)
        pos = take_list(f, d, false, static_cast<int>(c), bytes, safe, out, got);
    if (pos == ~uint64_t{0}) return pos;
    if (*got > bytes && *got - bytes >= kSplitMin) {
      const uint64_t tail = *got - bytes;
      auto* t = reinterpret_cast<BlockHead*>(*out + bytes);
      t->magic = kBlockMagic;
      t->enc = kEncSparse;
      t->space = ~uint64_t{0};
      t->cap = static_cast<uint32_t>(tail - kSparseFixed);
      t->retired.store(1, std::memory_order_relaxed);  // epoch 0: free for any process that announced since
      link_retired(f, d, t, pos + bytes);
      d->retired_bytes.fetch_add(tail, std::memory_order_relaxed);
      *got = bytes;
    } else if (*got > kSparseMaxBlock) {
      *got = bytes;  // a final exact table of a big exact_max: the rest stays unused until the bucket goes
    }
    return pos;
  }

  // Puts the exact or sparse block OLD (at position POS, its descriptor already replaced) on
  // its class's list, stamped with the epoch before this retirement's increment. Under the
  // segment lock.
  static void retire(UvFamily& f, DayHeader* d, BlockHead* old, uint64_t pos) {
    UvHeader* h = header(f);
    const bool sparse = old->enc == kEncSparse;
    const uint64_t bytes = block_bytes(old);
    const int cls = sparse ? static_cast<int>(sparse_class(bytes)) : exact_class(old->cap, h->exact_max);
    const uint64_t r = h->epoch.fetch_add(1, std::memory_order_seq_cst);  // after the descriptor's store
    d->retired_bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (cls < 0) return;
    old->retired.store(r + 1, std::memory_order_relaxed);
    link_retired(f, d, old, pos);
  }
  // Appends the retired block B at POS to its class's list (B->retired already stamped).
  static void link_retired(UvFamily& f, DayHeader* d, BlockHead* old, uint64_t pos) {
    UvHeader* h = header(f);
    const bool sparse = old->enc == kEncSparse;
    const int cls = sparse ? static_cast<int>(sparse_class(block_bytes(old))) : exact_class(old->cap, h->exact_max);
    if (cls < 0) return;
    std::atomic<uint64_t>& head = sparse ? d->sparse_head[cls] : d->free_head[cls];
    std::atomic<uint64_t>& tail_ref = sparse ? d->sparse_tail[cls] : d->free_tail[cls];
    old->next.store(0, std::memory_order_relaxed);
    const uint64_t tail = tail_ref.load(std::memory_order_acquire);
    BlockHead* t = tail != 0 ? block_at(f, d, tail | (sparse ? kEncSparse : kEncExact), ~uint64_t{0}, h->exact_max, true)
                             : nullptr;
    if (t != nullptr) {
      t->next.store(pos, std::memory_order_release);
      SHMF_KILL_POINT("uv.retire.after_link");  // the list's tail not yet moved: the next retirement relinks
    } else {
      head.store(pos, std::memory_order_release);
    }
    tail_ref.store(pos, std::memory_order_release);
  }

  // Gives SPACE's slot a first block (desc 0) or replaces the block `seen` (sealed, or over its
  // load) by a bigger or dense one. Serialised by the segment lock; idempotent.
  static void promote(UvFamily& f, DayHeader* d, SpaceSlot* ss, uint64_t space, uint64_t seen) {
    UvHeader* h = header(f);
    for (int attempt = 0; attempt < 4; ++attempt) {
      bool need_chunk = false;
      uint64_t need_bytes = 0;
      f.seg_.transact([&](ControlTxn&) {
        const uint64_t cur = ss->desc.load(std::memory_order_acquire);
        if (cur != seen) return;  // someone else promoted it
        std::vector<uint64_t> hashes;
        std::vector<uint8_t> regs;  // registers when the new block is sparse or dense
        BlockHead* old = nullptr;
        uint32_t new_enc = kEncExact, new_cap = kMinExactSlots;
        if (cur != 0) {
          old = block_at(f, d, cur, space, h->exact_max);
          if (old == nullptr) throw internal::corrupt_error(Kind::kUv, f.name_, "a space's block descriptor is invalid");
          if (old->enc == kEncDense) return;  // dense is final
          if (old->enc == kEncSparse) {
            sparse_seal(sparse_buf(body(old)));
            SHMF_KILL_POINT("uv.promote.after_seal");
            regs.assign(hllk::kHllRegisters, 0);
            if (!sparse_read_max(body(old), old->cap, regs.data()))
              throw internal::corrupt_error(Kind::kUv, f.name_, "a space's sparse block is malformed");
          } else {
            exact_seal(body(old), old->cap);
            SHMF_KILL_POINT("uv.promote.after_seal");
            for (uint32_t i = 0; i < old->cap; ++i) {
              const uint64_t v = exact_load(body(old), i);
              if (v >= 2) hashes.push_back(v);
            }
            const uint32_t final_cap = exact_final_cap(h->exact_max);
            if (hashes.size() + 1 > h->exact_max) {
              regs.assign(hllk::kHllRegisters, 0);
              for (uint64_t v : hashes) hash_into_regs(v, regs.data());
            } else {
              new_cap = std::min<uint32_t>(final_cap, old->cap * kExactGrowth);
              if ((hashes.size() + 1) * 4 > uint64_t{new_cap} * 3) new_cap = final_cap;
            }
          }
        }
        // Registers: sparse while the code (with the buffer and offsets) is smaller than a dense block.
        uint64_t bytes = exact_block_bytes(new_cap);
        if (!regs.empty()) {
          const uint64_t code = round64(sparse_code_bytes(regs.data()));
          if (kSparseFixed + code < dense_block_bytes()) {
            new_enc = kEncSparse;
            bytes = kSparseFixed + code;
          } else {
            new_enc = kEncDense;
            bytes = dense_block_bytes();
          }
        }
        std::byte* p = nullptr;
        uint64_t safe = 0, got = bytes;
        uint64_t pos = ~uint64_t{0};
        if (new_enc == kEncSparse) {
          // A retired sparse block of this size or bigger, or a retired final exact table; else
          // fresh bytes rounded up to the class size (room for the next merges).
          pos = take_for_sparse(f, d, bytes, safe, &p, &got);
          if (pos == ~uint64_t{0}) {
            got = bytes;
            pos = carve(f, d, got, &p);
          }
        } else {
          // A retired block of the same class, or for a dense block a retired final exact table
          // (9,024 >= 8,832 bytes at exact_max 1,000), before fresh chunk space.
          const int cls = new_enc == kEncDense ? static_cast<int>(kExactClasses) - 1 : exact_class(new_cap, h->exact_max);
          if (cls >= 0) pos = take_retired(f, d, cls, bytes, safe, &p);
          for (uint32_t c = sparse_class(bytes); new_enc == kEncDense && pos == ~uint64_t{0} && c < kSparseClasses; ++c)
            pos = take_list(f, d, true, static_cast<int>(c), bytes, safe, &p, &got);  // a big retired sparse block
          if (pos == ~uint64_t{0}) pos = carve(f, d, bytes, &p);
        }
        if (pos == ~uint64_t{0}) {
          need_chunk = true;
          need_bytes = got;
          return;
        }
        auto* nb = reinterpret_cast<BlockHead*>(p);
        nb->magic = kBlockMagic;
        nb->enc = new_enc;
        nb->space = space;
        if (new_enc == kEncDense) {
          nb->cap = kDenseWords;
          if (!regs.empty()) dense_from_regs(regs.data(), body(nb));
        } else if (new_enc == kEncSparse) {
          nb->cap = static_cast<uint32_t>(got - kSparseFixed);
          sparse_encode(regs.data(), sparse_groups(body(nb)), sparse_code(body(nb)));
        } else {
          nb->cap = new_cap;
          for (uint64_t v : hashes) (void)exact_insert(body(nb), nb->cap, v);
          nb->entries.store(hashes.size(), std::memory_order_relaxed);
        }
        SHMF_KILL_POINT("uv.promote.before_publish");
        // The one publishing store; seq_cst: before the retirement's epoch increment (see Announce).
        ss->desc.store(pos | new_enc, std::memory_order_seq_cst);
        if (old != nullptr) {
          retire(f, d, old, cur & ~uint64_t{63});
          h->promotions.fetch_add(1, std::memory_order_relaxed);
        }
      });
      if (!need_chunk) return;
      ensure_chunk(f, d, need_bytes);
    }
    throw Error(ErrorCode::kBusy, "UV family '" + f.name_ + "': storage was taken faster than the call could use it: retry");
  }

  static UvStatus add_hash(UvFamily& f, uint64_t space, uint64_t hash) noexcept {
    if (f.read_only_) return UvStatus::kReadOnly;
    if (!f.valid()) return UvStatus::kDropped;
    static thread_local uint32_t calls = 0;
    if (++calls % 256 == 0) f.seg_.quiesce();
    UvHeader* h = header(f);
    const uint64_t v = stored_hash(hash);
    const Pin pin(f.seg_, h);
    try {
      UvStatus st = UvStatus::kBusy;
      DayHeader* d = day_for_write(f, f.bucket_of(f.now()), &st);
      if (d == nullptr) return st;
      bool full = false;
      SpaceSlot* ss = find_space(h, d, space, true, &full);
      if (ss == nullptr) {
        h->spaces_full.fetch_add(1, std::memory_order_relaxed);
        return UvStatus::kSpacesFull;
      }
      d->adds.fetch_add(1, std::memory_order_relaxed);
      uint32_t idx;
      uint8_t rank;
      hllk::hll_index_rank(v, idx, rank);
      for (int attempt = 0; attempt < 8; ++attempt) {
        const uint64_t desc = ss->desc.load(std::memory_order_acquire);
        if (desc == 0) {
          promote(f, d, ss, space, 0);
          continue;
        }
        BlockHead* b = block_at(f, d, desc, space, h->exact_max);
        if (b == nullptr) return UvStatus::kCorrupt;
        UvStatus out;
        if (b->enc == kEncDense) {
          out = dense_update(body(b), idx, rank) ? UvStatus::kChanged : UvStatus::kUnchanged;
        } else if (b->enc == kEncSparse) {
          const uint32_t value = std::min<uint32_t>(rank, kDenseMaxValue);
          const int in_code = sparse_code_get(body(b), b->cap, idx);
          if (in_code < 0) return UvStatus::kCorrupt;
          out = UvStatus::kUnchanged;
          if (static_cast<uint32_t>(in_code) < value) {
            const ExactResult r = sparse_buf_insert(sparse_buf(body(b)), idx, value);
            if (r == ExactResult::kSealedBlock || r == ExactResult::kFull) {
              promote(f, d, ss, space, desc);
              continue;
            }
            if (r == ExactResult::kInserted) {
              out = UvStatus::kChanged;
              const uint64_t n = b->entries.fetch_add(1, std::memory_order_relaxed) + 1;
              if (n * 4 >= uint64_t{kSparseBuf} * 3) {
                try {
                  promote(f, d, ss, space, desc);  // the register is in (acknowledged): a failed merge is retried later
                } catch (const Error&) {
                }
              }
            }
          }
        } else {
          const ExactResult r = exact_insert(body(b), b->cap, v);
          if (r == ExactResult::kSealedBlock || r == ExactResult::kFull) {
            promote(f, d, ss, space, desc);
            continue;
          }
          out = r == ExactResult::kInserted ? UvStatus::kChanged : UvStatus::kUnchanged;
          if (r == ExactResult::kInserted) {
            const uint64_t n = b->entries.fetch_add(1, std::memory_order_relaxed) + 1;
            if ((n * 4 > uint64_t{b->cap} * 3 && b->cap < exact_final_cap(h->exact_max)) || n > h->exact_max) {
              try {
                promote(f, d, ss, space, desc);  // the item is in (acknowledged): a failed promotion is retried later
              } catch (const Error&) {
              }
            }
          }
        }
        hllk::hll_update(day_hll(d), idx, rank, nullptr);
        return out;
      }
      return UvStatus::kBusy;
    } catch (const Error& e) {
      switch (e.code()) {
        case ErrorCode::kNoSpace: h->no_space.fetch_add(1, std::memory_order_relaxed); return UvStatus::kNoSpace;
        case ErrorCode::kForked: return UvStatus::kForked;
        case ErrorCode::kDropped: return UvStatus::kDropped;
        case ErrorCode::kReadOnly: return UvStatus::kReadOnly;
        case ErrorCode::kCorrupt: return UvStatus::kCorrupt;
        default: return UvStatus::kBusy;
      }
    } catch (...) {
      return UvStatus::kBusy;
    }
  }

  // One bucket's view of SPACE for a read: its hashes (exact) or registers (dense).
  struct Gathered {
    std::vector<uint64_t> hashes;
    std::vector<uint8_t> regs;  // 16384 when any bucket is dense
    bool dense = false;
  };

  // Reads SPACE (or, with all, the all-spaces HLL) over the last w buckets. Lock-free.
  static void gather(const UvFamily& f, uint64_t space, uint32_t w, bool all, Gathered& g, uint32_t age0 = 0) {
    f.require_valid();
    const UvHeader* h = header(f);
    if (w < 1 || w > f.retention_)
      throw Error(ErrorCode::kInvalidArgument, "UV family '" + f.name_ + "': window w=" + std::to_string(w) +
                                                   " is outside 1.." + std::to_string(f.retention_) + " (the retention)");
    const int64_t cur = f.bucket_of(f.now());
    const Pin pin(f.seg_, const_cast<UvHeader*>(h));
    std::vector<uint64_t> day_hashes;
    std::vector<uint8_t> day_regs(hllk::kHllRegisters);
    for (uint32_t age = age0; age < age0 + w; ++age) {
      const int64_t b = cur - static_cast<int64_t>(age);
      if (b < 0) break;
      const DaySlot& slot = day_slots(const_cast<UvHeader*>(h))[static_cast<uint64_t>(b) % f.retention_];
      const uint64_t want = static_cast<uint64_t>(b) + 1;
      if (slot.tag.load(std::memory_order_acquire) != want) continue;
      DayHeader* d = day_at(f, slot.day, b);
      bool ok = d != nullptr, dense = false;
      day_hashes.clear();
      if (ok && all) {
        hllk::hll_read_registers(day_hll(d), day_regs.data());
        dense = true;
      } else if (ok) {
        SpaceSlot* ss = find_space(h, d, space, false, nullptr);
        uint64_t desc = ss ? ss->desc.load(std::memory_order_acquire) : 0;
        BlockHead* blk = desc != 0 ? block_at(f, d, desc, space, h->exact_max) : nullptr;
        // Unpinned (read-only or forked) readers: a block may have been reused under them; a
        // moved descriptor is followed again (a few times), a bad one is corruption.
        for (int retry = 0; desc != 0 && blk == nullptr && retry < 4; ++retry) {
          const uint64_t again = ss->desc.load(std::memory_order_acquire);
          if (again == desc) break;
          desc = again;
          blk = block_at(f, d, desc, space, h->exact_max);
        }
        if (desc != 0) {
          if (blk == nullptr) {
            ok = false;
          } else if (blk->enc == kEncDense) {
            std::fill(day_regs.begin(), day_regs.end(), 0);
            dense_read_max(body(blk), day_regs.data());
            dense = true;
          } else if (blk->enc == kEncSparse) {
            std::fill(day_regs.begin(), day_regs.end(), 0);
            ok = sparse_read_max(body(blk), blk->cap, day_regs.data());
            // Unpinned readers: a block reused under them may not decode; follow a moved
            // descriptor again (a few times), as above.
            for (int retry = 0; !ok && retry < 4; ++retry) {
              const uint64_t again = ss->desc.load(std::memory_order_acquire);
              if (again == desc) break;
              desc = again;
              BlockHead* nb = block_at(f, d, desc, space, h->exact_max);
              if (nb == nullptr || nb->enc == kEncExact) break;
              std::fill(day_regs.begin(), day_regs.end(), 0);
              if (nb->enc == kEncDense) {
                dense_read_max(body(nb), day_regs.data());
                ok = true;
              } else {
                ok = sparse_read_max(body(nb), nb->cap, day_regs.data());
              }
            }
            dense = true;
          } else {
            for (uint32_t i = 0; i < blk->cap; ++i) {
              const uint64_t v = exact_load(body(blk), i);
              if (v >= 2) day_hashes.push_back(v);
            }
          }
        }
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.tag.load(std::memory_order_relaxed) != want) continue;  // replaced meanwhile: the bucket left the window
      if (!ok) throw internal::corrupt_error(Kind::kUv, f.name_, "bucket " + std::to_string(b) + " fails validation");
      if (dense) {
        if (!g.dense) g.regs.assign(hllk::kHllRegisters, 0);
        g.dense = true;
        for (uint32_t i = 0; i < hllk::kHllRegisters; ++i) g.regs[i] = std::max(g.regs[i], day_regs[i]);
      }
      g.hashes.insert(g.hashes.end(), day_hashes.begin(), day_hashes.end());
    }
  }
  static std::vector<uint8_t> registers(const Gathered& g) {
    std::vector<uint8_t> r = g.dense ? g.regs : std::vector<uint8_t>(hllk::kHllRegisters, 0);
    for (uint64_t v : g.hashes) hash_into_regs(v, r.data());
    return r;
  }
};

UvFamily UvFamily::create(Segment& seg, std::string_view name, const UvOptions& o) {
  std::string p = options_problem(o);
  if (!p.empty()) throw Error(ErrorCode::kInvalidArgument, "UV family '" + std::string(name) + "': " + p);
  const uint64_t bytes = region_bytes_for(o.retention);
  seg.create_region(name, Kind::kUv, bytes, [&](std::byte* region, uint64_t, ControlTxn& txn) {
    auto* h = reinterpret_cast<UvHeader*>(region);
    init_header(h, o, static_cast<uint64_t>(region - txn.base()), bytes);
  });
  return open(seg, name);
}

UvFamily UvFamily::open(Segment& seg, std::string_view name) {
  UvFamily f;
  RegionInfo info = f.bind(seg, name, Kind::kUv);
  validate(info, f.region_, seg.size());
  f.base_ = seg.base();
  f.offset_ = info.offset;
  const auto* h = reinterpret_cast<const UvHeader*>(f.region_);
  // The geometry the data plane divides and indexes by: copied once, range-checked on the copy
  // (the header validated above could change under us), never re-read (issue 23).
  f.retention_ = h->retention;
  f.bucket_seconds_ = h->bucket_seconds;
  f.utc_offset_ = h->utc_offset;
  if (f.retention_ < 1 || f.retention_ > internal::uv::kMaxRetention || f.bucket_seconds_ < 1)
    throw internal::corrupt_error(Kind::kUv, name, "retention / bucket_seconds changed while the family was opened");
  // Every kept bucket's extent is validated now; the data plane re-validates what it follows.
  for (uint32_t s = 0; s < f.retention_; ++s) {
    const DaySlot& slot = day_slots(const_cast<UvHeader*>(h))[s];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;
    if ((tag - 1) % f.retention_ != s || UvOps::day_at(f, slot.day, static_cast<int64_t>(tag - 1)) == nullptr) {
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.tag.load(std::memory_order_relaxed) != tag) continue;  // rotating now
      throw internal::corrupt_error(Kind::kUv, name, "bucket slot " + std::to_string(s) + " names an invalid bucket extent");
    }
  }
  return f;
}

UvFamily UvFamily::open_or_create(Segment& seg, std::string_view name, const UvOptions& opts) {
  for (int attempt = 0;; ++attempt) {
    try {
      return open(seg, name);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound || attempt > 3) throw;
    }
    try {
      return create(seg, name, opts);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kExists) throw;
    }
  }
}

bool UvFamily::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kUv, [&](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    if (bytes < sizeof(UvHeader)) return;
    auto* h = reinterpret_cast<UvHeader*>(region);
    if (h->magic != kMagic || h->retention < 1 || h->retention > kMaxRetention ||
        region_bytes_for(h->retention) > bytes)
      return;  // not ours to interpret: the region itself is still freed
    UvFamily f;
    f.seg_ = seg;
    f.base_ = seg.base();
    f.name_ = std::string(name);
    for (uint32_t s = 0; s < h->retention; ++s) {
      DaySlot& slot = day_slots(h)[s];
      if (slot.day != 0) UvOps::free_day(txn, f, slot.day, day_extent_bytes(h->space_table));
    }
  });
}

void UvFamily::set_clock(int64_t (*fn)(void*), void* ctx) noexcept {
  clock_ = fn;
  clock_ctx_ = ctx;
  fixed_ = false;
}
void UvFamily::set_now(int64_t t) noexcept {
  fixed_now_ = t;
  fixed_ = true;
}
void UvFamily::use_system_clock() noexcept {
  clock_ = nullptr;
  fixed_ = false;
}
int64_t UvFamily::now() const noexcept {
  if (fixed_) return fixed_now_;
  if (clock_) return clock_(clock_ctx_);
  return system_now();
}
int64_t UvFamily::bucket_of(int64_t t) const noexcept {
  return bucket_seconds_ == 0 ? 0 : bucket_number(t, utc_offset_, bucket_seconds_);
}
int64_t UvFamily::bucket_at(uint32_t age) const noexcept { return bucket_of(now()) - static_cast<int64_t>(age); }

UvStatus UvFamily::add(uint64_t space, std::string_view item) noexcept {
  return UvOps::add_hash(*this, space, item_hash(item.data(), item.size()));
}
UvStatus UvFamily::add(uint64_t space, uint64_t item) noexcept { return UvOps::add_hash(*this, space, item_hash(item)); }

uint64_t UvFamily::add_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                            std::span<UvStatus> out) noexcept {
  const size_t n = std::min(spaces.size(), items.size());
  uint64_t changed = 0;
  for (size_t i = 0; i < n; ++i) {
    UvStatus s = add(spaces[i], items[i]);
    changed += s == UvStatus::kChanged;
    if (i < out.size()) out[i] = s;
  }
  return changed;
}

uint64_t UvFamily::count(uint64_t space, uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, space, w, false, g);
  if (!g.dense) {
    std::sort(g.hashes.begin(), g.hashes.end());
    return static_cast<uint64_t>(std::unique(g.hashes.begin(), g.hashes.end()) - g.hashes.begin());
  }
  return hllk::hll_estimate(UvOps::registers(g).data());
}

uint64_t UvFamily::count_hll(uint64_t space, uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, space, w, false, g);
  return hllk::hll_estimate(UvOps::registers(g).data());
}

uint64_t UvFamily::count_all(uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, 0, w, true, g);
  return hllk::hll_estimate(UvOps::registers(g).data());
}

std::string UvFamily::export_redis(uint64_t space, uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, space, w, false, g);
  return hllk::hll_redis_encode_dense(UvOps::registers(g).data());
}

std::string UvFamily::export_redis_at(uint64_t space, uint32_t age) const {
  if (age >= retention_)
    throw Error(ErrorCode::kInvalidArgument, "UV family '" + name_ + "': age " + std::to_string(age) +
                                                 " is outside 0.." + std::to_string(retention_ - 1));
  UvOps::Gathered g;
  UvOps::gather(*this, space, 1, false, g, age);
  return hllk::hll_redis_encode_dense(UvOps::registers(g).data());
}

uint64_t UvFamily::count_at(uint64_t space, uint32_t age) const {
  if (age >= retention_)
    throw Error(ErrorCode::kInvalidArgument, "UV family '" + name_ + "': age " + std::to_string(age) +
                                                 " is outside 0.." + std::to_string(retention_ - 1));
  UvOps::Gathered g;
  UvOps::gather(*this, space, 1, false, g, age);
  if (!g.dense) {
    std::sort(g.hashes.begin(), g.hashes.end());
    return static_cast<uint64_t>(std::unique(g.hashes.begin(), g.hashes.end()) - g.hashes.begin());
  }
  return hllk::hll_estimate(UvOps::registers(g).data());
}

std::string UvFamily::export_redis_all(uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, 0, w, true, g);
  return hllk::hll_redis_encode_dense(UvOps::registers(g).data());
}

std::vector<uint64_t> UvFamily::spaces(uint32_t w) const {
  require_valid();
  const UvHeader* h = UvOps::header(*this);
  if (w < 1 || w > retention_)
    throw Error(ErrorCode::kInvalidArgument, "UV family '" + name_ + "': window w=" + std::to_string(w) +
                                                 " is outside 1.." + std::to_string(retention_));
  std::set<uint64_t> out;
  const int64_t cur = bucket_of(now());
  const internal::uv::Pin pin(seg_, const_cast<UvHeader*>(h));
  for (uint32_t age = 0; age < w; ++age) {
    const int64_t b = cur - static_cast<int64_t>(age);
    if (b < 0) break;
    const DaySlot& slot = day_slots(const_cast<UvHeader*>(h))[static_cast<uint64_t>(b) % retention_];
    if (slot.tag.load(std::memory_order_acquire) != static_cast<uint64_t>(b) + 1) continue;
    DayHeader* d = UvOps::day_at(*this, slot.day, b);
    if (d == nullptr) continue;
    SpaceSlot* t = day_spaces(d);
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      if (k != 0 && t[i].desc.load(std::memory_order_acquire) != 0) out.insert(k - 1);
    }
  }
  return {out.begin(), out.end()};
}

UvStats UvFamily::stats() const {
  require_valid();
  const UvHeader* h = UvOps::header(*this);
  UvStats s;
  s.retention = h->retention;
  s.bucket_seconds = h->bucket_seconds;
  s.utc_offset = h->utc_offset;
  s.max_spaces = h->max_spaces;
  s.exact_max = h->exact_max;
  s.chunk_bytes = h->chunk_bytes;
  s.current_bucket = bucket_of(now());
  s.rotations = h->rotations.load(std::memory_order_relaxed);
  s.promotions = h->promotions.load(std::memory_order_relaxed);
  s.spaces_full = h->spaces_full.load(std::memory_order_relaxed);
  s.no_space = h->no_space.load(std::memory_order_relaxed);
  s.stale = h->stale.load(std::memory_order_relaxed);
  s.memory_bytes = h->region_bytes;
  const internal::uv::Pin pin(seg_, const_cast<UvHeader*>(h));
  for (uint32_t age = 0; age < retention_; ++age) {
    const int64_t b = s.current_bucket - static_cast<int64_t>(age);
    if (b < 0) break;
    const DaySlot& slot = day_slots(const_cast<UvHeader*>(h))[static_cast<uint64_t>(b) % retention_];
    if (slot.tag.load(std::memory_order_acquire) != static_cast<uint64_t>(b) + 1) continue;
    DayHeader* d = UvOps::day_at(*this, slot.day, b);
    if (d == nullptr) continue;
    UvBucketStats bs;
    bs.bucket = b;
    bs.age = age;
    bs.adds = d->adds.load(std::memory_order_relaxed);
    bs.table_bytes = d->extent_bytes;
    bs.chunk_bytes = uint64_t{std::min<uint32_t>(d->chunk_count.load(std::memory_order_acquire), kMaxChunks)} * d->chunk_bytes;
    bs.retired_bytes = d->retired_bytes.load(std::memory_order_relaxed);
    bs.reused = d->reused.load(std::memory_order_relaxed);
    SpaceSlot* t = day_spaces(d);
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      if (k == 0) continue;
      const uint64_t desc = t[i].desc.load(std::memory_order_acquire);
      if (desc == 0) continue;
      BlockHead* blk = UvOps::block_at(*this, d, desc, k - 1, h->exact_max);
      if (blk == nullptr) continue;
      ++bs.spaces;
      if (blk->enc == kEncDense) {
        ++bs.dense_spaces;
        bs.block_bytes += dense_block_bytes();
      } else if (blk->enc == kEncSparse) {
        ++bs.sparse_spaces;
        bs.block_bytes += sparse_block_bytes(blk->cap);
      } else {
        ++bs.exact_spaces;
        bs.block_bytes += exact_block_bytes(blk->cap);
      }
    }
    s.memory_bytes += bs.table_bytes + bs.chunk_bytes;
    s.buckets.push_back(bs);
  }
  return s;
}

namespace internal::uv {

// Header, every kept bucket (bounds, magic, chunks inside the segment and not overlapping),
// and every space's block (bounds, owner, encoding, dense words well formed).
void check_uv(Segment& seg, const RegionInfo& info, bool, CheckReport& report) {
  CheckScope scope = check_scope(info, report);
  std::byte* region = seg.base() + info.offset;
  if (!scope.validated([&] { validate(info, region, seg.size()); })) return;
  UvFamily f;
  try {
    f = UvFamily::open(seg, info.name);
  } catch (const Error& e) {
    scope.add(e.what());
    return;
  }
  auto* h = reinterpret_cast<UvHeader*>(region);
  const uint64_t size = seg.size();
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // [off, end) of every day and chunk
  extents.emplace_back(info.offset, info.offset + h->region_bytes);
  uint64_t bad_blocks = 0, bad_words = 0, bad_sparse = 0;
  for (uint32_t s = 0; s < h->retention; ++s) {
    DaySlot& slot = day_slots(h)[s];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;
    const int64_t b = static_cast<int64_t>(tag - 1);
    DayHeader* d = UvOps::day_at(f, slot.day, b);
    if (d == nullptr || static_cast<uint64_t>(b) % h->retention != s) {
      scope.add("bucket slot " + std::to_string(s) + " names an invalid bucket extent");
      continue;
    }
    extents.emplace_back(slot.day, slot.day + d->extent_bytes);
    const uint32_t nc = d->chunk_count.load(std::memory_order_acquire);
    if (nc > kMaxChunks) {
      scope.add("bucket " + std::to_string(b) + " claims " + std::to_string(nc) + " chunks (at most " +
                std::to_string(kMaxChunks) + ")");
      continue;
    }
    bool chunks_ok = true;
    for (uint32_t c = 0; c < nc; ++c) {
      const uint64_t ch = day_chunks(d)[c];
      if (ch == 0 || ch % 64 != 0 || ch > size || d->chunk_bytes > size - ch) {
        scope.add("bucket " + std::to_string(b) + " chunk " + std::to_string(c) + " lies outside the segment");
        chunks_ok = false;
        continue;
      }
      extents.emplace_back(ch, ch + d->chunk_bytes);
    }
    if (d->bump.load(std::memory_order_acquire) > uint64_t{nc} * d->chunk_bytes)
      scope.add("bucket " + std::to_string(b) + " hands out more bytes than its chunks hold");
    if (!chunks_ok) continue;
    for (uint32_t cls = 0; cls < kExactClasses; ++cls) {
      uint64_t pos = d->free_head[cls].load(std::memory_order_acquire);
      const uint64_t limit = d->bump.load(std::memory_order_acquire) / 64 + 1;
      for (uint64_t n = 0; pos != 0; ++n) {
        BlockHead* blk = UvOps::block_at(f, d, pos | kEncExact, 0, h->exact_max, true);
        if (blk == nullptr || n > limit || exact_class(blk->cap, h->exact_max) != static_cast<int>(cls)) {
          scope.add("bucket " + std::to_string(b) + ": the list of retired blocks of class " + std::to_string(cls) +
                    " names an invalid block or loops (the next promotion drops the list)");
          break;
        }
        pos = blk->next.load(std::memory_order_acquire);
      }
    }
    for (uint32_t cls = 0; cls < kSparseClasses; ++cls) {
      uint64_t pos = d->sparse_head[cls].load(std::memory_order_acquire);
      const uint64_t limit = d->bump.load(std::memory_order_acquire) / 64 + 1;
      for (uint64_t n = 0; pos != 0; ++n) {
        BlockHead* blk = UvOps::block_at(f, d, pos | kEncSparse, 0, h->exact_max, true);
        if (blk == nullptr || n > limit || sparse_class(sparse_block_bytes(blk->cap)) != cls) {
          scope.add("bucket " + std::to_string(b) + ": the list of retired sparse blocks of class " +
                    std::to_string(cls) + " names an invalid block or loops (the next promotion drops the list)");
          break;
        }
        pos = blk->next.load(std::memory_order_acquire);
      }
    }
    SpaceSlot* t = day_spaces(d);
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      const uint64_t desc = t[i].desc.load(std::memory_order_acquire);
      if (k == 0) {
        if (desc != 0) ++bad_blocks;
        continue;
      }
      if (desc == 0) continue;
      BlockHead* blk = UvOps::block_at(f, d, desc, k - 1, h->exact_max);
      if (blk == nullptr) {
        ++bad_blocks;
        continue;
      }
      if (blk->enc == kEncDense) {
        const uint64_t* words = reinterpret_cast<const uint64_t*>(blk + 1);
        for (uint32_t wi = 0; wi < kDenseWords; ++wi)
          bad_words += !dense_word_ok(std::atomic_ref<const uint64_t>(words[wi]).load(std::memory_order_relaxed), wi);
      } else if (blk->enc == kEncSparse) {
        std::vector<uint8_t> regs(hllk::kHllRegisters, 0);
        if (!sparse_read_max(blk + 1, blk->cap, regs.data())) ++bad_sparse;
      }
    }
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].first < extents[i - 1].second) {
      scope.add("two of its extents (bucket tables, chunks or its own header) overlap");
      break;
    }
  if (bad_blocks != 0) scope.add(std::to_string(bad_blocks) + " space descriptors name an invalid block");
  if (bad_words != 0) scope.add(std::to_string(bad_words) + " dense register words hold stray bits");
  if (bad_sparse != 0) scope.add(std::to_string(bad_sparse) + " sparse blocks hold a malformed code");
}

}  // namespace internal::uv
}  // namespace shmfilter
