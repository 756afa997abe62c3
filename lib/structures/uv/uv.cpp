// lib/structures/uv/uv.cpp: the UvFamily handle over uv_impl.h (include/shmfilter/uv.hpp):
// open/validate, the clock and rotation, the page allocator, the space locks, the data plane
// (add, promotion, merge), the reads (count, count_hll, count_all, export), drop, stats and
// the checker check_uv.
#include "base/cpu_relax.h"
#include "shmfilter/uv.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "base/kill_point.h"
#include "segment/segment_impl.h"
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

uint64_t mono_ms() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
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
  if (o.chunk_bytes < kMinChunkBytes || o.chunk_bytes > kMaxChunkBytes || o.chunk_bytes % kPage != 0)
    return "chunk_bytes must be a multiple of 256 in 64 KiB..256 MiB";
  return {};
}

// Robust lock word (uv_impl.h). Spins briefly, then yields; checks the owner's liveness every
// 64 rounds and takes a dead owner's lock over with one CAS; gives up after ~500 ms.
bool internal::uv::lock_word(const Segment& seg, std::atomic<uint64_t>& w, uint64_t token, bool wait,
                             std::atomic<uint64_t>* takeovers) noexcept {
  if (token == 0) return false;
  uint64_t deadline = 0;
  for (uint32_t round = 0;; ++round) {
    uint64_t cur = 0;
    // acquire: what the previous holder wrote under the lock is visible.
    if (w.compare_exchange_strong(cur, token, std::memory_order_acquire, std::memory_order_relaxed)) return true;
    if (round % 64 == 0 && cur != token && !seg.token_alive(cur)) {
      // The owner died holding it: what it left is consistent at every point (uv_impl.h).
      if (w.compare_exchange_strong(cur, token, std::memory_order_acquire, std::memory_order_relaxed)) {
        if (takeovers) takeovers->fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    if (!wait) return false;
    if (round < 128) {
      internal::cpu_relax();
      continue;
    }
    if (deadline == 0) deadline = mono_ms() + 500;
    if (round % 64 == 0 && mono_ms() > deadline) return false;
    sched_yield();
  }
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

// Holds a lock word for a scope (released on every path, exceptions included).
struct Held {
  std::atomic<uint64_t>* w = nullptr;
  Held() = default;
  explicit Held(std::atomic<uint64_t>* x) : w(x) {}
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() {
    if (w) unlock_word(*w);
  }
};

}  // namespace

// Every private operation of UvFamily (lib/structures/README.md).
struct UvOps {
  static UvHeader* header(const UvFamily& f) { return reinterpret_cast<UvHeader*>(f.region_); }
  static uint32_t retention(const UvFamily& f) { return f.retention_; }

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
    // Its allocation state: bump (acquire) first, then the chunk count, which a bump number
    // never passes (chunks are committed before a page is handed out from them).
    const uint64_t bump = d->bump.load(std::memory_order_acquire);
    const uint32_t chunks = d->chunk_count.load(std::memory_order_acquire);
    if (chunks > kMaxChunks || bump < 1 || bump > uint64_t{chunks} * (d->chunk_bytes / kPage) + 1) return nullptr;
    return d;
  }

  // Page P of day D, validated (handed out already, inside an allocated chunk inside the
  // segment); nullptr if bad. Loads the allocation state after the caller's load of whatever
  // named P (acquire), so a page handed out before that is within it.
  static std::byte* page_at(const UvFamily& f, DayHeader* d, uint64_t p) {
    if (p == 0 || p >= d->bump.load(std::memory_order_acquire)) return nullptr;
    const uint64_t cb = d->chunk_bytes, ppc = cb / kPage;
    if (ppc == 0) return nullptr;  // a divisor read from the segment (issue 23: never divide by a segment byte unchecked)
    const uint64_t c = p / ppc;
    if (c >= d->chunk_count.load(std::memory_order_acquire) || c >= kMaxChunks) return nullptr;
    const uint64_t chunk = day_chunks(d)[c];
    const uint64_t size = f.seg_.size();
    if (chunk == 0 || chunk % 64 != 0 || chunk > size || cb > size - chunk) return nullptr;
    return f.base_ + chunk + (p % ppc) * kPage;
  }

  // The head page a desc names, validated (magic, encoding, owner, page count); nullptr if bad.
  static PageHead* head_at(const UvFamily& f, DayHeader* d, uint64_t desc, uint64_t space) {
    std::byte* p = page_at(f, d, desc >> 2);
    if (p == nullptr) return nullptr;
    auto* hd = reinterpret_cast<PageHead*>(p);
    const uint32_t enc = static_cast<uint32_t>(desc & kEncMask);
    if (hd->magic != kHeadMagic || hd->enc != enc || hd->space != space) return nullptr;
    if (enc == kEncExact) {
      if (hd->npages != 0) return nullptr;
    } else if (enc == kEncSparse) {
      if (hd->npages < 1 || hd->npages > kSparseRefs || hd->rice > kRiceMax ||
          sparse_string_bytes(hd->code_bits) > uint64_t{hd->npages} * kPage)
        return nullptr;
    } else if (enc == kEncDense) {
      if (hd->npages != kDenseRefs) return nullptr;
    } else {
      return nullptr;
    }
    return hd;
  }
  // The data pages of a sparse or dense head (validated); false if one is bad.
  static bool data_pages(const UvFamily& f, DayHeader* d, PageHead* hd, PagedBytes& pb) {
    if (hd->enc != kEncSparse || hd->npages > kSparseRefs) return false;
    const uint32_t* refs = head_refs(hd);
    pb.n = hd->npages;
    for (uint32_t i = 0; i < pb.n; ++i)
      if ((pb.pages[i] = page_at(f, d, refs[i])) == nullptr) return false;
    return true;
  }
  static uint64_t* dense_page(const UvFamily& f, DayHeader* d, PageHead* hd, uint32_t i) {
    return reinterpret_cast<uint64_t*>(page_at(f, d, head_refs(hd)[i]));
  }
  // An exact head's published count (acquire: the entries below it and their pages are visible).
  static bool exact_count(PageHead* hd, uint32_t exact_max, uint32_t* n) {
    *n = hd->count.load(std::memory_order_acquire);
    return *n <= exact_max && *n <= kExactRefs * kExactPerPage;
  }
  // Every entry of an exact head (n published) appended to out; false if a page is bad.
  static bool exact_entries(const UvFamily& f, DayHeader* d, PageHead* hd, uint32_t n, std::vector<uint64_t>& out) {
    const uint32_t* refs = head_refs(hd);
    for (uint32_t pi = 0; pi * kExactPerPage < n; ++pi) {
      const uint32_t ref = std::atomic_ref<const uint32_t>(refs[pi]).load(std::memory_order_relaxed);
      std::byte* pg = page_at(f, d, ref);
      if (pg == nullptr) return false;
      const uint32_t m = std::min(kExactPerPage, n - pi * kExactPerPage);
      for (uint32_t i = 0; i < m; ++i) out.push_back(get48(pg + i * kExactEntry));
    }
    return true;
  }

  // The registers of a sparse or dense head max-merged into regs; false if malformed.
  static bool head_regs(const UvFamily& f, DayHeader* d, PageHead* hd, uint8_t* regs) {
    if (hd->enc == kEncDense) {
      for (uint32_t pi = 0; pi < kDenseRefs; ++pi) {
        const uint64_t* words = dense_page(f, d, hd, pi);
        if (words == nullptr) return false;
        for (uint32_t j = 0; j < kDenseWordsPerPage && pi * kDenseWordsPerPage + j < kDenseWords; ++j) {
          const uint32_t wi = pi * kDenseWordsPerPage + j;
          dense_word_max(std::atomic_ref<const uint64_t>(words[j]).load(std::memory_order_relaxed), wi, regs);
        }
      }
      return true;
    }
    PagedBytes pb;
    if (!data_pages(f, d, hd, pb)) return false;
    const uint64_t bytes = uint64_t{pb.n} * kPage;
    uint8_t buf[kSparseMaxBytes + 8];
    pb.copy_out(0, bytes, buf);
    std::memset(buf + bytes, 0, 8);
    if (!sparse_decode_all(buf, bytes, hd->code_bits, hd->rice, regs)) return false;
    return sparse_buf_max(sparse_buf(hd), regs);
  }

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
      // acq_rel: the key is the whole claim; its desc is published later.
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
      init_day(txn.base() + off, h->space_table, b, h->chunk_bytes);
      txn.store_u64(&slot.day, off);
      txn.store_u64(as_u64(&slot.tag), want);  // release (ControlTxn's stores are release)
      h->rotations.fetch_add(1, std::memory_order_relaxed);
    });
  }

  // Ensures chunks [0, need) exist (own transaction, committed before any page of a new chunk is
  // handed out, so no rollback can free a chunk a page lives in). Called by the allocator's
  // holder: the segment lock is held only for these few logged stores, never across a merge.
  static void ensure_chunks(UvFamily& f, DayHeader* d, uint64_t need) {
    if (need > kMaxChunks)
      throw Error(ErrorCode::kNoSpace, "UV family '" + f.name_ + "': a bucket holds at most " +
                                           std::to_string(kMaxChunks) + " chunks: raise chunk_bytes");
    f.seg_.transact([&](ControlTxn& txn) {
      const uint64_t cb = d->chunk_bytes;
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

  static std::atomic<uint64_t>* takeovers(const UvFamily& f) { return &header(f)->lock_takeovers; }

  // Hands out n zeroed pages of day D into out[] (the day's allocator lock held meanwhile):
  // from the free list, else a limbo generation once no process can read its pages (the segment's
  // announcements: min_live_epoch >= its newest retirement's epoch), else fresh pages from the
  // bump number (new chunks as needed). Throws kBusy (the lock stayed taken) / kNoSpace.
  static void alloc_pages(UvFamily& f, DayHeader* d, uint32_t n, uint32_t* out) {
    if (f.seg_.owner_token() == 0) throw Error(ErrorCode::kForked, "UV family '" + f.name_ + "': a forked handle cannot take locks: open the segment in this process");
    if (!lock_word(f.seg_, d->alloc_lock, f.seg_.owner_token(), true, takeovers(f)))
      throw Error(ErrorCode::kBusy, "UV family '" + f.name_ + "': the bucket's page allocator stayed busy: retry");
    Held held(&d->alloc_lock);
    const uint64_t ppc = d->chunk_bytes / kPage;
    bool limbo_checked = false;
    for (uint32_t k = 0; k < n;) {
      uint32_t p = d->free_head.load(std::memory_order_acquire);
      std::byte* pg = nullptr;
      if (p != 0) {
        pg = page_at(f, d, p);
        if (pg == nullptr) {
          d->free_head.store(0, std::memory_order_release);  // a bad link: the list is dropped (its pages stay unused)
          continue;
        }
        const uint32_t next = std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(pg)).load(std::memory_order_relaxed);
        d->free_head.store(next, std::memory_order_release);  // one store: a holder killed after it loses p, never reuses it twice
        SHMF_KILL_POINT("uv.alloc.after_pop");
        const uint64_t r = d->retired_pages.load(std::memory_order_relaxed);
        d->retired_pages.store(r > 0 ? r - 1 : 0, std::memory_order_relaxed);
        d->reused.fetch_add(1, std::memory_order_relaxed);
      } else if (!limbo_checked) {
        limbo_checked = true;
        // A generation whose newest retirement every process inside a call announced an epoch
        // at or past holds no page anyone can reach: it becomes the free list. The generation
        // empties first: a holder killed between the two stores loses it, never puts a page on
        // both lists.
        uint64_t safe = 0;
        for (uint32_t i = 0; i < kLimbo && d->free_head.load(std::memory_order_relaxed) == 0; ++i) {
          const uint32_t l = d->limbo_head[i].load(std::memory_order_acquire);
          if (l == 0) continue;
          if (safe == 0) safe = f.seg_.impl()->min_live_epoch();
          if (d->limbo_epoch[i].load(std::memory_order_acquire) > safe) continue;
          d->limbo_head[i].store(0, std::memory_order_release);
          free_generation(f, d, l);
        }
        continue;
      } else {
        const uint64_t b = d->bump.load(std::memory_order_acquire);
        if (b >= (uint64_t{1} << 32) - 1)
          throw Error(ErrorCode::kNoSpace, "UV family '" + f.name_ + "': a bucket holds at most 2^32 pages");
        if (b / ppc >= d->chunk_count.load(std::memory_order_acquire)) ensure_chunks(f, d, b / ppc + 1);
        const uint64_t c = b / ppc, chunk = day_chunks(d)[c];
        const uint64_t size = f.seg_.size();
        if (chunk == 0 || chunk % 64 != 0 || chunk > size || d->chunk_bytes > size - chunk)
          throw internal::corrupt_error(Kind::kUv, f.name_, "a chunk offset lies outside the segment");
        d->bump.store(b + 1, std::memory_order_release);  // only grows: a holder killed after it leaves one page unused
        p = static_cast<uint32_t>(b);
        pg = f.base_ + chunk + (b % ppc) * kPage;
      }
      std::memset(pg, 0, kPage);
      out[k++] = p;
    }
  }

  // Puts a replaced sketch on a limbo generation (its desc was replaced already, by a seq_cst
  // store). The segment's epoch is raised (seq_cst RMW, after that store) and the generation's
  // epoch set to it BEFORE the sketch is linked, so no page of it is handed out while a process
  // that may hold the old desc is inside a call. Only the head is linked, through its `reserved`
  // word, which no reader reads: every byte a reader of the old desc may still read stays as it
  // was until the generation is safe (free_generation then lists the head and its data pages).
  // One store links the whole sketch; a failure only leaves its pages unused.
  static void retire_pages(UvFamily& f, DayHeader* d, const std::vector<uint32_t>& pages) {
    if (pages.empty()) return;
    auto* seg_epoch = &f.seg_.impl()->hdr()->global_epoch;
    const uint64_t e = __atomic_add_fetch(seg_epoch, 1, __ATOMIC_SEQ_CST);
    if (!lock_word(f.seg_, d->alloc_lock, f.seg_.owner_token(), true, takeovers(f))) return;  // lost (unused) pages
    Held held(&d->alloc_lock);
    std::byte* pg = page_at(f, d, pages[0]);
    if (pg == nullptr) return;
    const uint32_t gen = limbo_generation(e);
    if (d->limbo_epoch[gen].load(std::memory_order_relaxed) < e) d->limbo_epoch[gen].store(e, std::memory_order_release);
    auto* hd = reinterpret_cast<PageHead*>(pg);
    std::atomic_ref<uint64_t>(hd->reserved).store(d->limbo_head[gen].load(std::memory_order_relaxed), std::memory_order_relaxed);
    d->limbo_head[gen].store(pages[0], std::memory_order_release);
    d->retired_pages.fetch_add(pages.size(), std::memory_order_relaxed);
    SHMF_KILL_POINT("uv.retire.after_link");
  }
  // A safe limbo generation (detached by the caller, who holds alloc_lock) onto the free list:
  // each retired head's pages (from the head's own refs, validated), then the head. The next
  // head is read before this one's pages are linked (a link overwrites a page's first u32). A
  // bad head or a chain longer than the pages ever handed out ends the walk: the rest stay
  // unused. A holder killed in the walk loses the rest (unused), never lists a page twice.
  static void free_generation(UvFamily& f, DayHeader* d, uint32_t head) {
    const uint64_t bump = d->bump.load(std::memory_order_acquire);
    std::vector<uint32_t> ps;
    for (uint64_t n = 0; head != 0 && n <= bump; ++n) {
      std::byte* pg = page_at(f, d, head);
      if (pg == nullptr) return;
      auto* hd = reinterpret_cast<PageHead*>(pg);
      const uint64_t next = std::atomic_ref<uint64_t>(hd->reserved).load(std::memory_order_relaxed);
      ps.clear();
      if (hd->magic == kHeadMagic && hd->enc >= kEncExact && hd->enc <= kEncSparse) {
        const uint32_t exact_n = hd->enc == kEncExact ? std::min<uint32_t>(hd->count.load(std::memory_order_relaxed),
                                                                          kExactRefs * kExactPerPage)
                                                      : 0;
        if (hd->enc == kEncExact || hd->npages <= max_refs(hd->enc)) sketch_pages(hd, head, exact_n, ps);
      }
      if (ps.empty()) ps.push_back(head);
      for (size_t i = ps.size(); i-- > 0;) {  // the head last: its refs were read above, its link below
        std::byte* q = page_at(f, d, ps[i]);
        if (q == nullptr) continue;
        std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(q)).store(d->free_head.load(std::memory_order_relaxed),
                                                                        std::memory_order_relaxed);
        d->free_head.store(ps[i], std::memory_order_release);
      }
      head = next <= UINT32_MAX ? static_cast<uint32_t>(next) : 0;
    }
  }
  // Every page of a sketch (head first).
  static void sketch_pages(PageHead* hd, uint32_t head, uint32_t exact_n, std::vector<uint32_t>& out) {
    out.push_back(head);
    const uint32_t* refs = head_refs(hd);
    const uint32_t n = hd->enc == kEncExact ? (exact_n + kExactPerPage - 1) / kExactPerPage : hd->npages;
    for (uint32_t i = 0; i < n && i < max_refs(hd->enc); ++i)
      if (refs[i] != 0) out.push_back(refs[i]);
  }

  // Builds a sparse (when its code fits kSparseRefs pages) or dense sketch of SPACE holding
  // regs in fresh pages; returns its desc (not yet published: the caller stores it).
  static uint64_t build_registers(UvFamily& f, DayHeader* d, uint64_t space, const uint8_t* regs) {
    uint64_t bits = 0;
    const uint32_t k = sparse_best_rice(regs, &bits);
    const uint64_t bytes = sparse_string_bytes(bits);
    const bool sparse = bytes <= kSparseMaxBytes;
    const uint32_t np = sparse ? static_cast<uint32_t>((bytes + kPage - 1) / kPage) : kDenseRefs;
    uint32_t pages[1 + kDenseRefs];
    alloc_pages(f, d, 1 + np, pages);
    auto* hd = reinterpret_cast<PageHead*>(page_at(f, d, pages[0]));
    if (hd == nullptr) throw internal::corrupt_error(Kind::kUv, f.name_, "a fresh page fails validation");
    hd->magic = kHeadMagic;
    hd->enc = static_cast<uint8_t>(sparse ? kEncSparse : kEncDense);
    hd->space = space;
    hd->npages = static_cast<uint16_t>(np);
    uint32_t* refs = head_refs(hd);
    for (uint32_t i = 0; i < np; ++i) refs[i] = pages[1 + i];
    if (sparse) {
      hd->rice = static_cast<uint8_t>(k);
      hd->code_bits = static_cast<uint32_t>(bits);
      PagedBytes pb;
      pb.n = np;
      for (uint32_t i = 0; i < np; ++i) pb.pages[i] = page_at(f, d, pages[1 + i]);
      uint8_t buf[kSparseMaxBytes + 8] = {};
      sparse_encode(regs, k, buf);
      pb.copy_in(buf, bytes);
    } else {
      std::vector<uint64_t> words(kDenseWords, 0);
      dense_from_regs(regs, words.data());
      for (uint32_t i = 0; i < np; ++i) {
        const uint32_t m = std::min(kDenseWordsPerPage, kDenseWords - i * kDenseWordsPerPage);
        std::memcpy(page_at(f, d, pages[1 + i]), words.data() + i * kDenseWordsPerPage, m * 8);
      }
    }
    return (uint64_t{pages[0]} << 2) | hd->enc;
  }

  // Replaces SPACE's sketch OLD (desc `seen`, its pages `old_pages`) by one holding regs; the
  // space lock is held. One publishing store, then the old pages are retired.
  static void publish_registers(UvFamily& f, DayHeader* d, SpaceSlot* ss, uint64_t space, const uint8_t* regs,
                                const std::vector<uint32_t>& old_pages) {
    const uint64_t nd = build_registers(f, d, space, regs);
    SHMF_KILL_POINT("uv.promote.before_publish");
    // seq_cst: before the retirement's epoch increment (retire_pages).
    ss->desc.store(nd, std::memory_order_seq_cst);
    header(f)->promotions.fetch_add(1, std::memory_order_relaxed);
    retire_pages(f, d, old_pages);
  }

  // Merges a sparse sketch's buffer into a new code (or dense), under the space lock: seal the
  // buffer (no raise can then be added that the merge misses), decode, build, publish, retire.
  // `wait`: wait for the lock (else skip when another process merges). Idempotent.
  static void merge(UvFamily& f, DayHeader* d, SpaceSlot* ss, uint64_t space, uint64_t seen, bool wait) {
    UvHeader* h = header(f);
    std::atomic<uint64_t>& lw = space_locks(h)[lock_stripe(space)];
    if (f.seg_.owner_token() == 0) {
      if (!wait) return;
      throw Error(ErrorCode::kForked, "UV family '" + f.name_ + "': a forked handle cannot take locks: open the segment in this process");
    }
    if (!lock_word(f.seg_, lw, f.seg_.owner_token(), wait, takeovers(f))) {
      if (!wait) return;
      throw Error(ErrorCode::kBusy, "UV family '" + f.name_ + "': a space's lock stayed busy: retry");
    }
    Held held(&lw);
    if (ss->desc.load(std::memory_order_acquire) != seen) return;  // merged meanwhile
    PageHead* hd = head_at(f, d, seen, space);
    if (hd == nullptr || hd->enc != kEncSparse) throw internal::corrupt_error(Kind::kUv, f.name_, "a space's sketch descriptor is invalid");
    sparse_seal(sparse_buf(hd));
    SHMF_KILL_POINT("uv.promote.after_seal");
    std::vector<uint8_t> regs(hllk::kHllRegisters, 0);
    if (!head_regs(f, d, hd, regs.data())) throw internal::corrupt_error(Kind::kUv, f.name_, "a space's sparse sketch is malformed");
    std::vector<uint32_t> old;
    sketch_pages(hd, static_cast<uint32_t>(seen >> 2), 0, old);
    publish_registers(f, d, ss, space, regs.data(), old);
  }

  // An add to a space that has no sketch yet or an exact one, under its space lock. *moved:
  // the sketch is no longer exact (the caller takes the lock-free path).
  static UvStatus exact_add(UvFamily& f, DayHeader* d, SpaceSlot* ss, uint64_t space, uint64_t v, bool* moved) {
    UvHeader* h = header(f);
    std::atomic<uint64_t>& lw = space_locks(h)[lock_stripe(space)];
    if (f.seg_.owner_token() == 0) return f.seg_.read_only() ? UvStatus::kReadOnly : UvStatus::kForked;
    if (!lock_word(f.seg_, lw, f.seg_.owner_token(), true, takeovers(f))) return UvStatus::kBusy;
    Held held(&lw);
    uint64_t desc = ss->desc.load(std::memory_order_acquire);
    if (desc == 0) {
      uint32_t p;
      alloc_pages(f, d, 1, &p);
      auto* hd = reinterpret_cast<PageHead*>(page_at(f, d, p));
      if (hd == nullptr) return UvStatus::kCorrupt;
      hd->magic = kHeadMagic;
      hd->enc = kEncExact;
      hd->space = space;
      desc = (uint64_t{p} << 2) | kEncExact;
      ss->desc.store(desc, std::memory_order_seq_cst);
    }
    if ((desc & kEncMask) != kEncExact) {
      *moved = true;
      return UvStatus::kBusy;
    }
    PageHead* hd = head_at(f, d, desc, space);
    uint32_t n = 0;
    if (hd == nullptr || !exact_count(hd, h->exact_max, &n)) return UvStatus::kCorrupt;
    uint32_t* refs = head_refs(hd);
    std::byte* pages[kExactRefs] = {};
    for (uint32_t pi = 0; pi * kExactPerPage < n; ++pi) {
      if ((pages[pi] = page_at(f, d, refs[pi])) == nullptr) return UvStatus::kCorrupt;
      if (exact_page_has(pages[pi], std::min(kExactPerPage, n - pi * kExactPerPage), v)) return UvStatus::kUnchanged;
    }
    if (n + 1 > h->exact_max) {
      // Past the threshold: the entries and this item become registers (sparse or dense).
      std::vector<uint8_t> regs(hllk::kHllRegisters, 0);
      auto put = [&](uint64_t x) {
        uint32_t idx;
        uint8_t rank;
        index_rank48(x, idx, rank);
        if (rank > regs[idx]) regs[idx] = rank;
      };
      for (uint32_t pi = 0; pi * kExactPerPage < n; ++pi) {
        const uint32_t m = std::min(kExactPerPage, n - pi * kExactPerPage);
        for (uint32_t i = 0; i < m; ++i) put(get48(pages[pi] + i * kExactEntry));
      }
      put(v);
      SHMF_KILL_POINT("uv.promote.after_seal");
      std::vector<uint32_t> old;
      sketch_pages(hd, static_cast<uint32_t>(desc >> 2), n, old);
      publish_registers(f, d, ss, space, regs.data(), old);
      return UvStatus::kChanged;
    }
    const uint32_t pi = n / kExactPerPage;
    if (n % kExactPerPage == 0) {
      // A new page, unless a holder killed here left one named already (its bytes past n are unused).
      uint32_t ref = std::atomic_ref<uint32_t>(refs[pi]).load(std::memory_order_relaxed);
      if (ref == 0 || page_at(f, d, ref) == nullptr) {
        alloc_pages(f, d, 1, &ref);
        // release: the page's zeroing before readers that find it through count (acquire).
        std::atomic_ref<uint32_t>(refs[pi]).store(ref, std::memory_order_release);
      }
      if ((pages[pi] = page_at(f, d, ref)) == nullptr) return UvStatus::kCorrupt;
    }
    put48(pages[pi] + (n % kExactPerPage) * kExactEntry, v);
    SHMF_KILL_POINT("uv.exact.before_count");
    hd->count.store(n + 1, std::memory_order_release);  // publishes the entry: acknowledged from here
    return UvStatus::kChanged;
  }

  static UvStatus add_hash(UvFamily& f, uint64_t space, uint64_t hash) noexcept {
    if (f.read_only_) return UvStatus::kReadOnly;
    const ReadGuard guard(f.seg_);  // announced before valid(): a region live now stays readable to the end of the call
    if (!f.valid()) return UvStatus::kDropped;
    static thread_local uint32_t calls = 0;
    if (++calls % 256 == 0) f.seg_.quiesce();
    UvHeader* h = header(f);
    const uint64_t v = stored_hash(hash);
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
      index_rank48(v, idx, rank);
      uint32_t hidx;
      uint8_t hrank;
      hllk::hll_index_rank(hash, hidx, hrank);
      for (int attempt = 0; attempt < 8; ++attempt) {
        const uint64_t desc = ss->desc.load(std::memory_order_acquire);
        UvStatus out;
        if (desc == 0 || (desc & kEncMask) == kEncExact) {
          bool moved = false;
          out = exact_add(f, d, ss, space, v, &moved);
          if (moved) continue;
          if (out != UvStatus::kChanged && out != UvStatus::kUnchanged) return out;
        } else {
          PageHead* hd = head_at(f, d, desc, space);
          if (hd == nullptr) return UvStatus::kCorrupt;
          if (hd->enc == kEncDense) {
            uint64_t* words = dense_page(f, d, hd, (idx / kDensePerWord) / kDenseWordsPerPage);
            if (words == nullptr) return UvStatus::kCorrupt;
            const uint32_t wi = idx / kDensePerWord;
            out = dense_update_word(&words[wi % kDenseWordsPerPage], wi, idx % kDensePerWord, rank) ? UvStatus::kChanged
                                                                                                     : UvStatus::kUnchanged;
          } else {
            PagedBytes pb;
            if (!data_pages(f, d, hd, pb)) return UvStatus::kCorrupt;
            const int in_code = sparse_code_get(pb, hd->code_bits, hd->rice, idx);
            if (in_code < 0) return UvStatus::kCorrupt;
            out = UvStatus::kUnchanged;
            if (in_code < rank) {
              const InsertResult r = sparse_buf_insert(sparse_buf(hd), idx, rank);
              if (r == InsertResult::kSealedBlock || r == InsertResult::kFull) {
                merge(f, d, ss, space, desc, true);
                continue;
              }
              if (r == InsertResult::kInserted) {
                out = UvStatus::kChanged;
                const uint32_t n = hd->count.fetch_add(1, std::memory_order_relaxed) + 1;
                if (n >= kSparseMergeAt) {
                  try {
                    merge(f, d, ss, space, desc, false);  // the register is in (acknowledged): a failed merge is retried later
                  } catch (const Error&) {
                  }
                }
              }
            }
          }
        }
        hllk::hll_update(day_hll(d), hidx, hrank, nullptr);
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

  // One bucket's view of SPACE for a read: its hashes (exact) or registers.
  struct Gathered {
    std::vector<uint64_t> hashes;  // stored 48-bit values
    std::vector<uint8_t> regs;     // 16384 when any bucket holds registers
    bool dense = false;
  };

  // One bucket's sketch of SPACE into hashes / regs (regs zeroed by the caller); false if it
  // fails validation. Readers that announce nothing (read-only, forked) may see pages reused
  // under them: a moved descriptor is followed again (a few times); a bad one is corruption.
  static bool read_space(const UvFamily& f, DayHeader* d, uint64_t space, std::vector<uint64_t>& hashes,
                         std::vector<uint8_t>& regs, bool* has_regs) {
    const UvHeader* h = header(f);
    SpaceSlot* ss = find_space(h, d, space, false, nullptr);
    if (ss == nullptr) return true;
    uint64_t desc = ss->desc.load(std::memory_order_acquire);
    for (int retry = 0; desc != 0; ++retry) {
      const size_t h0 = hashes.size();
      PageHead* hd = head_at(f, d, desc, space);
      bool ok = hd != nullptr;
      if (ok && hd->enc == kEncExact) {
        uint32_t n = 0;
        ok = exact_count(hd, h->exact_max, &n) && exact_entries(f, d, hd, n, hashes);
        if (ok) return true;
      } else if (ok) {
        std::fill(regs.begin(), regs.end(), 0);
        ok = head_regs(f, d, hd, regs.data());
        if (ok) {
          *has_regs = true;
          return true;
        }
      }
      hashes.resize(h0);
      const uint64_t again = ss->desc.load(std::memory_order_acquire);
      if (again == desc || retry >= 4) return false;
      desc = again;
    }
    return true;
  }

  // Reads SPACE (or, with all, the all-spaces HLL) over the last w buckets. Lock-free.
  static void gather(const UvFamily& f, uint64_t space, uint32_t w, bool all, Gathered& g, uint32_t age0 = 0) {
    const ReadGuard guard(f.seg_);  // before require_valid (docs/CONCURRENCY.md "Reader announcements")
    f.require_valid();
    const UvHeader* h = header(f);
    if (w < 1 || w > f.retention_)
      throw Error(ErrorCode::kInvalidArgument, "UV family '" + f.name_ + "': window w=" + std::to_string(w) +
                                                   " is outside 1.." + std::to_string(f.retention_) + " (the retention)");
    const int64_t cur = f.bucket_of(f.now());
    std::vector<uint64_t> day_hashes;
    std::vector<uint8_t> day_regs(hllk::kHllRegisters);
    for (uint32_t age = age0; age < age0 + w; ++age) {
      const int64_t b = cur - static_cast<int64_t>(age);
      if (b < 0) break;
      const DaySlot& slot = day_slots(const_cast<UvHeader*>(h))[static_cast<uint64_t>(b) % f.retention_];
      const uint64_t want = static_cast<uint64_t>(b) + 1;
      if (slot.tag.load(std::memory_order_acquire) != want) continue;
      DayHeader* d = day_at(f, slot.day, b);
      bool ok = d != nullptr, regs = false;
      day_hashes.clear();
      if (ok && all) {
        hllk::hll_read_registers(day_hll(d), day_regs.data());
        regs = true;
      } else if (ok) {
        ok = read_space(f, d, space, day_hashes, day_regs, &regs);
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.tag.load(std::memory_order_relaxed) != want) continue;  // replaced meanwhile: the bucket left the window
      if (!ok) throw internal::corrupt_error(Kind::kUv, f.name_, "bucket " + std::to_string(b) + " fails validation");
      if (regs) {
        if (!g.dense) g.regs.assign(hllk::kHllRegisters, 0);
        g.dense = true;
        for (uint32_t i = 0; i < hllk::kHllRegisters; ++i) g.regs[i] = std::max(g.regs[i], day_regs[i]);
      }
      g.hashes.insert(g.hashes.end(), day_hashes.begin(), day_hashes.end());
    }
  }
  static std::vector<uint8_t> registers(const Gathered& g) {
    std::vector<uint8_t> r = g.dense ? g.regs : std::vector<uint8_t>(hllk::kHllRegisters, 0);
    for (uint64_t v : g.hashes) {
      uint32_t idx;
      uint8_t rank;
      index_rank48(v, idx, rank);
      if (rank > r[idx]) r[idx] = rank;
    }
    return r;
  }
  static uint64_t exact_or_estimate(Gathered& g) {
    if (!g.dense) {
      std::sort(g.hashes.begin(), g.hashes.end());
      return static_cast<uint64_t>(std::unique(g.hashes.begin(), g.hashes.end()) - g.hashes.begin());
    }
    return hllk::hll_estimate(registers(g).data());
  }
  // Pages a space's sketch holds (head + data) and its encoding; false if invalid.
  static bool sketch_size(const UvFamily& f, DayHeader* d, SpaceSlot* s, uint64_t space, uint32_t* enc, uint64_t* pages) {
    const uint64_t desc = s->desc.load(std::memory_order_acquire);
    PageHead* hd = head_at(f, d, desc, space);
    if (hd == nullptr) return false;
    *enc = hd->enc;
    if (hd->enc == kEncExact) {
      uint32_t n = 0;
      if (!exact_count(hd, header(f)->exact_max, &n)) return false;
      *pages = 1 + (n + kExactPerPage - 1) / kExactPerPage;
    } else {
      *pages = 1 + uint64_t{hd->npages};
    }
    return true;
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
  return UvOps::exact_or_estimate(g);
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
  return UvOps::exact_or_estimate(g);
}

std::string UvFamily::export_redis_all(uint32_t w) const {
  UvOps::Gathered g;
  UvOps::gather(*this, 0, w, true, g);
  return hllk::hll_redis_encode_dense(UvOps::registers(g).data());
}

std::vector<uint64_t> UvFamily::spaces(uint32_t w) const {
  const ReadGuard guard(seg_);
  require_valid();
  const UvHeader* h = UvOps::header(*this);
  if (w < 1 || w > retention_)
    throw Error(ErrorCode::kInvalidArgument, "UV family '" + name_ + "': window w=" + std::to_string(w) +
                                                 " is outside 1.." + std::to_string(retention_));
  std::set<uint64_t> out;
  const int64_t cur = bucket_of(now());
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
  const ReadGuard guard(seg_);
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
    bs.retired_bytes = d->retired_pages.load(std::memory_order_relaxed) * kPage;
    bs.reused = d->reused.load(std::memory_order_relaxed);
    SpaceSlot* t = day_spaces(d);
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      if (k == 0 || t[i].desc.load(std::memory_order_acquire) == 0) continue;
      uint32_t enc = 0;
      uint64_t pages = 0;
      if (!UvOps::sketch_size(*this, d, &t[i], k - 1, &enc, &pages)) continue;
      ++bs.spaces;
      if (enc == kEncDense) ++bs.dense_spaces;
      else if (enc == kEncSparse) ++bs.sparse_spaces;
      else ++bs.exact_spaces;
      bs.block_bytes += pages * kPage;
    }
    s.memory_bytes += bs.table_bytes + bs.chunk_bytes;
    s.buckets.push_back(bs);
  }
  return s;
}

namespace internal::uv {

// Header, every kept bucket (bounds, magic, chunks inside the segment and not overlapping), the
// allocator's lists (every page handed out, no loop) and every space's sketch (head, data pages,
// counts, sparse code decodes, dense words well formed).
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
  uint64_t bad_sketches = 0, bad_words = 0, bad_sparse = 0;
  const uint32_t retention = UvOps::retention(f);  // the handle's validated copy (the header may change)
  for (uint32_t s = 0; s < retention; ++s) {
    DaySlot& slot = day_slots(h)[s];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;
    const int64_t b = static_cast<int64_t>(tag - 1);
    DayHeader* d = UvOps::day_at(f, slot.day, b);
    if (d == nullptr || static_cast<uint64_t>(b) % retention != s) {
      scope.add("bucket slot " + std::to_string(s) + " names an invalid bucket extent");
      continue;
    }
    extents.emplace_back(slot.day, slot.day + d->extent_bytes);
    const uint32_t nc = d->chunk_count.load(std::memory_order_acquire);
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
    if (!chunks_ok) continue;
    const uint64_t bump = d->bump.load(std::memory_order_acquire);
    for (uint32_t list = 0; list <= kLimbo; ++list) {
      uint32_t p = (list == 0 ? d->free_head : d->limbo_head[list - 1]).load(std::memory_order_acquire);
      for (uint64_t n = 0; p != 0; ++n) {
        std::byte* pg = UvOps::page_at(f, d, p);
        if (pg == nullptr || n > bump) {
          scope.add("bucket " + std::to_string(b) + ": its " + (list == 0 ? "free" : "limbo") +
                    " page list names an invalid page or loops (the allocator drops such a list)");
          break;
        }
        if (list == 0) {
          p = std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(pg)).load(std::memory_order_relaxed);
        } else {  // a limbo list links retired heads through their `reserved` word
          const uint64_t next = std::atomic_ref<uint64_t>(reinterpret_cast<PageHead*>(pg)->reserved).load(std::memory_order_relaxed);
          p = next <= UINT32_MAX ? static_cast<uint32_t>(next) : UINT32_MAX;
        }
      }
    }
    SpaceSlot* t = day_spaces(d);
    std::vector<uint8_t> regs(hllk::kHllRegisters);
    std::vector<uint64_t> hashes;
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      const uint64_t desc = t[i].desc.load(std::memory_order_acquire);
      if (k == 0) {
        if (desc != 0) ++bad_sketches;
        continue;
      }
      if (desc == 0) continue;
      PageHead* hd = UvOps::head_at(f, d, desc, k - 1);
      if (hd == nullptr) {
        ++bad_sketches;
        continue;
      }
      if (hd->enc == kEncExact) {
        uint32_t n = 0;
        hashes.clear();
        if (!UvOps::exact_count(hd, h->exact_max, &n) || !UvOps::exact_entries(f, d, hd, n, hashes)) ++bad_sketches;
      } else if (hd->enc == kEncDense) {
        for (uint32_t pi = 0; pi < kDenseRefs; ++pi) {
          const uint64_t* words = UvOps::dense_page(f, d, hd, pi);
          if (words == nullptr) {
            ++bad_sketches;
            break;
          }
          for (uint32_t j = 0; j < kDenseWordsPerPage && pi * kDenseWordsPerPage + j < kDenseWords; ++j)
            bad_words += !dense_word_ok(std::atomic_ref<const uint64_t>(words[j]).load(std::memory_order_relaxed),
                                        pi * kDenseWordsPerPage + j);
        }
      } else {
        std::fill(regs.begin(), regs.end(), 0);
        if (!UvOps::head_regs(f, d, hd, regs.data())) ++bad_sparse;
      }
    }
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].first < extents[i - 1].second) {
      scope.add("two of its extents (bucket tables, chunks or its own header) overlap");
      break;
    }
  if (bad_sketches != 0) scope.add(std::to_string(bad_sketches) + " space descriptors name an invalid sketch");
  if (bad_words != 0) scope.add(std::to_string(bad_words) + " dense register words hold stray bits");
  if (bad_sparse != 0) scope.add(std::to_string(bad_sparse) + " sparse sketches hold a malformed code");
}

}  // namespace internal::uv
}  // namespace shmfilter

namespace shmfilter::internal::uv {

std::vector<SavedDay> read_days(Segment& seg, const RegionInfo& r) {
  UvFamily f = UvFamily::open(seg, r.name);  // validates
  auto* h = reinterpret_cast<UvHeader*>(seg.base() + r.offset);
  const ReadGuard guard(seg);
  std::vector<SavedDay> out;
  for (uint32_t s = 0; s < h->retention; ++s) {
    DaySlot& slot = day_slots(h)[s];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;
    DayHeader* d = UvOps::day_at(f, slot.day, static_cast<int64_t>(tag - 1));
    if (d == nullptr) throw corrupt_error(Kind::kUv, r.name, "a bucket extent fails validation: run 'shmtool check'");
    SavedDay day;
    day.bucket = d->bucket;
    const uint64_t* hw = day_hll(d);
    for (uint32_t i = 0; i < hllk::kHllWords; ++i) day.hll.push_back(std::atomic_ref<const uint64_t>(hw[i]).load(std::memory_order_relaxed));
    SpaceSlot* t = day_spaces(d);
    std::vector<uint8_t> regs(hllk::kHllRegisters);
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      if (k == 0 || t[i].desc.load(std::memory_order_acquire) == 0) continue;
      SavedSpace sp{k - 1, kEncExact, {}};
      bool has_regs = false;
      if (!UvOps::read_space(f, d, k - 1, sp.v, regs, &has_regs))
        throw corrupt_error(Kind::kUv, r.name, "a space's sketch fails validation: run 'shmtool check'");
      if (has_regs) {
        sp.enc = kEncDense;
        sp.v.assign(kDenseWords, 0);
        dense_from_regs(regs.data(), sp.v.data());
      }
      day.spaces.push_back(std::move(sp));
    }
    out.push_back(std::move(day));
  }
  return out;
}

}  // namespace shmfilter::internal::uv
