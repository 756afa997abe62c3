// tests/unit/test_snapshot.cpp: save/restore round trips per kind, and every
// bad file (not a save, truncated anywhere, a flipped byte, a future version)
// is one clear error that creates nothing. The save under concurrent writers
// is tests/multiprocess/test_snapshot_multiprocess.cpp.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/snapshot.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::code_of;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

struct TempFile {
  std::string path = "/tmp/shmf-test-snap-" + std::to_string(getpid()) + "-" + unique_name("f").substr(10);
  ~TempFile() { std::remove(path.c_str()); }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

// A segment with one of every kind (a scaled Bloom with 3 layers, a set with
// erases, a Roaring set with values in snapshot and delta, a cuckoo filter
// that expanded, with erases) and a blob of raw bytes.
void fill(Segment& seg) {
  BloomOptions bo;
  bo.capacity = 200;
  bo.growth = 2;
  bo.seed = 11;
  Bloom b = Bloom::create(seg, "bloom", bo);
  for (uint64_t i = 0; i < 1500; ++i) b.add(i);
  ExactSetOptions eo;
  eo.capacity = 1000;
  ExactSet s = ExactSet::create(seg, "set", eo);
  for (uint64_t i = 0; i < 600; ++i) s.insert(i);
  for (uint64_t i = 0; i < 600; i += 3) s.erase(i);
  s.insert(std::string_view("device-a"));
  Hll h = Hll::create(seg, "hll");
  for (uint64_t i = 0; i < 5000; ++i) h.add(i);
  RoaringSet r = RoaringSet::create(seg, "roaring");
  for (uint32_t i = 0; i < 3000; ++i) r.add(i * 7);
  r.compact();
  for (uint32_t i = 0; i < 100; ++i) r.add(1'000'000 + i);
  r.remove(7);
  CuckooOptions co;
  co.capacity = 100;
  co.expansion = 2;
  co.seed = 3;
  Cuckoo c = Cuckoo::create(seg, "cuckoo", co);
  for (uint64_t i = 0; i < 400; ++i) c.add(i);
  for (uint64_t i = 0; i < 400; i += 5) c.erase(i);
  seg.create_region("blob", Kind::kBlob, 64, [](std::byte* p, uint64_t n, ControlTxn&) {
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(i * 37 + 1);
  });
}

}  // namespace

TEST(Snapshot, RoundTripKeepsEveryKindsContentsBlobsIncluded) {
  SegmentGuard src(unique_name("snap-src")), dst(unique_name("snap-dst"));
  TempFile f;
  Segment seg = Segment::create(src.name, shmf_test::small_options());
  fill(seg);
  SnapshotInfo saved = save(seg, f.path);
  ASSERT_EQ(saved.entries.size(), 6u);
  EXPECT_TRUE(saved.skipped.empty());

  SnapshotInfo info = restore(f.path, dst.name);
  EXPECT_EQ(info.source_segment, src.name);
  Segment out = Segment::open(dst.name);
  EXPECT_TRUE(out.check().consistent());
  {  // the blob's bytes, as written
    RegionInfo blob = out.open_region("blob", Kind::kBlob);
    ASSERT_EQ(blob.size, 64u);
    for (uint64_t i = 0; i < 64; ++i)
      EXPECT_EQ(static_cast<unsigned>(out.base()[blob.offset + i]), static_cast<unsigned>((i * 37 + 1) & 0xff)) << i;
  }

  Bloom b = Bloom::open(out, "bloom");
  EXPECT_EQ(b.stats().layers, Bloom::open(seg, "bloom").stats().layers);
  EXPECT_GE(b.stats().layers, 3u);
  for (uint64_t i = 0; i < 1500; ++i) ASSERT_TRUE(b.contains(i)) << i;
  b.add(uint64_t{99999});  // the restored filter keeps working (and growing)
  EXPECT_TRUE(b.contains(uint64_t{99999}));

  ExactSet s = ExactSet::open(out, "set");
  EXPECT_EQ(s.size(), ExactSet::open(seg, "set").size());
  for (uint64_t i = 0; i < 600; ++i) ASSERT_EQ(s.contains(i), i % 3 != 0) << i;
  EXPECT_TRUE(s.contains(std::string_view("device-a")));  // the seed came along
  EXPECT_EQ(s.insert(uint64_t{3}), InsertResult::kInserted);
  EXPECT_TRUE(s.erase(uint64_t{4}));

  Cuckoo c = Cuckoo::open(out, "cuckoo");
  EXPECT_GE(c.stats().subfilters, 2u);
  EXPECT_EQ(c.size(), Cuckoo::open(seg, "cuckoo").size());
  for (uint64_t i = 0; i < 400; ++i) {
    if (i % 5 != 0) {
      ASSERT_TRUE(c.contains(i)) << i;  // no false negatives; erased keys may be FPs
    }
  }
  EXPECT_TRUE(c.erase(uint64_t{1}));
  EXPECT_EQ(c.add(uint64_t{100000}), CuckooStatus::kInserted);

  EXPECT_EQ(Hll::open(out, "hll").count(), Hll::open(seg, "hll").count());
  RoaringSet r = RoaringSet::open(out, "roaring");
  EXPECT_EQ(r.cardinality(), 3000u + 100u - 1u);
  EXPECT_FALSE(r.contains(7));
  EXPECT_TRUE(r.contains(14));
  EXPECT_TRUE(r.contains(1'000'050));
}

TEST(Snapshot, IntoExistingAddsAndRefusesNameClashesBeforeCreatingAnything) {
  SegmentGuard src(unique_name("snap-src")), dst(unique_name("snap-into"));
  TempFile f;
  Segment seg = Segment::create(src.name, shmf_test::small_options());
  fill(seg);
  save(seg, f.path, {{"hll", "set"}});
  Segment out = Segment::create(dst.name, shmf_test::small_options());
  Hll::create(out, "set");  // a clash with the second entry
  RestoreOptions o;
  o.into_existing = true;
  EXPECT_EQ(code_of([&] { restore(f.path, dst.name, o); }), ErrorCode::kExists);
  EXPECT_FALSE(out.find("hll"));  // nothing was added
  o.structures = {"hll"};
  restore(f.path, dst.name, o);
  EXPECT_EQ(Hll::open(out, "hll").count(), Hll::open(seg, "hll").count());
  // A new segment under an existing name is refused too.
  EXPECT_EQ(code_of([&] { restore(f.path, dst.name); }), ErrorCode::kExists);
  EXPECT_EQ(save(seg, f.path, {{"blob"}}).entries.size(), 1u);  // every kind can be saved (its kinds-table row)
  EXPECT_EQ(code_of([&] { save(seg, f.path, {{"absent"}}); }), ErrorCode::kNotFound);
}

TEST(Snapshot, BadFilesAreOneErrorAndCreateNothing) {
  SegmentGuard src(unique_name("snap-src")), dst(unique_name("snap-bad"));
  TempFile f, bad;
  Segment seg = Segment::create(src.name, shmf_test::small_options());
  fill(seg);
  save(seg, f.path);
  const std::string good = slurp(f.path);
  ASSERT_GT(good.size(), 1000u);

  spit(bad.path, "name,kind\nfreq,bloom\n");
  EXPECT_EQ(code_of([&] { restore(bad.path, dst.name); }), ErrorCode::kBadInput);
  spit(bad.path, "");
  EXPECT_EQ(code_of([&] { restore(bad.path, dst.name); }), ErrorCode::kBadInput);
  // Truncated anywhere: header, name, an entry, the trailer.
  for (size_t cut : {size_t{10}, size_t{63}, size_t{70}, good.size() / 3, good.size() / 2, good.size() - 1}) {
    spit(bad.path, good.substr(0, cut));
    EXPECT_EQ(code_of([&] { restore(bad.path, dst.name); }), ErrorCode::kBadInput) << "cut at " << cut;
  }
  // One flipped bit anywhere past the version field.
  for (size_t at : {size_t{20}, size_t{100}, good.size() / 2, good.size() - 30, good.size() - 2}) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    spit(bad.path, b);
    EXPECT_EQ(code_of([&] { restore(bad.path, dst.name); }), ErrorCode::kBadInput) << "flip at " << at;
  }
  // A save of a newer format version.
  std::string future = good;
  future[8] = 2;
  spit(bad.path, future);
  EXPECT_EQ(code_of([&] { restore(bad.path, dst.name); }), ErrorCode::kVersionMismatch);
  try {
    restore(bad.path, dst.name);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 2"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(Segment::exists(dst.name));
  EXPECT_EQ(code_of([&] { read_snapshot_info("/nonexistent/x.save"); }), ErrorCode::kIo);
  EXPECT_EQ(read_snapshot_info(f.path).entries.size(), 6u);
}
