// tests/fuzz/fuzz_restore.cpp: libFuzzer target for save files (`shmtool restore FILE`,
// bytes anyone may hand us: a copied archive, a truncated transfer, a crafted file).
//
// Each input is written to a file and restored into one scratch segment (--into).
// shmfilter::Error is the expected outcome of a bad file, and then the segment must
// hold nothing (restore is all or nothing). An accepted file's structures must open,
// answer, take writes and pass check() without a crash; they are dropped afterwards.
// Seeds (corpus/fuzz_restore/): saves of a segment with every kind, windows of both
// variants included (their day ring, an overflowing bucket, a forget); dup-names and
// nul-name (re-sealed files the review's issue #23 named: two entries of one name, a
// name with a NUL byte; both kBadInput now); every-kind-every-state
// is the save of every row's fuzz image (idle windows with retired slots and a spare in
// preparation, a roaring set with retired snapshots pending, an exact set at capacity...).
//
// Custom mutator: half the time libFuzzer's own; otherwise structure-aware. It parses the
// input as a save file (docs/save-restore.md), picks an entry whose data starts with its
// region as laid out in the segment (u64 region bytes, then the region), and writes into
// one of the fields its kind's row lists (KindRow::fuzz_fields, gathered at start-up from
// every kind's fuzz image and kept relative to the region) a value chosen for the field's
// role (fuzz_fields.h), or swaps two of them; then it reseals the entry's and the file's
// checksums, so the input reaches the kind's restore checks instead of the checksum test.
// A quarter of libFuzzer's own byte mutations are resealed the same way.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "shmfilter/error.hpp"
#include "shmfilter/kinds.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/snapshot.hpp"
#include "structures/kind.h"
#include "base/hash.h"
#include "fuzz_fields.h"

using namespace shmfilter;

namespace {
std::string g_name, g_file;
Segment* g_seg = nullptr;
void cleanup() {
  delete g_seg;
  if (!g_name.empty()) Segment::remove(g_name);
  if (!g_file.empty()) std::remove(g_file.c_str());
}

// Every call a user can make on it, and its drop: through its kind's row (kinds table).
void exercise(const RegionInfo& r) {
  if (const internal::KindRow* row = internal::kind_row(r.kind)) row->fuzz_exercise(*g_seg, r);
}

bool drop_any(const RegionInfo& r) { return drop_structure(*g_seg, r.name); }

// Per kind, the fields its row lists, relative to the region start (those inside the region),
// from every kind's fuzz image; and every offset value those images hold.
std::map<uint32_t, std::vector<internal::FuzzField>> g_kind_fields;
std::vector<uint64_t> g_offsets;

void gather_kind_fields() {
  const std::string name = g_name + "-fields";
  CreateOptions o;
  o.size = 0;
  o.max_size = 64ull << 20;
  o.directory_capacity = 64;
  {
    Segment seg = Segment::create(name, o);
    for (const internal::KindRow* row : internal::kind_rows()) row->fuzz_image(seg, "");
    const std::vector<shmf_fuzz::RegionFields> all = shmf_fuzz::gather_fields(seg);
    g_offsets = shmf_fuzz::offsets_of(all, reinterpret_cast<const uint8_t*>(seg.base()), seg.stats().size);
    for (const shmf_fuzz::RegionFields& rf : all) {
      std::vector<internal::FuzzField>& v = g_kind_fields[static_cast<uint32_t>(rf.region.kind)];
      for (internal::FuzzField f : rf.fields) {
        if (f.offset < rf.region.offset || f.offset + f.width > rf.region.offset + rf.region.size) continue;
        f.offset -= rf.region.offset;
        bool dup = false;
        for (const internal::FuzzField& g : v) dup = dup || g.offset == f.offset;
        if (!dup) v.push_back(f);
      }
    }
  }
  Segment::remove(name);
}

uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

struct Entry {
  size_t start;  // its marker
  uint32_t kind;
  size_t data;   // its data bytes
  uint64_t data_len;
  size_t sum;    // its checksum
};

// The entries of a save file of SIZE bytes (header, name, entries, trailer), or false.
bool parse_save(const uint8_t* d, size_t size, std::vector<Entry>& out, size_t& trailer) {
  if (size < 64 + 24 || std::memcmp(d, "SHMFSAVE", 8) != 0) return false;
  const uint32_t count = get32(d + 24);
  size_t p = 64 + get32(d + 28);
  for (uint32_t i = 0; i < count && i < 4096; ++i) {
    if (p > size || size - p < 24 + 24 || get32(d + p) != 0x52544e45) return false;
    Entry e{p, get32(d + p + 4), 0, get64(d + p + 16), 0};
    const uint64_t name_len = get32(d + p + 12);
    if (name_len > size || e.data_len > size || p + 24 + name_len + e.data_len + 8 > size - 24) return false;
    e.data = p + 24 + name_len;
    e.sum = e.data + e.data_len;
    out.push_back(e);
    p = e.sum + 8;
  }
  trailer = p;
  return p <= size && size - p == 24 && std::memcmp(d + p, "SHMFEND!", 8) == 0;
}

// One structure-aware change to a parsed save file, resealed; false when none applies.
bool mutate_fields(uint8_t* d, size_t size, unsigned seed) {
  std::vector<Entry> entries;
  size_t trailer = 0;
  if (!parse_save(d, size, entries, trailer) || entries.empty()) return false;
  shmf_fuzz::Rng rng(seed);
  const Entry& e = entries[rng.below(entries.size())];
  const auto it = g_kind_fields.find(e.kind);
  // Entries whose data is "u64 region bytes, the region": every kind's but those with a
  // format of their own (roaring's portable serialization), which this size test leaves out.
  if (it == g_kind_fields.end() || it->second.empty() || e.data_len < 8) return false;
  const uint64_t region_bytes = get64(d + e.data);
  if (region_bytes > e.data_len - 8) return false;
  const size_t region = e.data + 8;
  const std::vector<internal::FuzzField>& fields = it->second;
  const internal::FuzzField& f = fields[rng.below(fields.size())];
  if (f.offset + f.width > region_bytes) return false;
  const uint64_t cur = shmf_fuzz::load_le(d + region + f.offset, f.width);
  const internal::FuzzField& g = fields[rng.below(fields.size())];
  if (rng.below(4) == 0 && g.offset != f.offset && g.offset + g.width <= region_bytes) {  // swap two fields
    const uint64_t other = shmf_fuzz::load_le(d + region + g.offset, g.width);
    std::memcpy(d + region + f.offset, &other, f.width);
    std::memcpy(d + region + g.offset, &cur, g.width);
  } else {
    const uint64_t v = shmf_fuzz::interesting_value(rng, f, cur, 0, region_bytes, size, g_offsets);
    std::memcpy(d + region + f.offset, &v, f.width);
  }
  put64(d + e.sum, internal::hash_bytes(d + e.start, e.sum - e.start, 0));
  put64(d + trailer + 16, internal::hash_bytes(d, trailer, 0));
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_name = "shmf-fuzz-restore-" + std::to_string(getpid());
  g_file = "/tmp/shmf-fuzz-restore-" + std::to_string(getpid()) + ".save";
  CreateOptions o;
  o.size = 0;
  o.max_size = 256ull << 20;
  o.directory_capacity = 64;
  g_seg = new Segment(Segment::create(g_name, o));
  gather_kind_fields();
  std::atexit(cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(g_file.c_str(), "wb");
  if (!f) abort();
  if (size && std::fwrite(data, 1, size, f) != size) abort();
  std::fclose(f);
  RestoreOptions ro;
  ro.into_existing = true;
  try {
    restore(g_file, g_name, ro);
  } catch (const Error&) {
    if (!g_seg->list().empty()) abort();  // a refused restore left a structure behind
    return 0;
  }
  for (const auto& r : g_seg->list()) {
    try {
      exercise(r);
    } catch (const Error&) {
      // a structure that opens may still refuse an operation (kNoSpace, kFull): fine
    }
  }
  (void)g_seg->check(false);
  for (const auto& r : g_seg->list()) {
    try {
      drop_any(r);
    } catch (const Error&) {
      abort();  // a restored structure must be droppable
    }
  }
  g_seg->quiesce();
  return 0;
}

// Recomputes every checksum of a save file whose layout still parses (header, entries, trailer).
bool reseal_all(uint8_t* d, size_t size) {
  std::vector<Entry> entries;
  size_t trailer = 0;
  if (!parse_save(d, size, entries, trailer)) return false;
  put64(d + 56, internal::hash_bytes(d, 56, 0));
  for (const Entry& e : entries) put64(d + e.sum, internal::hash_bytes(d + e.start, e.sum - e.start, 0));
  put64(d + trailer + 16, internal::hash_bytes(d, trailer, 0));
  return true;
}

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  shmf_fuzz::Rng rng(seed);
  const uint64_t choice = rng.below(4);
  if (choice < 2) {
    // One to three field changes, resealed; libFuzzer's own when the input is no save file.
    const uint64_t n = 1 + rng.below(3);
    bool any = false;
    for (uint64_t i = 0; i < n; ++i) any = mutate_fields(data, size, static_cast<unsigned>(rng.next())) || any;
    if (any) return size;
  }
  const size_t n = LLVMFuzzerMutate(data, size, max_size);
  // A quarter of the time libFuzzer's byte changes are resealed too, so they reach what the
  // field lists do not name (window table pieces, roaring's portable bytes, entry headers).
  if (choice == 2) (void)reseal_all(data, n);
  return n;
}
