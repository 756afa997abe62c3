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
