// tests/unit/test_segment.cpp: single-process behaviour of the segment API.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "segment/layout.h"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

using shmf_test::small_options;

using shmf_test::code_of;

}  // namespace

TEST(Segment, CreateOpenRemove) {
  SegmentGuard g(unique_name("cor"));
  EXPECT_FALSE(Segment::exists(g.name));
  EXPECT_EQ(code_of([&] { Segment::open(g.name); }), ErrorCode::kNotFound);
  Segment s = Segment::create(g.name, small_options());
  EXPECT_TRUE(Segment::exists(g.name));
  EXPECT_EQ(s.name(), g.name);
  EXPECT_GE(s.size(), 4ull << 20);
  EXPECT_NE(s.base(), nullptr);
  EXPECT_EQ(code_of([&] { Segment::create(g.name, small_options()); }), ErrorCode::kExists);
  Segment t = Segment::open(g.name);
  EXPECT_EQ(t.size(), s.size());
  EXPECT_NE(t.owner_token(), s.owner_token());
  Segment u = Segment::open_or_create(g.name, small_options());
  EXPECT_EQ(u.stats().processes_alive, 3u);
  EXPECT_TRUE(Segment::remove(g.name));
  EXPECT_FALSE(Segment::remove(g.name));
  EXPECT_FALSE(Segment::exists(g.name));
  // Attached processes keep their mapping after remove.
  auto r = s.create_region("after-remove", Kind::kBlob, 100, {});
  EXPECT_TRUE(t.find("after-remove").has_value());
  EXPECT_EQ(r.size, 100u);
}

TEST(Segment, PermissionsDefaultTo0600) {
  SegmentGuard g(unique_name("mode"));
  Segment s = Segment::create(g.name, small_options());
  struct stat st{};
  ASSERT_EQ(stat(("/dev/shm/" + g.name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Segment, BadNames) {
  EXPECT_EQ(code_of([] { Segment::create(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { Segment::create("a/b"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { Segment::create(std::string(kMaxSegmentNameLength + 1, 'x')); }), ErrorCode::kNameTooLong);
  try {
    Segment::open(std::string(300, 'y'));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorter"), std::string::npos) << e.what();
  }
  SegmentGuard g(unique_name("sn"));
  Segment s = Segment::create(g.name, small_options());
  EXPECT_EQ(code_of([&] { s.create_region("", Kind::kBlob, 8, {}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { s.create_region(std::string(64, 'n'), Kind::kBlob, 8, {}); }), ErrorCode::kNameTooLong);
  EXPECT_NO_THROW(s.create_region(std::string(63, 'n'), Kind::kBlob, 8, {}));
}

TEST(Segment, RegionsCreateFindListDrop) {
  SegmentGuard g(unique_name("reg"));
  Segment s = Segment::create(g.name, small_options());
  Segment other = Segment::open(g.name);
  bool init_ran = false;
  RegionInfo a = s.create_region("alpha", Kind::kBlob, 1000, [&](std::byte* p, uint64_t n, ControlTxn&) {
    init_ran = true;
    for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(p[i], std::byte{0});
    std::memset(p, 0xab, n);
  });
  EXPECT_TRUE(init_ran);
  EXPECT_EQ(a.offset % 64, 0u);
  EXPECT_EQ(a.size, 1000u);
  EXPECT_EQ(code_of([&] { s.create_region("alpha", Kind::kBlob, 10, {}); }), ErrorCode::kExists);
  auto f = other.find("alpha");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->offset, a.offset);
  EXPECT_EQ(f->slot, a.slot);
  EXPECT_EQ(f->generation, a.generation);
  EXPECT_EQ(std::to_integer<int>(other.base()[f->offset + 999]), 0xab);
  EXPECT_EQ(code_of([&] { other.open_region("alpha", Kind::kBloom); }), ErrorCode::kWrongKind);
  EXPECT_EQ(code_of([&] { other.open_region("beta", Kind::kBlob); }), ErrorCode::kNotFound);
  // kBlob: a structure kind (kHll, ...) would be validated by its checker in check() below.
  s.create_region("beta", Kind::kBlob, 64, {});
  auto l = other.list();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "alpha");
  EXPECT_EQ(l[1].kind, Kind::kBlob);
  EXPECT_TRUE(other.region_live(a.slot, a.generation));
  bool on_drop_ran = false;
  EXPECT_TRUE(other.drop("alpha", [&](std::byte*, uint64_t n, ControlTxn&) {
    on_drop_ran = true;
    EXPECT_EQ(n, 1000u);
  }));
  EXPECT_TRUE(on_drop_ran);
  EXPECT_FALSE(s.region_live(a.slot, a.generation));
  EXPECT_FALSE(s.find("alpha").has_value());
  EXPECT_FALSE(s.drop("alpha"));
  // Re-create: a new generation, old handles stay dead.
  RegionInfo a2 = s.create_region("alpha", Kind::kBlob, 10, {});
  EXPECT_FALSE(s.region_live(a.slot, a.generation));
  EXPECT_TRUE(s.region_live(a2.slot, a2.generation));
  EXPECT_EQ(s.stats().structures, 2u);
  EXPECT_TRUE(s.check().consistent());
}

TEST(Segment, InitThrowsLeavesNothing) {
  SegmentGuard g(unique_name("ithrow"));
  Segment s = Segment::create(g.name, small_options());
  auto before = s.stats();
  EXPECT_THROW(s.create_region("x", Kind::kBlob, 4096,
                               [](std::byte*, uint64_t, ControlTxn& txn) {
                                 txn.allocate(100000);
                                 throw std::runtime_error("init failed");
                               }),
               std::runtime_error);
  EXPECT_FALSE(s.find("x").has_value());
  auto after = s.stats();
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_EQ(after.structures, 0u);
  EXPECT_TRUE(s.check().consistent());
}

TEST(Segment, DirectoryFull) {
  SegmentGuard g(unique_name("dfull"));
  CreateOptions o = small_options();
  o.directory_capacity = 16;
  Segment s = Segment::create(g.name, o);
  for (int i = 0; i < 16; ++i) s.create_region("r" + std::to_string(i), Kind::kBlob, 64, {});
  EXPECT_EQ(code_of([&] { s.create_region("one-more", Kind::kBlob, 64, {}); }), ErrorCode::kFull);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(s.find("r" + std::to_string(i)).has_value()) << i;
  EXPECT_TRUE(s.drop("r3"));
  EXPECT_NO_THROW(s.create_region("one-more", Kind::kBlob, 64, {}));
  EXPECT_TRUE(s.find("one-more").has_value());
  EXPECT_FALSE(s.find("r3").has_value());
}

TEST(Segment, TransactAllocateFreeStore) {
  SegmentGuard g(unique_name("txn"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo r = s.create_region("meta", Kind::kBlob, 64, {});
  auto* field = reinterpret_cast<uint64_t*>(s.base() + r.offset);
  auto* field32 = reinterpret_cast<uint32_t*>(s.base() + r.offset + 8);
  uint64_t off = 0;
  s.transact([&](ControlTxn& txn) {
    off = txn.allocate(1000);
    EXPECT_EQ(off % 64, 0u);
    txn.store_u64(field, off);
    txn.store_u32(field32, 7);
  });
  EXPECT_EQ(*field, off);
  EXPECT_EQ(*field32, 7u);
  // A throwing transaction rolls back its stores and allocations.
  auto before = s.stats();
  EXPECT_THROW(s.transact([&](ControlTxn& txn) {
    txn.store_u64(field, 12345);
    txn.store_u32(field32, 9);
    txn.allocate(1 << 20);
    throw std::runtime_error("abort");
  }),
               std::runtime_error);
  EXPECT_EQ(*field, off);
  EXPECT_EQ(*field32, 7u);
  EXPECT_EQ(s.stats().used_bytes, before.used_bytes);
  // Double free and bad offsets are refused (and roll back).
  s.transact([&](ControlTxn& txn) { txn.free(off); });
  EXPECT_EQ(code_of([&] { s.transact([&](ControlTxn& txn) { txn.free(off); }); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { s.transact([&](ControlTxn& txn) { txn.free(3); }); }), ErrorCode::kInvalidArgument);
  EXPECT_GT(s.stats().quarantined_bytes, 0u);
  // Logged stores must target allocated space, never the segment's own tables.
  EXPECT_EQ(code_of([&] {
              s.transact([&](ControlTxn& txn) { txn.store_u64(reinterpret_cast<uint64_t*>(s.base() + 424), 0); });
            }),
            ErrorCode::kInvalidArgument);
  // Allocated memory is zeroed even when reused.
  s.quiesce();
  std::set<uint64_t> offs;
  for (int round = 0; round < 3; ++round) {
    s.transact([&](ControlTxn& txn) {
      uint64_t o = txn.allocate(1000);
      for (int i = 0; i < 1000; ++i) EXPECT_EQ(txn.base()[o + i], std::byte{0});
      std::memset(txn.base() + o, 0xff, 1000);
      txn.free(o);
      offs.insert(o);
    });
  }
  EXPECT_TRUE(s.check().consistent());
}

TEST(Segment, AllocatorReusesAndCoalesces) {
  SegmentGuard g(unique_name("coal"));
  Segment s = Segment::create(g.name, small_options());
  std::vector<uint64_t> offs(8);
  s.transact([&](ControlTxn& txn) {
    for (auto& o : offs) o = txn.allocate(4096);
  });
  auto full = s.stats();
  s.transact([&](ControlTxn& txn) {
    for (int i = 1; i < 7; ++i) txn.free(offs[i]);
  });
  s.quiesce();  // only this process is attached: the quarantine can now be reused
  uint64_t big = 0;
  s.transact([&](ControlTxn& txn) { big = txn.allocate(6 * (4096 + 64) - 64); });  // the coalesced hole exactly (each extent has a 64-byte header)
  EXPECT_EQ(big, offs[1]);
  EXPECT_EQ(s.stats().used_bytes, full.used_bytes);
  EXPECT_EQ(s.stats().quarantined_bytes, 0u);
  EXPECT_TRUE(s.check().consistent());
}

TEST(Segment, GrowthAndResize) {
  SegmentGuard g(unique_name("grow"));
  Segment s = Segment::create(g.name, small_options());
  Segment other = Segment::open(g.name);
  uint64_t before = s.size();
  RegionInfo big = s.create_region("big", Kind::kBlob, 16ull << 20, {});
  EXPECT_GT(s.size(), before);
  EXPECT_EQ(other.size(), s.size());
  std::memset(other.base() + big.offset, 1, big.size);  // the other process can touch all of it
  EXPECT_EQ(code_of([&] { s.create_region("huge", Kind::kBlob, 1ull << 30, {}); }), ErrorCode::kNoSpace);
  s.resize(64ull << 20);
  EXPECT_EQ(other.size(), 64ull << 20);
  EXPECT_EQ(code_of([&] { s.resize(1ull << 30); }), ErrorCode::kNoSpace);
  EXPECT_EQ(code_of([&] { s.resize(8ull << 20); }), ErrorCode::kBusy);
  ASSERT_TRUE(s.drop("big"));
  s.quiesce();
  other.quiesce();
  s.resize(8ull << 20);
  EXPECT_EQ(s.size(), 8ull << 20);
  struct stat st{};
  ASSERT_EQ(stat(("/dev/shm/" + g.name).c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 8ull << 20);
  EXPECT_TRUE(s.check().consistent());
}

TEST(Segment, TokensAndProcesses) {
  SegmentGuard g(unique_name("tok"));
  Segment s = Segment::create(g.name, small_options());
  uint64_t t1 = s.owner_token();
  EXPECT_NE(t1, 0u);
  EXPECT_TRUE(s.token_alive(t1));
  EXPECT_FALSE(s.token_alive(0));
  uint64_t t2;
  {
    Segment o = Segment::open(g.name);
    t2 = o.owner_token();
    EXPECT_TRUE(s.token_alive(t2));
    EXPECT_TRUE(o.token_alive(t1));
    EXPECT_EQ(s.processes().size(), 2u);
  }
  EXPECT_FALSE(s.token_alive(t2));  // detached: its OFD lock is gone
  Segment o2 = Segment::open(g.name);
  EXPECT_NE(o2.owner_token(), t2);  // same slot, new incarnation
  EXPECT_FALSE(s.token_alive(t2));
  auto ps = s.processes();
  ASSERT_EQ(ps.size(), 2u);
  for (const auto& p : ps) {
    EXPECT_TRUE(p.alive);
    EXPECT_EQ(p.pid, getpid());
  }
}

TEST(Segment, FileBacked) {
  std::string path = "/tmp/" + unique_name("file") + ".seg";
  OpenOptions oo;
  oo.file = path;
  CreateOptions o = small_options();
  o.file = path;
  {
    Segment s = Segment::create("persist", o);
    s.create_region("kept", Kind::kBlob, 128, [](std::byte* p, uint64_t, ControlTxn&) { p[0] = std::byte{42}; });
  }
  {
    Segment s = Segment::open("persist", oo);
    auto r = s.open_region("kept", Kind::kBlob);
    EXPECT_EQ(s.base()[r.offset], std::byte{42});
  }
  EXPECT_TRUE(Segment::remove("persist", oo));
}

TEST(Segment, StatsAndCheck) {
  SegmentGuard g(unique_name("stats"));
  Segment s = Segment::create(g.name, small_options());
  auto st0 = s.stats();
  EXPECT_EQ(st0.format_version, 2u);
  EXPECT_EQ(st0.used_bytes, 0u);
  EXPECT_EQ(st0.processes_alive, 1u);
  EXPECT_EQ(st0.directory_capacity, 64u);
  s.create_region("a", Kind::kBlob, 1 << 16, {});
  auto st1 = s.stats();
  EXPECT_EQ(st1.used_bytes, (1u << 16) + 64);
  EXPECT_EQ(st1.free_bytes + st1.used_bytes + st1.quarantined_bytes, st0.free_bytes + (st1.size - st0.size));
  EXPECT_TRUE(s.check().consistent());
  EXPECT_TRUE(s.check().findings.empty());
}

TEST(Segment, ParseAndFormatSize) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64k"), 65536u);
  EXPECT_EQ(parse_size("64KiB"), 65536u);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("1MB"), 1000000u);
  // nginx's lowercase suffixes too (the nginx module's size=32m, docs/nginx.md): binary units
  EXPECT_EQ(parse_size("64m"), 64ull << 20);
  EXPECT_EQ(parse_size("3g"), 3ull << 30);
  EXPECT_EQ(parse_size("1t"), 1ull << 40);
  EXPECT_EQ(code_of([] { parse_size("1mb"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_size(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_size("12 parsecs"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_size("-5"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_size("1.2.3"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_size("99999999999T"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(1536ull << 20), "1.50 GiB");
  EXPECT_EQ(format_size(64ull << 10), "64.00 KiB");
}

TEST(Segment, CheckFindsAndRepairsLeaks) {
  SegmentGuard g(unique_name("leak"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo r = s.create_region("owner", Kind::kBlob, 256, [](std::byte*, uint64_t, ControlTxn& txn) {
    txn.allocate(5000);  // charged to the new region by create_region
  });
  s.transact([&](ControlTxn& txn) {
    txn.charge_to(r);
    txn.allocate(1000);
  });
  uint64_t unattributed = 0;
  s.transact([&](ControlTxn& txn) { unattributed = txn.allocate(64); });
  EXPECT_TRUE(s.check().findings.empty());
  ASSERT_TRUE(s.drop("owner"));  // without freeing its two extra extents
  CheckReport bad = s.check(false);
  EXPECT_FALSE(bad.consistent());
  int leaks = 0;
  for (const auto& f : bad.findings) leaks += f.problem.find("leak") != std::string::npos;
  EXPECT_EQ(leaks, 2);
  CheckReport fixed = s.check(true);
  EXPECT_TRUE(fixed.consistent());
  EXPECT_EQ(fixed.findings.size(), 2u);
  EXPECT_TRUE(s.check(false).findings.empty());
  // A new structure in the same directory slot does not adopt the old leaks.
  RegionInfo r2 = s.create_region("owner", Kind::kBlob, 256, {});
  EXPECT_EQ(r2.slot, r.slot);
  EXPECT_NE(r2.generation, r.generation);
  EXPECT_TRUE(s.check(false).findings.empty());
  s.transact([&](ControlTxn& txn) { txn.free(unattributed); });
}

// Threads of one process share one attachment: control-plane calls serialise
// on the robust mutex, lookups run lock-free beside them (run under TSan too).
TEST(Segment, ThreadsShareOneAttachment) {
  SegmentGuard g(unique_name("thr"));
  Segment s = Segment::create(g.name, small_options());
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const RegionInfo& r : s.list())
        if (r.size == 0 || r.offset % 64 != 0) errors++;
      auto f = s.find("t0-1");
      if (f && f->kind != Kind::kBlob) errors++;
      s.stats();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      Segment mine = s;  // copies share the attachment
      for (int i = 0; i < 150; ++i) {
        std::string n = "t" + std::to_string(t) + "-" + std::to_string(i % 4);
        if (!mine.drop(n)) mine.create_region(n, Kind::kBlob, 100 + i, {});
      }
    });
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_TRUE(s.check().findings.empty());
}

// A control-plane call nested in transact() that throws is undone on its own
// (savepoint); the enclosing transaction may catch it and commit the rest.
TEST(Segment, NestedFailureIsASavepoint) {
  SegmentGuard g(unique_name("nest"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo keep;
  s.transact([&](ControlTxn&) {
    keep = s.create_region("kept", Kind::kBlob, 128, {});
    try {
      s.create_region("failed", Kind::kBlob, 4096, [](std::byte*, uint64_t, ControlTxn& txn) {
        txn.allocate(10000);
        throw Error(ErrorCode::kInvalidArgument, "init refuses");
      });
    } catch (const Error&) {
    }
  });
  EXPECT_TRUE(s.find("kept").has_value());
  EXPECT_FALSE(s.find("failed").has_value());
  EXPECT_TRUE(s.check().findings.empty());
  EXPECT_EQ(s.stats().used_bytes, 128u + 64u);
}

// While another attachment stays inside one call nothing freed after its entry is
// reused, but adjacent quarantined extents coalesce, so churn does not exhaust the
// quarantine table (4096 entries): 5000 drops succeed, and everything becomes
// reusable once that call ends.
TEST(Segment, QuarantineCoalescesWhileAProcessLags) {
  SegmentGuard g(unique_name("qco"));
  Segment s = Segment::create(g.name, small_options());
  {
    Segment lagging = Segment::open(g.name);
    const ReadGuard stuck(lagging);  // a call of that attachment in flight the whole time
    for (int i = 0; i < 10000; ++i) {
      std::string n = "c" + std::to_string(i % 3);
      if (!s.drop(n)) s.create_region(n, Kind::kBlob, 64 + 64 * (i % 4), {});
    }
    SegmentStats st = s.stats();
    EXPECT_GT(st.quarantined_bytes, 0u);
    EXPECT_TRUE(s.check().findings.empty());
  }
  s.quiesce();
  s.transact([](ControlTxn& txn) { txn.free(txn.allocate(64)); });  // reclaims on demand
  s.quiesce();
  s.transact([](ControlTxn& txn) { txn.free(txn.allocate(64)); });
  s.quiesce();
  s.transact([](ControlTxn& txn) { txn.allocate(64); });
  EXPECT_LT(s.stats().quarantined_bytes, 1024u);
  EXPECT_TRUE(s.check().findings.empty());
}

// A free next to a quarantined span that is already reusable does not merge into it
// (the merged span would wait for the new free's stamp): a transaction that frees one
// table and allocates the next (a window's maintain: retire, then the spare) reuses
// yesterday's table instead of growing. The old code merged, so a window grew by one
// table a day even with no other process attached (bench/reclaim_bench.cpp).
TEST(Segment, FreeNextToAReusableQuarantinedSpanDoesNotDelayIt) {
  SegmentGuard g(unique_name("qadj"));
  Segment s = Segment::create(g.name, small_options());
  uint64_t a = 0, b = 0;
  s.transact([&](ControlTxn& txn) {
    a = txn.allocate(64 << 10);
    b = txn.allocate(64 << 10);
    txn.allocate(64);  // keeps a and b off the top
  });
  ASSERT_EQ(b, a + (64 << 10) + 64);
  s.transact([&](ControlTxn& txn) { txn.free(a); });  // "yesterday's" table, stamped at commit
  uint64_t again = 0;
  s.transact([&](ControlTxn& txn) {
    txn.free(b);                     // "today's" retirement, adjacent to a
    again = txn.allocate(64 << 10);  // the spare
  });
  EXPECT_EQ(again, a) << "a reusable quarantined extent was merged into a pending free and not reused";
  EXPECT_EQ(s.stats().quarantined_bytes, (64u << 10) + 64);
  EXPECT_TRUE(s.check().consistent());
}

// Reader announcements (docs/CONCURRENCY.md): an extent freed while a call of a live
// attachment is in flight is not reused until that call (and every call nested in it or
// joining it from another thread) has ended; an attachment with no call in flight holds
// nothing back, even one that never passed a quiescent point.
TEST(Segment, CallsInFlightHoldReclamationBackAndIdleOnesDoNot) {
  SegmentGuard g(unique_name("ann"));
  Segment s = Segment::create(g.name, small_options());
  Segment idle = Segment::open(g.name);  // attached, never calls, never quiesces
  Segment reader = Segment::open(g.name);
  auto reused = [&](const RegionInfo& r) {
    uint64_t off = 0;
    s.transact([&](ControlTxn& txn) {
      off = txn.allocate(r.size);
      txn.free(off);  // back to quarantine: the next round starts from the same state
    });
    return off == r.offset;
  };
  auto* reg = reinterpret_cast<internal::RegistrySlot*>(
      reader.base() + reinterpret_cast<const internal::Header*>(reader.base())->registry_offset);
  const uint32_t rslot = static_cast<uint32_t>(reader.owner_token() & 0xffff);
  {
    RegionInfo r = s.create_region("a", Kind::kBlob, 4096, {});
    ASSERT_TRUE(s.drop("a"));
    EXPECT_TRUE(reused(r)) << "an idle attachment held reclamation back";
  }
  {
    RegionInfo r = s.create_region("b", Kind::kBlob, 4096, {});
    std::optional<ReadGuard> outer(std::in_place, reader);
    EXPECT_EQ(__atomic_load_n(&reg[rslot].calls, __ATOMIC_SEQ_CST) & internal::kCallCountMask, 1u);
    {
      const ReadGuard nested(reader);  // same thread: joins without a shared write
      EXPECT_EQ(__atomic_load_n(&reg[rslot].calls, __ATOMIC_SEQ_CST) & internal::kCallCountMask, 1u);
      ASSERT_TRUE(s.drop("b"));
      EXPECT_FALSE(reused(r)) << "reused under a reader inside a call";
    }
    EXPECT_FALSE(reused(r)) << "reused while the outer call was still in flight";
    // Another thread joins and leaves while the outer call is in flight: the older
    // announcement stays (a joiner never raises it).
    uint64_t joined = 0;
    std::thread([&] {
      const ReadGuard joiner(reader);
      joined = __atomic_load_n(&reg[rslot].calls, __ATOMIC_SEQ_CST);
    }).join();
    EXPECT_EQ(joined & internal::kCallCountMask, 2u) << "another thread's call counts";
    EXPECT_FALSE(reused(r)) << "a joining thread's exit released the outer call's hold";
    outer.reset();
    EXPECT_EQ(__atomic_load_n(&reg[rslot].calls, __ATOMIC_SEQ_CST) & internal::kCallCountMask, 0u);
    EXPECT_TRUE(reused(r)) << "not reused once no call was in flight";
  }
  {
    // A call that began after the commit does not hold the extent back.
    RegionInfo r = s.create_region("c", Kind::kBlob, 4096, {});
    ASSERT_TRUE(s.drop("c"));
    const ReadGuard later(reader);
    EXPECT_TRUE(reused(r)) << "a call that began after the free held it back";
  }
  EXPECT_TRUE(s.check().consistent());
}

// Huge pages (docs/huge-pages.md): the option advises this process's mapping;
// huge_page_stats() finds the mapping in /proc/self/smaps and says how much is
// on huge pages. Where the kernel's shmem_enabled is never/deny (this CI
// machine), nothing can be huge and the note says what to change.
TEST(Segment, HugePageStatsFindTheMappingAndExplainAZero) {
  SegmentGuard g(unique_name("huge"));
  CreateOptions o = small_options(8ull << 20);
  o.huge_pages = true;
  Segment seg = Segment::create(g.name, o);
  RegionInfo r = seg.create_region("blob", Kind::kBlob, 4ull << 20, {});
  std::memset(seg.base() + r.offset, 1, r.size);  // touch 4 MiB
  HugePageStats st = seg.huge_page_stats();
  EXPECT_TRUE(st.requested);
  EXPECT_TRUE(st.advised || st.advise_errno != 0) << "madvise was called";
  ASSERT_TRUE(st.smaps_read) << "the segment's mapping is in /proc/self/smaps";
  EXPECT_GE(st.resident_bytes, 4ull << 20);
  EXPECT_LE(st.huge_bytes, st.resident_bytes);
  if (st.shmem_enabled == "never" || st.shmem_enabled == "deny") {
    EXPECT_EQ(st.huge_bytes, 0u);
    EXPECT_NE(st.note.find("shmem_enabled"), std::string::npos) << st.note;
  }
  Segment plain = Segment::open(g.name);
  HugePageStats p = plain.huge_page_stats();
  EXPECT_FALSE(p.requested);
  EXPECT_FALSE(p.advised);
  EXPECT_TRUE(p.note.empty());
  EXPECT_TRUE(p.smaps_read) << "a second mapping of the same segment is found by its own address";
}
