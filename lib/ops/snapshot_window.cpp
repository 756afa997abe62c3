// lib/ops/snapshot_window.cpp: save and restore of a Window (the kKinds line
// "window" of snapshot.cpp; the layout is structures/window_impl.h, the entry
// format and what "consistent" means for a window are docs/save-restore.md).
//
// Save, while writers mark and rotations run:
//   1. epoch0 = header epoch (acquire). The region (header, slot ring) is copied.
//   2. Per slot, up to kSlotAttempts times: read (tag, table) by the readers'
//      protocol, copy the table, read (tag, table) again. Kept if the table
//      offset did not change and the tag did not change, or went from 0 (a fresh
//      spare) to a claim (a rotation during the copy: every mark in that table
//      came after the first read, so the fresh form is saved). A retirement or
//      re-preparation by maintain() during the copy (offset or tag changed
//      otherwise) copies the slot again. A bucket expired by epoch0 (it left
//      every window, so no query can reach it again) is saved as retired.
//      Tables: kBloom words read once each with relaxed atomic loads (bits only
//      go 0 -> 1), the overflow after the main table (acquire); kCuckoo under
//      the table's cuckoo writer lock (items move between buckets), its overflow
//      sub-filter with it. A fresh table (tag 0) is saved as its parameter line
//      (and cuckoo header): the rest is zero by protocol.
//   3. The space-key table is copied LAST (a counter row copied in step 2 was
//      claimed before it was incremented), then the final epoch (it only grows).
//   Freed tables stay readable during the copy: the saver makes no control-plane
//   call and no quiescent point between reading an offset and copying it, so a
//   table maintain() frees meanwhile stays quarantined (ControlTxn::free).
//
// Restore: every field and length is checked before the region is created;
// inside create_region's init (unpublished until complete) the tables get fresh
// extents, offsets are recomputed, lock words, intents, pending extents and
// pads are reset, spaces_claimed is recounted and counter rows of unclaimed
// spaces are zeroed; snapshot.cpp then opens it (Window::open validates again).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/snapshot_io.h"
#include "shmfilter/window.hpp"
#include "structures/bloom_impl.h"
#include "structures/cuckoo_impl.h"
#include "structures/window_impl.h"

namespace shmfilter::internal::snapshot {
namespace {

namespace wi = internal::window;
namespace ck = internal::cuckoo;
namespace bl = internal::bloom;

constexpr int kSlotAttempts = 16;          // copies of one slot before the save gives up (kBusy)
constexpr uint64_t kMaxTag = uint64_t{1} << 62;  // bucket numbers are < 2^62 + 2^40 (bucket_number clamps)
constexpr uint32_t kMaxPieces = 3;
constexpr uint64_t kHeadLine = 64;  // TableHead line 0: the parameters

WindowCopyHook g_hook = nullptr;  // tests only (snapshot_io.h)
void* g_hook_ctx = nullptr;

uint64_t load64(const std::byte* p) noexcept {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);  // relaxed: re-checked by the caller
}

struct SlotRead {
  uint64_t tag, table;
};
// The readers' protocol (window.cpp table_for): acquire tag, relaxed table, acquire fence, relaxed tag re-check.
// Bounded: a tag changes a few times a bucket period; after kReadTries changing reads the
// last pair is returned with table 0, which no caller accepts (they read again or give up).
constexpr int kReadTries = 1000;
SlotRead read_slot(wi::BucketSlot& s) noexcept {
  uint64_t tag = 0;
  for (int i = 0; i < kReadTries; ++i) {
    tag = s.tag.load(std::memory_order_acquire);  // acquire: the table it names was written before
    uint64_t off = std::atomic_ref<uint64_t>(s.table).load(std::memory_order_relaxed);  // relaxed: re-checked
    std::atomic_thread_fence(std::memory_order_acquire);  // orders the table load before the re-check
    if (s.tag.load(std::memory_order_relaxed) == tag) return {tag, off};  // relaxed: after the fence
  }
  return {tag, 0};
}

uint32_t lane_bits(uint32_t k_main) { return k_main <= 8 ? 8 : 16; }

// Main-table bytes of a table of `geometry`, 0 when out of range.
uint64_t main_bytes(uint32_t variant, uint32_t k_main, uint64_t geometry) {
  if (variant == wi::kVariantBloom)
    return geometry >= 1 && geometry <= bl::kMaxLayerBlocks ? wi::bloom_main_bytes(geometry) : 0;
  return geometry >= 1 && geometry <= 32 ? wi::cuckoo_main_bytes(static_cast<uint32_t>(geometry), lane_bits(k_main)) : 0;
}
uint64_t cuckoo_overflow_bytes(uint64_t geometry, uint32_t k_main) {
  const auto g = static_cast<uint32_t>(geometry);
  return ck::sub_bytes(g, ck::stripes_for(g), lane_bits(k_main));
}

bool inside(uint64_t off, uint64_t bytes, uint64_t seg_size) {
  return off % 64 == 0 && off != 0 && off <= seg_size && bytes <= seg_size - off;
}

void piece(Out& o, const std::byte* table, uint64_t at, uint64_t len) {
  o.u64(at);
  o.u64(len);
  copy_live(o.b, table + at, len);
}

// Copies one table into `rec` ([u64 table bytes][u32 pieces]{[u64 at][u64 len][bytes]}[u64 overflow bytes][bytes]).
// False when what the slot names does not look like a table (it is changing under us: the caller re-reads).
bool copy_table(Segment& seg, wi::WindowHeader* h, wi::BucketSlot& slot, SlotRead sr, bool fresh, Out& rec) {
  std::byte* base = seg.base();
  const uint64_t seg_size = seg.size();
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  if (!inside(sr.table, moff, seg_size)) return false;
  std::byte* t = base + sr.table;
  const uint64_t geometry = load64(t + offsetof(wi::TableHead, geometry));
  const uint64_t mb = main_bytes(h->variant, h->k_main, geometry);
  if (mb == 0 || !inside(sr.table, moff + mb, seg_size)) return false;
  const uint64_t tbytes = moff + mb;
  rec.u64(tbytes);
  if (h->variant == wi::kVariantBloom) {
    if (fresh) {
      rec.u32(1);
      piece(rec, t, 0, kHeadLine);
      rec.u64(0);
      return true;
    }
    rec.u32(1);
    piece(rec, t, 0, tbytes);
    auto* head = reinterpret_cast<wi::TableHead*>(t);
    const uint64_t ovf = head->overflow.load(std::memory_order_acquire);  // acquire: its geometry and lines
    const uint64_t og = load64(t + offsetof(wi::TableHead, overflow_geometry));
    if (ovf == 0) {
      rec.u64(0);
      return true;
    }
    if (og < 1 || og > bl::kMaxLayerBlocks || !inside(ovf, og * 64, seg_size)) return false;
    rec.u64(og * 64);
    copy_live(rec.b, base + ovf, og * 64);
    return true;
  }
  // kCuckoo: the table's own cuckoo filter at moff.
  auto* ch = reinterpret_cast<ck::Header*>(t + moff);
  if (ch->magic != ck::kMagic || ch->lane_bits != lane_bits(h->k_main)) return false;
  if (fresh) {
    rec.u32(2);
    piece(rec, t, 0, kHeadLine);
    piece(rec, t, moff, sizeof(ck::Header));
    rec.u64(0);
    return true;
  }
  // Re-check the slot right before taking the lock: a table retired since is not locked.
  SlotRead again = read_slot(slot);
  if (again.tag != sr.tag || again.table != sr.table) return false;
  ck::Liveness lv{seg.owner_token(), &seg,
                  [](const void* ctx, uint64_t tok) { return static_cast<const Segment*>(ctx)->token_alive(tok); },
                  nullptr};
  const bool wide = ch->lane_bits == 16;
  if (wide)
    ck::lock<ck::Lanes16>(base, ch, lv);
  else
    ck::lock<ck::Lanes8>(base, ch, lv);
  bool ok = true;
  rec.u32(1);
  piece(rec, t, 0, tbytes);
  const uint32_t subs = ck::sub_count_acquire(ch);  // acquire: subs[1] it publishes
  if (subs >= 2) {
    const ck::SubDesc d = ch->subs[1];
    const uint64_t ob = cuckoo_overflow_bytes(geometry, h->k_main);
    if (d.log2_buckets != geometry || !inside(d.offset, ob, seg_size)) {
      ok = false;
    } else {
      rec.u64(ob);
      copy_live(rec.b, base + d.offset, ob);
    }
  } else {
    rec.u64(0);
  }
  ck::unlock(ch);
  return ok;
}

}  // namespace

void set_window_copy_hook(WindowCopyHook fn, void* ctx) noexcept {
  g_hook = fn;
  g_hook_ctx = ctx;
}

std::string save_window(Segment& seg, const RegionInfo& r) {
  Window::open(seg, r.name);  // validates the header, the ring and every table
  if (seg.owner_token() == 0)
    fail(ErrorCode::kForked, "save: this process inherited its segment handle across fork(); open the "
                             "segment in this process to save window '" + r.name + "'");
  std::byte* base = seg.base();
  auto* h = reinterpret_cast<wi::WindowHeader*>(base + r.offset);
  const uint32_t S = h->slots, T = h->space_table;
  const uint64_t rbytes = wi::region_bytes(S, T);
  const uint64_t keys_at = rbytes - wi::round64(uint64_t{T} * 8);
  const uint64_t epoch0 = h->epoch.load(std::memory_order_acquire);  // acquire: the claimed slots it covers
  const int64_t e0 = static_cast<int64_t>(epoch0) - 1;
  Out region;
  copy_live(region.b, base + r.offset, keys_at);  // header and ring; the keys come last (see the top)
  Out slots;
  wi::BucketSlot* ring = wi::slot_table(h);
  for (uint32_t i = 0; i < S; ++i) {
    bool kept = false;
    for (int attempt = 0; attempt < kSlotAttempts && !kept; ++attempt) {
      const SlotRead a = read_slot(ring[i]);
      if (a.tag == wi::kRetired) {
        slots.u64(wi::kRetired);
        kept = true;
        break;
      }
      const bool fresh = a.tag == 0;
      if (!fresh && epoch0 != 0 && static_cast<int64_t>(a.tag - 1) <= e0 - static_cast<int64_t>(h->retention)) {
        slots.u64(wi::kRetired);  // expired by epoch0: no query reaches it again
        kept = true;
        break;
      }
      Out rec;
      if (!copy_table(seg, h, ring[i], a, fresh, rec)) continue;
      if (g_hook) g_hook(i, attempt, g_hook_ctx);
      const SlotRead b = read_slot(ring[i]);
      if (b.table != a.table || !(b.tag == a.tag || (fresh && b.tag != wi::kRetired))) continue;
      slots.u64(a.tag);
      slots.b += rec.b;
      kept = true;
    }
    if (!kept)
      fail(ErrorCode::kBusy, "save: slot " + std::to_string(i) + " of window '" + r.name + "' changed during " +
                                 std::to_string(kSlotAttempts) + " copies in a row (maintain() or rotations running "
                                 "continuously): save again");
  }
  copy_live(region.b, base + r.offset + keys_at, rbytes - keys_at);
  const uint64_t epoch = h->epoch.load(std::memory_order_acquire);  // acquire: only grows; the newest we saw
  std::memcpy(region.b.data() + offsetof(wi::WindowHeader, epoch), &epoch, 8);
  Out o;
  o.u64(rbytes);
  o.b += region.b;
  o.u32(S);
  o.b += slots.b;
  return o.b;
}

namespace {

struct Piece {
  uint64_t at, len;
  const unsigned char* bytes;
};
struct TableRec {
  uint32_t slot;
  uint64_t tag;
  uint64_t bytes;
  std::vector<Piece> pieces;
  uint64_t overflow_bytes;
  const unsigned char* overflow;
};

template <class T>
T field(const unsigned char* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

}  // namespace

void restore_window(Segment& seg, const std::string& name, In in) {
  using wi::WindowHeader;
  const uint64_t size = in.u64();
  if (size < sizeof(WindowHeader)) fail(ErrorCode::kBadInput, in.what + ": a window region shorter than its header");
  const unsigned char* rb = in.take(size);
  auto bad = [&](const std::string& m) { fail(ErrorCode::kBadInput, in.what + ": " + m); };
#define SHMF_WF(T, f) field<T>(rb, offsetof(WindowHeader, f))
  if (SHMF_WF(uint32_t, magic) != wi::kMagic || SHMF_WF(uint32_t, version) != wi::kVersion)
    bad("not a window of layout version " + std::to_string(wi::kVersion));
  const auto variant = SHMF_WF(uint32_t, variant);
  const auto retention = SHMF_WF(uint32_t, retention);
  const auto S = SHMF_WF(uint32_t, slots);
  const auto max_spaces = SHMF_WF(uint32_t, max_spaces);
  const auto T = SHMF_WF(uint32_t, space_table);
  const auto error_window = SHMF_WF(uint32_t, error_window);
  const auto bucket_seconds = SHMF_WF(uint64_t, bucket_seconds);
  const auto utc_offset = SHMF_WF(int64_t, utc_offset);
  const auto expected = SHMF_WF(uint64_t, expected);
  const auto error = SHMF_WF(double, error);
  const auto p1 = SHMF_WF(double, p1);
  const auto main_error = SHMF_WF(double, main_error);
  const auto overflow_error = SHMF_WF(double, overflow_error);
  const auto k_main = SHMF_WF(uint32_t, k_main);
  const auto k_overflow = SHMF_WF(uint32_t, k_overflow);
  const auto epoch = SHMF_WF(uint64_t, epoch);
#undef SHMF_WF
  if (variant > wi::kVariantCuckoo) bad("unknown window variant " + std::to_string(variant));
  if (retention < 1 || retention > wi::kMaxRetention || S != retention + 1)
    bad("retention " + std::to_string(retention) + " / slots " + std::to_string(S) + " out of range");
  if (max_spaces < 1 || max_spaces > wi::kMaxSpaces || T != wi::space_table_for(max_spaces))
    bad("max_spaces " + std::to_string(max_spaces) + " / space table " + std::to_string(T) + " do not agree");
  const uint64_t rbytes = wi::region_bytes(S, T);
  if (size != rbytes)
    bad("a region of " + std::to_string(size) + " bytes; these parameters lay out " + std::to_string(rbytes));
  if (bucket_seconds < 1 || bucket_seconds > (uint64_t{1} << 40) || utc_offset <= -(int64_t{1} << 40) ||
      utc_offset >= (int64_t{1} << 40) || expected < 1 || !(error > 0 && error < 1) || error_window < 1 ||
      error_window > retention)
    bad("parameters out of range (bucket_seconds, utc_offset, expected, error, error_window)");
  if (!(p1 > 0 && p1 < 1) || !near(p1, wi::one_bucket_error(error, error_window)) || !(main_error > 0) ||
      !(overflow_error > 0) || !near(main_error + overflow_error, p1))
    bad("the one-bucket error rates do not follow from the error rate");
  if (variant == wi::kVariantBloom ? (k_main < 1 || k_main > bl::kMaxK || k_overflow < 1 || k_overflow > bl::kMaxK)
                                   : ((k_main != 8 && k_main != 12 && k_main != 16) || k_overflow != k_main))
    bad("probe counts / fingerprint bits out of range");
  if (epoch > kMaxTag) bad("epoch " + std::to_string(epoch) + " out of range");
  const uint64_t keys_at = rbytes - wi::round64(uint64_t{T} * 8);
  uint32_t claimed = 0;
  for (uint32_t i = 0; i < T; ++i) claimed += field<uint64_t>(rb, keys_at + 8ull * i) != 0;
  if (claimed > T / 2 + 64) bad("the space table holds " + std::to_string(claimed) + " keys, more than half its rows");

  // The ring: one u64 tag per slot, a table record for every slot that is not retired.
  const uint64_t moff = wi::main_offset_in_table(T);
  if (in.u32() != S) bad("the slot count does not match the header");
  std::vector<TableRec> recs;
  std::vector<uint64_t> tags(S);
  for (uint32_t i = 0; i < S; ++i) {
    const std::string at = "slot " + std::to_string(i) + ": ";
    const uint64_t tag = tags[i] = in.u64();
    if (tag == wi::kRetired) continue;
    if (tag != 0 && (tag > kMaxTag || (tag - 1) % S != i)) bad(at + "tag " + std::to_string(tag) + " does not belong to it");
    TableRec rec{i, tag, in.u64(), {}, 0, nullptr};
    const uint32_t pieces = in.u32();
    if (pieces < 1 || pieces > kMaxPieces) bad(at + std::to_string(pieces) + " pieces");
    uint64_t end = 0;
    for (uint32_t k = 0; k < pieces; ++k) {
      const uint64_t p_at = in.u64(), p_len = in.u64();
      if ((k == 0 ? p_at != 0 || p_len < kHeadLine : p_at < end) || p_len > rec.bytes || p_at > rec.bytes - p_len)
        bad(at + "table piece " + std::to_string(k) + " lies outside its table or out of order");
      rec.pieces.push_back({p_at, p_len, in.take(p_len)});
      end = p_at + p_len;
    }
    const unsigned char* head = rec.pieces[0].bytes;
    const uint64_t capacity = field<uint64_t>(head, offsetof(wi::TableHead, capacity));
    const uint64_t geometry = field<uint64_t>(head, offsetof(wi::TableHead, geometry));
    const uint64_t mb = main_bytes(variant, k_main, geometry);
    if (mb == 0) bad(at + "table geometry " + std::to_string(geometry) + " out of range");
    if (rec.bytes != moff + mb) bad(at + "table of " + std::to_string(rec.bytes) + " bytes; its geometry needs " +
                                    std::to_string(moff + mb));
    const uint64_t pairs_limit = variant == wi::kVariantBloom ? geometry * bl::kBlockBits : uint64_t{4} << geometry;
    if (capacity < 1 || capacity > pairs_limit) bad(at + "table capacity " + std::to_string(capacity) + " out of range");
    if (tag == 0)  // a fresh table is zero past its parameters (and its cuckoo header)
      for (const Piece& p : rec.pieces)
        if (!(p.at + p.len <= kHeadLine || (variant == wi::kVariantCuckoo && p.at >= moff &&
                                             p.at + p.len <= moff + sizeof(ck::Header))))
          bad(at + "a fresh (unclaimed) table holds data");
    rec.overflow_bytes = in.u64();
    if (rec.overflow_bytes != 0) {
      if (tag == 0) bad(at + "a fresh (unclaimed) table has an overflow");
      if (variant == wi::kVariantBloom) {
        const uint64_t og = rec.pieces[0].len >= kHeadLine ? field<uint64_t>(head, offsetof(wi::TableHead, overflow_geometry)) : 0;
        if (og < 1 || og > bl::kMaxLayerBlocks || rec.overflow_bytes != og * 64) bad(at + "overflow of the wrong size");
      } else if (rec.overflow_bytes != cuckoo_overflow_bytes(geometry, k_main)) {
        bad(at + "overflow sub-filter of the wrong size");
      }
      rec.overflow = in.take(rec.overflow_bytes);
    }
    recs.push_back(rec);
  }
  if (in.left != 0) bad("bytes after the last table");

  seg.create_region(name, Kind::kWindow, rbytes, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    std::memcpy(region, rb, rbytes);
    auto* h = reinterpret_cast<WindowHeader*>(region);
    h->region_offset = static_cast<uint64_t>(region - txn.base());
    h->region_bytes = got;
    std::memset(h->pad0, 0, sizeof h->pad0);
    std::memset(h->pad1, 0, sizeof h->pad1);
    std::memset(h->pad3, 0, sizeof h->pad3);
    h->reserved3 = 0;
    h->spaces_claimed.store(claimed, std::memory_order_relaxed);  // relaxed: unpublished (recounted from the keys)
    h->epoch.store(epoch, std::memory_order_relaxed);            // relaxed: unpublished
    const uint64_t* keys = wi::space_keys(h);
    wi::BucketSlot* ring = wi::slot_table(h);
    for (uint32_t i = 0; i < S; ++i) {
      ring[i].tag.store(tags[i], std::memory_order_relaxed);  // relaxed: unpublished
      ring[i].table = 0;
    }
    for (const TableRec& rec : recs) {
      const std::string at = "slot " + std::to_string(rec.slot) + ": ";
      const uint64_t off = txn.allocate(rec.bytes);  // zeroed; unpublished until the directory store
      std::byte* t = txn.base() + off;
      for (const Piece& p : rec.pieces) std::memcpy(t + p.at, p.bytes, p.len);
      auto* th = reinterpret_cast<wi::TableHead*>(t);
      uint64_t ovf = 0;
      if (rec.overflow_bytes != 0) {
        ovf = txn.allocate(rec.overflow_bytes);
        std::memcpy(txn.base() + ovf, rec.overflow, rec.overflow_bytes);
      }
      // What belongs to the source's processes or is derived: reset or recomputed.
      th->check_shift = wi::check_shift_for(th->capacity);
      th->reserved0 = 0;
      th->main_full.store(th->main_full.load(std::memory_order_relaxed) != 0, std::memory_order_relaxed);  // relaxed: unpublished
      // kTableAllChecked is dropped: a save copies the head and the body at different moments, so
      // an insert racing the save may be in the body without its flag clear in the head; a
      // restored table is "unchecked" (forget erases there, counting forget_ambiguous).
      th->flags.store(th->flags.load(std::memory_order_relaxed) & wi::kTableOverflowFailed, std::memory_order_relaxed);
      th->overflow.store(ovf, std::memory_order_relaxed);  // relaxed: unpublished
      th->pending_overflow = 0;
      if (variant == wi::kVariantCuckoo || ovf == 0) th->overflow_geometry = 0;
      th->prep_cursor.store(0, std::memory_order_relaxed);  // relaxed: unpublished; copied in full, so ready
      for (auto& st : th->stripes) std::memset(st.pad, 0, sizeof st.pad);
      // kBloom: a kNew answer set at least one bit, so a bucket counts at most as many pairs as its
      // tables have bits (a larger count is damage, and would make stats()' FP model loop for long).
      uint64_t distinct = 0;
      for (const auto& st : th->stripes) {
        const uint64_t d = st.distinct.load(std::memory_order_relaxed);  // relaxed: unpublished
        distinct = d > ~uint64_t{0} - distinct ? ~uint64_t{0} : distinct + d;
      }
      if (variant == wi::kVariantBloom &&
          distinct > (th->geometry + (ovf != 0 ? th->overflow_geometry : 0)) * bl::kBlockBits)
        fail(ErrorCode::kBadInput, in.what + ": " + at + "the bucket counts " + std::to_string(distinct) +
                                       " pairs, more than its tables have bits");
      uint64_t* counters = reinterpret_cast<uint64_t*>(t + sizeof(wi::TableHead));
      for (uint32_t row = 0; row < T; ++row)
        if (keys[row] == 0) counters[row] = 0;  // an unclaimed row counts nothing (see the top)
      if (variant == wi::kVariantCuckoo) {
        auto* ch = reinterpret_cast<ck::Header*>(t + moff);
        const uint32_t subs = ch->sub_count;
        const uint32_t g = static_cast<uint32_t>(th->geometry);
        if (ch->magic != ck::kMagic || ch->layout_version != ck::kLayoutVersion || ch->fp_bits != k_main ||
            ch->lane_bits != lane_bits(k_main) || ch->max_path < 1 || ch->max_path > ck::kMaxPathLimit ||
            ch->max_subs < 1 || ch->max_subs > 2 || subs < 1 || subs > ch->max_subs ||
            ch->subs[0].log2_buckets != g || ch->subs[0].log2_stripes != ck::stripes_for(g) ||
            (subs == 2 && (ch->subs[1].log2_buckets != g || ch->subs[1].log2_stripes != ck::stripes_for(g))))
          fail(ErrorCode::kBadInput, in.what + ": " + at + "the table's cuckoo header is corrupt");
        if (ch->size > (uint64_t{ck::kSlots} << g) * subs)
          fail(ErrorCode::kBadInput, in.what + ": " + at + "the table's cuckoo filter counts more items than it has slots");
        if ((subs == 2) != (ovf != 0))
          fail(ErrorCode::kBadInput, in.what + ": " + at + "the cuckoo sub-filter count does not match its overflow");
        ch->reserved0 = 0;
        ch->reserved2 = 0;
        ch->region_bytes = rec.bytes - moff;
        ch->subs[0].offset = off + moff + sizeof(ck::Header);
        if (subs == 2) ch->subs[1].offset = ovf;
        for (uint32_t j = subs; j < ck::kMaxSubs; ++j) ch->subs[j] = ck::SubDesc{};
        // Seqlock versions: even in a copy taken under the lock; made even here whatever the file says.
        for (uint32_t j = 0; j < subs; ++j) {
          auto* v = reinterpret_cast<uint64_t*>(txn.base() + ch->subs[j].offset);
          for (uint64_t x = 0; x < (uint64_t{1} << ch->subs[j].log2_stripes); ++x) v[x] &= ~uint64_t{1};
        }
        ch->pending_extent = 0;
        ch->lock_owner = 0;  // copied under the saver's lock: no step was in flight
        ch->intent = ck::Intent{};
      }
      ring[rec.slot].table = off;
    }
  });
}

}  // namespace shmfilter::internal::snapshot
