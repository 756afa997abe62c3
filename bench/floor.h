// bench/floor.h: the machine's own floor for an out-of-cache lookup, measured
// in the same run as the structures it is compared with.
//
// For a buffer of B bytes in /dev/shm (a POSIX shared-memory object, 4 KiB
// pages unless the kernel's shmem THP says otherwise: the same backing and
// the same TLB reach as a segment), two numbers:
//
//   dependent read: one random 64-byte line whose address depends on the line
//     read before (a pointer chase over a random cyclic permutation of all
//     B/64 lines, Sattolo's algorithm, so no prefetcher can guess it). Timed
//     two ways: every read bracketed by the same fenced clock reads as a
//     single-key operation (so its p50 is comparable with a single-key row's
//     p50), and a long chase timed in chunks of 512 reads (no bracket cost).
//     A structure that needs one miss per lookup cannot beat this; one that
//     needs two dependent misses is near 2x.
//   pair: the dependent read and one more random line issued with it (the
//     cost of a lookup that must read two unrelated lines, as a cuckoo
//     filter's two buckets; bracketed like a single-key operation).
//   independent reads: random lines whose addresses are all known up front
//     (an index array), summed: as many misses in flight as the core allows.
//     The per-read time is the floor for a batched lookup (contains_many
//     prefetches every key's line before it reads any).
//
// Both include the TLB miss (page walk) a random line costs, as the
// structures' lookups do. The buffer is written once (the chase links)
// before timing, so every page is resident.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "timed.h"
#include "workload.h"

namespace shmf_bench {

struct Floor {
  uint64_t bytes = 0;
  double dep_p50 = 0, dep_p99 = 0, dep_mean = 0;  // bracketed single dependent reads (ns)
  double pair_p50 = 0;                            // bracketed: a dependent read plus one independent line in parallel
  uint32_t group = 0;                             // measure_floor's `group` (0: not measured)
  double group_p50 = 0;                           // bracketed: a dependent read plus group - 1 independent lines in parallel
  double chase_ns = 0;                            // long chase: ns per read (median of 512-read chunks)
  double indep_ns = 0;                            // independent reads: ns per read (median of 512-read chunks)
};

// Measures the floor over a /dev/shm buffer of `bytes` (rounded down to whole
// lines, at least 64 lines). samples: bracketed single reads; the long chase
// and the independent pass each do max(samples, 1e6) reads.
// huge: madvise(MADV_HUGEPAGE) on the buffer, as a segment opened with huge_pages
// (effective only where shmem_enabled allows it: docs/huge-pages.md).
// group >= 2: also the cost of `group` unrelated lines issued together (the w lines of a
// window query over w buckets, prefetched before any is read): group_p50.
inline Floor measure_floor(const Clock& clk, uint64_t bytes, uint64_t samples, uint64_t seed, bool huge = false,
                           uint32_t group = 0) {
  constexpr uint64_t kLine = 64;
  const uint64_t lines = std::max<uint64_t>(bytes / kLine, 64);
  const uint64_t len = lines * kLine;
  const std::string name = "/shmf-bench-floor-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw std::runtime_error("floor: shm_open " + name + " failed");
  shm_unlink(name.c_str());  // nothing to clean up if this process dies
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    close(fd);
    throw std::runtime_error("floor: ftruncate failed (is /dev/shm full?)");
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("floor: mmap failed");
  if (huge) (void)madvise(p, len, MADV_HUGEPAGE);
  auto* w = static_cast<uint64_t*>(p);
  constexpr uint64_t kStride = kLine / sizeof(uint64_t);
  // Sattolo: one random cycle through every line; word 0 of line i holds the next line.
  {
    std::vector<uint32_t> perm(lines);
    for (uint64_t i = 0; i < lines; ++i) perm[i] = static_cast<uint32_t>(i);
    Rng rng(seed);
    for (uint64_t i = lines - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i)]);
    for (uint64_t i = 0; i < lines; ++i) w[static_cast<uint64_t>(perm[i]) * kStride] = perm[(i + 1) % lines];
  }
  Floor f;
  f.bytes = len;
  // Bracketed single dependent reads.
  Samples s;
  s.reserve(samples);
  uint64_t cur = 0;
  for (uint64_t j = 0; j < samples; ++j) {
    const uint64_t t0 = clk.now();
    cur = *static_cast<volatile uint64_t*>(&w[cur * kStride]);
    const uint64_t t1 = clk.now();
    s.add(clk.ns_of(t0, t1));
  }
  f.dep_p50 = s.pct(0.5);
  f.dep_p99 = s.pct(0.99);
  f.dep_mean = s.mean();
  // The dependent chase plus `extra` random lines whose addresses are known up front, all
  // issued together (bracketed like a single-key operation): p50 ns.
  auto together = [&](uint64_t extra, uint64_t rng_seed) {
    std::vector<uint32_t> other(samples * extra);
    Rng rng(rng_seed);
    for (auto& x : other) x = static_cast<uint32_t>(rng.below(lines));
    Samples s2;
    s2.reserve(samples);
    uint64_t sum = 0;
    for (uint64_t j = 0; j < samples; ++j) {
      const uint32_t* o = &other[j * extra];
      const uint64_t t0 = clk.now();
      const uint64_t a = *static_cast<volatile uint64_t*>(&w[cur * kStride]);
      for (uint64_t i = 0; i < extra; ++i) sum += *static_cast<volatile uint64_t*>(&w[static_cast<uint64_t>(o[i]) * kStride]);
      cur = a;
      const uint64_t t1 = clk.now();
      s2.add(clk.ns_of(t0, t1));
    }
    keep(sum);
    return s2.pct(0.5);
  };
  f.pair_p50 = together(1, seed + 2);  // a cuckoo lookup's two buckets
  if (group >= 2) {                    // a window query's w lines
    f.group = group;
    f.group_p50 = together(group - 1, seed + 3);
  }
  // Long chase and independent reads: timed in chunks of kChunk reads; the
  // median chunk gives the per-read time, so a preemption (a loaded, shared
  // machine) costs one chunk, not the mean.
  constexpr uint64_t kChunk = 512;
  const uint64_t chunks = std::max<uint64_t>(samples, 1000000) / kChunk;
  {
    Samples c;
    c.reserve(chunks);
    for (uint64_t k = 0; k < chunks; ++k) {
      const uint64_t t0 = clk.now();
      for (uint64_t j = 0; j < kChunk; ++j) cur = w[cur * kStride];
      const uint64_t t1 = clk.now();
      c.add(clk.ns_of(t0, t1) / kChunk);
    }
    keep(cur);
    f.chase_ns = c.pct(0.5);
  }
  {
    std::vector<uint32_t> idx(chunks * kChunk);
    Rng rng(seed + 1);
    for (auto& x : idx) x = static_cast<uint32_t>(rng.below(lines));
    Samples c;
    c.reserve(chunks);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < chunks; ++k) {
      const uint32_t* ix = idx.data() + k * kChunk;
      const uint64_t t0 = clk.now();
      for (uint64_t j = 0; j < kChunk; ++j) sum += w[static_cast<uint64_t>(ix[j]) * kStride];
      const uint64_t t1 = clk.now();
      c.add(clk.ns_of(t0, t1) / kChunk);
    }
    keep(sum);
    f.indep_ns = c.pct(0.5);
  }
  munmap(p, len);
  return f;
}

}  // namespace shmf_bench
