// lib/ops/advise.cpp: profile a sample of IDs and size every candidate
// structure with the library's own sizing (shmfilter/advise.hpp).
//
// Roaring extrapolation (docs/advise.md). A CRoaring bitmap is built from
// the sample (run-optimised) to measure its containers; the daily set is then
// modelled one of two ways, chosen by the sample's density d = distinct /
// (max - min + 1):
//   sequential-like (d >= 1/16: on average >= 4096 values per chunk): the
//     daily set has the same density over a range `capacity / d` long, so
//     chunks = ceil(capacity / (d x 65536)), each holding c = d x 65536 values;
//   scattered (d < 1/16, e.g. hashes): the range stays [min, max] (R chunks)
//     and every chunk holds c = capacity / R values on average; chunks
//     present = R (1 - e^-c).
// A chunk of c values with rho runs (rho = c x sample runs / distinct) costs
// min(2c array, 8192 bitmap, 2 + 4 rho run) bytes + 8 (portable key, count
// and offset), as roaring_bitmap_run_optimize chooses. Test vectors (seed):
// dense 0..1e8 -> 1526 bitmap chunks = 12.5 MB without runs (and ~15 KB of
// run containers with them); 1.2e8 hashes over 2^32 -> 65536 chunks of 1831
// values = 240 MB of arrays. Where it stops holding: clustered IDs (bands of
// dense ranges with gaps between) are priced as if spread evenly.
#include "shmfilter/advise.hpp"

#include <roaring/roaring.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/window.hpp"
#include "structures/cuckoo/cuckoo_impl.h"     // fp_bits_for_error, geometry_for, region_bytes_for: create()'s sizing
#include "structures/exact_set/exact_set_impl.h"  // set_layout: create()'s sizing
#include "structures/hll/hll_impl.h"        // kHllRegionBytes

namespace shmfilter {
namespace {

namespace ck = internal::cuckoo;

constexpr uint64_t kChunk = 65536;
constexpr double kContainerOverhead = 8;  // portable: 2-byte key + 2-byte count + 4-byte offset

double container_bytes(double c, double rho, bool runs) {
  double b = std::min(2 * c, 8192.0);
  if (runs) b = std::min(b, 2 + 4 * std::max(1.0, rho));
  return b + kContainerOverhead;
}

// Roaring bytes for `capacity` values modelled on the profile; runs=false prices array/bitmap only.
double roaring_estimate(const IdProfile& p, uint64_t capacity, bool runs) {
  const double n = static_cast<double>(p.distinct);
  const double span = static_cast<double>(p.max - p.min) + 1;
  const double d = n / span;
  const double runs_per_value = static_cast<double>(p.runs) / n;
  const double cap = static_cast<double>(capacity);
  if (d >= 1.0 / 16) {
    double c = std::min(d * kChunk, cap);
    double chunks = std::ceil(cap / c);
    return chunks * container_bytes(c, c * runs_per_value, runs);
  }
  double r = static_cast<double>((p.max >> 16) - (p.min >> 16) + 1);
  double c = cap / r;
  double present = r * (1 - std::exp(-c));
  double per = std::max(c / std::max(1.0 - std::exp(-c), 1e-300), 1.0);  // values per present chunk
  return present * container_bytes(per, per * runs_per_value, runs);
}

IdProfile profile(std::span<const uint64_t> ids) {
  IdProfile p;
  p.lines = ids.size();
  std::vector<uint64_t> v(ids.begin(), ids.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  p.distinct = v.size();
  p.duplicates_ratio = 1.0 - static_cast<double>(p.distinct) / static_cast<double>(p.lines);
  p.min = v.front();
  p.max = v.back();
  p.fits_32 = p.max < (uint64_t{1} << 32);
  p.runs = 1;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[i - 1] + 1) ++p.runs;
  // Chunks and their fill.
  p.chunk_histogram.assign(17, 0);
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && (v[j] >> 16) == (v[i] >> 16)) ++j;
    ++p.chunks;
    p.chunk_histogram[static_cast<size_t>(std::bit_width(static_cast<uint64_t>(j - i)) - 1)]++;
    i = j;
  }
  p.values_per_chunk = static_cast<double>(p.distinct) / static_cast<double>(p.chunks);
  // Value distribution: 64 equal-width bins over [min, max].
  p.value_histogram.assign(64, 0);
  const long double span = static_cast<long double>(p.max - p.min) + 1;
  for (uint64_t x : v) {
    auto bin = static_cast<size_t>(static_cast<long double>(x - p.min) * 64 / span);
    p.value_histogram[std::min<size_t>(bin, 63)]++;
  }
  if (p.fits_32) {
    roaring_bitmap_t* r = roaring_bitmap_create();
    std::vector<uint32_t> v32(v.begin(), v.end());
    roaring_bitmap_add_many(r, v32.size(), v32.data());
    roaring_bitmap_run_optimize(r);
    roaring_statistics_t st;
    roaring_bitmap_statistics(r, &st);
    p.array_containers = st.n_array_containers;
    p.bitmap_containers = st.n_bitset_containers;
    p.run_containers = st.n_run_containers;
    p.sample_roaring_bytes = roaring_bitmap_portable_size_in_bytes(r);
    roaring_bitmap_free(r);
  }
  return p;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", 100 * v);
  return buf;
}

// Options out of range: rejected, each with its own error.
void check_options(std::span<const uint64_t> ids, const AdviseOptions& o) {
  if (ids.empty()) throw Error(ErrorCode::kBadInput, "no IDs in the sample: pass a file (or stdin) with one ID per line");
  if (!(o.error > 0 && o.error < 1))
    throw Error(ErrorCode::kInvalidArgument, "error rate " + std::to_string(o.error) + " is outside (0, 1): pass e.g. 0.01");
  if (!(o.headroom >= 1 && o.headroom <= 100))
    throw Error(ErrorCode::kInvalidArgument, "headroom " + std::to_string(o.headroom) + " is outside [1, 100]: pass e.g. 1.5");
  // Checked before any conversion: daily x headroom becomes an integer capacity, and an
  // out-of-range double converted to an integer is undefined behaviour (--daily 1.8e19).
  if (o.daily > kAdviseMaxDaily)
    throw Error(ErrorCode::kInvalidArgument, "daily volume " + std::to_string(o.daily) + " is above " +
                                                 std::to_string(kAdviseMaxDaily) +
                                                 " IDs a day, more than any segment can hold: pass e.g. 120M");
  if (o.window_days > 366)
    throw Error(ErrorCode::kInvalidArgument, "window of " + std::to_string(o.window_days) + " days: pass 1..366");
}

// Roaring, priced by the extrapolation at the top; also sets a.roaring_bytes_without_runs.
Candidate roaring_candidate(const AdviseOptions& o, Advice& a) {
  const IdProfile& p = a.profile;
  Candidate roaring{"roaring", p.fits_32 && !o.hashed_strings, 0, 0, true, true, ""};
  if (roaring.applicable) {
    roaring.bytes = static_cast<uint64_t>(roaring_estimate(p, a.capacity, true));
    a.roaring_bytes_without_runs = static_cast<uint64_t>(roaring_estimate(p, a.capacity, false));
    roaring.note = "exact, set algebra; " + std::to_string(p.distinct) + " sample IDs in " + std::to_string(p.chunks) +
                   " chunks (" + std::to_string(p.array_containers) + " array, " + std::to_string(p.bitmap_containers) +
                   " bitmap, " + std::to_string(p.run_containers) + " run containers)";
  } else {
    roaring.note = o.hashed_strings ? "string IDs hash to 64 bits: no 32-bit integers to store"
                                    : "values exceed 32 bits (Roaring64 keeps a map of the high halves; the memory "
                                      "advantage is gone)";
  }
  return roaring;
}

// Bloom, blocked (the library's layout) and classic (textbook), sized by Bloom::plan.
Candidate bloom_candidate(const AdviseOptions& o, uint64_t capacity, BloomLayout layout) {
  BloomOptions bo;
  bo.capacity = capacity;
  bo.error = o.error;
  bo.layout = layout;
  const BloomSizing sz = Bloom::plan(bo);
  char note[200];
  if (layout == BloomLayout::kClassic) {
    std::snprintf(note, sizeof note, "textbook sizing: %.2f bits/ID, k=%u probes (k cache misses)", sz.bits_per_key,
                  sz.k);
    return Candidate{"bloom-classic", true, sz.region_bytes, o.error, false, true, note};
  }
  std::snprintf(note, sizeof note, "one cache line per query; %.2f bits/ID, k=%u; no deletion", sz.bits_per_key, sz.k);
  return Candidate{"bloom", true, sz.region_bytes, o.error, false, true, note};
}

// Cuckoo, sized as Cuckoo::create sizes it.
Candidate cuckoo_candidate(const AdviseOptions& o, uint64_t capacity) {
  Candidate cuckoo{"cuckoo", true, 0, 0, true, true, ""};
  uint32_t f = ck::fp_bits_for_error(o.error);
  const ck::Geometry geo = ck::geometry_for(capacity);
  if (geo.buckets() > ck::kMaxBuckets) {
    cuckoo.applicable = false;
    cuckoo.note = "more than 2^32 buckets";
  } else {
    const uint32_t lane = ck::lane_bits_for(f);  // as create: f = 12 in packed 12-bit lanes
    cuckoo.bytes = ck::region_bytes_for(geo, lane);
    cuckoo.fp_rate = 8.0 / static_cast<double>(uint64_t{1} << f);
    double load = static_cast<double>(capacity) / static_cast<double>(4 * geo.buckets());
    char note[200];
    std::snprintf(note, sizeof note, "%u-bit fingerprints, load %.0f%% at capacity (buckets in 2^16 chunks); deletes",
                  f, 100 * load);
    cuckoo.note = note;
  }
  return cuckoo;
}

// The window structure, sized by Window::plan (the sizing Window::create uses): one bucket
// table per day holding `capacity` pairs, error P for a query over all W days (so one
// bucket gets p1 = 1 - (1 - P)^(1/W)), W tables + the spare the next day rotates into.
// The variant: the default, stamped (one table for every day, deletable, caps), where it holds
// the window (<= 12 buckets, a rate >= its 0.2%); else --deletes picks the deletable cuckoo ring,
// and the insert-only Bloom ring otherwise.
Candidate window_candidate(const AdviseOptions& o, uint64_t capacity) {
  Candidate window{"window", o.window_days > 0, 0, 0, o.deletes, true, ""};
  if (o.window_days > kWindowMaxRetention) {
    window.applicable = false;
    window.note = "a window keeps at most " + std::to_string(kWindowMaxRetention) +
                  " buckets: use longer buckets (window create --bucket-seconds)";
  } else if (o.window_days > 0) {
    WindowOptions wo;
    const bool stamped = o.window_days <= 12 && o.error >= 8.0 / 4096;
    wo.variant = stamped ? WindowVariant::kStamped : o.deletes ? WindowVariant::kCuckoo : WindowVariant::kBloom;
    wo.expected_per_bucket = capacity;
    wo.error = o.error;
    wo.retention = o.window_days;
    try {
      const WindowSizing ws = Window::plan(wo);
      window.bytes = ws.full_window_bytes;
      window.fp_rate = o.error;
      window.deletes = stamped || o.deletes;
      char note[220];
      if (stamped)
        std::snprintf(note, sizeof note, "variant stamped: one table for all %u days (%s lanes of 16 bits, a pair once "
                      "whatever its days), %.2f bits/pair; a %u-day question reads what a 1-day one reads; deletes, caps",
                      o.window_days, format_size(ws.shared_bytes).c_str(), ws.bits_per_pair, o.window_days);
      else
        std::snprintf(note, sizeof note, "%u day tables (%s) + 1 spare, %s each, %.2f bits/pair; FP over a %u-day "
                      "question (one call), %s a day", o.window_days, o.deletes ? "cuckoo" : "Bloom",
                      format_size(ws.table_bytes).c_str(), ws.bits_per_pair, o.window_days, pct(ws.one_bucket_error).c_str());
      window.note = note;
    } catch (const Error& e) {
      window.applicable = false;
      window.note = e.what();
    }
  } else {
    window.note = "no --window asked";
  }
  return window;
}

// The seed's selection table, first match wins.
void choose(const AdviseOptions& o, const Candidate& roaring, const Candidate& bloom, const Candidate& window,
            Advice& a) {
  if (o.count_only) {
    a.choice = "hll";
    a.reason = "only the count of distinct IDs is asked: HyperLogLog, fixed 13 KB, 0.81% error";
  } else if (roaring.applicable && roaring.bytes <= bloom.bytes) {
    a.choice = "roaring";
    a.reason = "IDs fit 32 bits and fill their chunks densely enough that Roaring, exact and deletable, is smaller "
               "than a Bloom filter at " + pct(o.error);
  } else if (a.daily < 10'000'000) {
    a.choice = "set";
    a.reason = "fewer than 1e7 IDs a day: an exact set; the memory an approximate filter saves does not pay for "
               "its false positives";
  } else if (o.window_days > 0 && window.applicable && o.deletes) {
    a.choice = "window";
    a.reason = "the workload deletes IDs, over a " + std::to_string(o.window_days) + "-day window: the window structure's " +
               (window.note.rfind("variant stamped", 0) == 0 ? std::string("stamped variant (one table for every day, deletable)")
                                                             : std::string("deletable (cuckoo) variant, one table per day"));
  } else if (o.deletes) {
    a.choice = "cuckoo";
    a.reason = "the workload deletes IDs and a Bloom filter cannot: a Cuckoo filter";
    if (a.daily > 50'000'000)
      a.reason += " (above 5e7 a day its kick chains fail more often: watch shmfilter_cuckoo_insert_failures_total)";
  } else if (o.window_days > 0 && window.applicable) {
    a.choice = "window";
    a.reason = "sparse or 64-bit IDs, insert-only, over a " + std::to_string(o.window_days) +
               "-day window: one window structure instead of daily filters OR-ed at query time";
  } else {
    a.choice = "bloom";
    a.reason = "sparse or 64-bit IDs, insert-only: a Bloom filter (~1.2 bytes per ID at 1% is about the floor)";
  }
}

}  // namespace

Advice advise(std::span<const uint64_t> ids, const AdviseOptions& o) {
  check_options(ids, o);
  Advice a;
  a.profile = profile(ids);
  a.daily = o.daily ? o.daily : a.profile.distinct;
  const double capacity = std::ceil(static_cast<double>(a.daily) * o.headroom);  // <= 1e14: in range, exact enough
  a.capacity = static_cast<uint64_t>(capacity);
  const Candidate roaring = roaring_candidate(o, a);
  const Candidate bloom = bloom_candidate(o, a.capacity, BloomLayout::kBlocked);
  const Candidate bloom_classic = bloom_candidate(o, a.capacity, BloomLayout::kClassic);
  const Candidate cuckoo = cuckoo_candidate(o, a.capacity);
  const internal::exact_set::SetLayout sl = internal::exact_set::set_layout(a.capacity, 0.8);
  const Candidate set{"set", true, sl.bytes, 0, true, true, "exact 64-bit keys, 10 bytes/ID at 80% load; deletes"};
  const Candidate hll{"hll", true, internal::hll::kHllRegionBytes, 0.0081, false, false,
                      "counts distinct IDs only (+-0.81%): NOT a membership test"};
  const Candidate window = window_candidate(o, a.capacity);
  choose(o, roaring, bloom, window, a);
  a.candidates = {roaring, bloom, bloom_classic, cuckoo, set, window, hll};
  return a;
}

}  // namespace shmfilter
