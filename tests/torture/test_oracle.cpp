// tests/torture/test_oracle.cpp: the torture's oracle and verifiers must be
// able to fail. A replay that accepted everything, or a verifier that never
// probed, would make shmfilter_torture pass vacuously; these tests feed known
// histories and damage a segment behind the oracle's back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.h"
#include "torture.h"

#if __has_include("shmfilter/exact_set.hpp")
#include "shmfilter/exact_set.hpp"
#endif
#if __has_include("shmfilter/roaring_set.hpp")
#include "shmfilter/roaring_set.hpp"
#endif

namespace torture {

// The program's definitions used by targets.cpp (tests/torture/main.cpp is not linked here).
uint64_t now_ns() noexcept { return 0; }
Outcome Worker::logged(Target, Op, uint64_t, uint32_t, const std::function<Outcome()>& fn) { return fn(); }

namespace {

Record rec(uint64_t seq, Target t, Op op, uint64_t key, uint8_t phase, Outcome o = Outcome::kNone) {
  Record r;
  r.seq = seq;
  r.key = key;
  r.phase = phase;
  r.target = static_cast<uint8_t>(t);
  r.op = static_cast<uint8_t>(op);
  r.outcome = static_cast<uint8_t>(o);
  return r;
}

// Feeds an acknowledged operation (pending + ack).
void acked(Replayer& rp, uint64_t seq, Target t, Op op, uint64_t key, Outcome o) {
  rp.feed(rec(seq, t, op, key, kPending));
  rp.feed(rec(seq, t, op, key, kAck, o));
}

TEST(TortureOracle, UnacknowledgedOperationMakesTheKeyUnknownUntilTheNextAck) {
  WorkerModel m;
  Anomalies a;
  Replayer rp(m, a, 0);
  acked(rp, 1, Target::kExactSet, Op::kAdd, 7, Outcome::kChanged);
  EXPECT_EQ(m.state(Target::kExactSet, 7), kPresent);
  rp.feed(rec(2, Target::kExactSet, Op::kErase, 7, kPending));  // killed inside the erase
  acked(rp, 3, Target::kExactSet, Op::kContains, 8, Outcome::kNo);
  EXPECT_EQ(m.state(Target::kExactSet, 7), kUnknown);
  acked(rp, 4, Target::kExactSet, Op::kAdd, 7, Outcome::kUnchanged);  // either answer is fine for unknown
  EXPECT_EQ(m.state(Target::kExactSet, 7), kPresent);
  rp.finish();
  EXPECT_EQ(a.total(), 0u);
  EXPECT_EQ(m.unacked, 1u);
  EXPECT_EQ(m.next_seq, 5u);
}

TEST(TortureOracle, OutcomesImpossibleUnderTheOracleAreCounted) {
  WorkerModel m;
  Anomalies a;
  Replayer rp(m, a, 3);
  acked(rp, 1, Target::kExactSet, Op::kAdd, 1, Outcome::kChanged);
  acked(rp, 2, Target::kExactSet, Op::kErase, 1, Outcome::kUnchanged);  // erase found nothing: LOST
  EXPECT_EQ(a.lost, 1u);
  acked(rp, 3, Target::kRoaring, Op::kErase, 2, Outcome::kDone);
  acked(rp, 4, Target::kRoaring, Op::kContains, 2, Outcome::kYes);  // erased key read back
  EXPECT_EQ(a.resurrected, 1u);
  acked(rp, 5, Target::kBloom, Op::kAdd, 0, Outcome::kChanged);
  acked(rp, 6, Target::kBloom, Op::kContains, 0, Outcome::kNo);  // false negative
  EXPECT_EQ(a.lost, 2u);
  acked(rp, 7, Target::kCuckoo, Op::kAdd, 5, Outcome::kChanged);
  acked(rp, 8, Target::kCuckoo, Op::kAdd, 5, Outcome::kChanged);  // insert_unique stored twice
  EXPECT_EQ(a.inconsistent, 1u);
  rp.feed(rec(20, Target::kHll, Op::kAdd, 0, kAck, Outcome::kChanged));  // ack without pending
  EXPECT_EQ(a.inconsistent, 2u);
  EXPECT_FALSE(a.samples.empty());
}

TEST(TortureOracle, CuckooExistsForAnAbsentKeyIsAFingerprintMatchNotStored) {
  WorkerModel m;
  Anomalies a;
  Replayer rp(m, a, 0);
  acked(rp, 1, Target::kCuckoo, Op::kAdd, 9, Outcome::kUnchanged);
  EXPECT_EQ(m.state(Target::kCuckoo, 9), kUnknown);  // never erased by the workload, never checked
  EXPECT_EQ(m.fp_matches, 1u);
  EXPECT_EQ(a.total(), 0u);
}

TEST(TortureOracle, FilesDropATornTailAndSurviveACheckpoint) {
  char dir[] = "/tmp/shmf-oracle-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  {
    Oracle o(dir, 2);
    Anomalies a;
    o.load(a, true);
    o.open_for_append(1);
    o.append(rec(1, Target::kExactSet, Op::kAdd, 4, kPending));
    o.append(rec(1, Target::kExactSet, Op::kAdd, 4, kAck, Outcome::kChanged));
    o.append(rec(2, Target::kExactSet, Op::kErase, 4, kPending));
  }
  // Half a record at the end, as a SIGKILL inside write() could leave.
  FILE* f = std::fopen((std::string(dir) + "/w2.log").c_str(), "ab");
  ASSERT_NE(f, nullptr);
  std::fwrite("torn-record", 1, 11, f);
  std::fclose(f);
  Oracle o(dir, 2);
  Anomalies a;
  WorkerModel m = o.load(a, true);
  EXPECT_EQ(a.total(), 0u) << (a.samples.empty() ? "" : a.samples[0]);
  EXPECT_EQ(m.state(Target::kExactSet, 4), kUnknown);  // the erase never acknowledged
  o.checkpoint(m);
  WorkerModel again = o.load(a, true);
  EXPECT_EQ(again.state(Target::kExactSet, 4), kUnknown);
  EXPECT_EQ(again.acked, 1u);
  EXPECT_EQ(again.next_seq, 3u);
  o.remove_files();
  rmdir(dir);
}

#if __has_include("shmfilter/exact_set.hpp") && __has_include("shmfilter/roaring_set.hpp")
// The verifiers probe the segment: a key removed behind the oracle's back is
// reported lost, a key added behind its back is reported as an undone erase.
TEST(TortureVerifier, DamageBehindTheOraclesBackIsFound) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("torture-verify"));
  Config cfg;
  cfg.segment = g.name;
  cfg.workers = 1;
  cfg.keys = 64;
  shmfilter::Segment seg = shmfilter::Segment::create(g.name);
  for (const auto& d : targets()) d.create(seg, cfg);

  std::vector<WorkerModel> models(2);
  shmfilter::ExactSet es = shmfilter::ExactSet::open(seg, "t.exact");
  shmfilter::RoaringSet rs = shmfilter::RoaringSet::open(seg, "t.roaring");
  for (uint64_t i = 0; i < 10; ++i) {
    ASSERT_EQ(es.insert(key64(Target::kExactSet, 0, i)), shmfilter::InsertResult::kInserted);
    ASSERT_EQ(rs.add(static_cast<uint32_t>(i)), shmfilter::RoaringStatus::kOk);  // worker 0: value = idx
    models[0].set(Target::kExactSet, i, kPresent);
    models[0].set(Target::kRoaring, i, kPresent);
  }
  models[0].set(Target::kExactSet, 10, kAbsent);
  auto verify = [&] {
    Verdict v;
    for (const auto& d : targets()) d.verify(seg, cfg, models, v);
    for (const auto& s : v.size_issues) v.anomalies.note(v.anomalies.inconsistent, s);
    return v;
  };
  Verdict clean = verify();
  EXPECT_EQ(clean.anomalies.total(), 0u) << (clean.anomalies.samples.empty() ? "" : clean.anomalies.samples[0]);
  EXPECT_GE(clean.keys_verified, 21u);

  ASSERT_TRUE(es.erase(key64(Target::kExactSet, 0, 3)));   // lost
  ASSERT_EQ(rs.remove(5u), shmfilter::RoaringStatus::kOk);  // lost
  ASSERT_EQ(es.insert(key64(Target::kExactSet, 0, 10)), shmfilter::InsertResult::kInserted);  // erase undone
  Verdict damaged = verify();
  EXPECT_EQ(damaged.anomalies.lost, 2u);
  EXPECT_EQ(damaged.anomalies.resurrected, 1u);
  EXPECT_GE(damaged.anomalies.inconsistent, 1u);  // the sizes no longer match the oracle's range
}
#endif

}  // namespace
}  // namespace torture
