// tests/unit/test_c_api_lifecycle.cpp: a segment's life beside its data through the
// C API (shmfilter.h): shmf_segment_linked while the name is ours, after it was
// removed, and after it was replaced by another file; shmf_segment_save and
// shmf_segment_restore of a removed segment's mapping into a new file of its name
// (the nginx module's rescue, docs/nginx.md "A removed segment"), never replacing a
// name that exists (-SHMF_EEXISTS).
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "shmfilter/shmfilter.h"
#include "test_util.h"

namespace {

shmf_segment* create(const std::string& name) {
  shmf_segment_options o;
  shmf_segment_options_init(&o);
  o.size = 4ull << 20;
  shmf_segment* seg = nullptr;
  EXPECT_EQ(shmf_segment_create(name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  return seg;
}

}  // namespace

TEST(CApiLifecycle, LinkedFollowsTheName) {
  shmf_test::SegmentGuard g{shmf_test::unique_name("capilife")};
  shmf_segment* seg = create(g.name);
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(shmf_segment_linked(seg), 1);
  EXPECT_EQ(shmf_segment_remove(g.name.c_str(), nullptr), 1);
  EXPECT_EQ(shmf_segment_linked(seg), 0);  // removed: only the mapping keeps it
  shmf_segment* other = create(g.name);    // the name now holds another file
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(shmf_segment_linked(seg), 0);
  EXPECT_EQ(shmf_segment_linked(other), 1);
  EXPECT_EQ(shmf_segment_linked(nullptr), -SHMF_EINVAL);
  shmf_segment_close(other);
  shmf_segment_close(seg);
}

TEST(CApiLifecycle, SaveOfARemovedSegmentRestoresUnderItsName) {
  shmf_test::SegmentGuard g{shmf_test::unique_name("capilife")};
  shmf_segment* seg = create(g.name);
  ASSERT_NE(seg, nullptr);
  shmf_set_options so;
  shmf_set_options_init(&so);
  so.capacity = 1000;
  shmf_set* set = nullptr;
  ASSERT_EQ(shmf_set_create(seg, "pairs", &so, &set), 0) << shmf_last_error_message();
  for (int i = 0; i < 100; ++i) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_EQ(shmf_set_insert_unique(set, k.data(), k.size()), 1);
  }
  ASSERT_EQ(shmf_segment_remove(g.name.c_str(), nullptr), 1);
  ASSERT_EQ(shmf_set_insert_unique(set, "after", 5), 1);  // the mapping still works

  const std::string save = "/dev/shm/" + g.name + ".test-save";
  ASSERT_EQ(shmf_segment_save(seg, save.c_str()), 0) << shmf_last_error_message();
  shmf_segment_options o;
  shmf_segment_options_init(&o);
  o.mode = 0600;
  ASSERT_EQ(shmf_segment_restore(save.c_str(), g.name.c_str(), &o), 0) << shmf_last_error_message();
  EXPECT_EQ(shmf_segment_linked(seg), 0);
  // a second restore never replaces the name
  EXPECT_EQ(shmf_segment_restore(save.c_str(), g.name.c_str(), &o), -SHMF_EEXISTS);
  ::unlink(save.c_str());

  shmf_segment* back = nullptr;
  ASSERT_EQ(shmf_segment_open(g.name.c_str(), nullptr, &back), 0) << shmf_last_error_message();
  EXPECT_EQ(shmf_segment_linked(back), 1);
  shmf_set* s2 = nullptr;
  ASSERT_EQ(shmf_set_open(back, "pairs", &s2), 0);
  for (int i = 0; i < 100; ++i) {
    const std::string k = "k" + std::to_string(i);
    EXPECT_EQ(shmf_set_contains(s2, k.data(), k.size()), 1) << k;
  }
  EXPECT_EQ(shmf_set_contains(s2, "after", 5), 1);
  EXPECT_EQ(shmf_segment_save(seg, nullptr), -SHMF_EINVAL);
  EXPECT_EQ(shmf_segment_restore("/nonexistent/x.save", "capilife-never", nullptr) < 0, true);
  shmf_set_close(s2);
  shmf_segment_close(back);
  shmf_set_close(set);
  shmf_segment_close(seg);
}
