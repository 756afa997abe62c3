// tests/unit/test_kinds.cpp: the kinds table (lib/structures/kind.h, kinds.cpp) is complete
// and every row's parts work together.
//
// A row's hooks cannot be null (KindRow's constructor is consteval: a missing one fails
// the build); these tests check what the compiler cannot: one row per Kind value, in
// order, with unique names that the front ends' lookups agree on, and for every kind:
// its fuzz image builds and checks consistent; its metrics declare every family they
// add; save -> restore keeps the image consistent and openable; its fuzz exercise runs;
// and its drop leaves check() with no finding (nothing it owned is leaked).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/kinds.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/window.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/shmfilter.h"
#include "shmfilter/snapshot.hpp"
#include "structures/kind.h"
#include "structures/roaring/roaring_impl.h"
#include "structures/window/window_impl.h"
#include "test_util.h"

using namespace shmfilter;
using internal::KindRow;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

std::string findings_text(const CheckReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.where + ": " + f.problem + (f.repaired ? " (repaired)" : "") + "\n";
  return s;
}

// Bytes the directory's live structures hold (what a drop must give back).
uint64_t live_bytes(Segment& seg) { return seg.stats().used_bytes; }

}  // namespace

TEST(Kinds, OneRowPerKindValueInOrderWithEveryPart) {
  const auto rows = internal::kind_rows();
  ASSERT_EQ(rows.size(), static_cast<size_t>(kLastKind));
  std::set<std::string> names, nouns;
  for (size_t i = 0; i < rows.size(); ++i) {
    const KindRow* row = rows[i];
    ASSERT_NE(row, nullptr);
    EXPECT_EQ(static_cast<size_t>(row->kind), i + 1) << row->name;
    EXPECT_EQ(internal::kind_row(row->kind), row);
    EXPECT_TRUE(names.insert(row->name).second) << "duplicate kind name " << row->name;
    EXPECT_TRUE(nouns.insert(row->noun).second) << "duplicate noun " << row->noun;
    // The consteval constructor already refuses null hooks; a row built some other way would not.
    EXPECT_TRUE(row->open && row->check && row->drop && row->save && row->restore && row->metrics &&
                row->fuzz_image && row->fuzz_exercise)
        << row->name;
    for (const internal::MetricFamily& f : row->families) {
      EXPECT_EQ(std::string(f.name).rfind("shmfilter_", 0), 0u) << f.name;
      EXPECT_TRUE(std::string(f.type) == "gauge" || std::string(f.type) == "counter") << f.name;
    }
  }
  EXPECT_EQ(internal::kind_row(Kind::kNone), nullptr);
  EXPECT_EQ(internal::kind_row(static_cast<Kind>(static_cast<uint32_t>(kLastKind) + 1)), nullptr);
}

TEST(Kinds, NamesAgreeAcrossCxxAndC) {
  const std::vector<Kind> kinds = known_kinds();
  ASSERT_EQ(kinds.size(), static_cast<size_t>(kLastKind));
  for (Kind k : kinds) {
    const std::string name(kind_name(k));
    EXPECT_EQ(name, internal::kind_row(k)->name);
    EXPECT_EQ(kind_from_name(name), k) << name;
    EXPECT_EQ(std::string(shmf_kind_name(static_cast<uint32_t>(k))), name);
  }
  EXPECT_EQ(kind_from_name("bloomfilter"), std::nullopt);
  EXPECT_EQ(kind_from_name(""), std::nullopt);
  EXPECT_EQ(std::string(shmf_kind_name(0)), "unknown");
  EXPECT_EQ(std::string(shmf_kind_name(static_cast<uint32_t>(kLastKind) + 1)), "unknown");
  EXPECT_EQ(kind_name(static_cast<Kind>(200)), "unknown");
}

class EveryKind : public ::testing::TestWithParam<Kind> {};

TEST_P(EveryKind, FuzzImageChecksAndEveryPartWorksOnIt) {
  const KindRow* row = internal::kind_row(GetParam());
  ASSERT_NE(row, nullptr);
  SegmentGuard g(unique_name(std::string("kinds-") + row->name));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  const uint64_t empty = live_bytes(seg);
  row->fuzz_image(seg, "img-");
  const std::vector<RegionInfo> made = seg.list();
  ASSERT_FALSE(made.empty()) << row->name << "'s fuzz image made nothing";
  for (const RegionInfo& r : made) {
    EXPECT_EQ(r.kind, row->kind) << r.name;
    EXPECT_EQ(r.name.rfind("img-", 0), 0u) << r.name << ": the image must use the prefix it is given";
  }
  CheckReport rep = seg.check();
  EXPECT_TRUE(rep.findings.empty()) << findings_text(rep);

  // Metrics: the shared numbers, and only families the row declares.
  for (const RegionInfo& r : made) {
    internal::MetricsCollector c;
    internal::CommonMetrics m = row->metrics(seg, r, "name=\"x\"", c);
    EXPECT_GE(m.bytes, static_cast<double>(r.size)) << r.name << ": bytes count the region at least";
    std::string text;
    c.print(row->families, text);
    internal::MetricsCollector all;
    row->metrics(seg, r, "name=\"x\"", all);
    std::string everything;
    // Printing with every family of every row must add nothing the row's own list left out.
    std::vector<internal::MetricFamily> every;
    for (const KindRow* other : internal::kind_rows()) every.insert(every.end(), other->families.begin(), other->families.end());
    all.print(every, everything);
    EXPECT_EQ(text, everything) << r.name << ": a family its row does not declare";
  }

  // Save -> restore into a new segment: every structure opens and checks consistent.
  const std::string file = "/tmp/shmf-test-kinds-" + std::to_string(getpid()) + "-" + row->name + ".save";
  SegmentGuard dst(unique_name(std::string("kinds-dst-") + row->name));
  {
    SnapshotInfo saved = save(seg, file);
    EXPECT_EQ(saved.entries.size(), made.size());
    EXPECT_TRUE(saved.skipped.empty());
    restore(file, dst.name);
    std::remove(file.c_str());
    Segment out = Segment::open(dst.name);
    ASSERT_EQ(out.list().size(), made.size());
    for (const RegionInfo& r : out.list()) EXPECT_NO_THROW(row->open(out, r.name)) << r.name;
    CheckReport rr = out.check();
    EXPECT_TRUE(rr.findings.empty()) << findings_text(rr);
  }

  // The fuzz exercise: every call a user can make; a refusal is a named error, never more.
  for (const RegionInfo& r : seg.list()) {
    try {
      row->fuzz_exercise(seg, r);
    } catch (const Error&) {
    }
  }
  rep = seg.check();
  EXPECT_TRUE(rep.findings.empty()) << findings_text(rep);

  // Drop through the table frees everything the kind owns.
  for (const RegionInfo& r : seg.list()) EXPECT_TRUE(drop_structure(seg, r.name)) << r.name;
  EXPECT_FALSE(drop_structure(seg, "img-absent"));
  EXPECT_TRUE(seg.list().empty());
  rep = seg.check();
  EXPECT_TRUE(rep.findings.empty()) << findings_text(rep);
  EXPECT_EQ(live_bytes(seg), empty) << row->name << ": its drop left bytes allocated";
}

INSTANTIATE_TEST_SUITE_P(Table, EveryKind, ::testing::ValuesIn(known_kinds()),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(kind_name(i.param)); });

// The fuzz images are the fuzzers' base images: they must keep reaching the states that
// make a structure interesting to corrupt (layers, expansions, a full filter, packs and a
// pending delta, tombstones, rotated buckets and overflow tables), or fuzz coverage of
// those paths silently goes away.
TEST(Kinds, FuzzImagesReachTheStatesTheyPromise) {
  SegmentGuard g(unique_name("kinds-states"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  for (const KindRow* row : internal::kind_rows()) row->fuzz_image(seg, "");

  EXPECT_GE(Bloom::open(seg, "bloom-classic").stats().layers, 2u);
  const CuckooStats grown = Cuckoo::open(seg, "cuckoo").stats();
  EXPECT_GE(grown.subfilters, 2u);
  EXPECT_GT(grown.erases, 0u);
  EXPECT_GT(Cuckoo::open(seg, "cuckoo-full").stats().failures, 0u);
  const RoaringStats rs = RoaringSet::open(seg, "roaring").stats();
  EXPECT_GT(rs.compactions, 0u);
  EXPECT_GT(rs.delta_fill, 0u);
  const RoaringStats dense = RoaringSet::open(seg, "roaring-dense").stats();
  EXPECT_GT(dense.run_containers + dense.bitmap_containers, 0u);
  EXPECT_GT(dense.array_containers, 0u);
  EXPECT_GT(Hll::open(seg, "hll").count(), 0u);
  EXPECT_EQ(Hll::open(seg, "hll-empty").count(), 0u);
  EXPECT_EQ(ExactSet::open(seg, "set").size(), 34u);  // 40 - 8 erased (tombstones) + the two special keys
  EXPECT_EQ(ExactSet::open(seg, "set-full").size(), 16u);  // at capacity
  EXPECT_EQ(ExactSet::open(seg, "set-full").insert(uint64_t{999999937}), InsertResult::kFull);
  for (const char* name : {"window-bloom", "window-cuckoo"}) {
    Window w = Window::open(seg, name);
    w.set_now(1764547200 + 3 * 86400 + 7200);  // the image's last day (window_kind.cpp's clock), not today
    const WindowStats ws = w.stats();
    EXPECT_GE(ws.rotations, 3u) << name;
    bool overflow = false;
    for (const WindowBucketStats& b : ws.buckets) overflow = overflow || b.overflow;
    EXPECT_TRUE(overflow) << name << ": no bucket reached its overflow table";
    EXPECT_GT(ws.other_marks, 0u) << name << ": no space past max_spaces";
  }
  // Raw states no stats() call shows: a kCuckoo table sealed by a newer bucket; an idle window
  // (both variants) with retired slots and a spare in chunked preparation; a roaring snapshot
  // that dropped packs or retired snapshots awaiting reclamation.
  namespace wi = internal::window;
  auto slot_states = [&](const char* name, bool& sealed, int& retired, int& preparing) {
    const RegionInfo r = *seg.find(name);
    const auto* h = reinterpret_cast<const wi::WindowHeader*>(seg.base() + r.offset);
    const auto* slots = reinterpret_cast<const wi::BucketSlot*>(seg.base() + r.offset + sizeof(wi::WindowHeader));
    sealed = false, retired = 0, preparing = 0;
    for (uint32_t i = 0; i < h->slots; ++i) {
      if (slots[i].tag.load() == wi::kRetired) ++retired;
      if (slots[i].table == 0) continue;
      const auto* t = reinterpret_cast<const wi::TableHead*>(seg.base() + slots[i].table);
      sealed = sealed || (t->flags.load() & wi::kTableSealed) != 0;
      preparing += t->prep_cursor.load() != 0;
    }
  };
  bool sealed = false;
  int retired = 0, preparing = 0;
  slot_states("window-cuckoo", sealed, retired, preparing);
  EXPECT_TRUE(sealed) << "window-cuckoo: no sealed table";
  for (const char* name : {"window-bloom-idle", "window-cuckoo-idle"}) {
    slot_states(name, sealed, retired, preparing);
    EXPECT_GE(retired, 1) << name << ": no retired slot";
    EXPECT_GE(preparing, 1) << name << ": no spare in chunked preparation";
  }
  const RegionInfo rr = *seg.find("roaring-dense");
  const auto* rh = reinterpret_cast<const internal::roaring::RoaringHeader*>(seg.base() + rr.offset);
  const auto* snap = reinterpret_cast<const internal::roaring::SnapHeader*>(seg.base() + rh->current.load());
  uint32_t pending = 0;
  for (const auto& p : rh->pending) pending += p.snap_off != 0;
  EXPECT_GE(snap->npacks, 1u);
  EXPECT_GT(snap->ndropped + pending, 0u) << "roaring-dense: no dropped pack and no retired snapshot";

  // Every structure's fuzz fields (its row's list, which the structure-aware mutators
  // corrupt) lie inside the file, with a width a mutator can write.
  const uint64_t size = seg.stats().size;
  for (const RegionInfo& r : seg.list()) {
    std::vector<internal::FuzzField> fields;
    internal::kind_row(r.kind)->fuzz_fields(seg, r, fields);
    if (r.kind != Kind::kBlob) {
      EXPECT_FALSE(fields.empty()) << r.name << ": its row lists no field";
    }
    for (const internal::FuzzField& f : fields) {
      EXPECT_TRUE(f.width == 1 || f.width == 2 || f.width == 4 || f.width == 8) << r.name;
      EXPECT_LE(f.offset + f.width, size) << r.name;
    }
  }
}
