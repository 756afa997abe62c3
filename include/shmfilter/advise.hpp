// shmfilter/advise.hpp: measure a sample of IDs, then choose a structure
// (the seed's closing advice: "first draw the histogram, then choose").
//
// advise() profiles the sample (distinct count, duplicates, value range, whether
// every value fits 32 bits, how densely the values fill 2^16-value chunks: the
// Roaring container question) and sizes every candidate at the expected daily
// volume with the library's own sizing: Bloom::plan for Bloom, Window::plan for
// the window structure (W day tables + the spare, cuckoo variant with deletes),
// the cuckoo and exact-set layouts as create() allocates them, and for Roaring a CRoaring
// bitmap built from the sample (run-optimised) whose containers are
// extrapolated to the daily volume (docs/advise.md has the model and where it
// stops holding). The choice follows the seed's selection table.
//
// Pure computation: no segment, no shared state; throws kInvalidArgument for
// bad options and kBadInput for an empty sample.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shmfilter/error.hpp"

namespace shmfilter {

// The largest daily volume advise() sizes for (kInvalidArgument above it): 1e12 IDs a day.
inline constexpr uint64_t kAdviseMaxDaily = 1'000'000'000'000ull;

struct AdviseOptions {
  uint64_t daily = 0;         // expected distinct IDs per day (<= kAdviseMaxDaily); 0: the sample's distinct count
  double error = 0.01;        // false-positive target for the approximate candidates
  bool deletes = false;       // the workload must remove IDs (undo, refunds)
  uint32_t window_days = 0;   // > 0: a sliding window of this many days is asked
  bool count_only = false;    // only "how many distinct" is asked (UV): HyperLogLog
  double headroom = 1.5;      // capacity = daily x headroom (the seed: reserve >= 1.5x peak)
  bool hashed_strings = false;  // the values are XXH3 hashes of arbitrary strings (ranges mean nothing)
};

// What the sample looks like.
struct IdProfile {
  uint64_t lines = 0;             // IDs read
  uint64_t distinct = 0;
  double duplicates_ratio = 0;    // 1 - distinct / lines
  uint64_t min = 0, max = 0;
  bool fits_32 = false;           // max < 2^32
  uint64_t chunks = 0;            // distinct values >> 16 (32-bit samples: Roaring containers)
  double values_per_chunk = 0;    // distinct / chunks
  uint32_t array_containers = 0, bitmap_containers = 0, run_containers = 0;  // the sample's bitmap, run-optimised
  uint64_t sample_roaring_bytes = 0;  // its portable serialization
  uint64_t runs = 0;              // maximal runs of consecutive values in the sample
  std::vector<uint64_t> value_histogram;  // 64 equal-width bins over [min, max] (distinct values)
  std::vector<uint64_t> chunk_histogram;  // 17 bins: chunks holding [2^i, 2^(i+1)) values, i = 0..16
};

// One structure sized for the workload.
struct Candidate {
  std::string structure;   // "roaring", "bloom", "bloom-classic", "cuckoo", "set", "hll", "window"
  bool applicable = true;  // false: cannot hold these IDs (why in note)
  uint64_t bytes = 0;      // at capacity ("window": Window::plan's full_window_bytes, all days + the spare)
  double fp_rate = 0;      // 0: exact
  bool deletes = false;    // supports removing one ID
  bool membership = true;  // answers "seen before?" (HLL does not)
  std::string note;
};

struct Advice {
  IdProfile profile;
  uint64_t daily = 0;      // as used (option or sample distinct)
  uint64_t capacity = 0;   // daily x headroom, what the create commands reserve
  std::vector<Candidate> candidates;
  std::string choice;      // one of the candidates' structure names
  std::string reason;      // the row of the selection table that decided, in words
  uint64_t roaring_bytes_without_runs = 0;  // Roaring with array/bitmap containers only (the seed's 12.5 MB figure)
};

// Profiles `ids` (any order, duplicates allowed) and recommends. Throws
// kBadInput when ids is empty, kInvalidArgument for options out of range.
Advice advise(std::span<const uint64_t> ids, const AdviseOptions& options);

}  // namespace shmfilter
