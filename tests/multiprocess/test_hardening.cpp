// tests/multiprocess/test_hardening.cpp: a corrupt or hostile segment never
// crashes or hangs anyone (issue 12). Each test builds a real file-backed
// segment, closes it, writes the corruption into the file's bytes the way a
// flipped disk block, a `cp` of a live segment or a hostile local user would,
// and then runs the operation that used to crash or hang IN A FORKED CHILD
// with a wall bound: the child must end normally (a named shmfilter::Error is
// the right answer), never by a signal, never by the bound. The bound is a
// hang detector, not a speed test: every operation here returns in
// milliseconds once fixed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <roaring/roaring.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "segment/layout.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "structures/bloom/bloom_impl.h"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/exact_set/exact_set_impl.h"
#include "structures/roaring/roaring_impl.h"
#include "corrupt_image.h"
#include "test_util.h"

using namespace shmfilter;
namespace bl = shmfilter::internal::bloom;
namespace ck = shmfilter::internal::cuckoo;
namespace rs = shmfilter::internal::roaring;
namespace es = shmfilter::internal::exact_set;

using namespace shmf_test;

namespace {

// ---- Bloom ---------------------------------------------------------------------------------

TEST(HardeningBloom, ClassicLayerBitsNear2To64AreRejected) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    BloomOptions o;
    o.capacity = 1000;
    o.layout = BloomLayout::kClassic;
    o.seed = 1;
    Bloom::create(s, "b", o).add("k");
  }
  uint64_t off = region_offset(img, "b");
  img.poke<uint64_t>(off + sizeof(bl::BloomHeader) + offsetof(bl::BloomLayer, bits), ~uint64_t{0} - 255);
  Outcome o = in_child([&] {
    Segment s = img.open();
    bool refused = false;
    try {
      Bloom b = Bloom::open(s, "b");
      (void)b.contains("k");
      (void)b.add("x");
    } catch (const Error& e) {
      refused = e.code() == ErrorCode::kCorrupt;
    }
    CheckReport r = s.check(false);
    return refused && !r.consistent() ? 0 : 4;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningBloom, OpenNeverPublishesAnUnvalidatedSlot) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    BloomOptions o;
    o.capacity = 100;
    o.growth = 2;
    o.max_layers = 4;
    o.seed = 2;
    Bloom::create(s, "b", o).add("k");
  }
  uint64_t off = region_offset(img, "b");
  uint64_t slot1 = off + sizeof(bl::BloomHeader) + sizeof(bl::BloomLayer);
  bl::BloomLayer bad{};
  bad.offset = 1ull << 40;  // nowhere
  bad.bits = 1ull << 20;
  bad.capacity = 200;
  bad.error = 0.005;
  bad.k = 7;
  bad.state = bl::kSlotReady;  // "committed by a grower that died before publishing"
  img.poke(slot1, bad);
  Outcome o = in_child([&] {
    Segment s = img.open();
    Bloom b = Bloom::open(s, "b");
    for (int i = 0; i < 100; ++i) (void)b.contains("key" + std::to_string(i));
    (void)b.add("x");
    return b.stats().layers == 1 ? 0 : 5;  // never published
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningBloom, CheckShiftOutOfRangeIsCorrupt) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    Bloom::create(s, "b", BloomOptions{.capacity = 1000, .seed = 3});
  }
  uint64_t off = region_offset(img, "b");
  img.poke<uint32_t>(off + sizeof(bl::BloomHeader) + offsetof(bl::BloomLayer, check_shift), 200);
  Segment s = img.open();
  EXPECT_EQ(shmf_test::code_of([&] { Bloom::open(s, "b"); }), ErrorCode::kCorrupt);
}

// ---- Roaring -------------------------------------------------------------------------------

void build_roaring(const ImageFile& img) {
  Segment s = Segment::create("img", img.options());
  RoaringOptions o;
  o.delta_capacity = 64;
  RoaringSet r = RoaringSet::create(s, "r", o);
  for (uint32_t v = 0; v < 200; ++v) r.add(v * 7);
}

TEST(HardeningRoaring, StatsNeverFollowsAPendingOffset) {
  ImageFile img;
  build_roaring(img);
  uint64_t off = region_offset(img, "r");
  img.poke<uint64_t>(off + offsetof(rs::RoaringHeader, pending) + offsetof(rs::PendingFree, snap_off), 1ull << 40);
  Outcome o = in_child([&] {
    Segment s = img.open();
    RoaringSet r = RoaringSet::open(s, "r");
    (void)r.stats();
    CheckReport rep = s.check(true);
    if (rep.findings.empty()) return 6;  // the bad entry is reported
    CheckReport after = s.check(false);
    return after.consistent() ? 0 : 7;   // and --repair fixed it
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// Without a sanitizer a misaligned read goes unnoticed on x86; the ASan+UBSan
// phase (ctest -L multiprocess) fails this on the unfixed code.
TEST(HardeningRoaring, MisalignedPendingOffsetIsNotDereferenced) {
  ImageFile img;
  build_roaring(img);
  uint64_t off = region_offset(img, "r");
  uint64_t cur = img.peek<uint64_t>(off + offsetof(rs::RoaringHeader, current));
  img.poke<uint64_t>(off + offsetof(rs::RoaringHeader, pending) + offsetof(rs::PendingFree, snap_off), cur + 9);
  Outcome o = in_child([&] {
    Segment s = img.open();
    (void)RoaringSet::open(s, "r").stats();
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningRoaring, CompactionRecoveryNeverPublishesAGarbageStagedSnapshot) {
  ImageFile img;
  build_roaring(img);
  uint64_t off = region_offset(img, "r");
  uint64_t cur = img.peek<uint64_t>(off + offsetof(rs::RoaringHeader, current));
  img.poke<uint64_t>(off + offsetof(rs::RoaringHeader, staged_snap), 1ull << 40);
  img.poke<uint64_t>(off + offsetof(rs::RoaringHeader, staged_from), cur);  // "built on current": would be published
  Outcome o = in_child([&] {
    Segment s = img.open();
    RoaringSet r = RoaringSet::open(s, "r");
    ignore_errors([&] { r.compact(); });
    if (r.stats().snapshot_generation == 0) return 8;
    for (uint32_t v = 0; v < 200; ++v)
      if (!r.contains(v * 7)) return 9;  // the set still answers from a real snapshot
    (void)s.check(true);
    return s.check(false).consistent() ? 0 : 10;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// ---- Cuckoo and ExactSet: bounded waits ---------------------------------------------------------

void build_cuckoo(const ImageFile& img, uint32_t expansion = 0) {
  Segment s = Segment::create("img", img.options());
  CuckooOptions o;
  o.capacity = 1000;
  o.fingerprint_bits = 12;
  o.seed = 5;
  o.expansion = expansion;
  Cuckoo c = Cuckoo::create(s, "c", o);
  for (uint64_t k = 0; k < 200; ++k) c.add(k);
}

TEST(HardeningCuckoo, AllVersionsOddWithNoOwnerDoNotHangReaders) {
  ImageFile img;
  build_cuckoo(img);
  uint64_t off = region_offset(img, "c");
  ck::Header h = img.peek<ck::Header>(off);
  uint64_t stripes = uint64_t{1} << h.subs[0].log2_stripes;
  for (uint64_t i = 0; i < stripes; ++i) img.poke<uint64_t>(h.subs[0].offset + i * 8, 1);
  Outcome o = in_child([&] {
    Segment s = img.open();
    Cuckoo c = Cuckoo::open(s, "c");
    for (uint64_t k = 0; k < 200; ++k)
      if (!c.contains(k)) return 11;  // no false negative after the repair
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningCuckoo, ExpansionFactorOutOfRangeIsCorrupt) {
  ImageFile img;
  build_cuckoo(img, 2);
  uint64_t off = region_offset(img, "c");
  img.poke<uint32_t>(off + offsetof(ck::Header, expansion), 0x80000001u);
  Outcome o = in_child([&] {
    Segment s = img.open();
    bool refused = shmf_test::code_of([&] { Cuckoo::open(s, "c"); }) == ErrorCode::kCorrupt;
    return refused ? 0 : 13;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// ---- directory entries ---------------------------------------------------------------------------

// Without a sanitizer a misaligned read goes unnoticed on x86; the ASan+UBSan
// phase (ctest -L multiprocess) fails this on the unfixed code.
TEST(HardeningDirectory, AMisalignedRegionOffsetIsReportedNotDereferenced) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    Bloom::create(s, "b", BloomOptions{.capacity = 100});
  }
  RegionInfo r = *img.open().find("b");
  seg_layout::Header h = img.peek<seg_layout::Header>(0);
  img.poke<uint64_t>(h.directory_offset + r.slot * sizeof(seg_layout::DirEntry) + offsetof(seg_layout::DirEntry, offset),
                     r.offset + 8);
  Outcome o = in_child([&] {
    Segment s = img.open();
    ignore_errors([&] { Bloom::open(s, "b"); });
    return s.check(false).consistent() ? 15 : 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// ---- ExactSet under insert/delete churn ------------------------------------------------------

TEST(HardeningExactSet, ChurnNeverAnswersFullBelowCapacity) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("churn"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  ExactSet e = ExactSet::create(seg, "e", ExactSetOptions{.capacity = 1000});
  uint64_t next = 1;
  for (int round = 0; round < 6; ++round) {
    std::vector<uint64_t> keys;
    for (int i = 0; i < 800; ++i) keys.push_back(next++ * 0x9E3779B97F4A7C15ull);
    uint64_t full = 0;
    for (uint64_t k : keys) full += e.insert(k) == InsertResult::kFull;
    EXPECT_EQ(full, 0u) << "round " << round << ": kFull with " << e.size() << " live keys of 1000";
    EXPECT_EQ(e.size(), 800u - full);
    for (uint64_t k : keys) e.erase(k);
    EXPECT_EQ(e.size(), 0u);
  }
  EXPECT_TRUE(seg.check(false).consistent());
}

// ---- Roaring portable import -----------------------------------------------------------------

TEST(HardeningRoaringImport, ARunContainerWithoutRunsIsBadInputNotACrash) {
  // Found by fuzz_roaring_import: cookie 12347 with one run container, cardinality
  // 4098 in its header and 0 runs; CRoaring built it and later dereferenced NULL.
  const unsigned char bytes[] = {0x3b, 0x30, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x10, 0x00, 0x00};
  std::string_view in(reinterpret_cast<const char*>(bytes), sizeof bytes);
  EXPECT_EQ(shmf_test::code_of([&] { roaring_bitmap_free(RoaringSet::parse_portable(in)); }), ErrorCode::kBadInput);
  shmf_test::SegmentGuard g(shmf_test::unique_name("rimp"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  RoaringSet r = RoaringSet::create(seg, "r");
  Outcome o = in_child([&] {
    r.import_portable(in);
    return 17;  // must have thrown kBadInput
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

}  // namespace
