// tests/unit/test_window_strbatch.cpp: the Window's batched calls with string items (issue 24:
// 16-hex device ids could not be batched). On both variants, each batched string call answers
// pair for pair what the single-key call answers: two windows of the same options and seed get
// the same operations, one through the batch, one key at a time, over several days (rotation),
// past capacity (overflow layers / sub-filters), with empty items and repeated pairs inside a
// batch; then unequal lengths, a short out, a w past retention and a dropped window; and the
// C API's string batch calls with their argument errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/shmfilter.h"
#include "shmfilter/window.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;

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
};

WindowOptions opts(WindowVariant v, uint64_t n, uint32_t retention) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = n;
  o.error = 0.05;
  o.retention = retention;
  o.max_spaces = 64;
  o.seed = 24;
  o.now = kT0;
  return o;
}

std::string hex_id(uint64_t x) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(x * 0x9E3779B97F4A7C15ull));
  return b;
}

// A batch's pairs: string storage and the views the calls take.
struct Pairs {
  std::vector<uint64_t> spaces;
  std::vector<std::string> store;
  std::vector<std::string_view> items;
  void add(uint64_t space, std::string item) {
    spaces.push_back(space);
    store.push_back(std::move(item));
  }
  void seal() {
    items.assign(store.begin(), store.end());
  }
  size_t size() const { return spaces.size(); }
};

// Day d's pairs: ids d*1000 .. d*1000 + 2999 (so two thirds repeat the day before), an empty
// item, and a pair repeated inside the batch.
Pairs day_pairs(int d) {
  Pairs p;
  for (uint64_t i = 0; i < 3000; ++i) {
    const uint64_t id = static_cast<uint64_t>(d) * 1000 + i;
    p.add(id % 7, hex_id(id));
  }
  p.add(3, "");
  p.add(0, hex_id(static_cast<uint64_t>(d) * 1000));  // the batch's first pair again
  p.add(3, "");
  p.seal();
  return p;
}

// Probes: the day's pairs and as many never marked.
Pairs probe_pairs(int d) {
  Pairs p = day_pairs(d);
  for (uint64_t i = 0; i < 3000; ++i) p.add(i % 7, "never-" + hex_id(1000000 + i));
  p.seal();
  return p;
}

class WindowStrBatch : public ::testing::TestWithParam<WindowVariant> {};

}  // namespace

TEST_P(WindowStrBatch, StringBatchesAnswerWhatTheSingleCallsAnswer) {
  Fixture f("wstrbatch");
  const bool cuckoo = GetParam() != WindowVariant::kBloom;  // kCuckoo and kStamped forget
  constexpr uint32_t kR = 3;
  // About 4000 pairs a bucket against 800 expected: the first buckets grow overflow layers (the
  // later ones are sized from the measured count).
  Window a = Window::create(f.seg, "batched", opts(GetParam(), 800, kR));
  Window b = Window::create(f.seg, "single", opts(GetParam(), 800, kR));
  uint64_t news = 0, seens = 0, hits = 0, misses = 0;
  uint32_t layered_days = 0;
  for (int d = 0; d < 5; ++d) {
    a.set_now(kT0 + d * kDay);
    b.set_now(kT0 + d * kDay);
    const Pairs p = day_pairs(d);
    // mark_many
    std::vector<WindowStatus> st(p.size(), WindowStatus::kCorrupt);
    uint64_t n = a.mark_many(p.spaces, p.items, st);
    uint64_t want_n = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const WindowStatus s = b.mark(p.spaces[i], p.items[i]);
      ASSERT_EQ(st[i], s) << "mark_many day " << d << " pair " << i << " '" << p.items[i] << "'";
      want_n += s == WindowStatus::kNew;
      news += s == WindowStatus::kNew;
    }
    EXPECT_EQ(n, want_n) << "day " << d;
    // seen_many over every w, against the single seen of both windows
    const Pairs q = probe_pairs(d);
    for (uint32_t w : {1u, 2u, kR, kWholeWindow}) {
      std::vector<uint8_t> hit(q.size(), 7);
      n = a.seen_many(q.spaces, q.items, w, hit);
      want_n = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        const bool s = b.seen(q.spaces[i], q.items[i], w);
        ASSERT_EQ(hit[i] != 0, s) << "seen_many day " << d << " w " << w << " pair " << i;
        ASSERT_EQ(hit[i] != 0, a.seen(q.spaces[i], q.items[i], w)) << "day " << d << " w " << w << " pair " << i;
        ASSERT_LE(hit[i], 1);
        want_n += s;
        hits += s;
        misses += !s;
      }
      EXPECT_EQ(n, want_n) << "day " << d << " w " << w;
    }
    // mark_if_unseen_many: the next day's ids (one third new), over w = 2 and the whole window
    const Pairs m = day_pairs(d + 1);
    for (uint32_t w : {2u, kWholeWindow}) {
      std::fill(st.begin(), st.end(), WindowStatus::kCorrupt);
      n = a.mark_if_unseen_many(m.spaces, m.items, w, st);
      want_n = 0;
      for (size_t i = 0; i < m.size(); ++i) {
        const WindowStatus s = b.mark_if_unseen(m.spaces[i], m.items[i], w);
        ASSERT_EQ(st[i], s) << "mark_if_unseen_many day " << d << " w " << w << " pair " << i;
        want_n += s == WindowStatus::kNew;
        seens += s == WindowStatus::kSeen;
      }
      EXPECT_EQ(n, want_n) << "day " << d << " w " << w;
    }
    // forget_many: every fifth pair of the day, the empty item (pair 3000) among them (twice:
    // removed, then absent)
    Pairs g;
    for (size_t i = 0; i < p.size(); i += 5) g.add(p.spaces[i], p.store[i]);
    g.seal();
    for (int round = 0; round < 2; ++round) {
      std::fill(st.begin(), st.end(), WindowStatus::kCorrupt);
      n = a.forget_many(g.spaces, g.items, st);
      want_n = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const WindowStatus s = b.forget(g.spaces[i], g.items[i]);
        ASSERT_EQ(st[i], s) << "forget_many day " << d << " round " << round << " pair " << i;
        if (!cuckoo) {
          ASSERT_EQ(s, WindowStatus::kUnsupported);
        }
        want_n += s == WindowStatus::kRemoved;
      }
      EXPECT_EQ(n, want_n) << "day " << d << " round " << round;
      // Round 0 removes nearly all (a forget may take a colliding pair's copy first: the
      // window's documented forget_ambiguous case, the same in both windows).
      if (cuckoo && round == 0) {
        EXPECT_GE(n, g.size() * 95 / 100);
      }
    }
    layered_days += a.stats().buckets[0].layers > 0;
  }
  // The comparison covered both answers, and the buckets were past capacity.
  EXPECT_GT(news, 5000u);
  EXPECT_GT(seens, 1000u);
  EXPECT_GT(hits, 10000u);
  EXPECT_GT(misses, 10000u);
  const WindowStats sa = a.stats(), sb = b.stats();
  EXPECT_GE(layered_days, 1u);
  EXPECT_EQ(sa.buckets[0].distinct, sb.buckets[0].distinct);
  EXPECT_EQ(sa.memory_bytes, sb.memory_bytes);
  for (uint64_t s = 0; s < 7; ++s)
    for (uint32_t age = 0; age < kR; ++age) EXPECT_EQ(a.new_count(s, age), b.new_count(s, age)) << s << " " << age;
}

// Unequal lengths answer the first min(spaces, items) pairs; an out shorter than that gets no
// answers (the call still runs); a w past retention answers kInvalidArgument everywhere and
// stores nothing; a dropped window answers kDropped.
TEST_P(WindowStrBatch, LengthsOutAndWindowArguments) {
  Fixture f("wstrbatchargs");
  Window w = Window::create(f.seg, "w", opts(GetParam(), 1000, 7));
  w.set_now(kT0);
  const std::vector<uint64_t> sp5{1, 2, 3, 4, 5};
  const std::vector<std::string_view> it3{"0000000000000001", "0000000000000002", ""};
  std::vector<WindowStatus> st(5, WindowStatus::kCorrupt);
  EXPECT_EQ(w.mark_many(sp5, it3, st), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(st[i], WindowStatus::kNew) << i;
  EXPECT_EQ(st[3], WindowStatus::kCorrupt);  // past the pairs: untouched
  EXPECT_EQ(st[4], WindowStatus::kCorrupt);
  EXPECT_FALSE(w.seen(4, std::string_view("0000000000000001")));
  const std::vector<std::string_view> it5{"0000000000000001", "0000000000000002", "", "x", "y"};
  const std::vector<uint64_t> sp2{1, 2};
  std::vector<uint8_t> hit(5, 9);
  EXPECT_EQ(w.seen_many(sp2, it5, 1, hit), 2u);
  EXPECT_EQ(hit[0], 1);
  EXPECT_EQ(hit[1], 1);
  EXPECT_EQ(hit[2], 9);
  // out shorter than the pairs: no answers written; the count and the marks still happen
  std::vector<uint8_t> short_hit(1, 9);
  EXPECT_EQ(w.seen_many(sp5, it5, 1, short_hit), 3u);  // pairs 0, 1, 2 marked above
  EXPECT_EQ(short_hit[0], 9);
  std::vector<WindowStatus> short_st(2, WindowStatus::kCorrupt);
  EXPECT_EQ(w.mark_if_unseen_many(sp5, it5, 1, short_st), 2u);  // "x", "y" new
  EXPECT_EQ(short_st[0], WindowStatus::kCorrupt);
  EXPECT_TRUE(w.seen(5, std::string_view("y")));
  // w past retention: every answer kInvalidArgument (seen_many: 0), nothing stored
  const std::vector<std::string_view> fresh{"fresh-a", "fresh-b"};
  std::fill(st.begin(), st.end(), WindowStatus::kNew);
  EXPECT_EQ(w.mark_if_unseen_many(sp2, fresh, 8, st), 0u);
  EXPECT_EQ(st[0], WindowStatus::kInvalidArgument);
  EXPECT_EQ(st[1], WindowStatus::kInvalidArgument);
  EXPECT_FALSE(w.seen(1, std::string_view("fresh-a"), 7));
  EXPECT_FALSE(w.seen(2, std::string_view("fresh-b"), 7));
  std::fill(hit.begin(), hit.end(), 1);
  EXPECT_EQ(w.seen_many(sp2, it3, 8, hit), 0u);
  EXPECT_EQ(hit[0], 0);
  EXPECT_EQ(hit[1], 0);
  EXPECT_EQ(w.seen_many(sp2, it3, 7, hit), 2u);
  EXPECT_EQ(w.seen_many(sp2, it3, kWholeWindow, hit), 2u);
  // empty batches
  EXPECT_EQ(w.mark_many({}, std::span<const std::string_view>{}, {}), 0u);
  EXPECT_EQ(w.seen_many({}, std::span<const std::string_view>{}, 1, {}), 0u);
  // a dropped window
  Window other = Window::open(f.seg, "w");
  ASSERT_TRUE(Window::drop(f.seg, "w"));
  std::fill(st.begin(), st.end(), WindowStatus::kNew);
  EXPECT_EQ(other.mark_many(sp2, fresh, st), 0u);
  EXPECT_EQ(st[0], WindowStatus::kDropped);
  EXPECT_EQ(st[1], WindowStatus::kDropped);
  EXPECT_EQ(other.mark_if_unseen_many(sp2, fresh, 1, st), 0u);
  EXPECT_EQ(other.forget_many(sp2, fresh, st), 0u);
  EXPECT_EQ(st[0], WindowStatus::kDropped);
  std::fill(hit.begin(), hit.end(), 1);
  EXPECT_EQ(other.seen_many(sp2, fresh, 1, hit), 0u);
  EXPECT_EQ(hit[0], 0);
}

INSTANTIATE_TEST_SUITE_P(Variants, WindowStrBatch, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo, WindowVariant::kStamped),
                         [](const auto& pi) { return std::string(window_variant_name(pi.param)); });

// The C API's string batches: the answers of the single calls, and the argument errors of the
// _u64 batches (NULL arrays, a NULL item with a length, w outside 1..retention): -SHMF_EINVAL with
// nothing stored.
TEST(WindowStrBatchCApi, AnswersAndArgumentErrors) {
  SegmentGuard g(shmf_test::unique_name("wstrbatchc"));
  shmf_segment_options so;
  shmf_segment_options_init(&so);
  so.size = 16ull << 20;
  shmf_segment* seg = nullptr;
  ASSERT_EQ(shmf_segment_create(g.name.c_str(), &so, &seg), 0) << shmf_last_error_message();
  for (uint32_t variant : {uint32_t{SHMF_WINDOW_BLOOM}, uint32_t{SHMF_WINDOW_CUCKOO}}) {
    SCOPED_TRACE(variant);
    shmf_window_options o;
    shmf_window_options_init(&o);
    o.variant = variant;
    o.expected_per_bucket = 1000;
    o.retention = 3;
    o.seed = 24;
    shmf_window *a = nullptr, *b = nullptr;
    const std::string na = "a" + std::to_string(variant), nb = "b" + std::to_string(variant);
    ASSERT_EQ(shmf_window_create(seg, na.c_str(), &o, &a), 0) << shmf_last_error_message();
    ASSERT_EQ(shmf_window_create(seg, nb.c_str(), &o, &b), 0) << shmf_last_error_message();
    ASSERT_EQ(shmf_window_set_now(a, kT0), 0);
    ASSERT_EQ(shmf_window_set_now(b, kT0), 0);
    // 16-hex ids in one buffer, as the header shows
    constexpr size_t kN = 600;
    std::vector<char> ids(kN * 16);
    std::vector<const void*> items(kN);
    std::vector<size_t> lens(kN, 16);
    std::vector<uint64_t> spaces(kN);
    for (size_t i = 0; i < kN; ++i) {
      const std::string id = hex_id(i % 400);  // ids 400.. repeat 0..199
      std::copy(id.begin(), id.end(), ids.begin() + static_cast<ptrdiff_t>(i * 16));
      items[i] = ids.data() + i * 16;
      spaces[i] = i % 400 % 5;
    }
    items[7] = nullptr;  // an empty item: NULL with length 0
    lens[7] = 0;
    std::vector<uint8_t> out(kN, 9);
    const int n = shmf_window_mark_if_unseen_many(a, spaces.data(), items.data(), lens.data(), kN, 2, out.data());
    ASSERT_GE(n, 0) << shmf_last_error_message();
    int want = 0;
    for (size_t i = 0; i < kN; ++i) {
      const int s = shmf_window_mark_if_unseen(b, spaces[i], items[i], lens[i], 2);
      ASSERT_GE(s, 0) << shmf_last_error_message();
      ASSERT_EQ(out[i], s) << i;
      want += s;
    }
    EXPECT_EQ(n, want);
    EXPECT_GE(n, 390);  // 401 distinct pairs (pairs 400.. repeat 0..199, pair 7 is the empty item); FP
    EXPECT_LE(n, 401);
    std::fill(out.begin(), out.end(), 9);
    EXPECT_EQ(shmf_window_seen_many(a, spaces.data(), items.data(), lens.data(), kN, 1, out.data()), static_cast<int>(kN));
    for (size_t i = 0; i < kN; ++i) ASSERT_EQ(out[i], shmf_window_seen(b, spaces[i], items[i], lens[i], 1)) << i;
    EXPECT_EQ(shmf_window_seen_many(a, spaces.data(), items.data(), lens.data(), kN, 3, nullptr), static_cast<int>(kN));
    // never-marked items: the u64 item 5 and the string "5" are different items
    const char* five = "5";
    const void* fv[1] = {five};
    const size_t fl[1] = {1};
    const uint64_t sp0[1] = {0};
    const uint64_t u5[1] = {5};
    ASSERT_EQ(shmf_window_mark_if_unseen_many_u64(a, sp0, u5, 1, 1, nullptr), 1);
    EXPECT_EQ(shmf_window_seen_many(a, sp0, fv, fl, 1, 1, nullptr), shmf_window_seen(a, 0, five, 1, 1));
    // argument errors: -SHMF_EINVAL, a message naming the argument, nothing stored
    const char* fresh = "fresh-item";
    const void* iv[2] = {fresh, nullptr};
    const size_t il[2] = {10, 4};
    const uint64_t sp2[2] = {1, 1};
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, sp2, iv, il, 2, 1, nullptr), -SHMF_EINVAL);
    EXPECT_NE(std::string(shmf_last_error_message()).find("items[1] is NULL"), std::string::npos)
        << shmf_last_error_message();
    EXPECT_EQ(shmf_window_seen(a, 1, fresh, 10, 3), 0);
    EXPECT_EQ(shmf_window_seen_many(a, sp2, iv, il, 2, 1, nullptr), -SHMF_EINVAL);
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, sp2, iv, il, 1, 4, nullptr), -SHMF_EINVAL);  // w > retention
    EXPECT_NE(std::string(shmf_last_error_message()).find("window 4"), std::string::npos) << shmf_last_error_message();
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, sp2, iv, il, 1, 0, nullptr), -SHMF_EINVAL);  // w = 0
    EXPECT_EQ(shmf_window_seen(a, 1, fresh, 10, 3), 0);
    EXPECT_EQ(shmf_window_seen_many(a, sp2, iv, il, 1, 4, nullptr), -SHMF_EINVAL);
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, nullptr, iv, il, 1, 1, nullptr), -SHMF_EINVAL);
    EXPECT_NE(std::string(shmf_last_error_message()).find("'spaces'"), std::string::npos) << shmf_last_error_message();
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, sp2, nullptr, il, 1, 1, nullptr), -SHMF_EINVAL);
    EXPECT_NE(std::string(shmf_last_error_message()).find("'items'"), std::string::npos) << shmf_last_error_message();
    EXPECT_EQ(shmf_window_seen_many(a, sp2, iv, nullptr, 1, 1, nullptr), -SHMF_EINVAL);
    EXPECT_NE(std::string(shmf_last_error_message()).find("'lens'"), std::string::npos) << shmf_last_error_message();
    EXPECT_EQ(shmf_window_seen_many(nullptr, sp2, iv, il, 1, 1, nullptr), -SHMF_EINVAL);
    EXPECT_EQ(shmf_window_seen(a, 1, fresh, 10, 3), 0);
    // n = 0: nothing to read, the arrays may be NULL
    EXPECT_EQ(shmf_window_seen_many(a, nullptr, nullptr, nullptr, 0, 1, nullptr), 0);
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, nullptr, nullptr, nullptr, 0, 1, nullptr), 0);
    // a dropped window
    ASSERT_EQ(shmf_window_drop(seg, na.c_str()), 1);
    EXPECT_EQ(shmf_window_mark_if_unseen_many(a, sp2, iv, il, 1, 1, nullptr), -SHMF_EDROPPED);
    EXPECT_EQ(shmf_window_seen_many(a, sp2, iv, il, 1, 1, nullptr), -SHMF_EDROPPED);
    EXPECT_EQ(shmf_window_close(a), 0);
    EXPECT_EQ(shmf_window_close(b), 0);
  }
  EXPECT_EQ(shmf_segment_close(seg), 0);
}
