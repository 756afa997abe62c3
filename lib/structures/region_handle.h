// lib/structures/region_handle.h: the wording and preludes every structure
// shares (its handle base is the public shmfilter/region_handle.hpp). Used by
// lib/structures/X.cpp only; defined in lib/structures/region_handle.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shmfilter/region_handle.hpp"

namespace shmfilter::internal {

// How messages name a structure of KIND: "bloom filter", "cuckoo filter",
// "Roaring set", "HyperLogLog", "exact set".
std::string_view structure_noun(Kind kind) noexcept;

// kCorrupt: "<noun> '<name>' is corrupt: <problem>: run 'shmtool check' on the
// segment, then drop and recreate the structure".
Error corrupt_error(Kind kind, std::string_view name, const std::string& problem);
// kVersionMismatch: "<noun> '<name>' has layout version F, this build reads E: use a matching shmfilter".
Error version_error(Kind kind, std::string_view name, uint32_t found, uint32_t expected);
// kReadOnly: "<noun> '<name>': WHAT needs a read-write attachment: the segment was opened read-only ...".
[[noreturn]] void throw_read_only(Kind kind, std::string_view name, const char* what);
// The bounds every region is checked against first: "" when INFO's region holds
// at least MIN_BYTES and lies inside a segment of SEGMENT_SIZE bytes, else the problem.
std::string region_bounds_problem(const RegionInfo& info, uint64_t min_bytes, uint64_t segment_size);

// Every structure's region header starts with these two words (each X.cpp
// static_asserts it), so the first checks are the same for all.
struct RegionPrefix {
  uint32_t magic;
  uint32_t version;
};
struct PrefixCheck {
  std::string problem;            // "" when the prefix is fine
  bool version_mismatch = false;  // the problem is a layout version this build does not read
};
// In order: region bounds (region_bounds_problem, MIN_BYTES >= sizeof(RegionPrefix)),
// magic, layout version. Reads the region only after its bounds are checked.
PrefixCheck check_prefix(const RegionInfo& info, const std::byte* region, uint64_t min_bytes, uint64_t segment_size,
                         uint32_t magic, uint32_t version);
// check_prefix, thrown: corrupt_error, or version_error for a version mismatch.
void validate_prefix(const RegionInfo& info, const std::byte* region, uint64_t min_bytes, uint64_t segment_size,
                     uint32_t magic, uint32_t version);

// A checker's prelude: the finding's `where` ("<kind> '<name>'"), and the
// header validation that must pass before anything else is read.
struct CheckScope {
  std::string where;
  CheckReport& report;
  // Runs VALIDATE (which throws Error on a bad header); on Error adds its
  // message as one unrepaired finding and returns false: stop checking.
  template <class F>
  bool validated(F&& validate) {
    try {
      validate();
      return true;
    } catch (const Error& e) {
      report.findings.push_back({where, e.what(), false});
      return false;
    }
  }
  void add(std::string problem, bool repaired = false) { report.findings.push_back({where, std::move(problem), repaired}); }
};
CheckScope check_scope(const RegionInfo& region, CheckReport& report);

}  // namespace shmfilter::internal
