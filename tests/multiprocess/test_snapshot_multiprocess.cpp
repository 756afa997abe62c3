// tests/multiprocess/test_snapshot_multiprocess.cpp: a save taken while forked
// writers keep inserting and erasing restores with every operation that was
// acknowledged before the save began. The oracle lives outside the segment
// (an anonymous shared mapping): writer w stores j after its op j returned,
// so a value read before save() is a watermark of acknowledged ops.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
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
using shmf_test::fork_child;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

constexpr int kWriters = 3;
constexpr uint64_t kKeySpace = 1'000'000;  // writer w's keys: w * kKeySpace + j

uint64_t key(int w, uint64_t j) { return static_cast<uint64_t>(w) * kKeySpace + j; }
// Op j inserts key j everywhere; when j % 4 == 3 it then erases key j - 3 (set, roaring, cuckoo).
// (Never key 0, which no op inserts: erasing a never-inserted key may remove
// another key's cuckoo fingerprint, docs/cuckoo.md.)
bool erased_by(uint64_t j) { return j % 4 == 3 && j >= 7; }

}  // namespace

TEST(SnapshotMultiProcess, SaveUnderConcurrentWritersKeepsEveryAcknowledgedOperation) {
  SegmentGuard src(unique_name("snapmp-src")), dst(unique_name("snapmp-dst"));
  const std::string file = "/tmp/" + unique_name("snapmp") + ".save";
  {
    Segment seg = Segment::create(src.name, shmf_test::small_options(64ull << 20, 1ull << 30, 64));
    BloomOptions bo;
    bo.capacity = 50'000;
    bo.growth = 2;  // layers are added while the save may run
    bo.seed = 5;
    Bloom::create(seg, "bloom", bo);
    ExactSetOptions eo;
    eo.capacity = 3 * kKeySpace / 2;
    ExactSet::create(seg, "set", eo);
    Hll::create(seg, "hll");
    RoaringOptions ro;
    ro.delta_capacity = 1024;  // compactions run during the save
    RoaringSet::create(seg, "roaring", ro);
    CuckooOptions co;
    co.capacity = 20'000;
    co.expansion = 2;  // sub-filters are added while the save may run
    co.max_subfilters = 12;
    Cuckoo::create(seg, "cuckoo", co);
  }
  auto* acked = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(acked, MAP_FAILED);
  for (int w = 0; w < kWriters; ++w) new (&acked[w]) std::atomic<uint64_t>(0);

  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pids.push_back(fork_child([&, w] {
      Segment seg = Segment::open(src.name);
      Bloom b = Bloom::open(seg, "bloom");
      ExactSet s = ExactSet::open(seg, "set");
      Hll h = Hll::open(seg, "hll");
      RoaringSet r = RoaringSet::open(seg, "roaring");
      Cuckoo c = Cuckoo::open(seg, "cuckoo");
      for (uint64_t j = 1; j < kKeySpace; ++j) {
        const uint64_t k = key(w, j);
        b.add(k);
        if (s.insert(k) == InsertResult::kFull) return 3;
        h.add(k);
        if (r.add(static_cast<uint32_t>(k)) != RoaringStatus::kOk) return 4;
        if (c.insert(k) != CuckooStatus::kInserted) return 5;
        if (erased_by(j)) {
          s.erase(key(w, j - 3));
          r.remove(static_cast<uint32_t>(key(w, j - 3)));
          c.erase(key(w, j - 3));
        }
        acked[w].store(j, std::memory_order_release);  // release: op j returned before this store
      }
      return 0;
    }));
  }
  // Wait for progress (not time): every writer past 20,000 ops.
  for (int w = 0; w < kWriters; ++w)
    while (acked[w].load(std::memory_order_acquire) < 20'000) usleep(1000);
  uint64_t mark[kWriters];
  for (int w = 0; w < kWriters; ++w) mark[w] = acked[w].load(std::memory_order_acquire);
  SnapshotInfo info;
  {
    Segment seg = Segment::open(src.name);
    info = save(seg, file);
  }
  uint64_t after[kWriters];
  for (int w = 0; w < kWriters; ++w) after[w] = acked[w].load(std::memory_order_acquire);
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) wait_status(p);
  ASSERT_EQ(info.entries.size(), 5u);
  bool concurrent = false;
  for (int w = 0; w < kWriters; ++w) concurrent = concurrent || after[w] > mark[w];
  EXPECT_TRUE(concurrent) << "the writers made no progress during the save: the test proved nothing";

  restore(file, dst.name);
  std::remove(file.c_str());
  Segment out = Segment::open(dst.name);
  EXPECT_TRUE(out.check().consistent());
  Bloom b = Bloom::open(out, "bloom");
  ExactSet s = ExactSet::open(out, "set");
  RoaringSet r = RoaringSet::open(out, "roaring");
  Cuckoo c = Cuckoo::open(out, "cuckoo");
  // The HLL's registers only grow: the restored registers dominate those of the acknowledged keys alone.
  SegmentGuard scratch(unique_name("snapmp-hll"));
  Segment ss = Segment::create(scratch.name, shmf_test::small_options());
  Hll ref = Hll::create(ss, "ref");
  uint64_t missing = 0, resurrected = 0;
  for (int w = 0; w < kWriters; ++w) {
    for (uint64_t j = 1; j <= mark[w]; ++j) {
      const uint64_t k = key(w, j);
      ref.add(k);
      const bool erased_before = j % 4 == 0 && erased_by(j + 3) && j + 3 <= mark[w];  // its erase (op j+3) was acknowledged
      missing += !b.contains(k);
      if (j % 4 != 0) missing += !c.contains(k);
      if (erased_before) {
        resurrected += s.contains(k) + r.contains(static_cast<uint32_t>(k));
      } else if (j % 4 != 0) {  // never erased
        missing += !s.contains(k) + !r.contains(static_cast<uint32_t>(k));
      }
    }
  }
  EXPECT_EQ(missing, 0u);
  // Cuckoo: the restored item count is the source's count at some instant after the
  // watermark: at least the acknowledged inserts minus the acknowledged erases.
  uint64_t least = 0;
  for (int w = 0; w < kWriters; ++w) least += mark[w] - (mark[w] >= 7 ? (mark[w] - 7) / 4 + 1 : 0);
  EXPECT_GE(c.size(), least);
  EXPECT_EQ(resurrected, 0u);
  std::vector<uint8_t> got = Hll::open(out, "hll").registers(), want = ref.registers();
  uint64_t lower = 0;
  for (size_t i = 0; i < want.size(); ++i) lower += got[i] < want[i];
  EXPECT_EQ(lower, 0u);
  munmap(acked, 4096);
}
