// tests/unit/test_fuzz_findings.cpp: regression tests for what the fuzzers of tests/fuzz found
// (each input's minimal form is also a seed in tests/fuzz/corpus/<target>/).
//
// Save files here are made by save(), then one field of an entry's region is changed and
// the entry's and the file's checksums are recomputed (reseal), as fuzz_restore's
// structure-aware mutator does, so the change reaches the kind's restore checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/hash.h"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/snapshot.hpp"
#include "structures/exact_set/exact_set_impl.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
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

// The offset of the first entry's region bytes in a save file of one entry (after the
// entry's "u64 region bytes"); reseal() recomputes its checksums.
size_t first_region(const std::vector<uint8_t>& b) {
  const size_t entry = 64 + get32(b.data() + 28);
  return entry + 24 + get32(b.data() + entry + 12) + 8;
}

void reseal(std::vector<uint8_t>& b) {
  const size_t entry = 64 + get32(b.data() + 28);
  const size_t data = entry + 24 + get32(b.data() + entry + 12);
  const size_t sum = data + get64(b.data() + entry + 16);
  const uint64_t e = shmfilter::internal::hash_bytes(b.data() + entry, sum - entry, 0);
  std::memcpy(b.data() + sum, &e, 8);
  const size_t trailer = sum + 8;
  ASSERT_EQ(b.size(), trailer + 24);
  const uint64_t t = shmfilter::internal::hash_bytes(b.data(), trailer, 0);
  std::memcpy(b.data() + trailer + 16, &t, 8);
}

}  // namespace

// fuzz_restore (structure-aware mutator), seed corpus/fuzz_restore/set-stripes-offset-wraps:
// an exact set whose stripes_offset is 2^64 - 64 passed restore's "stripes before slots" test
// (the sum wrapped), and restore then wrote the stripe words 64 bytes BEFORE the new region,
// over its extent header (UBSan: pointer overflow in exact_set_snapshot.cpp). Now kBadInput,
// nothing is created and the segment checks consistent.
TEST(FuzzFindings, RestoreRefusesAnExactSetWhoseStripesOffsetWraps) {
  SegmentGuard src(unique_name("ff-src")), dst(unique_name("ff-dst"));
  const std::string file = "/tmp/" + unique_name("ff") + ".save";
  {
    Segment seg = Segment::create(src.name, shmf_test::small_options());
    ExactSetOptions o;
    o.capacity = 16;
    ExactSet s = ExactSet::create(seg, "set", o);
    for (uint64_t k = 1; k <= 5; ++k) s.insert(k);
    save(seg, file);
  }
  std::vector<uint8_t> b = read_all(file);
  const size_t region = first_region(b);
  const uint64_t wrapped = ~uint64_t{63};  // 2^64 - 64
  std::memcpy(b.data() + region + offsetof(internal::exact_set::ExactSetHeader, stripes_offset), &wrapped, 8);
  reseal(b);
  write_all(file, b);
  if (const char* keep = std::getenv("SHMF_FUZZ_SEED_OUT")) write_all(keep, b);  // how the seed was made

  { Segment seg = Segment::create(dst.name, shmf_test::small_options()); }
  RestoreOptions ro;
  ro.into_existing = true;
  EXPECT_EQ(shmf_test::code_of([&] { restore(file, dst.name, ro); }), ErrorCode::kBadInput);
  std::remove(file.c_str());
  Segment seg = Segment::open(dst.name);
  EXPECT_TRUE(seg.list().empty());
  const CheckReport rep = seg.check();
  EXPECT_TRUE(rep.findings.empty()) << (rep.findings.empty() ? "" : rep.findings[0].where + ": " + rep.findings[0].problem);
}

// Found by test_kinds on the exact set's fuzz image at capacity (set-full): the used limit
// (keys + tombstones) is soft, an insert past it cleans tombstones and may then use every
// slot but one, and check calls such a set consistent; but restore refused its save ("the set
// holds more slots than its limit"), so a consistent set could not be restored. Whether the
// limit is passed depends on the set's random seed, so this makes sets until one is past it.
TEST(FuzzFindings, RestoreTakesASetPastItsSoftUsedLimit) {
  SegmentGuard src(unique_name("ff-soft")), dst(unique_name("ff-soft-dst"));
  const std::string file = "/tmp/" + unique_name("ff-soft") + ".save";
  Segment seg = Segment::create(src.name, shmf_test::small_options());
  std::string past;
  for (int t = 0; t < 200 && past.empty(); ++t) {
    const std::string name = "set" + std::to_string(t);
    ExactSetOptions o;
    o.capacity = 16;
    ExactSet s = ExactSet::create(seg, name, o);
    for (uint64_t k = 1; k <= 24; ++k) (void)s.insert(k * 7919u);
    for (uint64_t k = 1; k <= 6; ++k) s.erase(k * 7919u);
    for (uint64_t k = 100; k <= 130; ++k) (void)s.insert(k * 7919u);
    const RegionInfo r = *seg.find(name);
    const auto* h = reinterpret_cast<const internal::exact_set::ExactSetHeader*>(seg.base() + r.offset);
    const auto* slots = reinterpret_cast<const uint64_t*>(seg.base() + r.offset + h->slots_offset);
    uint64_t used = 0;
    for (uint64_t i = 0; i < h->slots; ++i) used += slots[i] != 0;
    if (used > h->used_limit) past = name;
    else ExactSet::drop(seg, name);
  }
  ASSERT_FALSE(past.empty()) << "no set of 200 went past its used limit";
  ASSERT_TRUE(seg.check().consistent());
  save(seg, file);
  EXPECT_NO_THROW(restore(file, dst.name));
  std::remove(file.c_str());
  Segment out = Segment::open(dst.name);
  EXPECT_EQ(ExactSet::open(out, past).size(), 16u);
  EXPECT_TRUE(out.check().findings.empty());
}
