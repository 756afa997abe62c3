// tests/unit/test_window_trust.cpp: the trust rule for the window (issue 23, "a check that
// says consistent is a promise"). Every table offset, size and descriptor a window path
// follows (data plane, maintain, the inline preparer, stats, drop, save) is validated by
// open and by check, for every slot state: a corrupt window is kCorrupt (or the status
// kCorrupt), never a crash, and nothing outside the window's own extents is written.
// Each test here reproduces one example of the review and fails on the code before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "segment/layout.h"
#include "shmfilter/window.hpp"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/window/window_impl.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
namespace wi = shmfilter::internal::window;
namespace ck = shmfilter::internal::cuckoo;

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC

struct Fixture {
  SegmentGuard guard;
  Segment seg;
  explicit Fixture(const std::string& tag) : guard(shmf_test::unique_name(tag)) {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    seg = Segment::create(guard.name, o);
  }
  wi::WindowHeader* header(const char* name = "w") {
    return reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find(name)->offset);
  }
};

WindowOptions opts(WindowVariant v, uint32_t retention = 3) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = 64;
  o.error = 0.01;
  o.retention = retention;
  o.max_spaces = 16;
  o.seed = 5;
  return o;
}

// A window whose bucket of kT0 is current and maintained: slots of e and e + 1 hold tables,
// the others are retired with no table.
Window make(Fixture& f, WindowVariant v) {
  Window w = Window::create(f.seg, "w", opts(v));
  w.set_now(kT0);
  for (uint64_t i = 0; i < 20; ++i) (void)w.mark(1, i);
  w.maintain();
  return w;
}

uint32_t retired_slot(wi::WindowHeader* h) {
  for (uint32_t i = 0; i < h->slots; ++i)
    if (wi::slot_table(h)[i].tag.load() == wi::kRetired && wi::slot_table(h)[i].table == 0) return i;
  ADD_FAILURE() << "no retired slot";
  return 0;
}

std::vector<std::byte> bytes_of(Segment& seg, uint64_t from, uint64_t n) {
  return std::vector<std::byte>(seg.base() + from, seg.base() + from + n);
}

bool consistent(Segment& seg) { return seg.check(false).consistent(); }

class Trust : public ::testing::TestWithParam<WindowVariant> {};

}  // namespace

// The review: a retired slot's table offset was never validated. check said consistent;
// stats, maintain and drop followed it (SIGSEGV); with the offset 64, the next maintain
// zeroed segment-header bytes from a "cursor" read inside the header. Now every path
// answers kCorrupt and the header is unchanged.
TEST_P(Trust, RetiredSlotTableOffsetIsValidatedByEveryPath) {
  for (uint64_t bad : {uint64_t{64}, uint64_t{1} << 40, uint64_t{4096 + 64}}) {
    SCOPED_TRACE("offset " + std::to_string(bad));
    Fixture f("wtret");
    Window w = make(f, GetParam());  // opened before the damage: maintain / stats re-validate
    wi::WindowHeader* h = f.header();
    const uint32_t i = retired_slot(h);
    wi::slot_table(h)[i].table = bad;
    const auto head = bytes_of(f.seg, 0, 4096);
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
    EXPECT_FALSE(consistent(f.seg));
    EXPECT_EQ(shmf_test::code_of([&] { (void)w.stats(); }), ErrorCode::kCorrupt);
    EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
    EXPECT_EQ(shmf_test::code_of([&] { (void)w.maintain_step(1 << 20); }), ErrorCode::kCorrupt);
    // The data plane's inline preparer of that slot's bucket (no maintain ran): kCorrupt.
    const int64_t e = w.bucket_of(kT0);
    int64_t target = e + 1;
    while (static_cast<uint64_t>(target) % h->slots != i) ++target;
    w.set_now(kT0 + (target - e) * kDay);
    EXPECT_EQ(w.mark(1, uint64_t{12345}), WindowStatus::kCorrupt);
    EXPECT_EQ(window_status_name(WindowStatus::kCorrupt), "corrupt");
    EXPECT_TRUE(bytes_of(f.seg, 0, 256) == std::vector<std::byte>(head.begin(), head.begin() + 256))
        << "the segment header's immutable line changed";
    // drop frees only what validates: the segment stays sound, nothing leaked.
    EXPECT_TRUE(Window::drop(f.seg, "w"));
    CheckReport r = f.seg.check(false);
    for (const auto& fd : r.findings) ADD_FAILURE() << fd.where << ": " << fd.problem;
    EXPECT_NO_THROW(Segment::open(f.guard.name));
  }
}

// The fuzz finding: a table placed over the window's own region passed (it is an allocated
// extent of the window's size); writes then clobbered the header and maintain() divided by
// a zeroed slot count. A table may not overlap the region, the segment's metadata, another
// table of the window, nor lie in an extent the window does not own.
TEST_P(Trust, TablesMayNotOverlapTheRegionEachOtherOrForeignExtents) {
  Fixture f("wtovl");
  Window w = make(f, GetParam());
  // Created at kT0 (not the system clock): its slot of bucket e holds a table whatever today's
  // date is (created by the system clock, that slot was empty on 2 days of 4: foreign 0).
  WindowOptions oo = opts(GetParam());
  oo.now = kT0;
  Window::create(f.seg, "other", oo);
  wi::WindowHeader* h = f.header();
  const int64_t e = w.bucket_of(kT0);
  wi::BucketSlot& live = wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots];
  wi::BucketSlot& spare = wi::slot_table(h)[static_cast<uint64_t>(e + 1) % h->slots];
  const uint64_t saved = live.table;
  const uint64_t region = f.seg.find("w")->offset;
  wi::WindowHeader* oh = f.header("other");
  const uint64_t foreign = wi::slot_table(oh)[static_cast<uint64_t>(e) % oh->slots].table;
  ASSERT_NE(foreign, 0u);
  struct Case {
    const char* what;
    uint64_t off;
  };
  for (const Case& c : {Case{"the window's own region", region}, Case{"the spare's table", spare.table},
                        Case{"another window's table", foreign}, Case{"the segment's metadata (undo log)", 4096 + 64}}) {
    SCOPED_TRACE(c.what);
    live.table = c.off;
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
    EXPECT_FALSE(consistent(f.seg));
    EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
    EXPECT_EQ(shmf_test::code_of([&] { (void)w.stats(); }), ErrorCode::kCorrupt);
    EXPECT_EQ(h->slots, 4u);
    live.table = saved;
  }
  // The same over a retired slot (a spare "in preparation"): maintain would zero it.
  const uint32_t i = retired_slot(h);
  wi::slot_table(h)[i].table = region;
  EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
  EXPECT_EQ(h->slots, 4u);
  EXPECT_EQ(h->magic, wi::kMagic);
  wi::slot_table(h)[i].table = foreign;
  EXPECT_EQ(shmf_test::code_of([&] { w.maintain(); }), ErrorCode::kCorrupt);
  EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "other"); }), ErrorCode::kOk);
  wi::slot_table(h)[i].table = 0;
  EXPECT_NO_THROW(w.maintain());
  EXPECT_TRUE(consistent(f.seg));
}

// Fields inside a table that a path follows: the check shift (a shift >= 64 is undefined),
// the Bloom overflow geometry (x 64 wrapped to a small extent), a pending overflow (freed by
// drop, published by the next overflow allocator), and the cuckoo lane width (sizes the
// overflow sub-filter the expansion allocates).
TEST_P(Trust, TableFieldsThatPathsFollowAreValidated) {
  Fixture f("wtfld");
  Window w = make(f, GetParam());
  for (uint64_t i = 0; i < 400; ++i) (void)w.mark(2, i * 7919 + 3);  // past capacity: an overflow table
  ASSERT_TRUE(w.stats().buckets.front().overflow);
  wi::WindowHeader* h = f.header();
  auto* t = reinterpret_cast<wi::TableHead*>(
      f.seg.base() + wi::slot_table(h)[static_cast<uint64_t>(w.bucket_of(kT0)) % h->slots].table);
  auto refused = [&](const char* what) {
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt) << what;
    EXPECT_FALSE(consistent(f.seg)) << what;
  };
  const uint32_t shift = t->check_shift;
  t->check_shift = 64;
  refused("check_shift 64");
  t->check_shift = shift;
  const uint64_t pending = t->pending_overflow;
  t->pending_overflow = 64;
  refused("pending overflow in the segment header");
  t->pending_overflow = pending;
  if (GetParam() == WindowVariant::kBloom) {
    const uint64_t g = t->overflow_geometry;
    t->overflow_geometry = (uint64_t{1} << 58) + 1;  // x 64 wraps to 64 bytes
    refused("overflow geometry");
    t->overflow_geometry = g;
  } else {
    auto* ch = reinterpret_cast<ck::Header*>(reinterpret_cast<std::byte*>(t) + wi::main_offset_in_table(h->space_table));
    const uint32_t lanes = ch->lane_bits;
    ch->lane_bits = lanes == 8 ? 16 : 8;
    refused("lane bits");
    ch->lane_bits = lanes;
  }
  EXPECT_NO_THROW(Window::open(f.seg, "w"));
  EXPECT_TRUE(consistent(f.seg));
}

// check --repair: a retired slot's unsound spare is detached (the window loses nothing but a
// spare; maintain() prepares a new one); a damaged live bucket is not guessed at: the finding
// says to drop the window, drop works on the corrupt window, and the next --repair frees what
// it owned that nothing vouched for.
TEST_P(Trust, CheckRepairDetachesABadSpareAndRefusesADamagedLiveBucket) {
  Fixture f("wtrep");
  Window w = make(f, GetParam());
  wi::WindowHeader* h = f.header();
  wi::slot_table(h)[retired_slot(h)].table = 64;
  CheckReport r = f.seg.check(true);
  ASSERT_FALSE(r.findings.empty());
  for (const auto& fd : r.findings) EXPECT_TRUE(fd.repaired) << fd.where << ": " << fd.problem;
  EXPECT_TRUE(consistent(f.seg));
  EXPECT_NO_THROW(w.maintain());
  EXPECT_TRUE(consistent(f.seg));

  const int64_t e = w.bucket_of(kT0);
  wi::BucketSlot& live = wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots];
  const uint64_t saved = live.table;
  live.table = f.seg.find("w")->offset;  // over its own region
  r = f.seg.check(true);
  bool said_drop = false;
  for (const auto& fd : r.findings) {
    EXPECT_FALSE(fd.repaired) << fd.problem;
    said_drop = said_drop || fd.problem.find("drop the window") != std::string::npos;
  }
  EXPECT_TRUE(said_drop);
  EXPECT_EQ(live.table, f.seg.find("w")->offset);  // not guessed at
  EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
  EXPECT_TRUE(Window::drop(f.seg, "w"));
  (void)saved;
  r = f.seg.check(true);  // the live table nobody vouched for: a leak, freed
  for (const auto& fd : r.findings) EXPECT_TRUE(fd.repaired) << fd.where << ": " << fd.problem;
  EXPECT_TRUE(consistent(f.seg));
}

// A sound window in every slot state still opens, checks clean, maintains and drops without
// leaks (spares in preparation included: a chunked maintain step leaves one half-zeroed).
TEST_P(Trust, SoundWindowsInEveryStatePass) {
  Fixture f("wtok");
  Window w = make(f, GetParam());
  for (int day = 1; day <= 5; ++day) {
    w.set_now(kT0 + day * kDay);
    for (uint64_t i = 0; i < (day == 3 ? 300u : 30u); ++i) (void)w.mark_if_unseen(i % 5, i + static_cast<uint64_t>(day));
    (void)w.maintain_step(4096);  // leaves a spare in preparation (retired tag, cursor > 0)
    EXPECT_NO_THROW(Window::open(f.seg, "w"));
    EXPECT_NO_THROW((void)w.stats());
    CheckReport r = f.seg.check(false);
    for (const auto& fd : r.findings) ADD_FAILURE() << "day " << day << ": " << fd.where << ": " << fd.problem;
  }
  EXPECT_TRUE(Window::drop(f.seg, "w"));
  CheckReport r = f.seg.check(false);
  for (const auto& fd : r.findings) ADD_FAILURE() << fd.where << ": " << fd.problem;
}

// Found by fuzz_segment once the window joined its base image: another structure's extent whose
// size field grew past its end was freed with that size, and the next table allocation handed
// out bytes over the live window's header (maintain() then divided by its zeroed slot count).
// free() now refuses an extent that does not end where the next one starts (kCorrupt, rolled
// back); the window next to it keeps working. Seed: corpus/fuzz_segment/window-table-over-own-region.
TEST_P(Trust, AFreeWithADamagedExtentSizeNeverHandsOutTheWindowsBytes) {
  Fixture f("wtfree");
  Window x = Window::create(f.seg, "x", opts(GetParam()));
  Window w = make(f, GetParam());
  wi::WindowHeader* xh = f.header("x");
  uint64_t last = 0;
  for (uint32_t i = 0; i < xh->slots; ++i) last = std::max(last, wi::slot_table(xh)[i].table);
  ASSERT_GT(last, 0u);
  auto* eh = reinterpret_cast<internal::ExtentHeader*>(f.seg.base() + last - sizeof(internal::ExtentHeader));
  ASSERT_LT(last, f.seg.find("w")->offset);  // x's last table lies before w's region
  eh->size += 128;                            // now runs into the next extent, ending inside it
  // The allocator's walk no longer reaches that table (lib/segment/extents.h), so drop frees none
  // of what it cannot vouch for (the window is dropped; the rest is check --repair's). Before the
  // walk, free() refused the size (kCorrupt) and drop rolled back.
  EXPECT_EQ(shmf_test::code_of([&] { Window::drop(f.seg, "x"); }), ErrorCode::kOk);
  EXPECT_FALSE(f.seg.find("x").has_value());
  eh->size -= 128;
  for (int i = 0; i < 4; ++i) {
    f.seg.quiesce();
    Window::create(f.seg, "y" + std::to_string(i), opts(GetParam()));
  }
  EXPECT_EQ(f.header()->slots, 4u);
  EXPECT_NO_THROW(w.maintain());
  EXPECT_FALSE(consistent(f.seg));  // x's tables: leaked, not handed out
  f.seg.check(true);
  EXPECT_TRUE(consistent(f.seg));
  EXPECT_EQ(f.header()->slots, 4u);
}

// A bucket's distinct counters are segment bytes: the next table's size, 1.5 x their sum,
// converted a double >= 2^64 to an integer (undefined; caught by the ASan+UBSan tree). Now
// clamped: maintain answers the named error for a size no table can have.
TEST_P(Trust, HugeDistinctCountersSizeNoTableByUndefinedConversion) {
  Fixture f("wtcnt");
  Window w = make(f, GetParam());
  wi::WindowHeader* h = f.header();
  auto* t = reinterpret_cast<wi::TableHead*>(
      f.seg.base() + wi::slot_table(h)[static_cast<uint64_t>(w.bucket_of(kT0)) % h->slots].table);
  for (auto& st : t->stripes) st.distinct.store(~uint64_t{0} / 4);
  w.set_now(kT0 + kDay / 2);
  const ErrorCode c = shmf_test::code_of([&] { w.maintain(); });
  EXPECT_TRUE(c == ErrorCode::kOk || c == ErrorCode::kInvalidArgument || c == ErrorCode::kNoSpace) << static_cast<int>(c);
  EXPECT_EQ(h->slots, 4u);
}

// Overflow layers (docs/window.md "Overload") under the trust rule: a descriptor of a layer past
// the first (kCuckoo sub-filter 2.., a kBloom BloomLayerDir entry, and each one's pending extent)
// names an extent the data plane, stats and drop follow. One pointing into the window's own
// region, over another table of the window or over another layer of the same table is kCorrupt
// from open, stats and check (before the merge of the two branches the layer checks accepted any
// allocated extent of the size: the region and the spare's table passed).
TEST_P(Trust, LayerDescriptorsAreOwnedExtentsOverlappingNothing) {
  Fixture f("wtlay");
  Window w = make(f, GetParam());
  for (uint64_t i = 0; i < 600; ++i) (void)w.mark(2, i * 7919 + 3);  // ~9x the 64 expected: layers
  w.maintain();  // the spare is re-sized from the measured count (a larger table)
  wi::WindowHeader* h = f.header();
  const int64_t e = w.bucket_of(kT0);
  const uint64_t region = f.seg.find("w")->offset;
  const uint64_t spare = wi::slot_table(h)[static_cast<uint64_t>(e + 1) % h->slots].table;
  ASSERT_NE(spare, 0u);
  auto* t = reinterpret_cast<wi::TableHead*>(f.seg.base() + wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots].table);
  uint64_t* layer2 = nullptr;   // the descriptor of the first layer past the first overflow
  uint64_t bigger = 0;          // a later (larger) layer of the same table
  uint64_t* pending = nullptr;  // the pending extent of the next layer
  if (GetParam() == WindowVariant::kCuckoo) {
    auto* ch = reinterpret_cast<ck::Header*>(reinterpret_cast<std::byte*>(t) + wi::main_offset_in_table(h->space_table));
    ASSERT_GE(ch->sub_count, 4u);
    layer2 = &ch->subs[2].offset;
    bigger = ch->subs[3].offset;
    pending = &t->pending_overflow;
  } else {
    auto* d = reinterpret_cast<wi::BloomLayerDir*>(f.seg.base() + t->overflow.load() + t->overflow_geometry * 64);
    ASSERT_GE(d->count.load(), 2u);
    layer2 = &d->layer[0].offset;
    bigger = d->layer[1].offset;
    pending = &d->pending;
  }
  ASSERT_NO_THROW(Window::open(f.seg, "w"));
  ASSERT_TRUE(consistent(f.seg));
  struct Case {
    const char* what;
    uint64_t* field;
    uint64_t off;
    bool overlap;  // an owned extent large enough: only the overlap check refuses it
  };
  for (const Case& c : {Case{"layer 2 in the window's own region", layer2, region, false},
                        Case{"layer 2 over the spare's table", layer2, spare, true},
                        Case{"layer 2 over layer 3 of the same table", layer2, bigger, true},
                        Case{"the pending layer in the window's own region", pending, region, false},
                        // kBloom: a pending layer is also the dir's next entry (logged with it): refused
                        // as that entry before any overlap
                        Case{"the pending layer over the spare's table", pending, spare,
                             GetParam() == WindowVariant::kCuckoo}}) {
    SCOPED_TRACE(c.what);
    const uint64_t saved = *c.field;
    *c.field = c.off;
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
    EXPECT_EQ(shmf_test::code_of([&] { (void)w.stats(); }), ErrorCode::kCorrupt);
    CheckReport r = f.seg.check(false);
    EXPECT_FALSE(r.consistent());
    bool said_overlap = false;
    for (const auto& fd : r.findings) said_overlap = said_overlap || fd.problem.find("overlap") != std::string::npos;
    if (c.overlap) {
      EXPECT_TRUE(said_overlap);
    }
    *c.field = saved;
    EXPECT_NO_THROW(Window::open(f.seg, "w"));
    EXPECT_TRUE(consistent(f.seg));
  }
  EXPECT_EQ(h->slots, 4u);
  EXPECT_EQ(h->magic, wi::kMagic);
}

// drop of a window whose buckets have layers frees every layer's extent exactly once: check then
// reports no leaked extent (a drop that freed only the first overflow leaked sub-filters 2.. /
// the dir's layers; one that freed a layer twice is refused by the allocator).
TEST_P(Trust, DropOfAWindowWithLayersLeaksNothing) {
  Fixture f("wtlaydrop");
  Window w = make(f, GetParam());
  uint64_t n = 600;  // ~9x the 64 expected, then ~6.7x each next day's table (sized 1.5 x the day before)
  for (int day = 0; day < 3; ++day, n *= 10) {
    w.set_now(kT0 + day * kDay);
    for (uint64_t i = 0; i < n; ++i) (void)w.mark(2, i * 7919 + 3 + static_cast<uint64_t>(day));
    ASSERT_GE(w.stats().buckets.front().layers, 3u) << "day " << day;
    (void)w.maintain_step(4096);  // and a spare in preparation
  }
  const uint64_t before = f.seg.stats().used_bytes;
  EXPECT_TRUE(Window::drop(f.seg, "w"));
  CheckReport r = f.seg.check(false);
  for (const auto& fd : r.findings) ADD_FAILURE() << fd.where << ": " << fd.problem;
  EXPECT_TRUE(r.findings.empty());
  EXPECT_LT(f.seg.stats().used_bytes, before);
}

// Every 8-byte word of a layered table's descriptors (line 0 of its TableHead; kCuckoo: its
// cuckoo header with every sub-filter descriptor; kBloom: the BloomLayerDir) set to each of a
// list of hostile values (0, 1, 64, the window's region, the spare's table, another window's
// table, the word +- 64, 2^40, ~0): open refuses it (kCorrupt) or accepts a window every path
// may follow; a handle opened then runs stats, queries, writes past the layers, maintain and
// drop, and the segment checks consistent (at most leaks check --repair frees: see below). The window's base fuzz image
// holds no kCuckoo sub-filter 2.. (fuzz_segment cannot reach those descriptors); this walks them
// all, deterministically (run it in the ASan+UBSan tree for out-of-segment accesses).
TEST_P(Trust, EveryLayerDescriptorWordDamagedIsRefusedOrSafe) {
  const size_t words = GetParam() == WindowVariant::kCuckoo ? 8 + sizeof(ck::Header) / 8 : 8 + sizeof(wi::BloomLayerDir) / 8;
  uint32_t refused = 0, accepted = 0;
  for (size_t wd = 0; wd < words; ++wd) {
    for (int v = 0; v < 10; ++v) {
      Fixture f("wtword");
      Window::create(f.seg, "other", opts(GetParam()));
      Window w = make(f, GetParam());
      for (uint64_t i = 0; i < 600; ++i) (void)w.mark(2, i * 7919 + 3);  // layers
      wi::WindowHeader* h = f.header();
      const int64_t e = w.bucket_of(kT0);
      const uint64_t off = wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots].table;
      auto* t = reinterpret_cast<wi::TableHead*>(f.seg.base() + off);
      std::byte* at = nullptr;
      if (wd < 8) {
        at = f.seg.base() + off + wd * 8;
      } else if (GetParam() == WindowVariant::kCuckoo) {
        at = f.seg.base() + off + wi::main_offset_in_table(h->space_table) + (wd - 8) * 8;
      } else {
        ASSERT_NE(t->overflow.load(), 0u);
        at = f.seg.base() + t->overflow.load() + t->overflow_geometry * 64 + (wd - 8) * 8;
      }
      uint64_t word;
      std::memcpy(&word, at, 8);
      wi::WindowHeader* oh = f.header("other");
      const uint64_t values[10] = {0, 1, 64, f.seg.find("w")->offset,
                                   wi::slot_table(h)[static_cast<uint64_t>(e + 1) % h->slots].table,
                                   wi::slot_table(oh)[static_cast<uint64_t>(e) % oh->slots].table, word + 64,
                                   word >= 64 ? word - 64 : word + 128, uint64_t{1} << 40, ~uint64_t{0}};
      if (values[v] == word) continue;
      std::memcpy(at, &values[v], 8);
      SCOPED_TRACE("word " + std::to_string(wd) + " = " + std::to_string(values[v]) + " (was " + std::to_string(word) + ")");
      (void)f.seg.check(false);  // never a crash
      std::optional<Window> d;
      const ErrorCode c = shmf_test::code_of([&] { d.emplace(Window::open(f.seg, "w")); });
      ASSERT_TRUE(c == ErrorCode::kOk || c == ErrorCode::kCorrupt) << static_cast<int>(c);
      if (c == ErrorCode::kCorrupt) {
        ++refused;
        std::memcpy(at, &word, 8);
      } else {
        ++accepted;
        d->set_now(kT0);
        (void)d->stats();
        std::vector<uint8_t> hit(64);
        std::vector<uint64_t> sp(64, 2), keys(64);
        for (uint64_t i = 0; i < 64; ++i) keys[i] = i * 7919 + 3;
        (void)d->seen_many(sp, keys, 1, hit);
        for (uint64_t i = 0; i < 400; ++i) (void)d->mark_if_unseen(3, i * 104729 + 11);
        if (GetParam() == WindowVariant::kCuckoo) (void)d->forget(2, uint64_t{3});
        d->maintain();
        (void)d->stats();
        CheckReport r = f.seg.check(false);
        for (const auto& fd : r.findings) ADD_FAILURE() << fd.where << ": " << fd.problem;
      }
      EXPECT_TRUE(Window::drop(f.seg, "w"));
      EXPECT_NO_THROW(Window::open(f.seg, "other"));
      // A damage that validates may hide extents (the kTableLayered bit cleared: a one-overflow
      // table whose layers 2.. nothing names): drop frees what validates, the rest are leaks the
      // next check --repair frees; nothing else is wrong.
      CheckReport r = f.seg.check(true);
      for (const auto& fd : r.findings)
        if (!fd.repaired || fd.problem.find("(leak)") == std::string::npos)
          ADD_FAILURE() << "after drop: " << fd.where << ": " << fd.problem;
      r = f.seg.check(false);
      for (const auto& fd : r.findings) ADD_FAILURE() << "after repair: " << fd.where << ": " << fd.problem;
    }
  }
  std::printf("%s: %u damaged descriptors refused, %u accepted (and safe)\n",
              std::string(window_variant_name(GetParam())).c_str(), refused, accepted);
  EXPECT_GT(refused, 0u);
}

INSTANTIATE_TEST_SUITE_P(Variants, Trust, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo),
                         [](const auto& pi) { return std::string(window_variant_name(pi.param)); });
