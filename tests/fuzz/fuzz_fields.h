// tests/fuzz/fuzz_fields.h: the structure-aware part of the fuzzers' custom mutators
// (fuzz_segment, fuzz_restore), driven by the kinds table.
//
// Each kind's row lists the fields its code follows (KindRow::fuzz_fields in
// lib/structures/<kind>/<kind>_kind.cpp: header offsets, sizes, counts, shifts,
// descriptors, slot tags, and those of every table the header reaches). These helpers
// gather them from a consistent segment and pick a value to write into one: 0, 1, 64,
// all ones, the region's own offset and end, another table's offset, the file size,
// the field's own value off by one, doubled or halved, a shift at or past the word
// width. Nothing here names a kind: a new kind is targeted by its row's list.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shmfilter/segment.hpp"
#include "structures/kind.h"

namespace shmf_fuzz {

using shmfilter::internal::FuzzField;

struct RegionFields {
  shmfilter::RegionInfo region;
  std::vector<FuzzField> fields;
};

// Every listed structure's fields, through its kind's row; structures without any are left out.
inline std::vector<RegionFields> gather_fields(shmfilter::Segment& seg) {
  std::vector<RegionFields> out;
  for (const shmfilter::RegionInfo& r : seg.list()) {
    const shmfilter::internal::KindRow* row = shmfilter::internal::kind_row(r.kind);
    if (row == nullptr) continue;
    RegionFields rf{r, {}};
    row->fuzz_fields(seg, r, rf.fields);
    if (!rf.fields.empty()) out.push_back(std::move(rf));
  }
  return out;
}

// xorshift64*: the mutators' only randomness, seeded from libFuzzer's seed.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

inline uint64_t width_mask(unsigned width) { return width >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1; }

inline uint64_t load_le(const uint8_t* p, unsigned width) {
  uint64_t v = 0;
  std::memcpy(&v, p, width);
  return v;
}

// What to write into field F (current value CUR) of REGION (offset, size) in an image of
// FILE_SIZE bytes whose tables are at OFFSETS (every kOffset field's value, every region's
// offset): the boundary values every field gets, then the ones its role makes interesting.
inline uint64_t interesting_value(Rng& rng, const FuzzField& f, uint64_t cur, uint64_t region_offset,
                                  uint64_t region_size, uint64_t file_size, const std::vector<uint64_t>& offsets) {
  const uint64_t other = offsets.empty() ? 64 : offsets[rng.below(offsets.size())];
  const uint64_t common[] = {0, 1, 64, ~uint64_t{0}, cur + 1, cur - 1, file_size, region_offset, other};
  uint64_t v = 0;
  if (rng.below(2) == 0) {
    v = common[rng.below(sizeof common / sizeof common[0])];
  } else {
    switch (f.role) {
      case FuzzField::kOffset: {
        const uint64_t c[] = {region_offset + 64,   region_offset + region_size, region_offset - 64,
                              other + 64,           other - 64,                  other + 8,
                              file_size - 64,       file_size - 1,               file_size + 4096,
                              cur ^ 64,             cur + 4096,                  uint64_t{1} << 40,
                              uint64_t{4096}};
        v = c[rng.below(sizeof c / sizeof c[0])];
        break;
      }
      case FuzzField::kSize: {
        const uint64_t c[] = {cur * 2, cur / 2, cur + 64, cur - 64, file_size - region_offset, region_size,
                              region_size + 1, uint64_t{1} << 32, uint64_t{1} << 63};
        v = c[rng.below(sizeof c / sizeof c[0])];
        break;
      }
      case FuzzField::kShift: {
        const uint64_t c[] = {2, 7, 8, 12, 16, 31, 32, 33, 63, 64, 65, 255, cur + 8, cur * 2};
        v = c[rng.below(sizeof c / sizeof c[0])];
        break;
      }
      case FuzzField::kTag: {
        const uint64_t c[] = {cur + 2, cur - 2, cur + 1000, ~uint64_t{0} - 1, uint64_t{1} << 62, cur << 1,
                              cur ^ (uint64_t{1} << rng.below(64))};
        v = c[rng.below(sizeof c / sizeof c[0])];
        break;
      }
      case FuzzField::kDescriptor:
        v = rng.below(2) ? cur ^ (uint64_t{1} << rng.below(8 * f.width)) : rng.below(8);
        break;
      case FuzzField::kCount:
      default: {
        const uint64_t c[] = {cur * 2, cur / 2, cur + 64, uint64_t{1} << 31, uint64_t{1} << 32, (uint64_t{1} << 32) - 1,
                              uint64_t{1} << 16, 65535, 65536, width_mask(f.width) - 1, cur * 1000};
        v = c[rng.below(sizeof c / sizeof c[0])];
        break;
      }
    }
  }
  return v & width_mask(f.width);
}

// The values of every kOffset field (read from IMAGE, where each field's offset is valid)
// and every region's offset: "another table's offset" for interesting_value.
inline std::vector<uint64_t> offsets_of(const std::vector<RegionFields>& all, const uint8_t* image, uint64_t image_size) {
  std::vector<uint64_t> out;
  for (const RegionFields& rf : all) {
    out.push_back(rf.region.offset);
    for (const FuzzField& f : rf.fields)
      if (f.role == FuzzField::kOffset && f.offset + f.width <= image_size) {
        const uint64_t v = load_le(image + f.offset, f.width);
        if (v != 0) out.push_back(v);
      }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace shmf_fuzz
