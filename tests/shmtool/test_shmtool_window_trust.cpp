// tests/shmtool/test_shmtool_window_trust.cpp: the review's shmtool examples of issue 23's
// window trust rule, through the real binary. A window whose retired slot names a table at
// offset 64 (inside the segment header) made list, dump, stats, stats --prometheus and
// window rotate die of SIGSEGV, and rotate rewrote header bytes 121..416, after which no
// command opened the segment. Now each answers with a named error (or lists the window as
// unreadable), the segment header is unchanged, check reports the window and check --repair
// detaches the bad spare.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shmfilter/window.hpp"
#include "structures/window/window_impl.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::run_shmtool;
namespace wi = shmfilter::internal::window;

TEST(WindowToolTrust, ARetiredSlotAtOffset64CrashesNoCommandAndRotateLeavesTheHeader) {
  constexpr long long kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC
  shmf_test::SegmentGuard guard(shmf_test::unique_name("win-trust"));
  const std::string& S = guard.name;
  std::vector<std::byte> head;
  {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    Segment seg = Segment::create(S, o);
    WindowOptions wo;
    wo.expected_per_bucket = 1000;
    wo.retention = 3;
    Window w = Window::create(seg, "freq", wo);
    w.set_now(kT0);
    (void)w.mark(1, uint64_t{1});
    w.maintain();
    auto* h = reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find("freq")->offset);
    uint32_t retired = h->slots;
    for (uint32_t i = 0; i < h->slots; ++i)
      if (wi::slot_table(h)[i].tag.load() == wi::kRetired && wi::slot_table(h)[i].table == 0) retired = i;
    ASSERT_LT(retired, h->slots);
    wi::slot_table(h)[retired].table = 64;
    head.assign(seg.base(), seg.base() + 512);
  }
  const std::vector<std::vector<std::string>> commands = {
      {"list", S},  {"dump", S},       {"window", "info", S, "freq"}, {"stats", S, "--prometheus"},
      {"stats", S}, {"window", "rotate", S, "freq", "--now", std::to_string(kT0 + 86400)},
      {"window", "rotate", S, "freq", "--now", std::to_string(kT0 + 3 * 86400)}};
  for (const auto& c : commands) {
    std::string line;
    for (const auto& a : c) line += a + " ";
    auto r = run_shmtool(c);
    EXPECT_LT(r.exit_code, 128) << line << "died of a signal: " << r.err;
  }
  {
    Segment seg = Segment::open(S);
    EXPECT_TRUE(std::vector<std::byte>(seg.base(), seg.base() + 256) ==
                std::vector<std::byte>(head.begin(), head.begin() + 256))
        << "the segment header's immutable line changed";
  }
  auto r = run_shmtool({"check", S});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << r.err;
  EXPECT_NE((r.out + r.err).find("freq"), std::string::npos) << r.out << r.err;
  r = run_shmtool({"check", S, "--repair"});
  EXPECT_LT(r.exit_code, 128) << r.err;
  r = run_shmtool({"check", S});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_shmtool({"window", "rotate", S, "freq", "--now", std::to_string(kT0 + 86400)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}
