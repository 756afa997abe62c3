// tests/support/workload.h: the one workload generator, shared by the demo, the
// tests and the benchmarks. Header-only, deterministic by seed.
//
// The mission (shared/mission/SEED-SUMMARY.md): 1.2e8 device IDs a day over
// ~8,000 plans; device IDs are 16 hex chars (a 64-bit hash of the OAID); the
// question is "has device D been served by plan P today?".
//
// Model. Distinct (plan, device) pairs are numbered i = 0, 1, 2, ...; pair i
// has device id mix(i) (16 hex chars) and a plan drawn from a Zipf(s)
// distribution over `plans` plans, decided by i alone. The event stream
// emits, at each step, a repeat of an earlier pair (probability repeat_rate,
// uniform over the pairs seen so far) or the next new pair. So the exact
// number of distinct pairs in any prefix is known without a set: it is the
// count of "new" events. scale 1.0 = 1.2e8 distinct pairs a day.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace shmf_bench {

// SplitMix64 (Vigna): a bijective 64-bit mixer and a tiny PRNG.
inline uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  // The seed is mixed first: with a raw counter start, Rng(s + 1) would be
  // Rng(s) shifted by one draw, so "several seeds" would be one sample.
  explicit Rng(uint64_t seed) : s_(mix64(seed)) {}
  uint64_t next() noexcept { return mix64(s_++ * 0x2545f4914f6cdd1dull + 1); }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias < n/2^64).
  uint64_t below(uint64_t n) noexcept { return static_cast<uint64_t>((static_cast<__uint128_t>(next()) * n) >> 64); }
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// 16 lowercase hex chars of v.
inline std::string hex16(uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = d[v & 15];
  return s;
}

// Zipf(s) over [0, n): P(k) ~ 1/(k+1)^s, sampled from a precomputed CDF.
class Zipf {
 public:
  Zipf(uint32_t n, double s) : cdf_(n) {
    if (n == 0) throw std::invalid_argument("Zipf needs n >= 1");
    double sum = 0;
    for (uint32_t k = 0; k < n; ++k) sum += 1.0 / std::pow(k + 1.0, s);
    double acc = 0;
    for (uint32_t k = 0; k < n; ++k) {
      acc += 1.0 / std::pow(k + 1.0, s) / sum;
      cdf_[k] = acc;
    }
    cdf_.back() = 1.0;
  }
  // u uniform in [0, 1).
  uint32_t at(double u) const noexcept {
    return static_cast<uint32_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }
  uint32_t size() const noexcept { return static_cast<uint32_t>(cdf_.size()); }

 private:
  std::vector<double> cdf_;
};

struct WorkloadOptions {
  double scale = 0.01;        // 1.0 = the mission's 1.2e8 distinct (plan, device) pairs a day
  uint32_t plans = 8000;      // active plans
  double zipf_s = 1.0;        // skew of plan sizes
  double repeat_rate = 0.3;   // fraction of events that repeat an earlier pair
  uint64_t seed = 42;
};

struct Event {
  uint32_t plan;
  uint64_t device;  // 64-bit device id; its 16-hex-char form is hex16(device)
  uint64_t pair;    // pair number i (for oracles)
  bool is_new;      // first occurrence of this pair in the stream
};

class Workload {
 public:
  explicit Workload(const WorkloadOptions& o = {}) : o_(o), zipf_(o.plans, o.zipf_s), rng_(o.seed) {}

  uint64_t target_distinct() const noexcept { return static_cast<uint64_t>(o_.scale * 1.2e8); }
  // Device id and plan of pair i: functions of i and the seed only.
  uint64_t device_of(uint64_t i) const noexcept { return mix64(i ^ (o_.seed * 0x9e3779b97f4a7c15ull)); }
  uint32_t plan_of(uint64_t i) const noexcept {
    return zipf_.at(static_cast<double>(mix64(i + 0x5bd1e995ull * (o_.seed + 1)) >> 11) * 0x1.0p-53);
  }
  // The dedup key for a pair: "plan:device16hex", as the mission's freq:{plan}:{date} member.
  std::string key_of(uint64_t i) const { return std::to_string(plan_of(i)) + ":" + hex16(device_of(i)); }

  // Next event. New pairs stop once target_distinct() are out (then only repeats).
  Event next() {
    bool repeat = distinct_ > 0 && (distinct_ >= target_distinct() || rng_.unit() < o_.repeat_rate);
    uint64_t i = repeat ? rng_.below(distinct_) : distinct_++;
    return Event{plan_of(i), device_of(i), i, !repeat};
  }
  // A whole stream of n events.
  std::vector<Event> stream(uint64_t n) {
    std::vector<Event> v;
    v.reserve(n);
    for (uint64_t k = 0; k < n; ++k) v.push_back(next());
    return v;
  }
  uint64_t distinct_so_far() const noexcept { return distinct_; }

  // Writes events as "plan device16hex" lines (for shmtool and redis-cli).
  static void write_stream(const std::string& path, const std::vector<Event>& events) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path);
    for (const auto& e : events) std::fprintf(f, "%u %s\n", e.plan, hex16(e.device).c_str());
    std::fclose(f);
  }
  // Writes events as dedup keys "plan:device16hex", one per line (stdin of `shmtool bloom add`).
  static void write_keys(const std::string& path, const std::vector<Event>& events) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path);
    for (const auto& e : events) std::fprintf(f, "%u:%s\n", e.plan, hex16(e.device).c_str());
    std::fclose(f);
  }
  // Writes events as the mission's Redis commands, "SADD freq:{plan}:{date} device16hex",
  // one per line (`redis-cli < file`, or redis-cli --pipe after conversion).
  static void write_redis(const std::string& path, const std::vector<Event>& events, const std::string& date) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path);
    for (const auto& e : events) std::fprintf(f, "SADD freq:%u:%s %s\n", e.plan, date.c_str(), hex16(e.device).c_str());
    std::fclose(f);
  }

 private:
  WorkloadOptions o_;
  Zipf zipf_;
  Rng rng_;
  uint64_t distinct_ = 0;
};

// n distinct 64-bit keys (mix64 is a bijection, so distinct inputs stay distinct).
inline std::vector<uint64_t> distinct_keys(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = mix64((seed << 40) + i);
  return v;
}
// n keys guaranteed absent from distinct_keys(any n < 2^39, seed): disjoint input domain.
inline std::vector<uint64_t> absent_keys(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = mix64((seed << 40) + (1ull << 39) + i);
  return v;
}
// Dense 32-bit ids 0..n-1, leaving out every `hole_every`-th one (0: none).
inline std::vector<uint32_t> dense_ids(uint32_t n, uint32_t hole_every = 0) {
  std::vector<uint32_t> v;
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i)
    if (hole_every == 0 || i % hole_every != 0) v.push_back(i);
  return v;
}
// n random 32-bit ids (sparse over 2^32; may repeat, as hashes do).
inline std::vector<uint32_t> sparse_ids(uint64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = static_cast<uint32_t>(r.next() >> 32);
  return v;
}

}  // namespace shmf_bench
