// tests/unit/test_extent_ownership.cpp: issue 23, the crash class fuzz_segment found last
// (UBSan "division by zero" in window::bucket_number after 1,667 s): a window's header changed
// AFTER its open by another structure's writes, because a forged extent header let a
// neighbour's extent overlap the window's region. Two defences, one test group each:
//  - ownership proved against the allocator's own walk (lib/segment/extents.h): a region, or a
//    table a structure follows, that the walk does not reach (a forged extent header inside
//    another extent, an extent size forged to swallow the next one) is refused at open and
//    reported by check, for every kind (Segment::open_region);
//  - the Window handle keeps the geometry validated at open: header words overwritten after
//    open (bucket_seconds 0, slots 0, huge retention / space table / probe counts) never become
//    a divisor, modulus or index bound, and a slot's table offset pointing outside the mapping
//    answers kCorrupt, never a crash.
// Each test fails (crashes, or answers wrongly) on the code before this change.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "segment/layout.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/window.hpp"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/window/window_impl.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
namespace wi = shmfilter::internal::window;

namespace {

constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC
constexpr int64_t kDay = 86400;

struct Fixture {
  SegmentGuard guard;
  Segment seg;
  explicit Fixture(const std::string& tag) : guard(shmf_test::unique_name(tag)) {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    seg = Segment::create(guard.name, o);
  }
  internal::ExtentHeader* extent_of(const char* name) {
    return reinterpret_cast<internal::ExtentHeader*>(seg.base() + seg.find(name)->offset -
                                                     sizeof(internal::ExtentHeader));
  }
  wi::WindowHeader* header(const char* name = "w") {
    return reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find(name)->offset);
  }
};

WindowOptions opts(WindowVariant v) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = 64;
  o.error = 0.01;
  o.retention = 3;
  o.max_spaces = 16;
  o.seed = 5;
  o.now = kT0;
  return o;
}

Window make(Segment& seg, WindowVariant v) {
  Window w = Window::create(seg, "w", opts(v));
  w.set_now(kT0);
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(w.mark(1, i), WindowStatus::kNew);
  w.maintain();
  return w;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- ownership: the allocator's own walk ----------------------------------------------

// An extent size forged to run over the next extent: the walk steps over the swallowed
// structure, so its open is refused (kCorrupt, named), whatever its own extent header says;
// check reports it. Before: both opened, and each wrote into bytes the other also owned.
TEST(ExtentOwnership, AnExtentSizeForgedOverTheNextExtentIsRefusedAtOpen) {
  Fixture f("eoswallow");
  BloomOptions bo;
  bo.capacity = 1000;
  bo.seed = 1;
  (void)Bloom::create(f.seg, "a", bo);
  (void)Hll::create(f.seg, "b");
  (void)Window::create(f.seg, "c", opts(WindowVariant::kBloom));
  ASSERT_TRUE(f.seg.check(false).consistent());
  internal::ExtentHeader* a = f.extent_of("a");
  internal::ExtentHeader* b = f.extent_of("b");
  ASSERT_EQ(reinterpret_cast<std::byte*>(a) + a->size, reinterpret_cast<std::byte*>(b));  // b follows a
  a->size += b->size;  // a's extent now claims b's bytes too
  // A new attachment, as the fuzzer's (the image is damaged before the segment is opened).
  Segment seg = Segment::open(f.guard.name);
  EXPECT_NO_THROW(Bloom::open(seg, "a"));
  EXPECT_EQ(shmf_test::code_of([&] { Hll::open(seg, "b"); }), ErrorCode::kCorrupt);
  const std::string m = message_of([&] { Hll::open(seg, "b"); });
  EXPECT_NE(m.find("structure 'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("allocator's walk"), std::string::npos) << m;
  EXPECT_NE(m.find("shmtool check"), std::string::npos) << m;
  EXPECT_EQ(shmf_test::code_of([&] { Window::open(seg, "c"); }), ErrorCode::kOk);  // past b: the walk resumes
  EXPECT_FALSE(seg.check(false).consistent());
  a->size -= b->size;  // restored: check walks afresh, and everything opens again
  EXPECT_TRUE(seg.check(false).consistent());
  EXPECT_NO_THROW(Hll::open(seg, "b"));
}

// A window table extent forged INSIDE a neighbour's payload (a copied ExtentHeader with the
// window's owner word, and the table's bytes): every field check passes, but the walk does not
// reach it, so open and check refuse it. Before: the window opened and its data plane wrote into
// the neighbour's bits (and the neighbour's writes into the window's table).
TEST(ExtentOwnership, AWindowTableForgedInsideANeighbourIsRefused) {
  for (WindowVariant v : {WindowVariant::kBloom, WindowVariant::kCuckoo}) {
    Fixture f("eoforge");
    Window w = make(f.seg, v);
    BloomOptions bo;
    bo.capacity = 200000;
    bo.seed = 1;
    (void)Bloom::create(f.seg, "n", bo);
    const RegionInfo n = *f.seg.find("n");
    wi::WindowHeader* h = f.header();
    // The spare (tag 0, a ready table): copy its extent into n's payload and point the slot at it.
    const uint32_t spare = static_cast<uint32_t>((w.bucket_of(kT0) + 1) % h->slots);
    wi::BucketSlot& s = wi::slot_table(h)[spare];
    ASSERT_EQ(s.tag.load(), 0u);
    const uint64_t old = s.table;
    auto* eh = reinterpret_cast<internal::ExtentHeader*>(f.seg.base() + old - sizeof(internal::ExtentHeader));
    const uint64_t forged = n.offset + 4096;  // 64-aligned, inside n's bit array
    ASSERT_LT(forged + eh->size, n.offset + n.size);
    std::memcpy(f.seg.base() + forged - sizeof(internal::ExtentHeader), eh, eh->size);
    if (v == WindowVariant::kCuckoo) {  // sub-filter 0's descriptor names the copy's own bytes
      // (table_problem requires subs[0] right after the cuckoo header, at the table's offset)
      auto* ch = reinterpret_cast<internal::cuckoo::Header*>(f.seg.base() + forged + wi::main_offset_in_table(h->space_table));
      ch->subs[0].offset = forged + wi::main_offset_in_table(h->space_table) + sizeof(internal::cuckoo::Header);
    }
    s.table = forged;
    Segment seg = Segment::open(f.guard.name);  // a new attachment, as the fuzzer's
    const std::string m = message_of([&] { Window::open(seg, "w"); });
    EXPECT_NE(m.find("slot " + std::to_string(spare)), std::string::npos) << m;
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(seg, "w"); }), ErrorCode::kCorrupt);
    EXPECT_FALSE(seg.check(false).consistent());
    s.table = old;
    EXPECT_NO_THROW(Window::open(seg, "w"));
    EXPECT_TRUE(seg.check(false).consistent());
  }
}

// A cuckoo filter's sub-filter 1 is an extent of its own: pointed at another structure's
// allocated extent of a fitting size (a Bloom filter's region), open and check refuse it. Before:
// only "inside the segment" was checked, and the filter's inserts wrote into the Bloom's bits.
TEST(ExtentOwnership, ACuckooSubFilterOverAnotherStructuresExtentIsRefused) {
  Fixture f("eocuckoo");
  CuckooOptions co;
  co.capacity = 256;
  co.fingerprint_bits = 16;
  co.expansion = 2;
  co.seed = 3;
  Cuckoo c = Cuckoo::create(f.seg, "c", co);
  for (uint64_t i = 0; i < 2000; ++i) ASSERT_EQ(c.add(i), CuckooStatus::kInserted) << i;
  BloomOptions bo;
  bo.capacity = 200000;
  bo.seed = 1;
  (void)Bloom::create(f.seg, "n", bo);
  auto* h = reinterpret_cast<internal::cuckoo::Header*>(f.seg.base() + f.seg.find("c")->offset);
  ASSERT_GE(internal::cuckoo::sub_count_acquire(h), 2u);
  ASSERT_TRUE(f.seg.check(false).consistent());
  const uint64_t old = h->subs[1].offset;
  h->subs[1].offset = f.seg.find("n")->offset;  // an allocated extent, large enough, but the Bloom's
  Segment seg = Segment::open(f.guard.name);
  EXPECT_EQ(shmf_test::code_of([&] { Cuckoo::open(seg, "c"); }), ErrorCode::kCorrupt);
  EXPECT_NE(message_of([&] { Cuckoo::open(seg, "c"); }).find("sub-filter 1"), std::string::npos);
  EXPECT_FALSE(seg.check(false).consistent());
  h->subs[1].offset = old;
  EXPECT_NO_THROW(Cuckoo::open(seg, "c"));
  EXPECT_TRUE(seg.check(false).consistent());
}

// ---- the window keeps the geometry it validated at open --------------------------------

// What the data plane answers through W for pairs 0..49 of space 1 (marked by make()) and 50..99.
void expect_answers(Window& w, const char* what) {
  SCOPED_TRACE(what);
  for (uint64_t i = 0; i < 50; ++i) {
    EXPECT_TRUE(w.seen(1, i)) << i;
    EXPECT_EQ(w.mark_if_unseen(1, i), WindowStatus::kSeen) << i;
  }
  uint64_t fresh = 0;
  for (uint64_t i = 50; i < 100; ++i) fresh += w.mark(1, i) == WindowStatus::kNew;
  EXPECT_GE(fresh, 45u);
  std::vector<uint64_t> sp(100, 1), it(100);
  for (uint64_t i = 0; i < 100; ++i) it[i] = i;
  EXPECT_EQ(w.seen_many(sp, it, kWholeWindow), 100u);
  std::vector<WindowStatus> out(100);
  EXPECT_EQ(w.mark_if_unseen_many(sp, it, kWholeWindow, out), 0u);
  EXPECT_EQ(w.mark_many(sp, it, out), 0u);
  EXPECT_GE(w.new_count(1), 50u + fresh - 2);  // minus at most a false positive or two
  EXPECT_EQ(w.bucket_of(kT0), kT0 / kDay);
  (void)w.forget(1, 0);  // kCuckoo: kRemoved; kBloom: kUnsupported; never a crash
}

class Geometry : public ::testing::TestWithParam<WindowVariant> {};

// bucket_seconds 0 after open: the division of bucket_number (the fuzzer's crash) now uses the
// handle's copy; the data plane keeps answering by the geometry it validated; the control plane
// (maintain, stats), which reads the header, refuses it by name; a fresh open refuses it.
TEST_P(Geometry, BucketSecondsZeroAfterOpenIsNeverADivisor) {
  Fixture f("eobs0");
  Window w = make(f.seg, GetParam());
  wi::WindowHeader* h = f.header();
  h->bucket_seconds = 0;
  expect_answers(w, "bucket_seconds = 0");
  EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
  EXPECT_EQ(shmf_test::code_of([&] { (void)w.stats(); }), ErrorCode::kCorrupt);
  EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
  EXPECT_FALSE(f.seg.check(false).consistent());
  h->bucket_seconds = kDay;
  EXPECT_NO_THROW(w.maintain());
}

// slots 0 (a modulus), retention past the 64 tables a query resolves on its stack, a space table
// of 2^31 rows (an index mask), probe counts of 2^31: none is read again after open.
TEST_P(Geometry, RingAndTableSizesOverwrittenAfterOpenAreNeverIndexBounds) {
  Fixture f("eoslots");
  Window w = make(f.seg, GetParam());
  wi::WindowHeader* h = f.header();
  std::byte saved[128];  // the parameter lines only (atomics below)
  std::memcpy(saved, static_cast<const void*>(h), sizeof saved);
  h->slots = 0;
  h->retention = 1000;
  h->space_table = 1u << 31;
  h->max_spaces = 1u << 30;
  h->k_main = 1u << 31;
  h->k_overflow = 1u << 31;
  h->utc_offset = INT64_MIN;
  expect_answers(w, "ring and table sizes overwritten");
  EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
  EXPECT_EQ(shmf_test::code_of([&] { (void)w.stats(); }), ErrorCode::kCorrupt);
  std::memcpy(static_cast<void*>(h), saved, sizeof saved);
  EXPECT_NO_THROW(w.maintain());
  EXPECT_TRUE(f.seg.check(false).consistent());
}

// A slot's table offset is the one word the data plane must follow after open (rotation
// publishes it): pointing outside the mapping (or at a kBloom block count past it) it answers
// kCorrupt to writers and "not seen" to readers, never a wild read or write.
TEST_P(Geometry, ASlotTableOffsetOutsideTheMappingAnswersCorrupt) {
  for (uint64_t bad : {uint64_t{1} << 50, uint64_t{64}, ~uint64_t{0} - 63}) {
    Fixture f("eooff");
    Window w = make(f.seg, GetParam());
    wi::WindowHeader* h = f.header();
    wi::BucketSlot& cur = wi::slot_table(h)[static_cast<uint64_t>(w.bucket_of(kT0)) % 4];
    const uint64_t old = cur.table;
    cur.table = bad;
    SCOPED_TRACE(bad);
    EXPECT_EQ(w.mark(1, 7), WindowStatus::kCorrupt);
    EXPECT_EQ(w.mark_if_unseen(1, 7), WindowStatus::kCorrupt);
    EXPECT_FALSE(w.seen(1, 7));
    EXPECT_EQ(w.new_count(1), 0u);
    std::vector<uint64_t> sp(20, 1), it(20, 7);
    std::vector<WindowStatus> out(20);
    EXPECT_EQ(w.mark_many(sp, it, out), 0u);
    EXPECT_EQ(out[0], WindowStatus::kCorrupt);
    EXPECT_EQ(w.seen_many(sp, it, 1), 0u);
    EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
    cur.table = old;
    EXPECT_EQ(w.mark_if_unseen(1, 7), WindowStatus::kSeen);
  }
  // A kBloom table whose block count reaches past the mapping: the same.
  if (GetParam() == WindowVariant::kBloom) {
    Fixture f("eoblk");
    Window w = make(f.seg, GetParam());
    wi::WindowHeader* h = f.header();
    auto* t = reinterpret_cast<wi::TableHead*>(
        f.seg.base() + wi::slot_table(h)[static_cast<uint64_t>(w.bucket_of(kT0)) % 4].table);
    const uint64_t blocks = t->geometry;
    t->geometry = uint64_t{1} << 40;
    EXPECT_EQ(w.mark(1, 7), WindowStatus::kCorrupt);
    EXPECT_FALSE(w.seen(1, 7));
    t->geometry = blocks;
    EXPECT_EQ(w.mark_if_unseen(1, 7), WindowStatus::kSeen);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Geometry, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo),
                         [](const auto& i) { return std::string(window_variant_name(i.param)); });

}  // namespace
