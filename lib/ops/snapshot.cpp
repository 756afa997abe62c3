// lib/ops/snapshot.cpp: save() and restore() (shmfilter/snapshot.hpp), the
// container format of docs/save-restore.md and a per-kind table of
// serializers (kKinds below: one line per kind that can be saved).
//
// Raw kinds (bloom, hll, set): the structure's own bytes, region and extents,
// read word by word with relaxed atomic loads while writers run; restore
// copies them into a fresh region inside create_region's init (unpublished
// until complete), relocates the offsets the layout stores, resets what
// belongs to the source's processes (lock words, intents, clear tokens), and
// then opens the structure, whose open() validates every field as untrusted.
// Cuckoo: the same raw copy, taken under the filter's writer lock (items move
// between buckets). Roaring: the portable serialization, restored with
// create_from (published complete). Window: snapshot_window.cpp (the slot ring,
// each bucket table under its own protocol). Blobs are not saved (listed in `skipped`).
#include "shmfilter/snapshot.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <roaring/roaring.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/hash.h"
#include "segment/lock_file.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/cuckoo.hpp"
#include "structures/bloom_impl.h"
#include "structures/cuckoo_impl.h"
#include "structures/exact_set_impl.h"
#include "structures/hll_impl.h"
#include "ops/snapshot_io.h"
#include "shmfilter/window.hpp"

namespace shmfilter {
namespace {

namespace bl = internal::bloom;
namespace ck = internal::cuckoo;
using namespace internal::snapshot;

constexpr char kFileMagic[8] = {'S', 'H', 'M', 'F', 'S', 'A', 'V', 'E'};
constexpr char kTrailerMagic[8] = {'S', 'H', 'M', 'F', 'E', 'N', 'D', '!'};
constexpr uint32_t kEntryMagic = 0x52544e45;  // "ENTR"
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryHeaderBytes = 24;
constexpr size_t kTrailerBytes = 24;
constexpr uint32_t kKindFormat = 1;  // per-kind data layout version (docs/save-restore.md)

// ---- per-kind serializers ---------------------------------------------------------
// save: the data of one entry. restore: creates NAME in seg from data (already checksummed).
using SaveFn = std::string (*)(Segment&, const RegionInfo&);
using RestoreFn = void (*)(Segment&, const std::string& name, In data);

// Raw regions: [u64 region bytes][region][u32 extents]{[u64 bytes][extent]}...
std::string save_hll(Segment& seg, const RegionInfo& r) {
  Hll::open(seg, r.name);  // validates the header
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  o.u32(0);
  return o.b;
}

void restore_hll(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size != internal::hll::kHllRegionBytes)
    fail(ErrorCode::kBadInput, in.what + ": an HLL region of " + std::to_string(size) + " bytes (this build's are " +
                                   std::to_string(internal::hll::kHllRegionBytes) + ")");
  const unsigned char* bytes = in.take(size);
  seg.create_region(name, Kind::kHll, size, [&](std::byte* region, uint64_t, ControlTxn&) {
    std::memcpy(region, bytes, size);
    auto* hh = reinterpret_cast<internal::hll::HllHeader*>(region);
    hh->clear_token = 0;  // the source's clear, if any, is not ours
    // Nothing is in flight in the copy: equal counters, no cached count (the
    // source's counters may have been mid-change when it was saved).
    hh->sync.ends = hh->sync.begins;
    hh->sync.count_cache = 0;
  });
}

std::string save_set(Segment& seg, const RegionInfo& r) {
  ExactSet::open(seg, r.name);
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  o.u32(0);
  return o.b;
}

void restore_set(Segment& seg, const std::string& name, In in) {
  using namespace internal::exact_set;
  uint64_t size = in.u64();
  if (size < sizeof(ExactSetHeader)) fail(ErrorCode::kBadInput, in.what + ": a set region shorter than its header");
  const unsigned char* bytes = in.take(size);
  ExactSetHeader h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != internal::exact_set::kMagic || h.version != kLayoutVersion)
    fail(ErrorCode::kBadInput, in.what + ": not an exact set of layout version " + std::to_string(kLayoutVersion));
  if (h.stripes == 0 || (h.stripes & (h.stripes - 1)) != 0 || h.stripes_offset < sizeof(ExactSetHeader) ||
      h.slots < 8 || h.stripes_offset + uint64_t{h.stripes} * sizeof(ExactSetStripe) > h.slots_offset ||
      h.slots > (size - h.slots_offset) / 8 || h.slots_offset + h.slots * 8 != size)
    fail(ErrorCode::kBadInput, in.what + ": the set's header does not match its size");
  seg.create_region(name, Kind::kExactSet, size, [&](std::byte* region, uint64_t, ControlTxn&) {
    std::memcpy(region, bytes, size);
    auto* hh = reinterpret_cast<ExactSetHeader*>(region);
    auto* stripes = reinterpret_cast<ExactSetStripe*>(region + hh->stripes_offset);
    auto* slots = reinterpret_cast<uint64_t*>(region + hh->slots_offset);
    // Locks and intents belonged to the source's processes; counts are recomputed from the slots.
    for (uint32_t s = 0; s < hh->stripes; ++s) stripes[s] = ExactSetStripe{};
    uint64_t used = 0, live = 0;
    for (uint64_t i = 0; i < hh->slots; ++i) {
      if (slots[i] == kSlotEmpty) continue;
      ++used;
      if (slots[i] == kSlotTomb) continue;
      ++live;
      stripes[set_stripe(hh, set_hash(hh, slots[i]))].count++;
    }
    for (int k = 0; k < 2; ++k) {
      if (hh->special[k] > 1) hh->special[k] = 0;
      if (hh->special[k]) {
        ++live;
        stripes[set_stripe(hh, set_hash(hh, k == 0 ? kSlotEmpty : kSlotTomb))].count++;
      }
    }
    if (used > hh->used_limit) fail(ErrorCode::kBadInput, in.what + ": the set holds more slots than its limit");
    hh->live_hint = live;
    hh->used_hint = used;
  });
}

// Bloom: region (header, layer table, layer 0) then layers 1.. as extents.
std::string save_bloom(Segment& seg, const RegionInfo& r) {
  Bloom::open(seg, r.name);  // validates the header and every published layer
  const auto* h = reinterpret_cast<const bl::BloomHeader*>(seg.base() + r.offset);
  const uint64_t count = h->layer_count.load(std::memory_order_acquire);  // acquire: the layers it publishes
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  o.u32(static_cast<uint32_t>(count - 1));
  const bl::BloomLayer* s = bl::slots(h);
  for (uint64_t i = 1; i < count; ++i) {
    uint64_t ext = bl::layer_extent_bytes(s[i].bits);
    o.u64(ext);
    copy_live(o.b, seg.base() + s[i].offset, ext);
  }
  // The saved layer_count must be the one whose layers follow (a layer added meanwhile is left out).
  uint64_t c = count;
  std::memcpy(o.b.data() + 8 + offsetof(bl::BloomHeader, layer_count), &c, 8);
  return o.b;
}

void restore_bloom(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size < sizeof(bl::BloomHeader)) fail(ErrorCode::kBadInput, in.what + ": a Bloom region shorter than its header");
  const unsigned char* bytes = in.take(size);
  bl::BloomHeader h0;
  std::memcpy(static_cast<void*>(&h0), bytes, sizeof h0);
  uint64_t count = 0;
  std::memcpy(&count, bytes + offsetof(bl::BloomHeader, layer_count), 8);
  if (h0.magic != bl::kMagic || h0.version != bl::kLayoutVersion)
    fail(ErrorCode::kBadInput, in.what + ": not a Bloom filter of layout version " + std::to_string(bl::kLayoutVersion));
  if (h0.max_layers < 1 || h0.max_layers > bl::kMaxLayersLimit || count < 1 || count > h0.max_layers ||
      bl::header_bytes(h0.max_layers) > size)
    fail(ErrorCode::kBadInput, in.what + ": the Bloom header's layer counts are out of range");
  const auto* s0 = reinterpret_cast<const bl::BloomLayer*>(bytes + sizeof(bl::BloomHeader));
  bl::BloomLayer layer0;
  std::memcpy(&layer0, s0, sizeof layer0);
  if (layer0.offset != h0.region_offset + bl::header_bytes(h0.max_layers) ||
      bl::header_bytes(h0.max_layers) + bl::layer_extent_bytes(layer0.bits) != size)
    fail(ErrorCode::kBadInput, in.what + ": the Bloom region does not hold its first layer");
  uint32_t extents = in.u32();
  if (extents != count - 1) fail(ErrorCode::kBadInput, in.what + ": the Bloom layer count does not match its extents");
  std::vector<std::pair<uint64_t, const unsigned char*>> ext;
  for (uint32_t i = 1; i <= extents; ++i) {
    bl::BloomLayer li;
    std::memcpy(&li, s0 + i, sizeof li);
    uint64_t len = in.u64();
    if (len != bl::layer_extent_bytes(li.bits))
      fail(ErrorCode::kBadInput, in.what + ": Bloom layer " + std::to_string(i) + " has the wrong size");
    ext.emplace_back(len, in.take(len));
  }
  seg.create_region(name, Kind::kBloom, size, [&](std::byte* region, uint64_t, ControlTxn& txn) {
    std::memcpy(region, bytes, size);
    auto* h = reinterpret_cast<bl::BloomHeader*>(region);
    h->region_offset = static_cast<uint64_t>(region - txn.base());
    bl::BloomLayer* s = bl::slots(h);
    s[0].offset = h->region_offset + bl::header_bytes(h->max_layers);
    for (uint32_t i = 1; i <= extents; ++i) {
      uint64_t off = txn.allocate(ext[i - 1].first);  // fresh: unpublished until the directory store
      std::memcpy(txn.base() + off, ext[i - 1].second, ext[i - 1].first);
      s[i].offset = off;
      s[i].state = bl::kSlotReady;
    }
    for (uint64_t i = count; i < h->max_layers; ++i) s[i] = bl::BloomLayer{};  // not yet grown
    h->layer_count.store(count, std::memory_order_relaxed);  // relaxed: the directory's release store publishes
  });
}

// Roaring: [u32 maximum delta capacity][portable serialization].
std::string save_roaring(Segment& seg, const RegionInfo& r) {
  RoaringSet set = RoaringSet::open(seg, r.name);
  Out o;
  o.u32(static_cast<uint32_t>(set.stats().delta_max_capacity));  // the option (the active delta grows to it)
  o.b += set.export_portable();
  return o.b;
}

void restore_roaring(Segment& seg, const std::string& name, In in) {
  RoaringOptions ro;
  ro.delta_capacity = in.u32();
  const size_t n = in.left;
  const unsigned char* bytes = in.take(n);
  roaring_bitmap_t* b = RoaringSet::parse_portable(std::string_view(reinterpret_cast<const char*>(bytes), n));
  std::unique_ptr<roaring_bitmap_t, void (*)(roaring_bitmap_t*)> guard(b, [](roaring_bitmap_t* x) {
    roaring_bitmap_free(x);
  });
  RoaringSet::create_from(seg, name, b, ro);
}

// Cuckoo: region (header + sub-filter 0) then sub-filters 1.. as extents, copied
// under the filter's writer lock (items move between buckets while writers run:
// a lock-free copy could miss one that moved from an uncopied bucket to a copied
// one). Writers wait for the copy; readers do not. A saver that dies holding the
// lock is taken over like any dead writer (owner token + liveness).
template <class LT>
std::string save_cuckoo_locked(Segment& seg, const RegionInfo& r) {
  auto* h = reinterpret_cast<ck::Header*>(seg.base() + r.offset);
  ck::Liveness lv{seg.owner_token(), &seg,
                  [](const void* ctx, uint64_t t) { return static_cast<const Segment*>(ctx)->token_alive(t); }, nullptr};
  ck::lock<LT>(seg.base(), h, lv);
  Out o;
  try {
    const uint32_t count = ck::A(h->sub_count).load(std::memory_order_acquire);  // acquire: subs[] it publishes
    o.u64(r.size);
    copy_live(o.b, seg.base() + r.offset, r.size);
    o.u32(count - 1);
    for (uint32_t i = 1; i < count; ++i) {
      const ck::SubDesc d = h->subs[i];
      uint64_t len = ck::sub_bytes(d, h->lane_bits);
      o.u64(len);
      copy_live(o.b, seg.base() + d.offset, len);
    }
  } catch (...) {
    ck::unlock(h);
    throw;
  }
  ck::unlock(h);
  return o.b;
}

std::string save_cuckoo(Segment& seg, const RegionInfo& r) {
  Cuckoo::open(seg, r.name);  // validates the header and the sub-filter table
  const auto* h = reinterpret_cast<const ck::Header*>(seg.base() + r.offset);
  return h->lane_bits == 8    ? save_cuckoo_locked<ck::Lanes8>(seg, r)
         : h->lane_bits == 12 ? save_cuckoo_locked<ck::Lanes12>(seg, r)
                              : save_cuckoo_locked<ck::Lanes16>(seg, r);
}

void restore_cuckoo(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size < sizeof(ck::Header)) fail(ErrorCode::kBadInput, in.what + ": a cuckoo region shorter than its header");
  const unsigned char* bytes = in.take(size);
  ck::Header h0;
  std::memcpy(static_cast<void*>(&h0), bytes, sizeof h0);
  if (h0.magic != ck::kMagic || (h0.layout_version != ck::kLayoutVersion && h0.layout_version != ck::kLayoutVersionPow2 &&
                                 h0.layout_version != ck::kLayoutVersionPacked))
    fail(ErrorCode::kBadInput, in.what + ": not a cuckoo filter of layout version " + std::to_string(ck::kLayoutVersionPow2) +
                                   ", " + std::to_string(ck::kLayoutVersion) + " or " +
                                   std::to_string(ck::kLayoutVersionPacked));
  // Layout 3 is exactly packed 12-bit lanes; layouts 1 and 2 have 8 or 16 (Cuckoo::open re-checks the rest).
  if ((h0.layout_version == ck::kLayoutVersionPacked ? h0.lane_bits != 12 : (h0.lane_bits != 8 && h0.lane_bits != 16)))
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo header's lane width " + std::to_string(h0.lane_bits) +
                                   " does not match its layout version " + std::to_string(h0.layout_version));
  if (h0.max_subs < 1 || h0.max_subs > ck::kMaxSubs ||
      h0.sub_count < 1 || h0.sub_count > h0.max_subs)
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo header's sub-filter counts are out of range");
  for (uint32_t i = 0; i < h0.sub_count; ++i)
    if (!ck::sub_shape_ok(h0.subs[i]) || (i > 0 && !ck::nests_in(h0.subs[i - 1], h0.subs[i])) ||
        (h0.layout_version == ck::kLayoutVersionPow2 && h0.subs[i].chunks_minus_1 != 0))
      fail(ErrorCode::kBadInput, in.what + ": cuckoo sub-filter " + std::to_string(i) + " has a bad size");
  if (sizeof(ck::Header) + ck::sub_bytes(h0.subs[0], h0.lane_bits) > size)
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo region does not hold its first sub-filter");
  uint32_t extents = in.u32();
  if (extents != h0.sub_count - 1) fail(ErrorCode::kBadInput, in.what + ": the sub-filter count does not match its extents");
  std::vector<std::pair<uint64_t, const unsigned char*>> ext;
  for (uint32_t i = 1; i <= extents; ++i) {
    uint64_t len = in.u64();
    if (len != ck::sub_bytes(h0.subs[i], h0.lane_bits))
      fail(ErrorCode::kBadInput, in.what + ": cuckoo sub-filter " + std::to_string(i) + " has the wrong size");
    ext.emplace_back(len, in.take(len));
  }
  seg.create_region(name, Kind::kCuckoo, size, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    std::memcpy(region, bytes, size);
    auto* h = reinterpret_cast<ck::Header*>(region);
    h->region_bytes = got;
    h->subs[0].offset = static_cast<uint64_t>(region - txn.base()) + sizeof(ck::Header);
    for (uint32_t i = 1; i <= extents; ++i) {
      uint64_t off = txn.allocate(ext[i - 1].first);  // fresh: unpublished until the directory store
      std::memcpy(txn.base() + off, ext[i - 1].second, ext[i - 1].first);
      h->subs[i].offset = off;
    }
    for (uint32_t i = h->sub_count; i < ck::kMaxSubs; ++i) h->subs[i] = ck::SubDesc{};
    h->pending_extent = 0;  // the source's unpublished extent is not ours
    h->lock_owner = 0;      // copied under the saver's lock: no step was in flight
    h->intent = ck::Intent{};
  });
}

struct KindOps {
  Kind kind;
  SaveFn save;
  RestoreFn restore;
};
// One line per kind that can be saved. A kind not listed (blob) is skipped by save().
constexpr KindOps kKinds[] = {
    {Kind::kBloom, &save_bloom, &restore_bloom},
    {Kind::kCuckoo, &save_cuckoo, &restore_cuckoo},
    {Kind::kRoaring, &save_roaring, &restore_roaring},
    {Kind::kHll, &save_hll, &restore_hll},
    {Kind::kExactSet, &save_set, &restore_set},
    {Kind::kWindow, &save_window, &restore_window},  // snapshot_window.cpp
};

const KindOps* ops_for(Kind k) {
  for (const auto& e : kKinds)
    if (e.kind == k) return &e;
  return nullptr;
}

// ---- the container ----------------------------------------------------------------
struct Parsed {
  SnapshotInfo info;
  struct Entry {
    std::string name;
    Kind kind;
    const unsigned char* data;
    uint64_t len;
  };
  std::vector<Entry> entries;
};

struct Mapped {
  void* p = MAP_FAILED;
  size_t n = 0;
  ~Mapped() {
    if (p != MAP_FAILED && n) munmap(p, n);
  }
};

void map_file(const std::string& path, Mapped& m) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kIo, "cannot open save file '" + path + "': " + std::strerror(errno) + "; check the path");
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::kBadInput, "'" + path + "' is not a regular file: pass a file written by 'shmtool save'");
  }
  m.n = static_cast<size_t>(st.st_size);
  if (m.n > 0) m.p = mmap(nullptr, m.n, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m.n > 0 && m.p == MAP_FAILED) fail(ErrorCode::kIo, "cannot map '" + path + "': " + std::strerror(errno));
}

Parsed parse(const std::string& path, const unsigned char* p, size_t n) {
  Parsed out;
  const std::string file = "save file '" + path + "'";
  if (n < 8 || std::memcmp(p, kFileMagic, 8) != 0)
    fail(ErrorCode::kBadInput, file + " is not a shmfilter save (no SHMFSAVE magic): pass a file written by 'shmtool save'");
  if (n < kHeaderBytes) fail(ErrorCode::kBadInput, file + " is truncated inside its header");
  uint32_t version = get32(p + 8);
  if (get32(p + 12) != kByteOrderMark)
    fail(ErrorCode::kForeignByteOrder, file + " has an unknown byte-order mark: it is damaged");
  if (version > kSnapshotFormatVersion)
    fail(ErrorCode::kVersionMismatch, file + " is format version " + std::to_string(version) + "; this shmfilter reads " +
                                          "up to " + std::to_string(kSnapshotFormatVersion) + ": restore it with a newer shmtool");
  if (version == 0) fail(ErrorCode::kBadInput, file + " has format version 0: it is damaged");
  if (internal::hash_bytes(p, 56, 0) != get64(p + 56))
    fail(ErrorCode::kBadInput, file + ": header checksum mismatch: the file is damaged");
  SnapshotInfo& info = out.info;
  info.format_version = version;
  info.created_unix_ns = get64(p + 16);
  uint32_t count = get32(p + 24);
  uint32_t name_len = get32(p + 28);
  info.segment_max_size = get64(p + 32);
  info.directory_capacity = get32(p + 40);
  info.segment_size = get64(p + 48);
  info.file_bytes = n;
  // The trailer first: a truncated file is named as such, not as a bad entry.
  if (n < kHeaderBytes + name_len + kTrailerBytes || std::memcmp(p + n - kTrailerBytes, kTrailerMagic, 8) != 0)
    fail(ErrorCode::kBadInput, file + " is truncated (no end marker): the save did not finish or the copy is incomplete");
  const unsigned char* t = p + n - kTrailerBytes;
  if (get32(t + 8) != count) fail(ErrorCode::kBadInput, file + ": the trailer's entry count differs from the header's");
  if (internal::hash_bytes(p, n - kTrailerBytes, 0) != get64(t + 16))
    fail(ErrorCode::kBadInput, file + ": checksum mismatch: the file is damaged (corrupted bytes)");
  In in{p + kHeaderBytes, n - kHeaderBytes - kTrailerBytes, file};
  const unsigned char* nm = in.take(name_len);
  info.source_segment.assign(reinterpret_cast<const char*>(nm), name_len);
  for (uint32_t i = 0; i < count; ++i) {
    in.what = file + " entry " + std::to_string(i + 1);
    const unsigned char* start = in.p;
    if (in.u32() != kEntryMagic) fail(ErrorCode::kBadInput, in.what + " has no entry marker: the file is damaged");
    uint32_t kind = in.u32(), kind_format = in.u32(), len = in.u32();
    uint64_t data_len = in.u64();
    if (len == 0 || len > kMaxStructureNameLength) fail(ErrorCode::kBadInput, in.what + " has a bad name length");
    std::string name(reinterpret_cast<const char*>(in.take(len)), len);
    in.what = file + " entry '" + name + "'";
    const unsigned char* data = in.take(data_len);
    uint64_t sum = in.u64();
    if (internal::hash_bytes(start, static_cast<size_t>(in.p - 8 - start), 0) != sum)
      fail(ErrorCode::kBadInput, in.what + ": checksum mismatch: the file is damaged");
    if (kind_format > kKindFormat)
      fail(ErrorCode::kVersionMismatch, in.what + " uses data format " + std::to_string(kind_format) +
                                            "; this shmfilter reads " + std::to_string(kKindFormat) + ": use a newer shmtool");
    if (ops_for(static_cast<Kind>(kind)) == nullptr)
      fail(ErrorCode::kBadInput, in.what + " has kind " + std::to_string(kind) + ", which this build cannot restore");
    out.entries.push_back({name, static_cast<Kind>(kind), data, data_len});
    info.entries.push_back({name, static_cast<Kind>(kind), data_len});
  }
  if (in.left != 0) fail(ErrorCode::kBadInput, file + " has bytes after its last entry: the file is damaged");
  return out;
}

void write_all(int fd, const std::string& b, const std::string& path) {
  size_t done = 0;
  while (done < b.size()) {
    ssize_t w = ::write(fd, b.data() + done, b.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(ErrorCode::kIo, "cannot write '" + path + "': " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
}

}  // namespace

SnapshotInfo save(Segment& seg, const std::string& path, const SaveOptions& opts) {
  // A consistent copy takes each Cuckoo/ExactSet/window table's writer lock and pins Roaring snapshots: writes
  // a PROT_READ mapping cannot make (and a read-only attachment has no owner token to lock with).
  if (seg.read_only())
    throw Error(ErrorCode::kReadOnly, "segment '" + seg.name() + "': save needs a read-write attachment (the copy "
                                      "takes each structure's writer lock), and the segment was opened read-only: "
                                      "run the save as a user who may write the segment");
  SnapshotInfo info;
  std::vector<RegionInfo> chosen;
  const std::vector<RegionInfo> all = seg.list();
  if (opts.structures.empty()) {
    for (const auto& r : all) {
      if (ops_for(r.kind))
        chosen.push_back(r);
      else
        info.skipped.push_back(r.name + " (" + std::string(kind_name(r.kind)) + ": this build cannot save that kind)");
    }
  } else {
    for (const auto& want : opts.structures) {
      auto r = seg.find(want);
      if (!r) fail(ErrorCode::kNotFound, "no structure '" + want + "' in segment '" + seg.name() + "': check 'shmtool list'");
      if (!ops_for(r->kind))
        fail(ErrorCode::kInvalidArgument, "'" + want + "' is a " + std::string(kind_name(r->kind)) +
                                              ", which this build cannot save: leave it out of --structures");
      chosen.push_back(*r);
    }
  }
  SegmentStats st = seg.stats();
  Out o;
  o.bytes(kFileMagic, 8);
  o.u32(kSnapshotFormatVersion);
  o.u32(kByteOrderMark);
  o.u64(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count()));
  o.u32(static_cast<uint32_t>(chosen.size()));
  o.u32(static_cast<uint32_t>(seg.name().size()));
  o.u64(st.max_size);
  o.u32(st.directory_capacity);
  o.u32(0);
  o.u64(st.size);
  o.u64(internal::hash_bytes(o.b.data(), 56, 0));
  o.bytes(seg.name().data(), seg.name().size());
  for (const auto& r : chosen) {
    std::string data = ops_for(r.kind)->save(seg, r);
    if (!seg.region_live(r.slot, r.generation))
      fail(ErrorCode::kDropped, "'" + r.name + "' was dropped during the save: save again");
    size_t start = o.b.size();
    o.u32(kEntryMagic);
    o.u32(static_cast<uint32_t>(r.kind));
    o.u32(kKindFormat);
    o.u32(static_cast<uint32_t>(r.name.size()));
    o.u64(data.size());
    o.bytes(r.name.data(), r.name.size());
    o.b += data;
    o.u64(internal::hash_bytes(o.b.data() + start, o.b.size() - start, 0));
    info.entries.push_back({r.name, r.kind, data.size()});
  }
  uint64_t file_sum = internal::hash_bytes(o.b.data(), o.b.size(), 0);
  o.bytes(kTrailerMagic, 8);
  o.u32(static_cast<uint32_t>(chosen.size()));
  o.u32(0);
  o.u64(file_sum);

  // Atomic replace: temporary file in the same folder, fsync, rename.
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kIo, "cannot create '" + tmp + "': " + std::strerror(errno) + "; check the folder");
  try {
    write_all(fd, o.b, tmp);
    if (fsync(fd) != 0) fail(ErrorCode::kIo, "cannot fsync '" + tmp + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(e));
  }
  info.format_version = kSnapshotFormatVersion;
  info.created_unix_ns = get64(reinterpret_cast<const unsigned char*>(o.b.data()) + 16);
  info.source_segment = seg.name();
  info.segment_size = st.size;
  info.segment_max_size = st.max_size;
  info.directory_capacity = st.directory_capacity;
  info.file_bytes = o.b.size();
  return info;
}

SnapshotInfo read_snapshot_info(const std::string& path) {
  Mapped m;
  map_file(path, m);
  return parse(path, static_cast<const unsigned char*>(m.p), m.n).info;
}

SnapshotInfo restore(const std::string& path, std::string_view segment_name, const RestoreOptions& opts) {
  Mapped m;
  map_file(path, m);
  Parsed parsed = parse(path, static_cast<const unsigned char*>(m.p), m.n);  // the whole file, before anything changes
  std::vector<const Parsed::Entry*> chosen;
  for (const auto& e : parsed.entries)
    if (opts.structures.empty() || std::find(opts.structures.begin(), opts.structures.end(), e.name) != opts.structures.end())
      chosen.push_back(&e);
  for (const auto& want : opts.structures) {
    bool found = false;
    for (const auto* e : chosen) found = found || e->name == want;
    if (!found) fail(ErrorCode::kNotFound, "save file '" + path + "' holds no structure '" + want + "'");
  }
  auto restore_one = [&](Segment& seg, const Parsed::Entry& e) {
    In in{e.data, e.len, "save file '" + path + "' entry '" + e.name + "'"};
    ops_for(e.kind)->restore(seg, e.name, in);
    try {  // open() validates what was copied, as it does any segment bytes
      if (e.kind == Kind::kBloom) Bloom::open(seg, e.name);
      if (e.kind == Kind::kHll) Hll::open(seg, e.name);
      if (e.kind == Kind::kExactSet) ExactSet::open(seg, e.name);
      if (e.kind == Kind::kCuckoo) Cuckoo::open(seg, e.name);
      if (e.kind == Kind::kWindow) Window::open(seg, e.name);
    } catch (const Error& err) {
      fail(ErrorCode::kBadInput, in.what + " does not validate: " + err.what());
    }
  };
  SnapshotInfo info = parsed.info;
  if (opts.into_existing) {
    OpenOptions oo;
    oo.file = opts.create.file;
    Segment seg = Segment::open(segment_name, oo);
    for (const auto* e : chosen)
      if (seg.find(e->name))
        fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' already has a structure '" + e->name +
                                     "': drop it first, or restore the others with --structures");
    std::vector<std::string> made;
    try {
      for (const auto* e : chosen) {
        made.push_back(e->name);
        restore_one(seg, *e);
      }
    } catch (...) {
      for (const auto& n : made) {  // all or nothing
        auto r = seg.find(n);
        if (!r) continue;
        try {
          switch (r->kind) {  // each kind's drop frees its extents too
            case Kind::kBloom: Bloom::drop(seg, n); break;
            case Kind::kCuckoo: Cuckoo::drop(seg, n); break;
            case Kind::kRoaring: RoaringSet::drop(seg, n); break;
            case Kind::kHll: Hll::drop(seg, n); break;
            case Kind::kExactSet: ExactSet::drop(seg, n); break;
            case Kind::kWindow: Window::drop(seg, n); break;
            default: seg.drop(n);
          }
        } catch (const Error&) {
          // keep the first error; check() reports what is left
        }
      }
      throw;
    }
    return info;
  }
  // A new segment: built under a temporary name, renamed into place when complete.
  CreateOptions co = opts.create;
  const CreateOptions defaults;
  uint64_t need = 0;
  for (const auto* e : chosen) need += e->len + 4096;
  if (co.size == defaults.size) co.size = std::max<uint64_t>(parsed.info.segment_size, need + (16ull << 20));
  if (co.max_size == defaults.max_size && parsed.info.segment_max_size) co.max_size = parsed.info.segment_max_size;
  if (co.max_size < co.size) co.max_size = co.size;
  if (co.directory_capacity == defaults.directory_capacity && parsed.info.directory_capacity)
    co.directory_capacity = parsed.info.directory_capacity;
  const std::string final_path = co.file.empty() ? "/dev/shm/" + std::string(segment_name) : co.file;
  if (::access(final_path.c_str(), F_OK) == 0)
    fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' exists (" + final_path +
                                 "): remove it first, or add to it with --into");
  const std::string tmp_name = std::string(segment_name) + ".restoring-" + std::to_string(getpid());
  CreateOptions tco = co;
  if (!co.file.empty()) tco.file = co.file + ".restoring-" + std::to_string(getpid());
  const std::string tmp_path = tco.file.empty() ? "/dev/shm/" + tmp_name : tco.file;
  OpenOptions too;
  too.file = tco.file;
  try {
    Segment seg = Segment::create(tmp_name, tco);
    for (const auto* e : chosen) restore_one(seg, *e);
  } catch (...) {
    Segment::remove(tmp_name, too);
    throw;
  }
  // No-replace rename: a segment created meanwhile under the final name is never overwritten.
  if (::renameat2(AT_FDCWD, tmp_path.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    int e = errno;
    Segment::remove(tmp_name, too);
    if (e == EEXIST)
      fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' was created during the restore: nothing restored");
    fail(ErrorCode::kIo, "cannot rename '" + tmp_path + "' to '" + final_path + "': " + std::strerror(e));
  }
  internal::move_lock_file(tmp_path, final_path);  // its lock file goes with it (docs/SECURITY.md)
  return info;
}

}  // namespace shmfilter
