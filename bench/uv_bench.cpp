// bench/uv_bench.cpp: the UV family at the mission's day (docs/uv.md, bench/RESULTS.md).
//
// One day of 1.2e8 distinct (plan, device) pairs over 8,000 plans whose sizes follow Zipf
// s = 1 (plan r gets 1.2e8 / (H_8000 r) devices: 12.5 M for the biggest, ~1,568 for the
// smallest, 1,254 plans above 10,000), added in a random interleaving (each add picks a
// plan by its remaining devices, so promotions of all plans happen through the day as in
// production). Reports memory (per part), the error of every plan against its true count,
// and the add rate, add latency percentiles (every 16th add timed), and, with --week S > 0,
// six earlier days of every plan at S times its size (default 0.05) so that count(space, 7)
// (timed for every plan) reads seven buckets. --scale S multiplies every plan's devices on
// the measured day (S < 1 for a quick run). Memory counts every byte of the day: its own
// extent (space table, all-spaces HLL, chunk list) and every chunk (live pages, retired
// pages, never-used tails), plus the family's region once.
//   uv_bench [--scale 1.0] [--plans 8000] [--total 1.2e8] [--seed 1] [--trace K] [--week 0.05]
//            [--chunk BYTES]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shmfilter/segment.hpp"
#include "shmfilter/uv.hpp"

using namespace shmfilter;

int main(int argc, char** argv) {
  double scale = 1.0, total = 1.2e8;
  uint32_t plans = 8000;
  uint64_t seed = 1;
  uint32_t trace = 0;  // --trace K: memory at every 1/K of the adds (where the day's high-water mark is set)
  double week = 0.05;
  uint64_t chunk = 1ull << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--scale")) scale = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--plans")) plans = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--total")) total = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--trace")) trace = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--week")) week = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--chunk")) chunk = std::strtoull(argv[i + 1], nullptr, 10);
  }
  double H = 0;
  for (uint32_t r = 1; r <= plans; ++r) H += 1.0 / r;
  std::vector<uint64_t> n(plans);
  uint64_t sum = 0;
  for (uint32_t r = 1; r <= plans; ++r) sum += n[r - 1] = std::max<uint64_t>(1, std::llround(scale * total / (H * r)));
  const std::string segname = "shmf-uv-bench-" + std::to_string(getpid());
  Segment::remove(segname);
  CreateOptions co;
  co.size = 64ull << 20;
  co.max_size = 16ull << 30;
  Segment seg = Segment::create(segname, co);
  UvOptions o;
  o.max_spaces = 16384;
  o.chunk_bytes = chunk;
  UvFamily f = UvFamily::create(seg, "uv", o);
  const int64_t day0 = 1764547200 + 6 * 86400;
  std::mt19937_64 rng(seed);
  // Six earlier days (week > 0): plan r gets week x n_r devices a day, half of them the same
  // devices every day (so the 7-day union is not a sum), added plan by plan.
  if (week > 0) {
    for (int day = 6; day >= 1; --day) {
      f.set_now(day0 - day * 86400 + 3600);
      for (uint32_t r = 0; r < plans; ++r) {
        const uint64_t m = std::max<uint64_t>(1, std::llround(week * n[r]));
        for (uint64_t k = 0; k < m; ++k) {
          const uint64_t device = k % 2 == 0 ? (uint64_t{r} << 40) | (k / 2) : (uint64_t{r} << 40) | (uint64_t{1} << 39) | (uint64_t(day) << 32) | k;
          (void)f.add(r, device);
        }
      }
    }
    std::printf("week: six earlier days at %.3g x each plan's size added\n", week);
  }
  f.set_now(day0 + 3600);
  // The interleaving: a shuffled list of plan ids, one entry per device (plan r's k-th device
  // is the 64-bit id (r << 40) | k).
  std::vector<uint32_t> order;
  order.reserve(sum);
  for (uint32_t r = 0; r < plans; ++r) order.insert(order.end(), n[r], r);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint64_t> next(plans, 0);
  uint64_t refused = 0;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t done = 0, peak_chunks = 0;
  std::vector<uint32_t> lat;  // ns of every 16th add
  lat.reserve(sum / 16 + 1);
  for (uint32_t r : order) {
    const uint64_t device = (uint64_t{r} << 40) | next[r]++;
    UvStatus s;
    if ((done & 15) == 0) {
      const auto a = std::chrono::steady_clock::now();
      s = f.add(r, device);
      lat.push_back(static_cast<uint32_t>(std::min<int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - a).count(), UINT32_MAX)));
    } else {
      s = f.add(r, device);
    }
    if (trace == 0) ++done;
    refused += s != UvStatus::kChanged && s != UvStatus::kUnchanged;
    if (trace != 0 && ++done % (sum / trace) == 0) {
      const UvBucketStats t = f.stats().buckets.at(0);
      peak_chunks = std::max(peak_chunks, t.chunk_bytes);
      std::printf("t=%.2f chunks %.1f MiB: live %.1f (exact %llu, sparse %llu, dense %llu), retired %.1f\n",
                  static_cast<double>(done) / sum, t.chunk_bytes / 1048576.0, t.block_bytes / 1048576.0,
                  (unsigned long long)t.exact_spaces, (unsigned long long)t.sparse_spaces,
                  (unsigned long long)t.dense_spaces, t.retired_bytes / 1048576.0);
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const UvStats st = f.stats();
  const UvBucketStats& b = st.buckets.at(0);
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double q) { return lat.empty() ? 0.0 : lat[std::min<size_t>(lat.size() - 1, static_cast<size_t>(q * lat.size()))] / 1000.0; };
  // count(space, 7) for every plan (seven buckets with --week), and count(space, 1).
  std::vector<double> c7, c1;
  uint64_t sink = 0;
  for (uint32_t r = 0; r < plans; ++r) {
    auto a = std::chrono::steady_clock::now();
    sink += f.count(r, 7);
    auto z = std::chrono::steady_clock::now();
    c7.push_back(std::chrono::duration<double, std::micro>(z - a).count());
    a = std::chrono::steady_clock::now();
    sink += f.count(r, 1);
    z = std::chrono::steady_clock::now();
    c1.push_back(std::chrono::duration<double, std::micro>(z - a).count());
  }
  std::sort(c7.begin(), c7.end());
  std::sort(c1.begin(), c1.end());
  double sq_big = 0, max_big = 0, max_mid = 0;
  uint64_t big = 0, exact_ok = 0, exact_n = 0;
  for (uint32_t r = 0; r < plans; ++r) {
    const double e = (static_cast<double>(f.count(r, 1)) - n[r]) / n[r];
    if (n[r] > 10000) {
      ++big;
      sq_big += e * e;
      max_big = std::max(max_big, std::fabs(e));
    } else if (n[r] <= 1000) {
      ++exact_n;
      exact_ok += e == 0;
    } else {
      max_mid = std::max(max_mid, std::fabs(e));
    }
  }
  const double all_err = (static_cast<double>(f.count_all(1)) - sum) / sum;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("uv_bench: plans %u, devices %llu (scale %.3g), seed %llu\n", plans, (unsigned long long)sum, scale,
              (unsigned long long)seed);
  std::printf("adds: %.1f s, %.2f M adds/s, refused %llu\n", secs, sum / secs / 1e6, (unsigned long long)refused);
  std::printf("add latency (every 16th add, %zu timed): p50 %.2f us, p99 %.2f us, p99.9 %.2f us, max %.1f us\n", lat.size(),
              pct(0.5), pct(0.99), pct(0.999), lat.empty() ? 0.0 : lat.back() / 1000.0);
  std::printf("count(space, 7) over %u plans: p50 %.1f us, p99 %.1f us, max %.1f us; count(space, 1): p50 %.1f us, p99 %.1f us (sink %llu)\n",
              plans, c7[c7.size() / 2], c7[c7.size() * 99 / 100], c7.back(), c1[c1.size() / 2], c1[c1.size() * 99 / 100],
              (unsigned long long)(sink & 1));
  std::printf("spaces: %llu (exact %llu, sparse %llu, dense %llu), promotions %llu, pages reused %llu\n",
              (unsigned long long)b.spaces, (unsigned long long)b.exact_spaces, (unsigned long long)b.sparse_spaces,
              (unsigned long long)b.dense_spaces, (unsigned long long)st.promotions, (unsigned long long)b.reused);
  const double MiB = 1 << 20;
  std::printf("memory of the day: %.2f MiB = bucket table %.2f + chunks %.2f (live pages %.2f, retired %.2f, never used %.2f)\n",
              (b.table_bytes + b.chunk_bytes) / MiB, b.table_bytes / MiB, b.chunk_bytes / MiB, b.block_bytes / MiB,
              b.retired_bytes / MiB, (b.chunk_bytes - b.block_bytes - b.retired_bytes) / MiB);
  if (peak_chunks != 0) std::printf("chunks at the traced high-water mark: %.2f MiB\n", peak_chunks / MiB);
  std::printf("family memory (region + %zu buckets): %.2f MiB; segment used %.2f MiB, quarantined %.2f MiB\n",
              st.buckets.size(), st.memory_bytes / MiB, seg.stats().used_bytes / MiB, seg.stats().quarantined_bytes / MiB);
  std::printf("plans > 10,000: %llu, RMS relative error %.4f%%, max %.4f%%\n", (unsigned long long)big,
              100 * std::sqrt(big ? sq_big / big : 0), 100 * max_big);
  std::printf("plans 1,001..10,000: max relative error %.4f%%; plans <= 1,000: %llu of %llu exact\n", 100 * max_mid,
              (unsigned long long)exact_ok, (unsigned long long)exact_n);
  std::printf("count_all: relative error %.4f%%\n", 100 * all_err);
  std::printf("load average: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  Segment::remove(segname);
  return 0;
}
