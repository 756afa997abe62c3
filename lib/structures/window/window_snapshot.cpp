// lib/structures/window/window_snapshot.cpp: save and restore of a Window (its row of the
// kinds table, window_kind.cpp, names them; the layout is window_impl.h, the entry
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

#include "structures/snapshot_io.h"
#include "shmfilter/window.hpp"
#include "structures/bloom/bloom_impl.h"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/window/window_impl.h"
#include "structures/window/window_ops.h"  // alloc_shared, stamped_sub_geometry (kStamped)

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
  if (h->variant == wi::kVariantStamped) {
    // A bucket's table is its head and counters (the pairs are in the shared table, saved last).
    rec.u64(moff);
    rec.u32(1);
    piece(rec, t, 0, fresh ? kHeadLine : moff);
    rec.u64(0);
    return true;
  }
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
    // A layered table (docs/window.md "Overload") with layers past the first (or a first layer whose
    // probes are not the header's): the overflow record holds layer 1's lines, its BloomLayerDir
    // (count = the layers copied) and each layer's lines in order. Otherwise the one-overflow form.
    if ((head->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0) {  // relaxed: immutable
      if (!inside(ovf, og * 64 + sizeof(wi::BloomLayerDir), seg_size)) return false;
      const auto* d = reinterpret_cast<const wi::BloomLayerDir*>(base + ovf + og * 64);
      const uint64_t c = std::min<uint64_t>(d->count.load(std::memory_order_acquire), wi::kBloomMaxExtra);  // acquire: publisher
      if (c != 0 || d->k1 != h->k_overflow) {
        uint64_t total = og * 64 + sizeof(wi::BloomLayerDir);
        wi::BloomLayer ls[wi::kBloomMaxExtra];  // each entry read once: the copy uses what was bounds-checked
        for (uint64_t j = 0; j < c; ++j) {
          ls[j].offset = load64(reinterpret_cast<const std::byte*>(&d->layer[j].offset));
          ls[j].blocks = load64(reinterpret_cast<const std::byte*>(&d->layer[j].blocks));
          const uint64_t lb = ls[j].blocks;
          if (lb < 1 || lb > bl::kMaxLayerBlocks || !inside(ls[j].offset, lb * 64, seg_size)) return false;
          total += lb * 64;
        }
        rec.u64(total);
        copy_live(rec.b, base + ovf, og * 64 + sizeof(wi::BloomLayerDir));
        const size_t dir_at = rec.b.size() - sizeof(wi::BloomLayerDir);
        std::memcpy(rec.b.data() + dir_at + offsetof(wi::BloomLayerDir, count), &c, 8);
        for (uint64_t j = 0; j < c; ++j)  // the record's dir gives the lengths that follow it
          std::memcpy(rec.b.data() + dir_at + offsetof(wi::BloomLayerDir, layer) + j * sizeof(wi::BloomLayer) +
                          offsetof(wi::BloomLayer, blocks), &ls[j].blocks, 8);
        for (uint64_t j = 0; j < c; ++j) copy_live(rec.b, base + ls[j].offset, ls[j].blocks * 64);
        return true;
      }
    }
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
    // Sub-filters 1.. in order (a layered table's sub j >= 2 has the shape its index gives).
    uint64_t total = 0;
    for (uint32_t j = 1; j < subs && ok; ++j) {
      const ck::SubDesc d = ch->subs[j];
      const uint32_t l2 = wi::cuckoo_sub_log2(static_cast<uint32_t>(geometry), j);
      const uint64_t ob = ck::sub_bytes(l2, ck::stripes_for(l2), lane_bits(h->k_main));
      if (j >= ck::kMaxSubs || d.log2_buckets != l2 || !inside(d.offset, ob, seg_size)) ok = false;
      total += ob;
    }
    if (ok) {
      rec.u64(total);
      for (uint32_t j = 1; j < subs; ++j) {
        const uint32_t l2 = wi::cuckoo_sub_log2(static_cast<uint32_t>(geometry), j);
        copy_live(rec.b, base + ch->subs[j].offset, ck::sub_bytes(l2, ck::stripes_for(l2), lane_bits(h->k_main)));
      }
    }
  } else {
    rec.u64(0);
  }
  ck::unlock(ch);
  return ok;
}

// Step 2 (see the top) for slot i: up to kSlotAttempts copies until one is
// kept; appends the slot's tag and table record (or kRetired) to `slots`.
// False when every copy changed under us.
bool save_slot(Segment& seg, wi::WindowHeader* h, uint32_t i, uint64_t epoch0, Out& slots) {
  const int64_t e0 = static_cast<int64_t>(epoch0) - 1;
  wi::BucketSlot* ring = wi::slot_table(h);
  for (int attempt = 0; attempt < kSlotAttempts; ++attempt) {
    const SlotRead a = read_slot(ring[i]);
    if (a.tag == wi::kRetired) {
      slots.u64(wi::kRetired);
      return true;
    }
    const bool fresh = a.tag == 0;
    if (!fresh && epoch0 != 0 && static_cast<int64_t>(a.tag - 1) <= e0 - static_cast<int64_t>(h->retention)) {
      slots.u64(wi::kRetired);  // expired by epoch0: no query reaches it again
      return true;
    }
    Out rec;
    if (!copy_table(seg, h, ring[i], a, fresh, rec)) continue;
    if (g_hook) g_hook(i, attempt, g_hook_ctx);
    const SlotRead b = read_slot(ring[i]);
    if (b.table != a.table || !(b.tag == a.tag || (fresh && b.tag != wi::kRetired))) continue;
    slots.u64(a.tag);
    slots.b += rec.b;
    return true;
  }
  return false;
}

// kStamped: the shared table, under its writer lock (lanes move between buckets): [u64 capacity]
// [u64 buckets][u64 swept][u32 sub-filters]{[u64 bytes][the sub-filter's buckets]}. Versions,
// lock and intent are the source's processes' and are not saved.
void save_shared(Segment& seg, wi::WindowHeader* h, Out& o) {
  std::byte* base = seg.base();
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  auto* t = reinterpret_cast<wi::TableHead*>(base + h->shared);  // validated by Window::open above
  auto* ch = reinterpret_cast<ck::Header*>(base + h->shared + moff);
  ck::Liveness lv{seg.owner_token(), &seg,
                  [](const void* ctx, uint64_t tok) { return static_cast<const Segment*>(ctx)->token_alive(tok); },
                  nullptr};
  ck::lock<internal::stamped::Lanes>(base, ch, lv);
  const uint32_t subs = std::min<uint32_t>(ck::sub_count_acquire(ch), wi::kStampedMaxSubs);  // acquire: its subs
  o.u64(t->capacity);
  o.u64(t->geometry);
  o.u64(h->swept.load(std::memory_order_acquire));  // acquire: under the lock, the base the lanes decode by
  o.u32(subs);
  for (uint32_t j = 0; j < subs; ++j) {
    const ck::Sub s = ck::sub_view(base, ch->subs[j]);
    o.u64(s.n * 8);
    copy_live(o.b, static_cast<const std::byte*>(s.buckets), s.n * 8);
  }
  ck::unlock(ch);
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
  Out region;
  copy_live(region.b, base + r.offset, keys_at);  // header and ring; the keys come last (see the top)
  Out slots;
  for (uint32_t i = 0; i < S; ++i) {
    if (!save_slot(seg, h, i, epoch0, slots))
      fail(ErrorCode::kBusy, "save: slot " + std::to_string(i) + " of window '" + r.name + "' changed during " +
                                 std::to_string(kSlotAttempts) + " copies in a row (maintain() or rotations running "
                                 "continuously): save again");
  }
  copy_live(region.b, base + r.offset + keys_at, rbytes - keys_at);
  Out shared;
  if (h->variant == wi::kVariantStamped) save_shared(seg, h, shared);  // after the counters (as the keys)
  const uint64_t epoch = h->epoch.load(std::memory_order_acquire);  // acquire: only grows; the newest we saw
  std::memcpy(region.b.data() + offsetof(wi::WindowHeader, epoch), &epoch, 8);
  // swept as the shared table's copy decodes (read under its lock: save_shared).
  Out o;
  o.u64(rbytes);
  o.b += region.b;
  o.u32(S);
  o.b += slots.b;
  o.b += shared.b;
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
  // Overflow layers past the first (docs/window.md "Overload"): kBloom: the dir's layer count (the
  // record is layer 1's lines, its dir, each layer's lines); kCuckoo: sub-filters in all (1 + the
  // overflow sub-filters, each the shape its index gives). 0 / 2: the one-overflow form.
  uint32_t extra = 0;
  uint32_t subs = 0;
};

template <class T>
T field(const unsigned char* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

[[noreturn]] void bad(const In& in, const std::string& m) { fail(ErrorCode::kBadInput, in.what + ": " + m); }

// ---- Restore, before the region is created: every field and length is checked. ----

// The header fields restore checks and uses, as the file's copy of the region holds them.
struct SavedHeader {
  uint32_t magic, version, variant, retention, S, max_spaces, T, error_window, k_main, k_overflow;
  uint64_t bucket_seconds;
  int64_t utc_offset;
  uint64_t expected;
  double error, p1, main_error, overflow_error;
  uint64_t epoch;
};

SavedHeader saved_header(const unsigned char* rb) {
  using wi::WindowHeader;
#define SHMF_WF(T, f) field<T>(rb, offsetof(WindowHeader, f))
  SavedHeader f;
  f.magic = SHMF_WF(uint32_t, magic);
  f.version = SHMF_WF(uint32_t, version);
  f.variant = SHMF_WF(uint32_t, variant);
  f.retention = SHMF_WF(uint32_t, retention);
  f.S = SHMF_WF(uint32_t, slots);
  f.max_spaces = SHMF_WF(uint32_t, max_spaces);
  f.T = SHMF_WF(uint32_t, space_table);
  f.error_window = SHMF_WF(uint32_t, error_window);
  f.bucket_seconds = SHMF_WF(uint64_t, bucket_seconds);
  f.utc_offset = SHMF_WF(int64_t, utc_offset);
  f.expected = SHMF_WF(uint64_t, expected);
  f.error = SHMF_WF(double, error);
  f.p1 = SHMF_WF(double, p1);
  f.main_error = SHMF_WF(double, main_error);
  f.overflow_error = SHMF_WF(double, overflow_error);
  f.k_main = SHMF_WF(uint32_t, k_main);
  f.k_overflow = SHMF_WF(uint32_t, k_overflow);
  f.epoch = SHMF_WF(uint64_t, epoch);
#undef SHMF_WF
  return f;
}

// The header's parameters: in range, agreeing with each other and with the
// region's `size`. Returns the region bytes they lay out.
uint64_t check_saved_header(const In& in, const SavedHeader& f, uint64_t size) {
  if (f.magic != wi::kMagic || f.version != wi::kVersion)
    bad(in, "not a window of layout version " + std::to_string(wi::kVersion));
  if (f.variant > wi::kVariantStamped) bad(in, "unknown window variant " + std::to_string(f.variant));
  if (f.retention < 1 || f.retention > wi::kMaxRetention || f.S != f.retention + 1)
    bad(in, "retention " + std::to_string(f.retention) + " / slots " + std::to_string(f.S) + " out of range");
  if (f.max_spaces < 1 || f.max_spaces > wi::kMaxSpaces || f.T != wi::space_table_for(f.max_spaces))
    bad(in, "max_spaces " + std::to_string(f.max_spaces) + " / space table " + std::to_string(f.T) + " do not agree");
  const uint64_t rbytes = wi::region_bytes(f.S, f.T);
  if (size != rbytes)
    bad(in, "a region of " + std::to_string(size) + " bytes; these parameters lay out " + std::to_string(rbytes));
  if (f.bucket_seconds < 1 || f.bucket_seconds > (uint64_t{1} << 40) || f.utc_offset <= -(int64_t{1} << 40) ||
      f.utc_offset >= (int64_t{1} << 40) || f.expected < 1 || !(f.error > 0 && f.error < 1) || f.error_window < 1 ||
      f.error_window > f.retention)
    bad(in, "parameters out of range (bucket_seconds, utc_offset, expected, error, error_window)");
  if (!(f.p1 > 0 && f.p1 < 1) || !near(f.p1, wi::one_bucket_error(f.error, f.error_window)) || !(f.main_error > 0) ||
      !(f.overflow_error > 0) || !near(f.main_error + f.overflow_error, f.p1))
    bad(in, "the one-bucket error rates do not follow from the error rate");
  if (f.variant == wi::kVariantBloom
          ? (f.k_main < 1 || f.k_main > bl::kMaxK || f.k_overflow < 1 || f.k_overflow > bl::kMaxK)
          : ((f.k_main != 8 && f.k_main != 12 && f.k_main != 16) || f.k_overflow != f.k_main))
    bad(in, "probe counts / fingerprint bits out of range");
  if (f.variant == wi::kVariantStamped && (f.k_main != internal::stamped::kFpBits || f.retention > internal::stamped::kMaxRetention))
    bad(in, "a stamped window's fingerprint bits or retention out of range");
  if (f.epoch > kMaxTag) bad(in, "epoch " + std::to_string(f.epoch) + " out of range");
  return rbytes;
}

// The saved region (header, ring, space keys) as restore uses it.
struct SavedRegion {
  const unsigned char* rb;  // the region's bytes in the file
  uint64_t rbytes;
  uint32_t variant, S, T, k_main;
  uint64_t epoch;
  uint32_t claimed;  // space-table rows holding a key
};

SavedRegion read_region(In& in) {
  using wi::WindowHeader;
  const uint64_t size = in.u64();
  if (size < sizeof(WindowHeader)) fail(ErrorCode::kBadInput, in.what + ": a window region shorter than its header");
  const unsigned char* rb = in.take(size);
  const SavedHeader f = saved_header(rb);
  const uint64_t rbytes = check_saved_header(in, f, size);
  // The space-key table: the claimed rows are recounted (spaces_claimed is not trusted).
  const uint64_t keys_at = rbytes - wi::round64(uint64_t{f.T} * 8);
  uint32_t claimed = 0;
  for (uint32_t i = 0; i < f.T; ++i) claimed += field<uint64_t>(rb, keys_at + 8ull * i) != 0;
  if (claimed > f.T / 2 + 64)
    bad(in, "the space table holds " + std::to_string(claimed) + " keys, more than half its rows");
  return {rb, rbytes, f.variant, f.S, f.T, f.k_main, f.epoch, claimed};
}

// One slot's table record: its pieces in order inside the table, its
// parameter line in range, a fresh table zero past its parameters, an
// overflow of the size its parameters give.
TableRec read_table(In& in, const SavedRegion& r, uint32_t i, uint64_t tag, const std::string& at) {
  const uint64_t moff = wi::main_offset_in_table(r.T);
  TableRec rec{i, tag, in.u64(), {}, 0, nullptr};
  const uint32_t pieces = in.u32();
  if (pieces < 1 || pieces > kMaxPieces) bad(in, at + std::to_string(pieces) + " pieces");
  uint64_t end = 0;
  for (uint32_t k = 0; k < pieces; ++k) {
    const uint64_t p_at = in.u64(), p_len = in.u64();
    if ((k == 0 ? p_at != 0 || p_len < kHeadLine : p_at < end) || p_len > rec.bytes || p_at > rec.bytes - p_len)
      bad(in, at + "table piece " + std::to_string(k) + " lies outside its table or out of order");
    rec.pieces.push_back({p_at, p_len, in.take(p_len)});
    end = p_at + p_len;
  }
  const unsigned char* head = rec.pieces[0].bytes;
  const uint64_t capacity = field<uint64_t>(head, offsetof(wi::TableHead, capacity));
  const uint64_t geometry = field<uint64_t>(head, offsetof(wi::TableHead, geometry));
  if (r.variant == wi::kVariantStamped) {
    // A bucket's head and counters only.
    if (geometry != 0 || rec.bytes != moff) bad(in, at + "a stamped window's bucket table is its counters only");
    if (capacity < 1 || capacity > (uint64_t{1} << 40)) bad(in, at + "table capacity " + std::to_string(capacity) + " out of range");
    for (const Piece& p : rec.pieces)
      if (tag == 0 && p.at + p.len > kHeadLine) bad(in, at + "a fresh (unclaimed) table holds data");
    rec.overflow_bytes = in.u64();
    if (rec.overflow_bytes != 0) bad(in, at + "a stamped window's bucket table has an overflow");
    return rec;
  }
  const uint64_t mb = main_bytes(r.variant, r.k_main, geometry);
  if (mb == 0) bad(in, at + "table geometry " + std::to_string(geometry) + " out of range");
  if (rec.bytes != moff + mb)
    bad(in, at + "table of " + std::to_string(rec.bytes) + " bytes; its geometry needs " + std::to_string(moff + mb));
  const uint64_t pairs_limit = r.variant == wi::kVariantBloom ? geometry * bl::kBlockBits : uint64_t{4} << geometry;
  if (capacity < 1 || capacity > pairs_limit)
    bad(in, at + "table capacity " + std::to_string(capacity) + " out of range");
  if (tag == 0)  // a fresh table is zero past its parameters (and its cuckoo header)
    for (const Piece& p : rec.pieces)
      if (!(p.at + p.len <= kHeadLine || (r.variant == wi::kVariantCuckoo && p.at >= moff &&
                                           p.at + p.len <= moff + sizeof(ck::Header))))
        bad(in, at + "a fresh (unclaimed) table holds data");
  rec.overflow_bytes = in.u64();
  if (rec.overflow_bytes != 0) {
    if (tag == 0) bad(in, at + "a fresh (unclaimed) table has an overflow");
    if (r.variant == wi::kVariantBloom) {
      const uint64_t og =
          rec.pieces[0].len >= kHeadLine ? field<uint64_t>(head, offsetof(wi::TableHead, overflow_geometry)) : 0;
      if (og < 1 || og > bl::kMaxLayerBlocks) bad(in, at + "overflow of the wrong size");
      const uint32_t flags = field<uint32_t>(head, offsetof(wi::TableHead, flags));
      if (rec.overflow_bytes != og * 64) {
        // A layered table's record: layer 1, its dir, layers 2.. (each checked here).
        if ((flags & wi::kTableLayered) == 0 || rec.overflow_bytes < og * 64 + sizeof(wi::BloomLayerDir))
          bad(in, at + "overflow of the wrong size");
        in.need(rec.overflow_bytes);  // truncated: said so
        const unsigned char* dir = in.p + og * 64;  // not taken yet: checked, then taken whole below
        const uint64_t c = field<uint64_t>(dir, offsetof(wi::BloomLayerDir, count));
        const uint64_t k1 = field<uint64_t>(dir, offsetof(wi::BloomLayerDir, k1));
        if (c > wi::kBloomMaxExtra || k1 < 1 || k1 > bl::kMaxK) bad(in, at + "overflow of the wrong size: its layers are out of range");
        uint64_t total = og * 64 + sizeof(wi::BloomLayerDir);
        for (uint64_t j = 0; j < c; ++j) {
          const size_t e = offsetof(wi::BloomLayerDir, layer) + j * sizeof(wi::BloomLayer);
          const uint64_t lb = field<uint64_t>(dir, e + offsetof(wi::BloomLayer, blocks));
          const uint64_t lk = field<uint64_t>(dir, e + offsetof(wi::BloomLayer, k));
          if (lb < 1 || lb > bl::kMaxLayerBlocks || lk < 1 || lk > bl::kMaxK) bad(in, at + "overflow of the wrong size: its layers are out of range");
          total += lb * 64;
        }
        if (total != rec.overflow_bytes) bad(in, at + "overflow of the wrong size");
        rec.extra = static_cast<uint32_t>(c) + 1;  // + 1: the layered form, even with no layer past the first
      }
    } else if (rec.overflow_bytes != cuckoo_overflow_bytes(geometry, r.k_main)) {
      // Sub-filters 1.. of a layered table, each the shape its index gives.
      uint64_t total = 0;
      uint32_t j = 1;
      for (; j < ck::kMaxSubs && total < rec.overflow_bytes; ++j) {
        const uint32_t l2 = wi::cuckoo_sub_log2(static_cast<uint32_t>(geometry), j);
        total += ck::sub_bytes(l2, ck::stripes_for(l2), lane_bits(r.k_main));
      }
      if (total != rec.overflow_bytes) bad(in, at + "overflow sub-filter of the wrong size");
      rec.subs = j;
    } else {
      rec.subs = 2;
    }
    rec.overflow = in.take(rec.overflow_bytes);
  }
  return rec;
}

struct SavedRing {
  std::vector<uint64_t> tags;  // one per slot
  std::vector<TableRec> recs;  // one per slot that is not retired
};

// The ring: one u64 tag per slot, a table record for every slot that is not retired.
SavedRing read_ring(In& in, const SavedRegion& r) {
  if (in.u32() != r.S) bad(in, "the slot count does not match the header");
  SavedRing ring{std::vector<uint64_t>(r.S), {}};
  for (uint32_t i = 0; i < r.S; ++i) {
    const std::string at = "slot " + std::to_string(i) + ": ";
    const uint64_t tag = ring.tags[i] = in.u64();
    if (tag == wi::kRetired) continue;
    if (tag != 0 && (tag > kMaxTag || (tag - 1) % r.S != i))
      bad(in, at + "tag " + std::to_string(tag) + " does not belong to it");
    ring.recs.push_back(read_table(in, r, i, tag, at));
  }
  return ring;
}

// ---- Restore, inside create_region's init (unpublished until complete). ----

// The header's copy, with what belongs to the source's processes reset and
// spaces_claimed recounted; the ring's tags, its tables not yet placed.
wi::WindowHeader* init_header(std::byte* region, uint64_t got, ControlTxn& txn, const SavedRegion& r,
                              const std::vector<uint64_t>& tags) {
  std::memcpy(region, r.rb, r.rbytes);
  auto* h = reinterpret_cast<wi::WindowHeader*>(region);
  h->region_offset = static_cast<uint64_t>(region - txn.base());
  h->region_bytes = got;
  h->shared = 0;
  std::memset(h->pad1, 0, sizeof h->pad1);
  std::memset(h->pad3, 0, sizeof h->pad3);
  h->reserved3 = 0;
  h->spaces_claimed.store(r.claimed, std::memory_order_relaxed);  // relaxed: unpublished (recounted from the keys)
  h->epoch.store(r.epoch, std::memory_order_relaxed);             // relaxed: unpublished
  wi::BucketSlot* ring = wi::slot_table(h);
  for (uint32_t i = 0; i < r.S; ++i) {
    ring[i].tag.store(tags[i], std::memory_order_relaxed);  // relaxed: unpublished
    ring[i].table = 0;
  }
  return h;
}

// What belongs to the source's processes or is derived: reset or recomputed.
void reset_table_head(wi::TableHead* th, uint64_t ovf, uint32_t variant, bool layered) {
  th->check_shift = wi::check_shift_for(th->capacity);
  th->reserved0 = 0;
  th->main_full.store(th->main_full.load(std::memory_order_relaxed) != 0,
                      std::memory_order_relaxed);  // relaxed: unpublished
  // kTableAllChecked is dropped: a save copies the head and the body at different moments, so
  // an insert racing the save may be in the body without its flag clear in the head; a
  // restored table is "unchecked" (forget erases there, counting forget_ambiguous).
  // kTableLayered stays only where the restored extents have the layered form (a layered record,
  // or a cuckoo header that allows more sub-filters): it says where the layers are.
  th->flags.store((th->flags.load(std::memory_order_relaxed) & wi::kTableOverflowFailed) | (layered ? wi::kTableLayered : 0u),
                  std::memory_order_relaxed);  // relaxed: unpublished
  th->overflow.store(ovf, std::memory_order_relaxed);  // relaxed: unpublished
  th->pending_overflow = 0;
  if (variant == wi::kVariantCuckoo || ovf == 0) th->overflow_geometry = 0;
  th->prep_cursor.store(0, std::memory_order_relaxed);  // relaxed: unpublished; copied in full, so ready
  for (auto& st : th->stripes) std::memset(st.pad, 0, sizeof st.pad);
}

// kBloom: a kNew answer set at least one bit, so a bucket counts at most as many pairs as its
// tables have bits (a larger count is damage, and would make stats()' FP model loop for long).
void check_bucket_count(const In& in, const std::string& at, const wi::TableHead* th, uint64_t ovf, uint32_t variant,
                        uint64_t layer_blocks) {
  uint64_t distinct = 0;
  for (const auto& st : th->stripes) {
    const uint64_t d = st.distinct.load(std::memory_order_relaxed);  // relaxed: unpublished
    distinct = d > ~uint64_t{0} - distinct ? ~uint64_t{0} : distinct + d;
  }
  if (variant == wi::kVariantBloom &&
      distinct > (th->geometry + (ovf != 0 ? th->overflow_geometry : 0) + layer_blocks) * bl::kBlockBits)
    fail(ErrorCode::kBadInput, in.what + ": " + at + "the bucket counts " + std::to_string(distinct) +
                                   " pairs, more than its tables have bits");
}

// kCuckoo: the table's own cuckoo header checked, its offsets recomputed for
// the table at `off` (overflow sub-filter at `ovf`), its lock word, intent and
// pending extent reset.
void restore_cuckoo_header(ControlTxn& txn, const In& in, const std::string& at, const SavedRegion& r,
                           const TableRec& rec, uint64_t off, const std::vector<uint64_t>& sub_offs) {
  const uint64_t moff = wi::main_offset_in_table(r.T);
  std::byte* t = txn.base() + off;
  const auto* th = reinterpret_cast<const wi::TableHead*>(t);
  auto* ch = reinterpret_cast<ck::Header*>(t + moff);
  const uint32_t subs = ch->sub_count;
  const uint32_t g = static_cast<uint32_t>(th->geometry);
  if (ch->magic != ck::kMagic || ch->layout_version != ck::kLayoutVersion || ch->fp_bits != r.k_main ||
      ch->lane_bits != lane_bits(r.k_main) || ch->max_path < 1 || ch->max_path > ck::kMaxPathLimit ||
      (ch->max_subs != 2 && ch->max_subs != wi::kLayeredMaxSubs) || subs < 1 || subs > ch->max_subs ||
      ch->subs[0].log2_buckets != g || ch->subs[0].log2_stripes != ck::stripes_for(g))
    fail(ErrorCode::kBadInput, in.what + ": " + at + "the table's cuckoo header is corrupt");
  uint64_t slots = 0;
  for (uint32_t j = 0; j < subs; ++j) {
    const uint32_t l2 = j == 0 ? g : wi::cuckoo_sub_log2(g, j);
    if (ch->subs[j].log2_buckets != l2 || ch->subs[j].log2_stripes != ck::stripes_for(l2))
      fail(ErrorCode::kBadInput, in.what + ": " + at + "the table's cuckoo header is corrupt");
    slots += uint64_t{ck::kSlots} << l2;
  }
  if (ch->size > slots)
    fail(ErrorCode::kBadInput, in.what + ": " + at + "the table's cuckoo filter counts more items than it has slots");
  if ((subs >= 2 ? subs : 0) != (sub_offs.empty() ? 0 : rec.subs))
    fail(ErrorCode::kBadInput, in.what + ": " + at + "the cuckoo sub-filter count does not match its overflow");
  ch->reserved0 = 0;
  ch->reserved2 = 0;
  ch->region_bytes = rec.bytes - moff;
  ch->subs[0].offset = off + moff + sizeof(ck::Header);
  for (uint32_t j = 1; j < subs; ++j) ch->subs[j].offset = sub_offs[j - 1];
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

// One table: fresh extents (table, overflow), its saved pieces copied in,
// what is not the source's data reset, then placed in its slot.
void restore_table(ControlTxn& txn, const In& in, const SavedRegion& r, wi::WindowHeader* h, const TableRec& rec) {
  const std::string at = "slot " + std::to_string(rec.slot) + ": ";
  const uint64_t off = txn.allocate(rec.bytes);  // zeroed; unpublished until the directory store
  std::byte* t = txn.base() + off;
  for (const Piece& p : rec.pieces) std::memcpy(t + p.at, p.bytes, p.len);
  auto* th = reinterpret_cast<wi::TableHead*>(t);
  uint64_t ovf = 0, layer_blocks = 0;
  std::vector<uint64_t> sub_offs;  // kCuckoo: sub-filters 1..
  if (rec.overflow_bytes != 0 && r.variant == wi::kVariantCuckoo) {
    // One extent per sub-filter (the layout free_table and the data plane follow).
    uint64_t at_byte = 0;
    for (uint32_t j = 1; j < rec.subs; ++j) {
      const uint32_t l2 = wi::cuckoo_sub_log2(static_cast<uint32_t>(th->geometry), j);
      const uint64_t ob = ck::sub_bytes(l2, ck::stripes_for(l2), lane_bits(r.k_main));
      const uint64_t o = txn.allocate(ob);
      std::memcpy(txn.base() + o, rec.overflow + at_byte, ob);
      at_byte += ob;
      sub_offs.push_back(o);
    }
    ovf = sub_offs.empty() ? 0 : sub_offs[0];
  } else if (rec.overflow_bytes != 0 && rec.extra == 0) {
    ovf = txn.allocate(rec.overflow_bytes);
    std::memcpy(txn.base() + ovf, rec.overflow, rec.overflow_bytes);
  } else if (rec.overflow_bytes != 0) {
    // kBloom layered: layer 1 and its dir in one extent, each further layer in its own; the dir
    // names the new extents (nothing pending, the entries past its count zero).
    const uint64_t og = th->overflow_geometry;
    const uint64_t first = og * 64 + sizeof(wi::BloomLayerDir);
    ovf = txn.allocate(first);
    std::memcpy(txn.base() + ovf, rec.overflow, first);
    auto* d = reinterpret_cast<wi::BloomLayerDir*>(txn.base() + ovf + og * 64);
    const uint64_t c = rec.extra - 1;
    uint64_t at_byte = first;
    for (uint64_t j = 0; j < c; ++j) {
      const uint64_t lb = d->layer[j].blocks;
      const uint64_t o = txn.allocate(lb * 64);
      std::memcpy(txn.base() + o, rec.overflow + at_byte, lb * 64);
      at_byte += lb * 64;
      d->layer[j].offset = o;
      layer_blocks += lb;
    }
    for (uint64_t j = c; j < wi::kBloomMaxExtra; ++j) d->layer[j] = wi::BloomLayer{};
    d->count.store(c, std::memory_order_relaxed);  // relaxed: unpublished
    d->pending = 0;
    d->reserved = 0;
  }
  const bool layered = r.variant == wi::kVariantCuckoo
                           ? reinterpret_cast<const ck::Header*>(t + wi::main_offset_in_table(r.T))->max_subs ==
                                 wi::kLayeredMaxSubs
                           : rec.extra != 0;
  reset_table_head(th, ovf, r.variant, layered);
  check_bucket_count(in, at, th, ovf, r.variant, layer_blocks);
  const uint64_t* keys = wi::space_keys(h);
  uint64_t* counters = reinterpret_cast<uint64_t*>(t + sizeof(wi::TableHead));
  for (uint32_t row = 0; row < r.T; ++row)
    if (keys[row] == 0) counters[row] = 0;  // an unclaimed row counts nothing (see the top)
  if (r.variant == wi::kVariantCuckoo) restore_cuckoo_header(txn, in, at, r, rec, off, sub_offs);
  wi::slot_table(h)[rec.slot].table = off;
}

}  // namespace

namespace {
// kStamped: the shared table's record (see save_shared), every length and lane checked.
struct SavedShared {
  uint64_t capacity = 0, buckets = 0, swept = 0, lanes = 0;
  std::vector<ck::Geometry> geo;          // sub-filter j's shape
  std::vector<const unsigned char*> sub;  // its buckets
};
SavedShared read_shared(In& in, const SavedRegion& r) {
  SavedShared s;
  s.capacity = in.u64();
  s.buckets = in.u64();
  s.swept = in.u64();
  const uint32_t subs = in.u32();
  const ck::Geometry g0 = internal::stamped::table_geometry(s.capacity);
  if (s.capacity < 1 || g0.buckets() > ck::kMaxBuckets || g0.buckets() != s.buckets)
    bad(in, "the shared table's capacity " + std::to_string(s.capacity) + " and its " + std::to_string(s.buckets) +
                " buckets disagree");
  if (subs < 1 || subs > wi::kStampedMaxSubs) bad(in, "the shared table has " + std::to_string(subs) + " sub-filters");
  const uint64_t e = r.epoch > 0 ? r.epoch - 1 : 0;
  if (s.swept > e + 1) bad(in, "the shared table was swept at bucket " + std::to_string(s.swept) + ", after the window's newest");
  ck::SubDesc prev{};
  for (uint32_t j = 0; j < subs; ++j) {
    const ck::Geometry g = j == 0 ? g0 : stamped_sub_geometry(prev, j);
    if (g.buckets() > ck::kMaxBuckets) bad(in, "the shared table's sub-filter " + std::to_string(j) + " is too large");
    if (in.u64() != g.buckets() * 8) bad(in, "the shared table's sub-filter " + std::to_string(j) + " has the wrong size");
    const unsigned char* p = in.take(g.buckets() * 8);
    for (uint64_t b = 0; b < g.buckets(); ++b) {
      const uint64_t w = field<uint64_t>(p, b * 8);
      for (unsigned l = 0; l < ck::kSlots; ++l) {
        const uint32_t lane = internal::stamped::Lanes::lane(w, l);
        if (lane != 0 && (lane >> internal::stamped::kStampBits) == 0)
          bad(in, "the shared table holds a lane with fingerprint 0 (damaged)");
        s.lanes += lane != 0;
      }
    }
    s.geo.push_back(g);
    s.sub.push_back(p);
    prev = ck::sub_desc(0, g);
  }
  return s;
}
// Fresh extents for the shared table and its sub-filters, the lanes copied in, the counters
// derived (size), lock and intent fresh (alloc_shared).
void restore_shared(ControlTxn& txn, wi::WindowHeader* h, const SavedShared& s) {
  const uint64_t off = alloc_shared(txn, h, s.capacity);
  auto* t = reinterpret_cast<wi::TableHead*>(txn.base() + off);
  auto* ch = reinterpret_cast<ck::Header*>(txn.base() + off + wi::main_offset_in_table(h->space_table));
  for (uint32_t j = 0; j < s.geo.size(); ++j) {
    if (j > 0) {
      const uint64_t o = txn.allocate(ck::sub_bytes_of(s.geo[j].buckets(), ck::stripes_for_buckets(s.geo[j].buckets()),
                                                       internal::stamped::kLaneBits));
      ch->subs[j] = ck::sub_desc(o, s.geo[j]);
    }
    const ck::Sub sub = ck::sub_view(txn.base(), ch->subs[j]);
    std::memcpy(sub.buckets, s.sub[j], s.geo[j].buckets() * 8);
  }
  ch->sub_count = static_cast<uint32_t>(s.geo.size());
  ch->size = s.lanes;
  if (s.geo.size() > 1) t->overflow.store(ch->subs[1].offset, std::memory_order_relaxed);  // relaxed: unpublished
  h->shared = off;
  h->swept.store(s.swept, std::memory_order_relaxed);  // relaxed: unpublished
}
}  // namespace

void restore_window(Segment& seg, const std::string& name, In in) {
  const SavedRegion r = read_region(in);
  const SavedRing ring = read_ring(in, r);
  SavedShared shared;
  if (r.variant == wi::kVariantStamped) shared = read_shared(in, r);
  if (in.left != 0) bad(in, "bytes after the last table");
  seg.create_region(name, Kind::kWindow, r.rbytes, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    wi::WindowHeader* h = init_header(region, got, txn, r, ring.tags);
    for (const TableRec& rec : ring.recs) restore_table(txn, in, r, h, rec);
    if (r.variant == wi::kVariantStamped) restore_shared(txn, h, shared);
  });
}

}  // namespace shmfilter::internal::snapshot
