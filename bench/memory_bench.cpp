// bench/memory_bench.cpp: bytes per element of every structure at the
// mission's sizes, beside the mission's own figures.
//
//   memory_bench [--scale 1.0]      (--scale 0.01 is a quick run: every size x 0.01)
//
// Sizes (scale 1): 1.2e8 device ids at 1% for Bloom and Cuckoo, 1e8 dense and
// 1.2e8 sparse 32-bit ids for Roaring, 1.2e7 keys for the ExactSet, 1.2e8
// adds into one HLL. Every structure is built for real in a shared segment,
// filled, and its bytes in the segment counted (region + extents, from its
// stats()); false-positive rates are measured on 1e6 keys never added.
// One structure at a time: the peak is the largest one (~270 MB at scale 1).
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <roaring/roaring.h>

#include "shmfilter/hll.hpp"
#include "subjects.h"
#include "timed.h"

namespace {

using namespace shmf_bench;
using shmfilter::Segment;

struct Row {
  std::string structure, elements;
  double bytes, n;
  std::string accuracy, mission;
  double seconds;
};
std::vector<Row> rows;

void row(const std::string& s, double n, double bytes, const std::string& acc, const std::string& mission, double secs) {
  char e[32];
  snprintf(e, sizeof e, "%.3g", n);
  rows.push_back({s, e, bytes, n, acc, mission, secs});
  fprintf(stderr, "  %-40s n=%-9s %-10s %.2f bits/elem  %s  (%.1f s)\n", s.c_str(), e, fmt_bytes(bytes).c_str(),
          bytes * 8 / n, acc.c_str(), secs);
}

std::string pct(double x) {
  char b[32];
  snprintf(b, sizeof b, "%.3f%%", x * 100);
  return b;
}

template <class F>
double fp_rate(F&& contains) {
  const uint64_t probes = 1000000;
  uint64_t fp = 0;
  for (uint64_t i = 0; i < probes; ++i) fp += contains(absent_key(i)) ? 1 : 0;
  return static_cast<double>(fp) / static_cast<double>(probes);
}

// Adds present_key(0..n-1) through add_many in chunks.
template <class H>
void add_keys(H& h, uint64_t n) {
  std::vector<uint64_t> k(4096);
  for (uint64_t i = 0; i < n;) {
    const uint64_t m = std::min<uint64_t>(k.size(), n - i);
    for (uint64_t j = 0; j < m; ++j) k[j] = present_key(i + j);
    h.add_many(std::span<const uint64_t>(k.data(), m));
    i += m;
  }
}

void bloom(Segment& seg, uint64_t n, shmfilter::BloomLayout layout, const char* label, const char* mission) {
  const uint64_t t0 = mono_ns();
  shmfilter::BloomOptions o;
  o.capacity = n;
  o.error = 0.01;
  o.layout = layout;
  o.seed = 1;
  auto b = shmfilter::Bloom::create(seg, "mem:bloom", o);
  add_keys(b, n);
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  const double fp = fp_rate([&](uint64_t k) { return b.contains(k); });
  const auto st = b.stats();
  row(label, static_cast<double>(n), static_cast<double>(st.memory_bytes), "FP " + pct(fp) + " (k=" + std::to_string(st.k) + ")",
      mission, secs);
  shmfilter::Bloom::drop(seg, "mem:bloom");
  seg.quiesce();
}

void cuckoo(Segment& seg, uint64_t n, uint32_t bits, const char* label, const char* mission) {
  const uint64_t t0 = mono_ns();
  shmfilter::CuckooOptions o;
  o.capacity = n;
  o.fingerprint_bits = bits;
  o.seed = 1;
  auto c = shmfilter::Cuckoo::create(seg, "mem:cuckoo", o);
  add_keys(c, n);
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  const double fp = fp_rate([&](uint64_t k) { return c.contains(k); });
  const auto st = c.stats();
  char acc[128];
  snprintf(acc, sizeof acc, "FP %s, load %.1f%%, %" PRIu64 " failed inserts", pct(fp).c_str(), st.load_factor * 100,
           st.failures);
  row(label, static_cast<double>(n), static_cast<double>(st.bytes), acc, mission, secs);
  shmfilter::Cuckoo::drop(seg, "mem:cuckoo");
  seg.quiesce();
}

void exact(Segment& seg, uint64_t n) {
  const uint64_t t0 = mono_ns();
  shmfilter::ExactSetOptions o;
  o.capacity = n;
  auto s = shmfilter::ExactSet::create(seg, "mem:exact", o);
  std::vector<uint64_t> k(4096);
  std::vector<shmfilter::InsertResult> r(4096);
  for (uint64_t i = 0; i < n;) {
    const uint64_t m = std::min<uint64_t>(k.size(), n - i);
    for (uint64_t j = 0; j < m; ++j) k[j] = present_key(i + j);
    s.insert_many(std::span<const uint64_t>(k.data(), m), std::span(r.data(), m));
    i += m;
  }
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  const auto st = s.stats();
  row("ExactSet (max load 0.8)", static_cast<double>(n), static_cast<double>(st.bytes),
      "exact (" + std::to_string(st.size) + " keys)", "Redis SET of 16-hex strings: ~90 B/member (70-100)", secs);
  shmfilter::ExactSet::drop(seg, "mem:exact");
  seg.quiesce();
}

void roaring(Segment& seg, const char* label, roaring_bitmap_t* b, double secs_build, const char* mission) {
  const uint64_t t0 = mono_ns();
  auto r = shmfilter::RoaringSet::create_from(seg, "mem:roaring", b);
  const double secs = secs_build + static_cast<double>(mono_ns() - t0) / 1e9;
  const auto st = r.stats();
  char acc[200];
  snprintf(acc, sizeof acc, "exact; snapshot %s + delta tables %s; containers: %u array, %u bitmap, %u run",
           fmt_bytes(static_cast<double>(st.snapshot_bytes)).c_str(), fmt_bytes(static_cast<double>(st.delta_bytes)).c_str(),
           st.array_containers, st.bitmap_containers, st.run_containers);
  row(label, static_cast<double>(st.cardinality), static_cast<double>(st.total_bytes), acc, mission, secs);
  shmfilter::RoaringSet::drop(seg, "mem:roaring");
  seg.quiesce();
  roaring_bitmap_free(b);
}

void hll(Segment& seg, uint64_t n) {
  const uint64_t t0 = mono_ns();
  auto h = shmfilter::Hll::create(seg, "mem:hll");
  add_keys(h, n);
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  const auto st = h.stats();
  const double err = (static_cast<double>(st.estimate) - static_cast<double>(n)) / static_cast<double>(n);
  char acc[96];
  snprintf(acc, sizeof acc, "count %" PRIu64 " (error %+.2f%%; sigma 0.81%%)", st.estimate, err * 100);
  row("HLL (p=14, Redis-compatible)", static_cast<double>(n), static_cast<double>(st.bytes), acc,
      "Redis HLL dense: 12,304 B (\"12 KB\")", secs);
  shmfilter::Hll::drop(seg, "mem:hll");
  seg.quiesce();
}

}  // namespace

int main(int argc, char** argv) {
  double scale = 1.0;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--scale" && i + 1 < argc) scale = atof(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr,
              "Usage: memory_bench [--scale S] [--only bloom|cuckoo|roaring|exact|hll]\n"
              "  --scale S   every size x S (default 1.0 = the mission's sizes; 0.01 for a quick run)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (!(scale > 0 && scale <= 4)) {
    fprintf(stderr, "memory_bench: --scale %g is invalid: pass a number in (0, 4]\n", scale);
    return 2;
  }
  auto want = [&](const char* k) { return only.empty() || only == k; };
  const uint64_t n_dev = static_cast<uint64_t>(1.2e8 * scale), n_dense = static_cast<uint64_t>(1e8 * scale),
                 n_exact = static_cast<uint64_t>(1.2e7 * scale);
  const std::string segname = "shmf-bench-memory-" + std::to_string(getpid());
  Segment seg = Segment::create(segname);
  int rc = 0;
  try {
    if (want("bloom")) {
      bloom(seg, n_dev, shmfilter::BloomLayout::kBlocked, "Bloom blocked (512-bit blocks), 1%",
            "9.6 bits (classic theory); RedisBloom 9.59 NONSCALING, 11.03-12.98 default");
      bloom(seg, n_dev, shmfilter::BloomLayout::kClassic, "Bloom classic, 1%", "9.6 bits; 137 MiB for 1.2e8");
    }
    if (want("cuckoo")) {
      cuckoo(seg, n_dev, 12, "Cuckoo f=12 (packed 12-bit lanes, layout 3), bucket 4",
             "fastfilter Cuckoo12 (packed): 12.77 bits, FP 0.18%; issue 16: <= 13.0 bits, FP <= 0.2%");
      cuckoo(seg, n_dev, 8, "Cuckoo f=8, bucket 4", "RedisBloom CF (f=8): 8.39 bits, FP 2.96%");
      cuckoo(seg, n_dev, 16, "Cuckoo f=16 (16-bit lanes), bucket 4", "layout 2's f=12 cost (16.85 bits) at 1/16 its FP");
    }
    if (want("roaring")) {
      uint64_t t0 = mono_ns();
      roaring_bitmap_t* b = roaring_bitmap_create();
      roaring_bitmap_add_range(b, 0, n_dense);
      roaring(seg, "Roaring dense: ids 0..n-1 (all present)", b, static_cast<double>(mono_ns() - t0) / 1e9,
              "12.5 MB (1,526 bitmap containers)");
      t0 = mono_ns();
      b = roaring_bitmap_create();
      {
        std::vector<uint32_t> ids;
        ids.reserve(1 << 20);
        for (uint32_t i = 0; i < n_dense; ++i) {
          if (i % 10 != 9) ids.push_back(i);  // 90% dense: no long runs
          if (ids.size() == ids.capacity()) {
            roaring_bitmap_add_many(b, ids.size(), ids.data());
            ids.clear();
          }
        }
        roaring_bitmap_add_many(b, ids.size(), ids.data());
      }
      roaring(seg, "Roaring dense: ids 0..n-1, every 10th absent", b, static_cast<double>(mono_ns() - t0) / 1e9,
              "12.5 MB (bitmap containers)");
      t0 = mono_ns();
      b = roaring_bitmap_create();
      {
        std::vector<uint32_t> ids(1 << 20);
        Rng r(5);
        for (uint64_t i = 0; i < n_dev;) {
          const uint64_t m = std::min<uint64_t>(ids.size(), n_dev - i);
          for (uint64_t j = 0; j < m; ++j) ids[j] = static_cast<uint32_t>(r.next() >> 32);
          std::sort(ids.begin(), ids.begin() + static_cast<long>(m));
          roaring_bitmap_add_many(b, m, ids.data());
          i += m;
        }
      }
      roaring(seg, "Roaring sparse: random 32-bit ids", b, static_cast<double>(mono_ns() - t0) / 1e9,
              "240 MB (array containers, 2 B/id)");
    }
    if (want("exact")) exact(seg, n_exact);
    if (want("hll")) hll(seg, n_dev);
  } catch (const std::exception& e) {
    fprintf(stderr, "memory_bench: %s\n", e.what());
    rc = 1;
  }
  Segment::remove(segname);

  printf("Scale %g (1.0 = the mission). Bytes are what the structure occupies in the segment (header + every extent).\n"
         "Redis SET reference: the mission's 70-100 B/member (1.2e8 members: 12 GB); bench/redis_compare_bench measures it.\n\n",
         scale);
  printf("| structure | elements | memory | bytes/elem | bits/elem | vs Redis SET (90 B/elem) | accuracy (measured) | mission / anchor figure | build s |\n"
         "|---|---|---|---|---|---|---|---|---|\n");
  for (auto& r : rows) {
    char ratio[32] = "-";
    if (r.structure.rfind("HLL", 0) != 0) snprintf(ratio, sizeof ratio, "%.0fx smaller", 90.0 / (r.bytes / r.n));
    printf("| %s | %s | %s | %.3f | %.2f | %s | %s | %s | %.1f |\n", r.structure.c_str(), r.elements.c_str(),
           fmt_bytes(r.bytes).c_str(), r.bytes / r.n, r.bytes * 8 / r.n, ratio, r.accuracy.c_str(), r.mission.c_str(),
           r.seconds);
  }
  return rc;
}
