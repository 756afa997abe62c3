// bench/window_batch_bench.cpp: the kBloom window's batched read over one bucket
// (seen_many w = 1) beside a plain Bloom filter's contains_many of the same size, with the
// cache state controlled (window_bench measures them after its other sections):
//   window_batch_bench [PAIRS (default 3e7)] [--in-cache] [--error-window W (default 1)]
//   --error-window W: size the window for its error at w = W (window_bench uses the default,
//   W = retention = 7: a lower per-table error, so more bits and probes per table; the plain
//   filter always gets the same bits and k as one window table)
// Default: one window table and one plain filter of PAIRS keys each, a 512 MiB sweep before
// every phase (the L3 holds neither), fresh absent keys in every phase, 3 rounds of the two
// phases alternated. --in-cache: no sweep, the same 2e5 queries 10 times per phase (use a
// small PAIRS, e.g. 2e5, so both tables stay in cache). Median ns/pair of 256-pair calls.
// A third phase asks the window's seen_many w = 1 with string items (issue 24): the same
// kind of absent pairs as the uint64 phase, each item the 16 hex digits of a uint64 (a device
// id), the string_views built before the clock starts.
#include <algorithm>
#include <chrono>
#include <string_view>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/window.hpp"

using namespace shmfilter;

namespace {
uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 30000000;
  bool in_cache = false;
  uint32_t error_window = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--in-cache") == 0)
      in_cache = true;
    else if (std::strcmp(argv[i], "--error-window") == 0 && i + 1 < argc)
      error_window = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else
      n = static_cast<uint64_t>(std::strtod(argv[i], nullptr));
  }
  const uint64_t q = 200000;
  CreateOptions co;
  co.size = 64ull << 20;
  co.max_size = 8ull << 30;
  const char* seg_name = "shmf-bench-window-batch";
  Segment::remove(seg_name);
  Segment seg = Segment::create(seg_name, co);
  WindowOptions o;
  o.expected_per_bucket = n;
  o.error = 0.01;
  o.error_window = error_window;
  o.seed = 1;
  Window w = Window::create(seg, "w", o);
  w.set_now(1764547200);
  w.maintain();
  BloomOptions bo;
  bo.capacity = n;
  bo.error = Window::plan(o).main_error;
  bo.seed = 9;
  Bloom b = Bloom::create(seg, "b", bo);
  {
    std::vector<uint64_t> sp(65536), it(65536);
    for (uint64_t at = 0; at < n; at += sp.size()) {
      const size_t m = static_cast<size_t>(std::min<uint64_t>(sp.size(), n - at));
      for (size_t j = 0; j < m; ++j) {
        sp[j] = mix(at + j) % 8000;
        it[j] = mix(at + j + (1ull << 40));
      }
      w.mark_many(std::span<const uint64_t>(sp.data(), m), std::span<const uint64_t>(it.data(), m));
      for (size_t j = 0; j < m; ++j) it[j] = mix(at + j + (3ull << 40));
      b.add_many(std::span<const uint64_t>(it.data(), m));
    }
  }
  std::vector<char> sweep(in_cache ? 0 : (512ull << 20), 1);
  std::vector<uint64_t> a(q), s(q);
  std::vector<uint8_t> out(q);
  std::vector<char> hex(q * 16);
  std::vector<std::string_view> sv(q);
  uint64_t sink = 0, salt = 100;
  enum Phase { kPlain, kWindow, kWindowStr };
  auto phase = [&](Phase which) {
    const bool window = which != kPlain;
    if (!in_cache || salt == 100) {
      ++salt;
      for (uint64_t i = 0; i < q; ++i) {
        a[i] = mix(i + (salt << 40));
        s[i] = mix(i + (salt << 41)) % 8000;
        static constexpr char kDigits[] = "0123456789abcdef";
        for (int d = 0; d < 16; ++d) hex[i * 16 + static_cast<size_t>(d)] = kDigits[(a[i] >> (60 - 4 * d)) & 15];
        sv[i] = std::string_view(hex.data() + i * 16, 16);
      }
    }
    for (size_t i = 0; i < sweep.size(); i += 64) sink += static_cast<uint64_t>(sweep[i]++);
    std::vector<double> t;
    for (int rep = 0; rep < (in_cache ? 10 : 1); ++rep)
      for (size_t at = 0; at + 256 <= q; at += 256) {
        auto t0 = std::chrono::steady_clock::now();
        if (which == kWindowStr)
          sink += w.seen_many(std::span<const uint64_t>(s.data() + at, 256),
                              std::span<const std::string_view>(sv.data() + at, 256), 1,
                              std::span<uint8_t>(out.data() + at, 256));
        else if (window)
          sink += w.seen_many(std::span<const uint64_t>(s.data() + at, 256), std::span<const uint64_t>(a.data() + at, 256), 1,
                              std::span<uint8_t>(out.data() + at, 256));
        else
          sink += b.contains_many(std::span<const uint64_t>(a.data() + at, 256), std::span<uint8_t>(out.data() + at, 256));
        auto t1 = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 256);
      }
    std::sort(t.begin(), t.end());
    return std::make_pair(t[t.size() / 2], t[t.size() / 10]);
  };
  std::printf("# window_batch_bench: %llu pairs, %s, error sized for w = %u (per-table error %.4f%%, k = %u)\n",
              static_cast<unsigned long long>(n),
              in_cache ? "in cache (no sweep, same queries)" : "L3 swept before every phase, fresh keys", error_window,
              100 * Window::plan(o).main_error, b.stats().k);
  for (int r = 0; r < 3; ++r) {
    auto p = phase(kPlain);
    auto x = phase(kWindow);
    auto z = phase(kWindowStr);
    std::printf("round %d: plain contains_many %.1f ns/pair (p10 %.1f), window seen_many w=1 %.1f (p10 %.1f): %.2fx; "
                "16-hex string items %.1f (p10 %.1f): %.2fx the uint64 batch\n",
                r, p.first, p.second, x.first, x.second, x.first / p.first, z.first, z.second, z.first / x.first);
  }
  std::printf("(sink %llu)\n", static_cast<unsigned long long>(sink & 1));
  Segment::remove(seg_name);
}
