// tests/unit/test_c_api_window.cpp: the Window through the C API (shmfilter.h):
// create/open/close/drop, bad options (-SHMF_EINVAL, segment unchanged), the
// injected clock, mark / seen / mark_if_unseen over buckets, forget on the
// deletable variant and -SHMF_EINVAL on the insert-only one, batches, per-space
// counts, maintain, stats, and a dropped handle answering -SHMF_EDROPPED; the status
// vocabulary: no room for a bucket table is -SHMF_ENOSPACE, and handles inherited across
// fork() (window, cuckoo, exact set, roaring) answer -SHMF_EFORKED.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shmfilter/shmfilter.h"
#include "test_util.h"

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC

struct CSeg {
  shmf_test::SegmentGuard guard{shmf_test::unique_name("capiwin")};
  shmf_segment* seg = nullptr;
  CSeg() {
    shmf_segment_options o;
    shmf_segment_options_init(&o);
    o.size = 8ull << 20;
    o.max_size = 1ull << 30;
    EXPECT_EQ(shmf_segment_create(guard.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  }
  ~CSeg() { shmf_segment_close(seg); }
};

}  // namespace

TEST(CApiWindow, BadOptionsAreInvalidAndLeaveTheSegmentUnchanged) {
  CSeg s;
  shmf_window_options o;
  shmf_window_options_init(&o);
  shmf_window* w = nullptr;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);  // expected_per_bucket 0
  EXPECT_NE(std::string(shmf_last_error_message()).find("expected_per_bucket"), std::string::npos) << shmf_last_error_message();
  o.expected_per_bucket = 1000;
  o.bucket_seconds = 0;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);
  o.bucket_seconds = 86400;
  o.retention = 65;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);
  o.retention = 7;
  o.error = 1.5;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);
  o.error = 0.01;
  o.variant = 9;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(shmf_window_open(s.seg, "w", &w), -SHMF_ENOTFOUND);
  EXPECT_EQ(shmf_window_drop(s.seg, "w"), 0);
}

TEST(CApiWindow, MarkSeenForgetCountsAndStats) {
  CSeg s;
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.variant = SHMF_WINDOW_CUCKOO;
  o.expected_per_bucket = 10000;
  o.seed = 3;
  shmf_window* w = nullptr;
  ASSERT_EQ(shmf_window_create(s.seg, "w", &o, &w), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_window_set_now(w, kT0), 0);
  ASSERT_EQ(shmf_window_maintain(w), 0) << shmf_last_error_message();
  EXPECT_EQ(shmf_window_mark(w, 7, "dev-1", 5), 1);
  EXPECT_EQ(shmf_window_mark(w, 7, "dev-1", 5), 0);
  EXPECT_EQ(shmf_window_seen(w, 7, "dev-1", 5, 1), 1);
  EXPECT_EQ(shmf_window_seen(w, 8, "dev-1", 5, 1), 0);
  EXPECT_EQ(shmf_window_seen(w, 7, "dev-1", 5, 0), -SHMF_EINVAL);
  EXPECT_EQ(shmf_window_seen(w, 7, "dev-1", 5, 8), -SHMF_EINVAL);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 7, i, 7), 1);
  ASSERT_EQ(shmf_window_set_now(w, kT0 + kDay), 0);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 7, i, 7), 0) << i;
    EXPECT_EQ(shmf_window_seen_u64(w, 7, i, 1), 0) << i;
  }
  uint64_t n = 0;
  ASSERT_EQ(shmf_window_new_count(w, 7, 1, &n), 0);
  EXPECT_EQ(n, 101u);
  ASSERT_EQ(shmf_window_new_count(w, 7, 0, &n), 0);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(shmf_window_forget_u64(w, 7, 5), 1);
  EXPECT_EQ(shmf_window_forget_u64(w, 7, 5), 0);
  EXPECT_EQ(shmf_window_seen_u64(w, 7, 5, 7), 0);
  EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 7, 5, 7), 1);
  std::vector<uint64_t> sp(300, 9), it(300);
  for (size_t i = 0; i < it.size(); ++i) it[i] = 1000 + i;
  std::vector<uint8_t> out(300);
  EXPECT_EQ(shmf_window_mark_if_unseen_many_u64(w, sp.data(), it.data(), 300, 7, out.data()), 300);
  EXPECT_EQ(shmf_window_seen_many_u64(w, sp.data(), it.data(), 300, 1, out.data()), 300);
  EXPECT_EQ(shmf_window_seen_many_u64(w, sp.data(), it.data(), 300, 1, nullptr), 300);
  shmf_window_stats st;
  ASSERT_EQ(shmf_window_stats_get(w, &st), 0);
  EXPECT_EQ(st.variant, SHMF_WINDOW_CUCKOO);
  EXPECT_EQ(st.retention, 7u);
  EXPECT_EQ(st.today_distinct, 301u);
  EXPECT_EQ(st.today_capacity, 10000u);
  EXPECT_GT(st.memory_bytes, 0u);
  EXPECT_LE(st.fp_bound_1, st.one_bucket_error + 1e-12);
  EXPECT_GE(st.rotations, 2u);
  EXPECT_EQ(st.forget_ambiguous, 0u) << "forget(7, 5) erased the copy mark_if_unseen(w = 7) made: its own";
  // Another handle of the same window sees the same pairs.
  shmf_window* w2 = nullptr;
  ASSERT_EQ(shmf_window_open(s.seg, "w", &w2), 0);
  ASSERT_EQ(shmf_window_set_now(w2, kT0 + kDay), 0);
  EXPECT_EQ(shmf_window_seen_u64(w2, 9, 1000, 1), 1);
  // Plain marks on two days: forget erases the newer copy too, where mark() skipped the older
  // days, and counts it as ambiguous (docs/window.md, forget).
  EXPECT_EQ(shmf_window_mark_u64(w, 7, 4242), 1);
  ASSERT_EQ(shmf_window_set_now(w, kT0 + 2 * kDay), 0);
  EXPECT_EQ(shmf_window_mark_u64(w, 7, 4242), 1);
  EXPECT_EQ(shmf_window_forget_u64(w, 7, 4242), 1);
  EXPECT_EQ(shmf_window_seen_u64(w, 7, 4242, 7), 0);
  ASSERT_EQ(shmf_window_stats_get(w, &st), 0);
  EXPECT_EQ(st.forget_ambiguous, 1u);
  EXPECT_EQ(shmf_window_drop(s.seg, "w"), 1);
  EXPECT_EQ(shmf_window_mark_u64(w2, 9, 1), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_window_seen_u64(w2, 9, 1, 1), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_window_new_count(w2, 9, 0, &n), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_window_close(w2), 0);
  EXPECT_EQ(shmf_window_close(w), 0);
}

TEST(CApiWindow, ForgetOnTheInsertOnlyVariantIsInvalid) {
  CSeg s;
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.expected_per_bucket = 1000;
  shmf_window* w = nullptr;
  ASSERT_EQ(shmf_window_create(s.seg, "w", &o, &w), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_window_set_now(w, kT0), 0);
  EXPECT_EQ(shmf_window_mark_u64(w, 1, 1), 1);
  EXPECT_EQ(shmf_window_forget_u64(w, 1, 1), -SHMF_EINVAL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("SHMF_WINDOW_CUCKOO"), std::string::npos);
  EXPECT_EQ(shmf_window_seen_u64(w, 1, 1, 1), 1);
  EXPECT_EQ(shmf_window_set_now(w, INT64_MIN), 0);  // back to the system clock
  EXPECT_EQ(shmf_window_close(w), 0);
}

// The status vocabulary (issue 21): each failure reaches C as its own code.
TEST(CApiWindow, NoRoomForABucketTableIsENOSPACE) {
  shmf_test::SegmentGuard guard{shmf_test::unique_name("capiwns")};
  shmf_segment_options so;
  shmf_segment_options_init(&so);
  so.size = 8ull << 20;
  so.max_size = 8ull << 20;
  shmf_segment* seg = nullptr;
  ASSERT_EQ(shmf_segment_create(guard.name.c_str(), &so, &seg), 0) << shmf_last_error_message();
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.expected_per_bucket = 1000000;
  o.seed = 3;
  shmf_window* w = nullptr;
  ASSERT_EQ(shmf_window_create(seg, "w", &o, &w), 0) << shmf_last_error_message();
  int rc = 1;
  for (int d = 0; d < 7 && rc == 1; ++d) {
    ASSERT_EQ(shmf_window_set_now(w, kT0 + d * kDay), 0);
    rc = shmf_window_mark_u64(w, 1, 100 + static_cast<uint64_t>(d));
  }
  EXPECT_EQ(rc, -SHMF_ENOSPACE) << shmf_last_error_message();
  EXPECT_NE(std::string(shmf_last_error_message()).find("out of space"), std::string::npos);
  EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 1, 999, 1), -SHMF_ENOSPACE);
  EXPECT_EQ(shmf_window_close(w), 0);
  EXPECT_EQ(shmf_segment_close(seg), 0);
}

TEST(CApiWindow, InheritedHandlesAnswerEFORKED) {
  CSeg s;
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.variant = SHMF_WINDOW_CUCKOO;
  o.expected_per_bucket = 1000;
  o.seed = 3;
  shmf_window* w = nullptr;
  ASSERT_EQ(shmf_window_create(s.seg, "w", &o, &w), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_window_set_now(w, kT0), 0);
  shmf_cuckoo_options co;
  shmf_cuckoo_options_init(&co);
  co.capacity = 1000;
  co.fingerprint_bits = 16;
  shmf_cuckoo* c = nullptr;
  ASSERT_EQ(shmf_cuckoo_create(s.seg, "c", &co, &c), 0) << shmf_last_error_message();
  shmf_set_options xo;
  shmf_set_options_init(&xo);
  xo.capacity = 1000;
  shmf_set* x = nullptr;
  ASSERT_EQ(shmf_set_create(s.seg, "x", &xo, &x), 0) << shmf_last_error_message();
  shmf_roaring* r = nullptr;
  ASSERT_EQ(shmf_roaring_create(s.seg, "r", nullptr, &r), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_window_mark_u64(w, 7, 1), 1);
  pid_t child = shmf_test::fork_child([&] {
    if (shmf_window_mark_u64(w, 7, 2) != -SHMF_EFORKED) return 1;
    if (shmf_window_mark_if_unseen_u64(w, 7, 3, 7) != -SHMF_EFORKED) return 2;
    if (shmf_window_forget_u64(w, 7, 1) != -SHMF_EFORKED) return 3;
    if (shmf_window_seen_u64(w, 7, 1, 1) != 1) return 4;  // reads need no token
    if (shmf_cuckoo_add_u64(c, 5) != -SHMF_EFORKED) return 5;
    if (shmf_set_insert_unique_u64(x, 5) != -SHMF_EFORKED) return 6;
    if (shmf_roaring_add(r, 5) != -SHMF_EFORKED) return 8;
    if (std::string(shmf_strerror(SHMF_EFORKED)).find("fork") == std::string::npos) return 7;
    return 0;
  });
  const int status = shmf_test::wait_status(child);
  EXPECT_TRUE(shmf_test::exited_ok(status)) << "child exit " << WEXITSTATUS(status);
  EXPECT_EQ(shmf_window_seen_u64(w, 7, 2, 1), 0);
  EXPECT_EQ(shmf_roaring_contains(r, 5), 0);
  EXPECT_EQ(shmf_roaring_close(r), 0);
  EXPECT_EQ(shmf_window_new_count(w, 7, 7, nullptr), -SHMF_EINVAL);  // out == NULL
  uint64_t n = 0;
  EXPECT_EQ(shmf_window_new_count(w, 7, 7, &n), -SHMF_EINVAL);     // age outside [0, retention)
  EXPECT_EQ(shmf_window_new_count(w, 7, 6, &n), 0);
  EXPECT_EQ(shmf_set_close(x), 0);
  EXPECT_EQ(shmf_cuckoo_close(c), 0);
  EXPECT_EQ(shmf_window_close(w), 0);
}

// ---- the stamped variant and frequency caps (issue 24) ----------------------------------

namespace {

shmf_window* stamped_window(CSeg& s, const char* name, uint32_t retention = 7) {
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.variant = SHMF_WINDOW_STAMPED;
  o.expected_per_bucket = 10000;
  o.retention = retention;
  o.seed = 5;
  shmf_window* w = nullptr;
  EXPECT_EQ(shmf_window_create(s.seg, name, &o, &w), 0) << shmf_last_error_message();
  if (w != nullptr) {
    EXPECT_EQ(shmf_window_set_now(w, kT0), 0);
  }
  return w;
}

}  // namespace

TEST(CApiWindowStamped, CreatesMarksForgetsAndReportsItsTable) {
  CSeg s;
  shmf_window_options o;
  shmf_window_options_init(&o);
  o.variant = SHMF_WINDOW_STAMPED;
  o.expected_per_bucket = 10000;
  o.retention = 13;  // one table's 4-bit stamps: retention 1..12
  shmf_window* w = nullptr;
  EXPECT_EQ(shmf_window_create(s.seg, "w", &o, &w), -SHMF_EINVAL);
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(shmf_window_open(s.seg, "w", &w), -SHMF_ENOTFOUND);
  w = stamped_window(s, "w");
  ASSERT_NE(w, nullptr);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 7, i, 7), 1);
  ASSERT_EQ(shmf_window_set_now(w, kT0 + 3 * kDay), 0);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(shmf_window_seen_u64(w, 7, i, 4), 1) << i;
    EXPECT_EQ(shmf_window_seen_u64(w, 7, i, 3), 0) << i;  // marked 3 buckets ago: outside the last 3
    EXPECT_EQ(shmf_window_mark_if_unseen_u64(w, 7, i, 7), 0) << i;
  }
  EXPECT_EQ(shmf_window_mark(w, 7, "dev-1", 5), 1);
  EXPECT_EQ(shmf_window_forget(w, 7, "dev-1", 5), 1);
  EXPECT_EQ(shmf_window_forget(w, 7, "dev-1", 5), 0);
  EXPECT_EQ(shmf_window_seen(w, 7, "dev-1", 5, 7), 0);
  shmf_window_stats st;
  ASSERT_EQ(shmf_window_stats_get(w, &st), 0);
  EXPECT_EQ(st.variant, SHMF_WINDOW_STAMPED);
  EXPECT_EQ(st.retention, 7u);
  EXPECT_GE(st.lanes, 100u) << "one lane per pair";
  EXPECT_LE(st.lanes, 101u) << "a pair marked on two days holds one lane; the forgotten pair's lane is cleared";
  EXPECT_GT(st.shared_bytes, 0u);
  EXPECT_LT(st.shared_bytes, st.memory_bytes);
  EXPECT_GE(st.rotations, 1u);
  // Another handle reads the same one table.
  shmf_window* w2 = nullptr;
  ASSERT_EQ(shmf_window_open(s.seg, "w", &w2), 0);
  ASSERT_EQ(shmf_window_set_now(w2, kT0 + 3 * kDay), 0);
  EXPECT_EQ(shmf_window_seen_u64(w2, 7, 42, 7), 1);
  shmf_window_stats st2;
  ASSERT_EQ(shmf_window_stats_get(w2, &st2), 0);
  EXPECT_EQ(st2.lanes, st.lanes);
  EXPECT_EQ(st2.shared_bytes, st.shared_bytes);
  EXPECT_EQ(shmf_window_close(w2), 0);
  // The other variants report no shared table.
  shmf_window_options_init(&o);
  o.variant = SHMF_WINDOW_CUCKOO;
  o.expected_per_bucket = 1000;
  shmf_window* c = nullptr;
  ASSERT_EQ(shmf_window_create(s.seg, "c", &o, &c), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_window_stats_get(c, &st), 0);
  EXPECT_EQ(st.variant, SHMF_WINDOW_CUCKOO);
  EXPECT_EQ(st.lanes, 0u);
  EXPECT_EQ(st.swept_bucket, 0);
  EXPECT_EQ(st.shared_bytes, 0u);
  EXPECT_EQ(shmf_window_close(c), 0);
  EXPECT_EQ(shmf_window_close(w), 0);
}

TEST(CApiWindowStamped, MarkIfUnderAllowsCapMarksInASlidingWindow) {
  CSeg s;
  shmf_window* w = stamped_window(s, "w");
  ASSERT_NE(w, nullptr);
  // 3 a week (w = 7): the 4th call and later are capped, nothing stored by them.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-a", 5, 3, 7), 1) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-a", 5, 3, 7), 0) << i;
  EXPECT_EQ(shmf_window_seen(w, 42, "dev-a", 5, 1), 1) << "an allowed call marks the pair";
  // Pairs are counted apart: another plan, another device, and the uint64 item 5 (not "dev-a").
  EXPECT_EQ(shmf_window_mark_if_under(w, 43, "dev-a", 5, 3, 7), 1);
  EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-b", 5, 3, 7), 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(shmf_window_mark_if_under_u64(w, 42, 5, 3, 7), 1) << i;
  EXPECT_EQ(shmf_window_mark_if_under_u64(w, 42, 5, 3, 7), 0);
  // Six days later the marks are still in the last 7 buckets: capped.
  ASSERT_EQ(shmf_window_set_now(w, kT0 + 6 * kDay), 0);
  EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-a", 5, 3, 7), 0);
  // Seven days later they left it: 3 more.
  ASSERT_EQ(shmf_window_set_now(w, kT0 + 7 * kDay), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-a", 5, 3, 7), 1) << i;
  EXPECT_EQ(shmf_window_mark_if_under(w, 42, "dev-a", 5, 3, 7), 0);
  // A daily cap (w = 1) of 2 on another space: 2 a day, slid day by day.
  for (int d = 0; d < 3; ++d) {
    ASSERT_EQ(shmf_window_set_now(w, kT0 + (8 + d) * kDay), 0);
    EXPECT_EQ(shmf_window_mark_if_under_u64(w, 9, 77, 2, 1), 1) << d;
    EXPECT_EQ(shmf_window_mark_if_under_u64(w, 9, 77, 2, 1), 1) << d;
    EXPECT_EQ(shmf_window_mark_if_under_u64(w, 9, 77, 2, 1), 0) << d;
  }
  // cap = 15, the most: exactly 15.
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += shmf_window_mark_if_under_u64(w, 10, 1, 15, 7);
  EXPECT_EQ(allowed, 15);
  EXPECT_EQ(shmf_window_close(w), 0);
}

TEST(CApiWindowStamped, MarkIfUnderRefusesBadArgumentsAndOtherVariants) {
  CSeg s;
  shmf_window* w = stamped_window(s, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(shmf_window_mark_if_under_u64(w, 1, 1, 0, 7), -SHMF_EINVAL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("cap 0 is outside [1, 15]"), std::string::npos)
      << shmf_last_error_message();
  EXPECT_EQ(shmf_window_mark_if_under(w, 1, "x", 1, 16, 7), -SHMF_EINVAL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("cap 16"), std::string::npos) << shmf_last_error_message();
  EXPECT_EQ(shmf_window_mark_if_under_u64(w, 1, 1, 3, 0), -SHMF_EINVAL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("window 0"), std::string::npos) << shmf_last_error_message();
  EXPECT_EQ(shmf_window_mark_if_under_u64(w, 1, 1, 3, 8), -SHMF_EINVAL);
  EXPECT_EQ(shmf_window_mark_if_under(w, 1, nullptr, 1, 3, 7), -SHMF_EINVAL);  // NULL item with a length
  EXPECT_EQ(shmf_window_mark_if_under_u64(nullptr, 1, 1, 3, 7), -SHMF_EINVAL);
  EXPECT_EQ(shmf_window_seen_u64(w, 1, 1, 7), 0) << "refused calls stored nothing";
  EXPECT_EQ(shmf_window_seen(w, 1, "x", 1, 7), 0);
  shmf_window_stats st;
  ASSERT_EQ(shmf_window_stats_get(w, &st), 0);
  EXPECT_EQ(st.lanes, 0u);
  // bloom and cuckoo windows cannot count marks: -SHMF_EINVAL naming the variant, nothing stored.
  for (uint32_t v : {uint32_t{SHMF_WINDOW_BLOOM}, uint32_t{SHMF_WINDOW_CUCKOO}}) {
    shmf_window_options o;
    shmf_window_options_init(&o);
    o.variant = v;
    o.expected_per_bucket = 1000;
    const std::string name = "v" + std::to_string(v);
    shmf_window* x = nullptr;
    ASSERT_EQ(shmf_window_create(s.seg, name.c_str(), &o, &x), 0) << shmf_last_error_message();
    EXPECT_EQ(shmf_window_mark_if_under_u64(x, 1, 1, 3, 7), -SHMF_EINVAL) << v;
    EXPECT_NE(std::string(shmf_last_error_message()).find("SHMF_WINDOW_STAMPED"), std::string::npos)
        << shmf_last_error_message();
    EXPECT_EQ(shmf_window_mark_if_under(x, 1, "x", 1, 3, 7), -SHMF_EINVAL) << v;
    EXPECT_EQ(shmf_window_seen_u64(x, 1, 1, 7), 0) << v;
    EXPECT_EQ(shmf_window_close(x), 0);
  }
  // Dropped: -SHMF_EDROPPED.
  shmf_window* w2 = nullptr;
  ASSERT_EQ(shmf_window_open(s.seg, "w", &w2), 0);
  EXPECT_EQ(shmf_window_drop(s.seg, "w"), 1);
  EXPECT_EQ(shmf_window_mark_if_under_u64(w2, 1, 1, 3, 7), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_window_close(w2), 0);
  EXPECT_EQ(shmf_window_close(w), 0);
}

// Racing processes on one pair never together get more than the cap (each its own handles);
// a handle inherited across fork() writes nothing (-SHMF_EFORKED).
TEST(CApiWindowStamped, RacingProcessesGetExactlyCapAllowed) {
  CSeg s;
  shmf_window* w = stamped_window(s, "w");
  ASSERT_NE(w, nullptr);
  pid_t inherited = shmf_test::fork_child([&] { return shmf_window_mark_if_under_u64(w, 1, 1, 5, 7) == -SHMF_EFORKED ? 0 : 1; });
  EXPECT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(inherited)));
  EXPECT_EQ(shmf_window_seen_u64(w, 1, 1, 7), 0);
  constexpr int kProcs = 4, kCalls = 25, kCap = 5;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p)
    kids.push_back(shmf_test::fork_child([&] {
      shmf_segment* seg = nullptr;
      shmf_window* h = nullptr;
      if (shmf_segment_open(s.guard.name.c_str(), nullptr, &seg) != 0) return 100;
      if (shmf_window_open(seg, "w", &h) != 0) return 101;
      if (shmf_window_set_now(h, kT0) != 0) return 102;
      int allowed = 0;
      for (int i = 0; i < kCalls; ++i) {
        int rc = shmf_window_mark_if_under(h, 3, "racer", 5, kCap, 7);
        if (rc < 0) return 103;
        allowed += rc;
      }
      shmf_window_close(h);
      shmf_segment_close(seg);
      return allowed;  // the exit status: 0..kCap
    }));
  int total = 0;
  for (pid_t k : kids) {
    const int status = shmf_test::wait_status(k);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_LE(WEXITSTATUS(status), kCap) << "a child failed (100+: its step) or got more than the cap alone";
    total += WEXITSTATUS(status);
  }
  EXPECT_EQ(total, kCap) << kProcs << " processes x " << kCalls << " calls on one pair";
  EXPECT_EQ(shmf_window_mark_if_under(w, 3, "racer", 5, kCap, 7), 0);
  EXPECT_EQ(shmf_window_close(w), 0);
}
