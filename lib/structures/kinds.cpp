// lib/structures/kinds.cpp: the kinds table, the one list of the kinds this build knows.
//
// Each kind folder (lib/structures/<kind>/) defines its row in <kind>_kind.cpp
// (structures/kind.h says what a row holds); this file lists the rows once, in Kind
// order. Everything that needs "every kind" or "this kind's X" reads it: kind_name(),
// Segment::check (lib/check), save/restore and metrics (lib/ops), the handles' wording
// (region_handle.cpp), the C API's kind names, shmtool, nginx and Python through those,
// and the fuzz targets. tests/unit/test_kinds.cpp fails when a row lacks a part.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "shmfilter/error.hpp"
#include "shmfilter/kinds.hpp"

#include "structures/kind.h"

namespace shmfilter {
namespace internal {

namespace bloom { extern const KindRow kRow; }
namespace cuckoo { extern const KindRow kRow; }
namespace roaring { extern const KindRow kRow; }
namespace hll { extern const KindRow kRow; }
namespace exact_set { extern const KindRow kRow; }
namespace blob { extern const KindRow kRow; }
namespace window { extern const KindRow kRow; }
namespace uv { extern const KindRow kRow; }

namespace {

// Index i holds the row of Kind value i + 1 (test_kinds checks it).
constexpr std::array<const KindRow*, 8> kRows = {
    &bloom::kRow, &cuckoo::kRow, &roaring::kRow, &hll::kRow, &exact_set::kRow, &blob::kRow, &window::kRow, &uv::kRow,
};
static_assert(kRows.size() == static_cast<size_t>(kLastKind), "one row for every Kind value (segment.hpp)");

}  // namespace

std::span<const KindRow* const> kind_rows() noexcept { return kRows; }

const KindRow* kind_row(Kind kind) noexcept {
  const auto v = static_cast<uint32_t>(kind);
  if (v == 0 || v > kRows.size()) return nullptr;
  return kRows[v - 1];
}

}  // namespace internal

std::string_view kind_name(Kind kind) noexcept {
  if (kind == Kind::kNone) return "none";
  const internal::KindRow* row = internal::kind_row(kind);
  return row ? row->name : "unknown";
}

std::optional<Kind> kind_from_name(std::string_view name) noexcept {
  for (const internal::KindRow* row : internal::kind_rows())
    if (name == row->name) return row->kind;
  return std::nullopt;
}

std::vector<Kind> known_kinds() {
  std::vector<Kind> out;
  for (const internal::KindRow* row : internal::kind_rows()) out.push_back(row->kind);
  return out;
}

bool drop_structure(Segment& seg, std::string_view name) {
  const std::optional<RegionInfo> r = seg.find(name);
  if (!r) return false;
  if (const internal::KindRow* row = internal::kind_row(r->kind)) return row->drop(seg, name);
  throw Error(ErrorCode::kVersionMismatch, "'" + std::string(name) + "' is of kind " +
                                               std::to_string(static_cast<uint32_t>(r->kind)) +
                                               ", which this build does not know: drop it with the build that made it");
}

}  // namespace shmfilter
