// tests/unit/test_snapshot_window.cpp: save/restore of a Window (both variants).
//  - Round trip over a ring of day buckets driven by an injected clock (rotations,
//    expiry, an overflowing day, forgets, the "other" counter row): the restored
//    window answers seen / mark_if_unseen / new_count exactly as the source for
//    every bucket and every w, and keeps doing so through the next rotation; an
//    oracle kept outside the segment says what must be seen.
//  - Rotations and maintain() racing with the copy, made deterministic by the
//    save's test hook (snapshot_io.h): a spare claimed while it is copied, a slot
//    retired and re-prepared while it is copied, a slot that never settles (kBusy).
//  - Corrupt files: every field and length of the window entry changed one at a
//    time (the file re-sealed with correct checksums, so the window's own checks
//    are what answer) gives one kBadInput naming it and creates nothing; random
//    byte flips never crash.
// The save under concurrent writers is tests/multiprocess/test_snapshot_multiprocess.cpp.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/hash.h"
#include "structures/snapshot_io.h"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/window.hpp"
#include "structures/window/window_impl.h"
#include "check_clean.h"
#include "test_util.h"

using namespace shmfilter;

namespace {
// A write's answer (kNew / kSeen), not one of the failures (dropped, no space, busy, forked...).
inline bool answered(WindowStatus s) { return s == WindowStatus::kNew || s == WindowStatus::kSeen; }
}  // namespace

using shmf_test::code_of;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
namespace wi = shmfilter::internal::window;

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC

struct TempFile {
  std::string path = "/tmp/shmf-test-snapw-" + std::to_string(getpid()) + "-" + unique_name("f").substr(10);
  ~TempFile() {
    std::remove(path.c_str());
  }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

CreateOptions seg_options() { return shmf_test::small_options(16ull << 20, 1ull << 30, 64); }

WindowOptions opts(WindowVariant v, uint64_t n, uint32_t retention, uint32_t max_spaces = 32) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = n;
  o.error = 0.01;
  o.retention = retention;
  o.max_spaces = max_spaces;
  o.seed = 7;
  return o;
}

using shmf_test::expect_check_clean;  // tests/support/check_clean.h

int64_t at_day(int d) { return kT0 + d * kDay + 3600; }

// The oracle: per pair, the days it was acknowledged as stored (mark: kNew or kSeen;
// mark_if_unseen: kNew), and whether it was forgotten.
struct Oracle {
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int>> days;
  std::map<std::pair<uint64_t, uint64_t>, bool> forgotten;
  void marked(uint64_t s, uint64_t i, int d) { days[{s, i}].push_back(d); }
  // Must be seen at day `now` over w buckets: marked on a day in (now - w, now] and not forgotten since.
  bool must_see(uint64_t s, uint64_t i, int now, uint32_t w) const {
    auto f = forgotten.find({s, i});
    if (f != forgotten.end() && f->second) return false;
    auto it = days.find({s, i});
    if (it == days.end()) return false;
    for (int d : it->second)
      if (d <= now && d > now - static_cast<int>(w)) return true;
    return false;
  }
};

// Drives one window over `days` days: marks, re-marks of the previous day's pairs,
// an overflowing day 3, maintain() every other day, and forgets (cuckoo).
void drive(Window& w, Oracle& o, int days, uint32_t retention) {
  for (int d = 0; d < days; ++d) {
    w.set_now(at_day(d));
    if (d % 2 == 0) w.maintain();
    const uint64_t n = d == 3 ? 2600 : 900;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t space = i % 40;  // 40 > max_spaces 32: the "other" row counts too
      const uint64_t item = static_cast<uint64_t>(d) * 100'000 + i;
      // kSeen: in an earlier bucket of the window (or a false positive); nothing stored today.
      if (w.mark_if_unseen(space, item, retention) == WindowStatus::kNew) o.marked(space, item, d);
      if (d > 0 && i < 200) {
        const uint64_t old = static_cast<uint64_t>(d - 1) * 100'000 + i;
        if (answered(w.mark(i % 40, old))) o.marked(i % 40, old, d);
      }
    }
    if (w.stats().variant == WindowVariant::kCuckoo && d == days - 2)
      for (uint64_t i = 0; i < n; i += 10) {
        const uint64_t item = static_cast<uint64_t>(d) * 100'000 + i;
        if (w.forget(i % 40, item) == WindowStatus::kRemoved) o.forgotten[{i % 40, item}] = true;
      }
  }
}

// Every answer of `a` and `b` equal at the current clocks: seen over every w for
// the oracle's pairs and never-marked ones, new_count for every space and age,
// and the per-bucket statistics; the oracle's pairs are seen (no false negative).
void expect_same_answers(const Window& a, const Window& b, const Oracle& o, int now, const std::string& when) {
  SCOPED_TRACE(when);
  const WindowStats sa = a.stats(), sb = b.stats();
  ASSERT_EQ(sa.retention, sb.retention);
  EXPECT_EQ(sa.current_bucket, sb.current_bucket);
  EXPECT_EQ(sa.spaces, sb.spaces);
  EXPECT_EQ(sa.other_marks, sb.other_marks);
  EXPECT_EQ(sa.rotations, sb.rotations);
  EXPECT_EQ(sa.seed, sb.seed);
  for (size_t i = 0; i < sa.buckets.size(); ++i) {
    EXPECT_EQ(sa.buckets[i].bucket, sb.buckets[i].bucket) << "age " << i;
    EXPECT_EQ(sa.buckets[i].distinct, sb.buckets[i].distinct) << "age " << i;
    EXPECT_EQ(sa.buckets[i].capacity, sb.buckets[i].capacity) << "age " << i;
    EXPECT_EQ(sa.buckets[i].overflow, sb.buckets[i].overflow) << "age " << i;
  }
  uint64_t differ = 0, missing = 0, checked = 0;
  auto compare = [&](uint64_t s, uint64_t i) {
    for (uint32_t w = 1; w <= sa.retention; ++w) {
      const bool x = a.seen(s, i, w), y = b.seen(s, i, w);
      differ += x != y;
      missing += o.must_see(s, i, now, w) && !y;
      ++checked;
    }
  };
  for (const auto& [pair, days] : o.days) compare(pair.first, pair.second);
  for (uint64_t i = 0; i < 3000; ++i) compare(i % 40, 900'000'000 + i);  // never marked: FPs must agree too
  EXPECT_EQ(differ, 0u) << "of " << checked << " seen() answers";
  EXPECT_EQ(missing, 0u) << "false negatives against the oracle";
  uint64_t count_differ = 0;
  for (uint64_t s = 0; s < 45; ++s)
    for (uint32_t age = 0; age < sa.retention; ++age) count_differ += a.new_count(s, age) != b.new_count(s, age);
  EXPECT_EQ(count_differ, 0u);
}

class SnapshotWindow : public ::testing::TestWithParam<WindowVariant> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Variants, SnapshotWindow, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo, WindowVariant::kStamped),
                         [](const auto& p) { return std::string(window_variant_name(p.param)); });

TEST_P(SnapshotWindow, RoundTripAnswersLikeTheSourceForEveryBucketAndKeepsRotating) {
  SegmentGuard src(unique_name("snapw-src")), dst(unique_name("snapw-dst"));
  TempFile f;
  Segment seg = Segment::create(src.name, seg_options());
  constexpr uint32_t kRetention = 4;
  Window w = Window::create(seg, "freq", opts(GetParam(), 1200, kRetention));
  Oracle o;
  drive(w, o, 7, kRetention);  // days 0..6: two buckets expired, day 3 overflowed
  {
    const WindowStats st = w.stats();
    bool any_overflow = false;
    for (const auto& b : st.buckets) any_overflow = any_overflow || b.overflow;
    // kStamped: one table for every bucket, sized for retention x expected: no overflow here
    // (its overflow sub-filters round-trip in StampedSharedTableRoundTripsWithItsSubFilters).
    if (GetParam() != WindowVariant::kStamped) {
      ASSERT_TRUE(any_overflow) << "the test needs a bucket that used its overflow table";
    }
    ASSERT_GT(st.other_marks, 0u);
  }
  SnapshotInfo saved = save(seg, f.path);
  ASSERT_EQ(saved.entries.size(), 1u);
  EXPECT_EQ(saved.entries[0].kind, Kind::kWindow);
  EXPECT_TRUE(saved.skipped.empty());
  EXPECT_EQ(read_snapshot_info(f.path).entries.size(), 1u);

  restore(f.path, dst.name);
  Segment out = Segment::open(dst.name);
  expect_check_clean(out);
  Window r = Window::open(out, "freq");
  r.set_now(at_day(6));
  expect_same_answers(w, r, o, 6, "restored, day 6");

  // Both keep working alike: more marks today (new and old pairs), then the next day
  // (a rotation into the spare and the expiry of day 3), with and without maintain().
  for (int d = 6; d <= 8; ++d) {
    w.set_now(at_day(d));
    r.set_now(at_day(d));
    if (d == 7) {
      w.maintain();
      r.maintain();
    }
    uint64_t differ = 0;
    for (uint64_t i = 0; i < 1500; ++i) {
      const uint64_t item = (i % 2 ? static_cast<uint64_t>(d) * 100'000 + 50'000 : static_cast<uint64_t>(d - 1) * 100'000) + i;
      WindowStatus x = w.mark_if_unseen(i % 40, item, kRetention), y = r.mark_if_unseen(i % 40, item, kRetention);
      differ += x != y;
      if (x == WindowStatus::kNew) o.marked(i % 40, item, d);
    }
    EXPECT_EQ(differ, 0u) << "mark_if_unseen answers on day " << d;
    expect_same_answers(w, r, o, d, "both written, day " + std::to_string(d));
  }
  expect_check_clean(out);
  EXPECT_TRUE(Window::drop(out, "freq"));
  expect_check_clean(out);
}

namespace {

// The hook's script: at slot `slot`, attempt 0, rotate to the next day through another
// attachment (and run maintain() there when asked); records every call.
struct RaceScript {
  std::string seg_name;
  uint32_t slot = 0;
  int next_day = 0;
  bool maintain = false;
  std::vector<std::pair<uint32_t, int>> calls;
  bool fired = false;
};
void race_hook(uint32_t slot, int attempt, void* ctx) {
  auto* s = static_cast<RaceScript*>(ctx);
  s->calls.push_back({slot, attempt});
  if (slot != s->slot || attempt != 0 || s->fired) return;
  s->fired = true;
  Segment other = Segment::open(s->seg_name);  // its own attachment: its quiescent points are not the saver's
  Window w = Window::open(other, "freq");
  w.set_now(at_day(s->next_day));
  w.mark(1, uint64_t{777'777'777});  // the rotation (a claim of the spare), and one mark after the save began
  if (s->maintain) w.maintain();     // retires the expired bucket's slot and prepares the next spare there
}

struct HookGuard {
  HookGuard(internal::snapshot::WindowCopyHook fn, void* ctx) { internal::snapshot::set_window_copy_hook(fn, ctx); }
  ~HookGuard() { internal::snapshot::set_window_copy_hook(nullptr, nullptr); }
};

}  // namespace

// A rotation into the spare while the spare is being copied: saved as the fresh spare
// it was, with the newer epoch; a maintain() that retires and re-prepares the slot
// being copied: copied again. Every pair acknowledged before the save that is still in
// the window is in the restored one, which rotates on as the source did.
TEST_P(SnapshotWindow, RotationAndMaintainRacingTheCopyGiveAConsistentRing) {
  constexpr uint32_t kRetention = 3;  // 4 slots
  for (int variant_case = 0; variant_case < 2; ++variant_case) {
    SCOPED_TRACE(variant_case == 0 ? "spare claimed during its copy" : "slot retired and re-prepared during its copy");
    SegmentGuard src(unique_name("snapw-race")), dst(unique_name("snapw-race-dst"));
    TempFile f;
    Segment seg = Segment::create(src.name, seg_options());
    Window w = Window::create(seg, "freq", opts(GetParam(), 500, kRetention));
    Oracle o;
    for (int d = 0; d < 3; ++d) {
      w.set_now(at_day(d));
      w.maintain();
      for (uint64_t i = 0; i < 300; ++i)
        if (answered(w.mark(i % 8, static_cast<uint64_t>(d) * 1000 + i))) o.marked(i % 8, d * 1000 + i, d);
    }
    const int64_t e = w.bucket_of(at_day(2));
    RaceScript script;
    script.seg_name = src.name;
    script.next_day = 3;
    // Case 0: the slot of bucket e + 1 (the fresh spare maintain() prepared). Case 1: the slot of
    // bucket e - 2 (day 0), which the rotation to e + 1 expires and maintain() re-prepares.
    script.slot = static_cast<uint32_t>((variant_case == 0 ? e + 1 : e - 2) % (kRetention + 1));
    script.maintain = variant_case == 1;
    {
      HookGuard hook(&race_hook, &script);
      save(seg, f.path);
    }
    ASSERT_TRUE(script.fired) << "the hook never reached slot " << script.slot;
    int retries = 0;
    for (const auto& c : script.calls) retries += c.first == script.slot && c.second > 0;
    EXPECT_EQ(retries, variant_case == 1 ? 1 : 0)
        << "a slot re-prepared during its copy is copied again; a claim of the spare during its copy is not";

    restore(f.path, dst.name);
    Segment out = Segment::open(dst.name);
    expect_check_clean(out);
    Window r = Window::open(out, "freq");
    r.set_now(at_day(2));  // a clock behind: the restored epoch (the rotation the save saw) wins
    EXPECT_EQ(r.stats().current_bucket, e + 1);
    uint64_t missing = 0;
    for (const auto& [pair, days] : o.days)
      missing += o.must_see(pair.first, pair.second, 3, kRetention) && !r.seen(pair.first, pair.second, kRetention);
    EXPECT_EQ(missing, 0u) << "pairs acknowledged before the save, still in the window";
    // The restored ring rotates on like the source: same answers at day 3 and day 4.
    w.set_now(at_day(3));
    for (int d = 3; d <= 4; ++d) {
      w.set_now(at_day(d));
      r.set_now(at_day(d));
      uint64_t differ = 0;
      for (uint64_t i = 0; i < 400; ++i) {
        const uint64_t item = static_cast<uint64_t>(d - 1) * 1000 + i;
        differ += w.mark_if_unseen(i % 8, item, kRetention) != r.mark_if_unseen(i % 8, item, kRetention);
      }
      // The source holds the one mark the hook made after the save began (pair 1/777777777): not compared.
      EXPECT_EQ(differ, 0u) << "day " << d;
    }
    expect_check_clean(out);
  }
}

// A slot that changes under every copy: the save gives up with kBusy (bounded), writes nothing.
TEST(SnapshotWindowBusy, ASlotThatNeverSettlesIsKBusyAndNoFile) {
  SegmentGuard src(unique_name("snapw-busy"));
  TempFile f;
  Segment seg = Segment::create(src.name, seg_options());
  Window w = Window::create(seg, "freq", opts(WindowVariant::kBloom, 500, 3));
  w.set_now(at_day(0));
  w.mark(1, uint64_t{1});
  struct Ctx {
    wi::BucketSlot* ring;
    uint64_t original = 0;
    uint32_t slot = 0;
  } ctx{wi::slot_table(reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find("freq")->offset))};
  ctx.slot = static_cast<uint32_t>(w.bucket_of(at_day(0)) % 4);
  ctx.original = ctx.ring[ctx.slot].table;
  // The hook moves the slot's table offset by one line after each copy (as a maintain() would
  // replace it); the moved offset does not name a table, so every later copy fails or moves again.
  auto hook = [](uint32_t slot, int, void* c) {
    auto* x = static_cast<Ctx*>(c);
    if (slot == x->slot) x->ring[slot].table += 64;
  };
  {
    HookGuard g(hook, &ctx);
    try {
      save(seg, f.path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBusy);
      EXPECT_NE(std::string(e.what()).find("changed during"), std::string::npos) << e.what();
    }
  }
  ctx.ring[ctx.slot].table = ctx.original;
  EXPECT_NE(access(f.path.c_str(), F_OK), 0) << "a failed save left a file";
  expect_check_clean(seg);
}

// ---- corrupt files --------------------------------------------------------------------

namespace {

// The save container (docs/save-restore.md), to change one entry and re-seal the file
// with correct checksums: the window's own validation must then find the damage.
struct SaveFile {
  std::string head;  // header + source name
  struct Entry {
    uint32_t kind, format;
    std::string name, data;
  };
  std::vector<Entry> entries;
};
uint32_t rd32(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t rd64(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void wr32(std::string& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void wr64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
void put32(std::string& b, uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& b, uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }

SaveFile parse_save(const std::string& b) {
  SaveFile f;
  const uint32_t count = rd32(b, 24), name_len = rd32(b, 28);
  f.head = b.substr(0, 64 + name_len);
  size_t at = f.head.size();
  for (uint32_t i = 0; i < count; ++i) {
    SaveFile::Entry e;
    e.kind = rd32(b, at + 4);
    e.format = rd32(b, at + 8);
    const uint32_t nl = rd32(b, at + 12);
    const uint64_t dl = rd64(b, at + 16);
    e.name = b.substr(at + 24, nl);
    e.data = b.substr(at + 24 + nl, dl);
    at += 24 + nl + dl + 8;
    f.entries.push_back(e);
  }
  return f;
}
std::string seal(const SaveFile& f) {
  std::string b = f.head;
  for (const auto& e : f.entries) {
    const size_t start = b.size();
    put32(b, 0x52544e45);
    put32(b, e.kind);
    put32(b, e.format);
    put32(b, static_cast<uint32_t>(e.name.size()));
    put64(b, e.data.size());
    b += e.name;
    b += e.data;
    put64(b, internal::hash_bytes(b.data() + start, b.size() - start, 0));
  }
  const uint64_t sum = internal::hash_bytes(b.data(), b.size(), 0);
  b += "SHMFEND!";
  put32(b, static_cast<uint32_t>(f.entries.size()));
  put32(b, 0);
  put64(b, sum);
  return b;
}

// Where things are inside a window entry's data (lib/structures/window/window_snapshot.cpp's format).
struct TableAt {
  uint32_t slot;
  size_t tag, bytes, pieces, piece0_at, piece0_len, piece0_data, overflow_len, overflow_data;
  uint64_t tag_value, overflow_bytes;
};
struct EntryLayout {
  uint64_t region_bytes;
  size_t slot_count;  // the u32 after the region
  std::vector<TableAt> tables;
};
EntryLayout layout_of(const std::string& d) {
  EntryLayout l;
  l.region_bytes = rd64(d, 0);
  l.slot_count = 8 + l.region_bytes;
  const uint32_t S = rd32(d, l.slot_count);
  size_t at = l.slot_count + 4;
  for (uint32_t i = 0; i < S; ++i) {
    TableAt t{};
    t.slot = i;
    t.tag = at;
    t.tag_value = rd64(d, at);
    at += 8;
    if (t.tag_value == wi::kRetired) continue;
    t.bytes = at;
    t.pieces = at + 8;
    const uint32_t n = rd32(d, t.pieces);
    at = t.pieces + 4;
    for (uint32_t k = 0; k < n; ++k) {
      if (k == 0) {
        t.piece0_at = at;
        t.piece0_len = at + 8;
        t.piece0_data = at + 16;
      }
      at += 16 + rd64(d, at + 8);
    }
    t.overflow_len = at;
    t.overflow_bytes = rd64(d, at);
    t.overflow_data = at + 8;
    at += 8 + t.overflow_bytes;
    l.tables.push_back(t);
  }
  return l;
}
size_t hdr(size_t field) { return 8 + field; }  // a WindowHeader field inside the entry data

}  // namespace

TEST_P(SnapshotWindow, EveryCorruptFieldIsOneNamedErrorAndCreatesNothing) {
  SegmentGuard src(unique_name("snapw-bad")), dst(unique_name("snapw-bad-dst"));
  TempFile f, bad;
  Segment seg = Segment::create(src.name, seg_options());
  Window w = Window::create(seg, "freq", opts(GetParam(), 300, 2, 256));
  w.set_now(at_day(0));
  w.maintain();
  for (uint64_t i = 0; i < 900; ++i) w.mark(i % 6, i);  // 3x capacity: an overflow table
  save(seg, f.path);
  if (GetParam() == WindowVariant::kStamped) {
    // The shared table's record, last in the entry: [capacity][buckets][swept][subs]{[bytes][lanes]}.
    const SaveFile good = parse_save(slurp(f.path));
    const std::string& data = good.entries[0].data;
    auto refused = [&](const std::string& what, const std::string& says, const std::function<void(std::string&)>& edit) {
      SCOPED_TRACE(what);
      SaveFile x = good;
      edit(x.entries[0].data);
      spit(bad.path, seal(x));
      try {
        restore(bad.path, dst.name);
        ADD_FAILURE() << "restored";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kBadInput) << e.what();
        EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      }
      EXPECT_FALSE(Segment::exists(dst.name)) << "a refused restore left a segment";
    };
    // Find the record: it starts after the ring; its capacity is the window's retention x expected.
    const uint64_t cap = 300 * 2;
    size_t at = std::string::npos;
    for (size_t i = 0; i + 8 <= data.size(); ++i) {
      uint64_t v;
      std::memcpy(&v, data.data() + i, 8);
      if (v == cap) at = i;  // the last match: the shared record (head lines hold 300, not 600)
    }
    ASSERT_NE(at, std::string::npos);
    refused("capacity", "buckets disagree", [&](std::string& d) { wr64(d, at, cap * 1000); });
    refused("buckets", "buckets disagree", [&](std::string& d) { wr64(d, at + 8, rd64(d, at + 8) + 1); });
    refused("swept in the future", "swept at bucket", [&](std::string& d) { wr64(d, at + 16, uint64_t{1} << 40); });
    refused("sub-filters", "sub-filters", [&](std::string& d) { wr32(d, at + 24, 9); });
    refused("sub-filter size", "wrong size", [&](std::string& d) { wr64(d, at + 28, rd64(d, at + 28) + 8); });
    refused("a lane with fingerprint 0", "fingerprint 0", [&](std::string& d) {
      for (size_t i = at + 36; i + 8 <= d.size(); i += 8)
        if (rd64(d, i) == 0) {
          wr64(d, i, 5);
          return;
        }
    });
    refused("truncated", "", [&](std::string& d) { d.resize(d.size() - 8); });
    return;
  }
  const SaveFile good = parse_save(slurp(f.path));
  ASSERT_EQ(good.entries.size(), 1u);
  const std::string& data = good.entries[0].data;
  const EntryLayout L = layout_of(data);
  const TableAt* claimed = nullptr;
  for (const auto& t : L.tables)
    if (t.tag_value != 0 && t.overflow_bytes != 0) claimed = &t;
  ASSERT_NE(claimed, nullptr) << "the fixture needs a claimed bucket with an overflow table";
  const bool cuckoo = GetParam() == WindowVariant::kCuckoo;
  const uint64_t moff = wi::main_offset_in_table(rd32(data, hdr(offsetof(wi::WindowHeader, space_table))));

  auto refused = [&](const std::string& what, const std::string& says, const std::function<void(std::string&)>& edit) {
    SCOPED_TRACE(what);
    SaveFile x = good;
    edit(x.entries[0].data);
    spit(bad.path, seal(x));
    try {
      restore(bad.path, dst.name);
      ADD_FAILURE() << "restored";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("entry 'freq'"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(Segment::exists(dst.name)) << "a refused restore left a segment";
  };
  using H = wi::WindowHeader;
  refused("magic", "not a window of layout version", [&](std::string& d) { wr32(d, hdr(offsetof(H, magic)), 0); });
  refused("layout version", "not a window of layout version", [&](std::string& d) { wr32(d, hdr(offsetof(H, version)), 2); });
  refused("variant", "unknown window variant", [&](std::string& d) { wr32(d, hdr(offsetof(H, variant)), 5); });
  refused("retention 0", "retention 0", [&](std::string& d) { wr32(d, hdr(offsetof(H, retention)), 0); });
  refused("retention past the limit", "retention 65", [&](std::string& d) { wr32(d, hdr(offsetof(H, retention)), 65); });
  refused("slots", "slots 9", [&](std::string& d) { wr32(d, hdr(offsetof(H, slots)), 9); });
  refused("max_spaces", "max_spaces", [&](std::string& d) { wr32(d, hdr(offsetof(H, max_spaces)), 0); });
  refused("space table", "space table", [&](std::string& d) {
    wr32(d, hdr(offsetof(H, space_table)), 2 * rd32(d, hdr(offsetof(H, space_table))));
  });
  refused("region bytes", "a region of", [&](std::string& d) {
    d.erase(8 + L.region_bytes - 64, 64);
    wr64(d, 0, L.region_bytes - 64);
  });
  refused("bucket_seconds", "parameters out of range", [&](std::string& d) { wr64(d, hdr(offsetof(H, bucket_seconds)), 0); });
  refused("utc_offset", "parameters out of range",
          [&](std::string& d) { wr64(d, hdr(offsetof(H, utc_offset)), static_cast<uint64_t>(int64_t{1} << 41)); });
  refused("expected", "parameters out of range", [&](std::string& d) { wr64(d, hdr(offsetof(H, expected)), 0); });
  refused("error", "parameters out of range", [&](std::string& d) {
    double v = 1.5;
    std::memcpy(d.data() + hdr(offsetof(H, error)), &v, 8);
  });
  refused("error_window", "parameters out of range", [&](std::string& d) { wr32(d, hdr(offsetof(H, error_window)), 3); });
  refused("p1", "one-bucket error rates", [&](std::string& d) {
    double v;
    std::memcpy(&v, d.data() + hdr(offsetof(H, p1)), 8);
    v *= 2;
    std::memcpy(d.data() + hdr(offsetof(H, p1)), &v, 8);
  });
  refused("main_error", "one-bucket error rates", [&](std::string& d) {
    double v = -1;
    std::memcpy(d.data() + hdr(offsetof(H, main_error)), &v, 8);
  });
  refused("k_main", "probe counts", [&](std::string& d) { wr32(d, hdr(offsetof(H, k_main)), 99); });
  refused("k_overflow", "probe counts", [&](std::string& d) { wr32(d, hdr(offsetof(H, k_overflow)), 0); });
  refused("epoch", "epoch", [&](std::string& d) { wr64(d, hdr(offsetof(H, epoch)), uint64_t{1} << 63); });
  refused("space keys", "space table holds", [&](std::string& d) {
    const uint32_t T = rd32(d, hdr(offsetof(H, space_table)));
    const size_t keys = 8 + L.region_bytes - wi::round64(uint64_t{T} * 8);
    for (uint32_t i = 0; i < T; ++i) wr64(d, keys + 8ull * i, i + 1);
  });
  refused("slot count", "slot count", [&](std::string& d) { wr32(d, L.slot_count, rd32(d, L.slot_count) + 1); });
  refused("tag in the wrong slot", "does not belong", [&](std::string& d) { wr64(d, claimed->tag, claimed->tag_value + 1); });
  refused("tag past the limit", "does not belong", [&](std::string& d) { wr64(d, claimed->tag, (uint64_t{1} << 62) + 5); });
  refused("table bytes", "table of", [&](std::string& d) { wr64(d, claimed->bytes, rd64(d, claimed->bytes) + 64); });
  refused("piece count 0", "0 pieces", [&](std::string& d) { wr32(d, claimed->pieces, 0); });
  refused("piece count 9", "9 pieces", [&](std::string& d) { wr32(d, claimed->pieces, 9); });
  refused("piece offset", "lies outside", [&](std::string& d) { wr64(d, claimed->piece0_at, 64); });
  refused("piece length", "lies outside", [&](std::string& d) { wr64(d, claimed->piece0_len, uint64_t{1} << 40); });
  refused("geometry 0", "geometry 0", [&](std::string& d) { wr64(d, claimed->piece0_data + offsetof(wi::TableHead, geometry), 0); });
  refused("geometry huge", "geometry", [&](std::string& d) {
    wr64(d, claimed->piece0_data + offsetof(wi::TableHead, geometry), uint64_t{1} << 40);
  });
  refused("capacity 0", "capacity 0", [&](std::string& d) { wr64(d, claimed->piece0_data + offsetof(wi::TableHead, capacity), 0); });
  refused("capacity huge", "capacity", [&](std::string& d) {
    wr64(d, claimed->piece0_data + offsetof(wi::TableHead, capacity), uint64_t{1} << 50);
  });
  refused("a fresh table with data", "fresh (unclaimed) table holds data", [&](std::string& d) { wr64(d, claimed->tag, 0); });
  refused("overflow size", "of the wrong size", [&](std::string& d) {
    wr64(d, claimed->overflow_len, claimed->overflow_bytes + 64);
    d.insert(claimed->overflow_data, 64, '\0');
  });
  refused("overflow cut", "truncated", [&](std::string& d) { d.resize(d.size() - 8); });
  refused("trailing bytes", "bytes after the last table", [&](std::string& d) { d.append(8, '\0'); });
  refused("truncated region", "truncated", [&](std::string& d) { d.resize(100); });
  if (cuckoo) {
    refused("cuckoo header", "cuckoo header is corrupt", [&](std::string& d) { wr32(d, claimed->piece0_data + moff, 0); });
    refused("cuckoo sub-filter count", "cuckoo", [&](std::string& d) {
      wr32(d, claimed->piece0_data + moff + 64, 1);  // sub_count 1 while an overflow follows
    });
    refused("cuckoo size", "more items than it has slots", [&](std::string& d) {
      wr64(d, claimed->piece0_data + moff + offsetof(internal::cuckoo::Header, size), uint64_t{1} << 55);
    });
  } else {
    refused("bloom overflow geometry", "overflow of the wrong size", [&](std::string& d) {
      wr64(d, claimed->piece0_data + offsetof(wi::TableHead, overflow_geometry), 0);
    });
    refused("distinct count", "more than its tables have bits", [&](std::string& d) {
      wr64(d, claimed->piece0_data + offsetof(wi::TableHead, stripes), uint64_t{1} << 55);
    });
  }

  // The untouched file restores (the edits above were the only problems).
  spit(bad.path, seal(good));
  restore(bad.path, dst.name);
  Segment out = Segment::open(dst.name);
  expect_check_clean(out);
}

// Random damage inside the window entry (re-sealed): an Error or a window that opens,
// answers and checks; never a crash. Restored into one scratch segment (--into) and dropped.
TEST_P(SnapshotWindow, RandomByteFlipsNeverCrash) {
  SegmentGuard src(unique_name("snapw-fuzz")), dst(unique_name("snapw-fuzz-dst"));
  TempFile f, bad;
  Segment seg = Segment::create(src.name, seg_options());
  Window w = Window::create(seg, "freq", opts(GetParam(), 100, 2, 2));
  for (int d = 0; d < 3; ++d) {
    w.set_now(at_day(d));
    for (uint64_t i = 0; i < 250; ++i) w.mark(i % 4, i + 1000 * static_cast<uint64_t>(d));
  }
  save(seg, f.path);
  const SaveFile good = parse_save(slurp(f.path));
  Segment out = Segment::create(dst.name, seg_options());
  RestoreOptions ro;
  ro.into_existing = true;
  std::mt19937_64 rng(2026);
  int refused = 0, opened = 0;
  for (int iter = 0; iter < 200; ++iter) {
    SaveFile x = good;
    std::string& d = x.entries[0].data;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Half the flips in the first 1 KiB (header, ring, table records), half anywhere.
      const size_t at = k % 2 == 0 ? rng() % std::min<size_t>(d.size(), 1024) : rng() % d.size();
      d[at] = static_cast<char>(d[at] ^ (1u << (rng() % 8)));
    }
    spit(bad.path, seal(x));
    try {
      restore(bad.path, dst.name, ro);
    } catch (const Error& e) {
      EXPECT_GT(std::string(e.what()).size(), 20u);
      ++refused;
      ASSERT_FALSE(out.find("freq")) << "a refused restore left the structure (iteration " << iter << ")";
      continue;
    }
    ++opened;
    Window r = Window::open(out, "freq");
    r.set_now(at_day(2));
    (void)r.stats();
    for (uint64_t i = 0; i < 50; ++i) (void)r.seen(i % 4, i, 2);
    r.set_now(at_day(3));
    (void)r.mark_if_unseen(1, uint64_t{5}, 2);
    (void)out.check(false);
    ASSERT_TRUE(Window::drop(out, "freq"));
  }
  EXPECT_GT(refused, 0);
  RecordProperty("refused", refused);
  RecordProperty("opened", opened);
  expect_check_clean(out);
}

// kStamped: the shared table's overflow sub-filters, its swept bucket and every lane come back;
// the restored window answers like the source and keeps sweeping and rotating.
TEST(SnapshotWindowStamped, StampedSharedTableRoundTripsWithItsSubFilters) {
  SegmentGuard src(unique_name("snapws-src")), dst(unique_name("snapws-dst"));
  TempFile f;
  Segment seg = Segment::create(src.name, seg_options());
  Window w = Window::create(seg, "freq", opts(WindowVariant::kStamped, 1000, 2));
  for (int d = 0; d < 3; ++d) {
    w.set_now(at_day(d));
    w.maintain();
    for (uint64_t i = 0; i < 3000; ++i) (void)w.mark(i % 7, i + 100000 * static_cast<uint64_t>(d));  // 3x: sub-filters
    for (uint64_t i = 0; i < 50; ++i) (void)w.mark_if_under(9, i, 3, 2);
  }
  const WindowStats a = w.stats();
  ASSERT_GE(a.buckets[0].layers, 1u);
  save(seg, f.path);
  restore(f.path, dst.name);
  Segment out = Segment::open(dst.name);
  expect_check_clean(out);
  Window r = Window::open(out, "freq");
  r.set_now(at_day(2));
  const WindowStats b = r.stats();
  EXPECT_EQ(b.lanes, a.lanes);
  EXPECT_EQ(b.swept_bucket, a.swept_bucket);
  EXPECT_EQ(b.buckets[0].layers, a.buckets[0].layers);
  for (int d = 0; d < 3; ++d)
    for (uint64_t i = 0; i < 3000; ++i) {
      const uint64_t item = i + 100000 * static_cast<uint64_t>(d);
      ASSERT_EQ(w.seen(i % 7, item, 1), r.seen(i % 7, item, 1)) << d << " " << i;
      ASSERT_EQ(w.seen(i % 7, item, 2), r.seen(i % 7, item, 2)) << d << " " << i;
    }
  for (uint64_t i = 0; i < 50; ++i) ASSERT_EQ(w.mark_if_under(9, i, 3, 2), r.mark_if_under(9, i, 3, 2)) << i;
  for (int d = 3; d < 20; ++d) {  // past the 16-bucket stamp wrap: both sweep alike
    w.set_now(at_day(d));
    r.set_now(at_day(d));
    if (d % 4 == 0) {
      w.maintain();
      r.maintain();
    }
    for (uint64_t i = 0; i < 200; ++i) ASSERT_EQ(w.mark(1, i), r.mark(1, i)) << d << " " << i;
  }
  expect_check_clean(out);
}
