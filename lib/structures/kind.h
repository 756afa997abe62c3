// lib/structures/kind.h: one row of the kinds table, the contract every kind folder fulfils.
//
// A kind is one folder, lib/structures/<kind>/, holding all of it, with the same file roles
// (lib/structures/README.md):
//   <kind>_impl.h        shared layout (fixed-width fields, static_asserts) + kernels over (base, offset)
//   <kind>.cpp           the handle of include/shmfilter/<kind>.hpp: open/validate, drop, its checker
//   <kind>_snapshot.cpp  save/restore of one entry of a save file (docs/save-restore.md)
//   <kind>_kind.cpp      its metrics (families + the shared numbers), its fuzz image and fuzz
//                        exercise, and the row (SHMF_KIND_ROW below), which kinds.cpp lists once
// Every part is required: a null one fails the build (KindRow's consteval constructor), and
// tests/unit/test_kinds.cpp runs every part of every row on the kind's fuzz image; tests/fuzz
// builds its images from the table, so a new kind cannot ship without a checker, a save path,
// metrics or fuzz coverage.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/segment.hpp"
#include "structures/metrics_collector.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal {

// What a kind's metrics hook reports through the shared shmfilter_structure_* families.
struct CommonMetrics {
  double bytes = 0, capacity = 0, items = 0, fill = 0, fp = 0;
  bool over = false;
};

// One field of a structure that a structure-aware fuzzer may corrupt (tests/fuzz): where it
// is in the segment (an absolute offset from base()), its width in bytes (1, 2, 4 or 8) and
// what it holds, so the mutator picks values that matter for it (another table's offset, the
// region's own offset, a count off by one, a shift past 63...).
struct FuzzField {
  enum Role : uint8_t { kCount, kOffset, kSize, kShift, kDescriptor, kTag };
  uint64_t offset;
  uint8_t width;
  Role role;
};

struct KindRow {
  using OpenFn = void (*)(Segment& seg, std::string_view name);
  using CheckFn = void (*)(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);
  using DropFn = bool (*)(Segment& seg, std::string_view name);
  using SaveFn = std::string (*)(Segment& seg, const RegionInfo& region);
  using RestoreFn = void (*)(Segment& seg, const std::string& name, snapshot::In data);
  using MetricsFn = CommonMetrics (*)(Segment& seg, const RegionInfo& region, const std::string& labels,
                                      MetricsCollector& out);
  using FuzzImageFn = void (*)(Segment& seg, std::string_view prefix);
  using FuzzExerciseFn = void (*)(Segment& seg, const RegionInfo& region);
  using FuzzFieldsFn = void (*)(const Segment& seg, const RegionInfo& region, std::vector<FuzzField>& out);

  Kind kind;         // the on-disk value (include/shmfilter/segment.hpp)
  const char* name;  // stable identifier: kind_name(), shmf_kind_name(), shmtool, nginx, Python, metric labels
  const char* noun;  // in messages: "bloom filter"

  // open/validate: opens a handle on NAME, validating every offset, size and count the
  // data plane will follow; a corrupt structure throws a named shmfilter::Error.
  OpenFn open;
  // check: the kind's invariants (after the segment checked the region's bounds); adds a
  // finding per problem and, with repair, fixes what it can. Safe beside running writers.
  CheckFn check;
  // drop: frees the region and every extent the kind owns; false when NAME is not there.
  DropFn drop;
  // save: one entry's data; restore: creates NAME from it (checksummed by the container,
  // otherwise untrusted: every size is checked before it is followed).
  SaveFn save;
  RestoreFn restore;
  // metrics: adds the kind's own families (declared in `families`) and returns the shared numbers.
  MetricsFn metrics;
  std::span<const MetricFamily> families;
  // fuzz image: creates in SEG small structures of this kind, in every state it can be in,
  // named "<prefix>..." (tests/fuzz builds its base image from every row's).
  FuzzImageFn fuzz_image;
  // fuzz exercise: every call a user can make on the structure (open, stats, queries,
  // writes, growth); throws shmfilter::Error at the first refusal, which is a right answer.
  FuzzExerciseFn fuzz_exercise;
  // fuzz fields: appends the fields of REGION (a consistent structure of this kind) that its
  // open/validate, check, drop and data plane follow: its header's offsets, sizes, counts,
  // shifts and descriptors, and those of every table it owns (followed from the header, each
  // offset bounds-checked against the segment first). The fuzzers' structure-aware mutators
  // corrupt exactly these (tests/fuzz/fuzz_fields.h), so a new kind is targeted by listing its.
  FuzzFieldsFn fuzz_fields;
  // Non-null when its READS write the segment, saying how (e.g. "its readers pin snapshots in
  // the segment"): a read-only (PROT_READ) attachment cannot open or check it.
  const char* reads_write;

  // Every part is a parameter, and a null hook is a compile-time error (consteval): a
  // kind cannot be built without its checker, drop, save/restore, metrics or fuzz image.
  consteval KindRow(Kind kind_, const char* name_, const char* noun_, OpenFn open_, CheckFn check_, DropFn drop_,
                    SaveFn save_, RestoreFn restore_, MetricsFn metrics_, std::span<const MetricFamily> families_,
                    FuzzImageFn fuzz_image_, FuzzExerciseFn fuzz_exercise_, FuzzFieldsFn fuzz_fields_,
                    const char* reads_write_)
      : kind(kind_), name(name_), noun(noun_), open(open_), check(check_), drop(drop_), save(save_),
        restore(restore_), metrics(metrics_), families(families_), fuzz_image(fuzz_image_),
        fuzz_exercise(fuzz_exercise_), fuzz_fields(fuzz_fields_), reads_write(reads_write_) {
    if (kind == Kind::kNone || name == nullptr || noun == nullptr || open == nullptr || check == nullptr ||
        drop == nullptr || save == nullptr || restore == nullptr || metrics == nullptr || fuzz_image == nullptr ||
        fuzz_exercise == nullptr || fuzz_fields == nullptr)
      throw "a kind's row needs every part: see lib/structures/kind.h";  // not a constant: the build fails
  }
};

// open/validate for a kind whose handle class validates in its open() (every kind but blob).
template <class Handle>
void open_handle(Segment& seg, std::string_view name) {
  (void)Handle::open(seg, name);
}

// Defines `kRow`, the kind's row, in the kind's namespace, from the folder's names: its
// handle's open and drop, CHECKER, SAVE and RESTORE, and what <kind>_kind.cpp defines
// under the names every folder uses: metrics, kFamilies, fuzz_image, fuzz_exercise and fuzz_fields.
// kinds.cpp declares the same `kRow` and lists it.
#define SHMF_KIND_ROW(KIND, NAME, NOUN, HANDLE, CHECKER, SAVE, RESTORE, READS_WRITE)                              \
  extern const ::shmfilter::internal::KindRow kRow;                                                               \
  constinit const ::shmfilter::internal::KindRow kRow(KIND, NAME, NOUN, &::shmfilter::internal::open_handle<HANDLE>, \
                                                      &CHECKER, &HANDLE::drop, &SAVE, &RESTORE, &metrics, kFamilies, \
                                                      &fuzz_image, &fuzz_exercise, &fuzz_fields, READS_WRITE)

// fuzz_fields helpers: appends the field of WIDTH bytes at OFFSET (from the segment base).
inline void fuzz_field(std::vector<FuzzField>& out, uint64_t offset, uint8_t width, FuzzField::Role role) {
  out.push_back(FuzzField{offset, width, role});
}
// True when [OFFSET, OFFSET + BYTES) lies inside SEG's file (a table a header points at may be followed).
inline bool fuzz_in_segment(const Segment& seg, uint64_t offset, uint64_t bytes) {
  const uint64_t size = seg.stats().size;
  return offset >= 64 && bytes <= size && offset <= size - bytes;
}

// The kinds table (kinds.cpp): every kind this build knows, in Kind order.
std::span<const KindRow* const> kind_rows() noexcept;
// The row of KIND; nullptr for kNone and values this build does not know.
const KindRow* kind_row(Kind kind) noexcept;

}  // namespace shmfilter::internal
