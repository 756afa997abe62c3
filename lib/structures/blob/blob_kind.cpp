// lib/structures/blob/blob_kind.cpp: the blob's row of the kinds table (structures/kind.h).
//
// A blob is a named region of raw bytes (Kind::kBlob: tests, the demo's bookkeeping):
// no layout, no handle class, no extents. So its whole folder is this row:
//   open/validate  the directory lookup as a blob (Segment::open_region);
//   check          nothing beyond the region's bounds, which the segment's own check
//                  verified before any checker runs (lib/segment/self_check.cpp);
//   drop           the region (it owns nothing else);
//   save/restore   [u64 bytes][the bytes, read with relaxed atomic loads];
//   metrics        its bytes;
//   fuzz image     one 128-byte blob; exercise: open and read it.
#include <cstring>
#include <vector>
#include <string>
#include <string_view>

#include "structures/kind.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::blob {
namespace {

using namespace snapshot;

constexpr std::span<const MetricFamily> kFamilies{};

void open_validate(Segment& seg, std::string_view name) { (void)seg.open_region(name, Kind::kBlob); }

void check(Segment&, const RegionInfo&, bool, CheckReport&) {
  // Raw bytes: every byte pattern is a valid blob, and its bounds are the segment's to check.
}

bool drop(Segment& seg, std::string_view name) {
  if (!seg.find(name)) return false;
  (void)seg.open_region(name, Kind::kBlob);  // kWrongKind, naming both kinds, for another kind
  return seg.drop(name);
}

std::string save(Segment& seg, const RegionInfo& r) {
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  return o.b;
}

void restore(Segment& seg, const std::string& name, In in) {
  const uint64_t size = in.u64();
  if (size == 0) fail(ErrorCode::kBadInput, in.what + ": a blob of 0 bytes");
  const unsigned char* bytes = in.take(size);  // bounded by the entry: never more than the file holds
  if (in.left != 0) fail(ErrorCode::kBadInput, in.what + " has bytes after the blob: the file is damaged");
  seg.create_region(name, Kind::kBlob, size, [&](std::byte* region, uint64_t, ControlTxn&) {
    std::memcpy(region, bytes, size);
  });
}

CommonMetrics metrics(Segment&, const RegionInfo& r, const std::string&, MetricsCollector&) {
  CommonMetrics v;
  v.bytes = static_cast<double>(r.size);
  return v;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  seg.create_region(std::string(prefix) + "blob", Kind::kBlob, 128,
                    [](std::byte* p, uint64_t n, ControlTxn&) { std::memset(p, 7, n); });
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  const RegionInfo info = seg.open_region(r.name, Kind::kBlob);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < info.size; ++i) sum += static_cast<uint64_t>(seg.base()[info.offset + i]);
  (void)sum;
}

// A blob has no header: its bytes are the user's, and only its directory entry (the
// segment's, fuzzed through the directory anchors) says where they are.
void fuzz_fields(const Segment&, const RegionInfo&, std::vector<FuzzField>&) {}

}  // namespace

extern const KindRow kRow;
constinit const KindRow kRow(
    Kind::kBlob,  // kind
    "blob",  // name
    "blob",  // noun
    &open_validate,  // open
    &check,  // check
    &drop,  // drop
    &save,  // save
    &restore,  // restore
    &metrics,  // metrics
    kFamilies,  // families
    &fuzz_image,  // fuzz_image
    &fuzz_exercise,  // fuzz_exercise
    &fuzz_fields,  // fuzz_fields
    nullptr  // reads_write
);

}  // namespace shmfilter::internal::blob
