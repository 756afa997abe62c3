// lib/structures/uv/uv_snapshot.cpp: a UV family's entry in a save file (docs/save-restore.md).
// Logical, not a byte copy (the chunks hold retired pages, lists and lock words):
//   [u32 retention][u32 max_spaces][u32 exact_max][u32 buckets][u64 bucket_seconds]
//   [i64 utc_offset][u64 chunk_bytes]
//   per bucket: [i64 bucket][1639 x u64 all-spaces HLL words][u32 spaces]
//     per space: [u64 space][u32 enc][u32 n] then n u64 values (exact: the stored low 48 bits of each
//     hash) or 1093 u64 words (dense; a sparse sketch is saved as the dense words of its registers
//     and restored sparse again when its code fits)
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
  auto* h = reinterpret_cast<UvHeader*>(seg.base() + r.offset);
  const std::vector<SavedDay> days = read_days(seg, r);  // opens (validates) and reads through the data plane
  Out o;
  o.u32(h->retention);
  o.u32(h->max_spaces);
  o.u32(h->exact_max);
  o.u32(static_cast<uint32_t>(days.size()));
  o.u64(h->bucket_seconds);
  o.u64(static_cast<uint64_t>(h->utc_offset));
  o.u64(h->chunk_bytes);
  for (const SavedDay& day : days) {
    o.u64(static_cast<uint64_t>(day.bucket));
    for (uint64_t w : day.hll) o.u64(w);
    o.u32(static_cast<uint32_t>(day.spaces.size()));
    for (const SavedSpace& sp : day.spaces) {
      o.u64(sp.space);
      o.u32(sp.enc);
      o.u32(static_cast<uint32_t>(sp.v.size()));
      for (uint64_t x : sp.v) o.u64(x);
    }
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
        if (s.enc == kEncExact) s.v[j] = stored_hash(s.v[j]);  // a file from format 1 holds 64-bit values: their low 48 bits
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
    const uint64_t cb = h->chunk_bytes, ppc = cb / kPage;
    for (const RDay& rd : days) {
      const uint64_t dbytes = day_extent_bytes(h->space_table);
      const uint64_t doff = txn.allocate(dbytes);
      init_day(base + doff, h->space_table, rd.bucket, cb);
      auto* d = reinterpret_cast<DayHeader*>(base + doff);
      std::memcpy(day_hll(d), rd.hll.data(), rd.hll.size() * 8);
      // Pages handed out in order from fresh chunks (allocated zeroed).
      uint64_t next = 1;
      uint32_t nchunks = 0;
      auto page = [&](uint64_t* num) -> std::byte* {
        const uint64_t pn = next++;
        const uint64_t c = pn / ppc;
        if (c >= kMaxChunks) fail(ErrorCode::kNoSpace, in.what + ": a bucket needs more than " + std::to_string(kMaxChunks) + " chunks");
        while (nchunks <= c) day_chunks(d)[nchunks++] = txn.allocate(cb);
        *num = pn;
        return base + day_chunks(d)[c] + (pn % ppc) * kPage;
      };
      for (const RSpace& s : rd.spaces) {
        uint64_t hp = 0;
        auto* hd = reinterpret_cast<PageHead*>(page(&hp));
        hd->magic = kHeadMagic;
        hd->space = s.space;
        uint32_t enc = kEncExact;
        if (s.enc == kEncExact) {
          hd->enc = kEncExact;
          uint32_t* refs = head_refs(hd);
          std::byte* pg = nullptr;
          for (uint32_t j = 0; j < s.v.size(); ++j) {
            if (j % kExactPerPage == 0) {
              uint64_t pn = 0;
              pg = page(&pn);
              refs[j / kExactPerPage] = static_cast<uint32_t>(pn);
            }
            put48(pg + (j % kExactPerPage) * kExactEntry, s.v[j]);
          }
          hd->count.store(static_cast<uint32_t>(s.v.size()), std::memory_order_relaxed);
        } else {
          // The registers the words hold, kept sparse when their code fits (as the data plane would).
          std::vector<uint8_t> regs(hllk::kHllRegisters, 0);
          for (uint32_t wi = 0; wi < kDenseWords; ++wi) dense_word_max(s.v[wi], wi, regs.data());
          uint64_t bits = 0;
          const uint32_t k = sparse_best_rice(regs.data(), &bits);
          const uint64_t bytes = sparse_string_bytes(bits);
          if (bytes <= kSparseMaxBytes) {
            enc = kEncSparse;
            hd->enc = kEncSparse;
            hd->rice = static_cast<uint8_t>(k);
            hd->code_bits = static_cast<uint32_t>(bits);
            PagedBytes pb;
            pb.n = static_cast<uint32_t>((bytes + kPage - 1) / kPage);
            hd->npages = static_cast<uint16_t>(pb.n);
            for (uint32_t i = 0; i < pb.n; ++i) {
              uint64_t pn = 0;
              pb.pages[i] = page(&pn);
              head_refs(hd)[i] = static_cast<uint32_t>(pn);
            }
            std::vector<uint8_t> buf(bytes + 8, 0);
            sparse_encode(regs.data(), k, buf.data());
            pb.copy_in(buf.data(), bytes);
          } else {
            enc = kEncDense;
            hd->enc = kEncDense;
            hd->npages = kDenseRefs;
            for (uint32_t i = 0; i < kDenseRefs; ++i) {
              uint64_t pn = 0;
              std::byte* pg = page(&pn);
              head_refs(hd)[i] = static_cast<uint32_t>(pn);
              const uint32_t m = std::min(kDenseWordsPerPage, kDenseWords - i * kDenseWordsPerPage);
              std::memcpy(pg, s.v.data() + i * kDenseWordsPerPage, m * 8);
            }
          }
        }
        // The space's slot.
        SpaceSlot* t = day_spaces(d);
        const uint32_t mask = h->space_table - 1;
        uint32_t i = static_cast<uint32_t>(space_mix(s.space)) & mask;
        while (t[i].key.load(std::memory_order_relaxed) != 0) i = (i + 1) & mask;
        t[i].key.store(s.space + 1, std::memory_order_relaxed);
        t[i].desc.store((hp << 2) | enc, std::memory_order_relaxed);
        d->spaces.fetch_add(1, std::memory_order_relaxed);
      }
      d->bump.store(next, std::memory_order_relaxed);
      d->chunk_count.store(nchunks, std::memory_order_relaxed);
      DaySlot& slot = day_slots(h)[static_cast<uint64_t>(rd.bucket) % o.retention];
      slot.day = doff;
      slot.tag.store(static_cast<uint64_t>(rd.bucket) + 1, std::memory_order_relaxed);
    }
  });
}

}  // namespace shmfilter::internal::uv
