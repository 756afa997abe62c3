// lib/structures/uv/uv_snapshot.cpp: a UV family's entry in a save file (docs/save-restore.md).
// Logical, not a byte copy (the chunks hold retired blocks and per-process positions):
//   [u32 retention][u32 max_spaces][u32 exact_max][u32 buckets][u64 bucket_seconds]
//   [i64 utc_offset][u64 chunk_bytes]
//   per bucket: [i64 bucket][1639 x u64 all-spaces HLL words][u32 spaces]
//     per space: [u64 space][u32 enc][u32 n] then n u64 hashes (exact) or 1093 u64 words (dense)
// Restore validates every field, then builds the whole family inside create_region's init
// (unpublished until complete: a restore killed anywhere leaves nothing).
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "shmfilter/uv.hpp"
#include "structures/snapshot_io.h"
#include "structures/uv/uv_impl.h"

namespace shmfilter::internal::uv {

using namespace snapshot;
namespace hllk = internal::hll;

std::string save(Segment& seg, const RegionInfo& r) {
  UvFamily f = UvFamily::open(seg, r.name);  // validates
  auto* h = reinterpret_cast<UvHeader*>(seg.base() + r.offset);
  struct Day {
    int64_t bucket;
    DayHeader* d;
  };
  std::vector<Day> days;
  for (uint32_t s = 0; s < h->retention; ++s) {
    DaySlot& slot = day_slots(h)[s];
    const uint64_t tag = slot.tag.load(std::memory_order_acquire);
    if (tag == 0) continue;
    const uint64_t off = slot.day;
    if (off == 0 || off % 64 != 0 || off > seg.size() || day_extent_bytes(h->space_table) > seg.size() - off)
      fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a bucket extent lies outside the segment: run 'shmtool check'");
    auto* d = reinterpret_cast<DayHeader*>(seg.base() + off);
    if (d->magic != kDayMagic || d->bucket != static_cast<int64_t>(tag - 1))
      fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a bucket extent fails validation: run 'shmtool check'");
    days.push_back({d->bucket, d});
  }
  Out o;
  o.u32(h->retention);
  o.u32(h->max_spaces);
  o.u32(h->exact_max);
  o.u32(static_cast<uint32_t>(days.size()));
  o.u64(h->bucket_seconds);
  o.u64(static_cast<uint64_t>(h->utc_offset));
  o.u64(h->chunk_bytes);
  // The spaces of a bucket through the handle's validated reads: count by space and bucket.
  for (const Day& day : days) {
    o.u64(static_cast<uint64_t>(day.bucket));
    const uint64_t* hw = day_hll(day.d);
    for (uint32_t i = 0; i < hllk::kHllWords; ++i) o.u64(std::atomic_ref<const uint64_t>(hw[i]).load(std::memory_order_relaxed));
    SpaceSlot* t = day_spaces(day.d);
    Out body;
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->space_table; ++i) {
      const uint64_t k = t[i].key.load(std::memory_order_acquire);
      const uint64_t desc = t[i].desc.load(std::memory_order_acquire);
      if (k == 0 || desc == 0) continue;
      const uint64_t cb = day.d->chunk_bytes, pos = desc & ~uint64_t{63};
      const uint64_t c = pos / cb;
      if (c >= std::min<uint32_t>(day.d->chunk_count.load(std::memory_order_acquire), kMaxChunks))
        fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a space's block lies outside its chunks: run 'shmtool check'");
      const uint64_t ch = day_chunks(day.d)[c];
      if (ch == 0 || ch % 64 != 0 || ch > seg.size() || cb > seg.size() - ch || pos % cb + sizeof(BlockHead) > cb)
        fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a chunk lies outside the segment: run 'shmtool check'");
      auto* b = reinterpret_cast<BlockHead*>(seg.base() + ch + pos % cb);
      const uint32_t enc = static_cast<uint32_t>(desc & kEncMask);
      const uint64_t bytes = enc == kEncDense    ? dense_block_bytes()
                             : enc == kEncSparse ? sparse_block_bytes(b->cap)
                                                 : exact_block_bytes(b->cap);
      if (b->magic != kBlockMagic || b->enc != enc || b->space != k - 1 || pos % cb + bytes > cb ||
          (enc == kEncDense    ? b->cap != kDenseWords
           : enc == kEncSparse ? (b->cap < 64 || b->cap % 64 != 0 || bytes > kSparseMaxBlock)
                               : (b->cap < kMinExactSlots || b->cap > exact_final_cap(h->exact_max))))
        fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a space's block fails validation: run 'shmtool check'");
      const uint64_t* w = reinterpret_cast<const uint64_t*>(b + 1);
      body.u64(k - 1);
      if (enc == kEncSparse) {
        // Saved as dense words (the file format knows exact and dense): the same registers.
        std::vector<uint8_t> regs(hllk::kHllRegisters, 0);
        if (!sparse_read_max(b + 1, b->cap, regs.data()))
          fail(ErrorCode::kCorrupt, "UV family '" + r.name + "': a space's sparse block is malformed: run 'shmtool check'");
        std::vector<uint64_t> words(kDenseWords, 0);
        dense_from_regs(regs.data(), words.data());
        body.u32(kEncDense);
        body.u32(kDenseWords);
        for (uint64_t x : words) body.u64(x);
        ++n;
        continue;
      }
      body.u32(enc);
      if (enc == kEncDense) {
        body.u32(kDenseWords);
        for (uint32_t j = 0; j < kDenseWords; ++j) body.u64(std::atomic_ref<const uint64_t>(w[j]).load(std::memory_order_relaxed));
      } else {
        std::vector<uint64_t> hs;
        for (uint32_t j = 0; j < b->cap; ++j) {
          const uint64_t v = exact_load(w, j);
          if (v >= 2) hs.push_back(v);
        }
        body.u32(static_cast<uint32_t>(hs.size()));
        for (uint64_t v : hs) body.u64(v);
      }
      ++n;
    }
    o.u32(n);
    o.b += body.b;
  }
  return o.b;
}

namespace {

struct RSpace {
  uint64_t space;
  uint32_t enc;
  std::vector<uint64_t> v;
};
struct RDay {
  int64_t bucket;
  std::vector<uint64_t> hll;
  std::vector<RSpace> spaces;
};

}  // namespace

void restore(Segment& seg, const std::string& name, In in) {
  UvOptions o;
  o.retention = in.u32();
  o.max_spaces = in.u32();
  o.exact_max = in.u32();
  const uint32_t ndays = in.u32();
  o.bucket_seconds = in.u64();
  o.utc_offset = static_cast<int64_t>(in.u64());
  o.chunk_bytes = in.u64();
  const std::string p = options_problem(o);
  if (!p.empty()) fail(ErrorCode::kBadInput, in.what + ": UV family parameters out of range (" + p + ")");
  if (ndays > o.retention) fail(ErrorCode::kBadInput, in.what + ": more buckets than the retention");
  std::vector<RDay> days(ndays);
  std::set<uint64_t> slots_used;
  const uint32_t final_cap = exact_final_cap(o.exact_max);
  for (RDay& d : days) {
    d.bucket = static_cast<int64_t>(in.u64());
    if (d.bucket < 0 || d.bucket > (int64_t{1} << 62) || !slots_used.insert(static_cast<uint64_t>(d.bucket) % o.retention).second)
      fail(ErrorCode::kBadInput, in.what + ": a bucket number is out of range or repeats a slot");
    d.hll.resize(hllk::kHllWords);
    for (uint64_t& w : d.hll) {
      w = in.u64();
      bool bad = (w & ~hllk::kHllWordMask) != 0;
      for (uint32_t s = 0; s < hllk::kHllPerWord; ++s) bad |= hllk::hll_field(w, s) > hllk::kHllMaxRank;
      if (bad) fail(ErrorCode::kBadInput, in.what + ": an all-spaces HLL register is out of range");
    }
    const uint32_t ns = in.u32();
    if (ns > o.max_spaces) fail(ErrorCode::kBadInput, in.what + ": a bucket holds more spaces than max_spaces");
    std::set<uint64_t> seen;
    d.spaces.resize(ns);
    for (RSpace& s : d.spaces) {
      s.space = in.u64();
      s.enc = in.u32();
      const uint32_t n = in.u32();
      if (s.space == ~uint64_t{0} || !seen.insert(s.space).second)
        fail(ErrorCode::kBadInput, in.what + ": a space id is repeated or out of range");
      if (s.enc == kEncDense) {
        if (n != kDenseWords) fail(ErrorCode::kBadInput, in.what + ": a dense sketch of the wrong size");
      } else if (s.enc == kEncExact) {
        if (n > o.exact_max) fail(ErrorCode::kBadInput, in.what + ": an exact sketch past exact_max");
      } else {
        fail(ErrorCode::kBadInput, in.what + ": an unknown sketch encoding");
      }
      in.need(uint64_t{n} * 8);
      s.v.resize(n);
      for (uint32_t j = 0; j < n; ++j) {
        s.v[j] = in.u64();
        if (s.enc == kEncExact && s.v[j] < 2) fail(ErrorCode::kBadInput, in.what + ": an exact sketch holds a reserved value");
        if (s.enc == kEncDense && !dense_word_ok(s.v[j], j))
          fail(ErrorCode::kBadInput, in.what + ": a dense register word holds stray bits");
      }
    }
  }
  const uint64_t rbytes = region_bytes_for(o.retention);
  seg.create_region(name, Kind::kUv, rbytes, [&](std::byte* region, uint64_t, ControlTxn& txn) {
    auto* h = reinterpret_cast<UvHeader*>(region);
    init_header(h, o, static_cast<uint64_t>(region - txn.base()), rbytes);
    std::byte* base = txn.base();
    for (const RDay& rd : days) {
      const uint64_t dbytes = day_extent_bytes(h->space_table);
      const uint64_t doff = txn.allocate(dbytes);
      auto* d = reinterpret_cast<DayHeader*>(base + doff);
      d->magic = kDayMagic;
      d->space_table = h->space_table;
      d->bucket = rd.bucket;
      d->chunk_bytes = h->chunk_bytes;
      d->extent_bytes = dbytes;
      std::memcpy(day_hll(d), rd.hll.data(), rd.hll.size() * 8);
      const uint64_t cb = h->chunk_bytes;
      uint64_t bump = kFirstBlock;
      uint32_t nchunks = 0;
      for (const RSpace& s : rd.spaces) {
        uint32_t cap = kDenseWords;
        if (s.enc == kEncExact) {
          cap = kMinExactSlots;
          while (cap < final_cap && s.v.size() * 4 > uint64_t{cap} * 3) cap *= kExactGrowth;
          cap = std::min(cap, final_cap);
        }
        const uint64_t bytes = s.enc == kEncDense ? dense_block_bytes() : exact_block_bytes(cap);
        if (bump % cb + bytes > cb) bump = (bump / cb + 1) * cb;
        const uint64_t c = bump / cb;
        if (c >= kMaxChunks) fail(ErrorCode::kNoSpace, in.what + ": a bucket needs more than 256 chunks");
        while (nchunks <= c) day_chunks(d)[nchunks++] = txn.allocate(cb);
        auto* b = reinterpret_cast<BlockHead*>(base + day_chunks(d)[c] + bump % cb);
        b->magic = kBlockMagic;
        b->enc = s.enc;
        b->space = s.space;
        b->cap = cap;
        auto* w = reinterpret_cast<uint64_t*>(b + 1);
        if (s.enc == kEncDense) {
          std::memcpy(w, s.v.data(), s.v.size() * 8);
        } else {
          for (uint64_t v : s.v) (void)exact_insert(w, cap, v);
          b->entries.store(s.v.size(), std::memory_order_relaxed);
        }
        const uint64_t desc = bump | s.enc;
        bump += bytes;
        // The space's slot.
        SpaceSlot* t = day_spaces(d);
        const uint32_t mask = h->space_table - 1;
        uint32_t i = static_cast<uint32_t>(space_mix(s.space)) & mask;
        while (t[i].key.load(std::memory_order_relaxed) != 0) i = (i + 1) & mask;
        t[i].key.store(s.space + 1, std::memory_order_relaxed);
        t[i].desc.store(desc, std::memory_order_relaxed);
        d->spaces.fetch_add(1, std::memory_order_relaxed);
      }
      d->bump.store(bump, std::memory_order_relaxed);
      d->chunk_count.store(nchunks, std::memory_order_relaxed);
      DaySlot& slot = day_slots(h)[static_cast<uint64_t>(rd.bucket) % o.retention];
      slot.day = doff;
      slot.tag.store(static_cast<uint64_t>(rd.bucket) + 1, std::memory_order_relaxed);
    }
  });
}

}  // namespace shmfilter::internal::uv
