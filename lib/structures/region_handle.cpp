// lib/structures/region_handle.cpp: lookup, drop, kDropped and the shared
// error wording of every structure handle (shmfilter/region_handle.hpp,
// lib/structures/region_handle.h).
#include "structures/region_handle.h"

#include "structures/kind.h"

namespace shmfilter::internal {

std::string_view structure_noun(Kind kind) noexcept {
  const KindRow* row = kind_row(kind);
  return row ? row->noun : "structure";
}

namespace {
std::string named(Kind kind, std::string_view name) {
  return std::string(structure_noun(kind)) + " '" + std::string(name) + "'";
}
}  // namespace

Error corrupt_error(Kind kind, std::string_view name, const std::string& problem) {
  return Error(ErrorCode::kCorrupt, named(kind, name) + " is corrupt: " + problem +
                                        ": run 'shmtool check' on the segment, then drop and recreate the " +
                                        std::string(kind_name(kind)));
}

Error version_error(Kind kind, std::string_view name, uint32_t found, uint32_t expected) {
  return Error(ErrorCode::kVersionMismatch, named(kind, name) + " has layout version " + std::to_string(found) +
                                                ", this build reads " + std::to_string(expected) +
                                                ": use a matching shmfilter");
}

std::string region_bounds_problem(const RegionInfo& info, uint64_t min_bytes, uint64_t segment_size) {
  if (info.size < min_bytes)
    return "region of " + std::to_string(info.size) + " bytes is smaller than its " + std::to_string(min_bytes) +
           "-byte header";
  if (info.offset > segment_size || info.size > segment_size - info.offset) return "region lies outside the segment";
  // The allocator hands out 64-byte aligned payloads only; every header is alignas(64).
  if (info.offset % 64 != 0) return "region offset " + std::to_string(info.offset) + " is not 64-byte aligned";
  return {};
}

PrefixCheck check_prefix(const RegionInfo& info, const std::byte* region, uint64_t min_bytes, uint64_t segment_size,
                         uint32_t magic, uint32_t version) {
  if (min_bytes < sizeof(RegionPrefix)) min_bytes = sizeof(RegionPrefix);
  if (auto p = region_bounds_problem(info, min_bytes, segment_size); !p.empty()) return {p};
  const auto* pre = reinterpret_cast<const RegionPrefix*>(region);
  if (pre->magic != magic) return {"bad magic (not a " + std::string(structure_noun(info.kind)) + " region)"};
  if (pre->version != version)
    return {"layout version " + std::to_string(pre->version) + ", this build reads " + std::to_string(version), true};
  return {};
}

void validate_prefix(const RegionInfo& info, const std::byte* region, uint64_t min_bytes, uint64_t segment_size,
                     uint32_t magic, uint32_t version) {
  PrefixCheck c = check_prefix(info, region, min_bytes, segment_size, magic, version);
  if (c.version_mismatch)
    throw version_error(info.kind, info.name, reinterpret_cast<const RegionPrefix*>(region)->version, version);
  if (!c.problem.empty()) throw corrupt_error(info.kind, info.name, c.problem);
}

CheckScope check_scope(const RegionInfo& region, CheckReport& report) {
  return CheckScope{std::string(kind_name(region.kind)) + " '" + region.name + "'", report};
}

bool RegionHandle::valid() const noexcept { return region_ != nullptr && seg_.region_live(slot_, generation_); }

RegionInfo RegionHandle::bind(Segment& seg, std::string_view name, Kind kind) {
  RegionInfo info = seg.open_region(name, kind);
  bind(seg, info);
  return info;
}

void throw_read_only(Kind kind, std::string_view name, const char* what) {
  throw Error(ErrorCode::kReadOnly, std::string(structure_noun(kind)) + " '" + std::string(name) + "': " + what +
                                        " needs a read-write attachment, and the segment was opened read-only "
                                        "(OpenOptions::read_only, shmtool --read-only): open it read-write");
}

void RegionHandle::refuse_read_only_kind(const Segment& seg, const RegionInfo& info) {
  // Kinds whose READS write the segment (their row says how: a Roaring reader pins
  // the snapshot it reads in a shared slot, a window's first reader of a new bucket
  // rotates it) cannot be used through a PROT_READ mapping.
  if (!seg.read_only()) return;
  const KindRow* row = kind_row(info.kind);
  if (row != nullptr && row->reads_write != nullptr)
    throw Error(ErrorCode::kReadOnly, std::string(row->noun) + " '" + info.name +
                                          "' cannot be opened through a read-only attachment (" + row->reads_write +
                                          "): open the segment read-write to query it");
}

void RegionHandle::bind(Segment& seg, const RegionInfo& info) {
  refuse_read_only_kind(seg, info);
  read_only_ = seg.read_only();
  seg_ = seg;
  name_ = info.name;
  region_ = seg.base() + info.offset;
  slot_ = info.slot;
  generation_ = info.generation;
  kind_ = info.kind;
}

bool RegionHandle::drop_region(Segment& seg, std::string_view name, Kind kind, const DropFn& on_drop) {
  auto found = seg.find(name);
  if (!found) return false;
  if (found->kind != kind)
    throw Error(ErrorCode::kWrongKind, "'" + std::string(name) + "' is a " + std::string(kind_name(found->kind)) +
                                           ", not a " + std::string(kind_name(kind)) +
                                           ": drop it with the command of its kind");
  return seg.drop(name, on_drop);
}

void RegionHandle::require_valid() const {
  if (!valid())
    throw Error(ErrorCode::kDropped, named(kind_, name_) + " was dropped by some process: open it again");
}

RegionInfo RegionHandle::identity() const {
  RegionInfo me;
  me.name = name_;
  me.kind = kind_;
  me.offset = region_ ? static_cast<uint64_t>(region_ - seg_.base()) : 0;
  me.slot = slot_;
  me.generation = generation_;
  return me;
}

}  // namespace shmfilter::internal
