// shmfilter/region_handle.hpp: what every structure handle shares.
//
// Bloom, Cuckoo, RoaringSet, Hll, ExactSet and Window are thin, copyable values over
// one named region of a Segment. This base holds the part they have in
// common: the attachment, the structure's name, the region's address and the
// directory identity (slot + generation) by which a handle learns that some
// process dropped its structure. Lookup (kNotFound / kWrongKind), drop
// (kWrongKind for another kind) and kDropped have one wording for all kinds
// (lib/structures/region_handle.cpp). Each handle adds only its own parts.
// Not meant to be used on its own: its constructor is protected.
//
// A handle's private state has one shape (lib/structures/README.md): plain data fields,
// each with a comment (offsets and pointers validated at open, process-local state),
// and one `friend struct <Kind>Ops;` whose definition lives in the kind's folder,
// lib/structures/<kind>/, and holds every private operation as static functions taking
// the handle by reference. A public header declares no private member function and no
// private constructor; a kind with no private operation (Hll) has no Ops.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

class RegionHandle {
 public:
  // Lock-free, any process: false once some process dropped the structure
  // (and for a default-constructed handle).
  bool valid() const noexcept;
  // Local, immutable.
  const std::string& name() const noexcept { return name_; }

 protected:
  using DropFn = std::function<void(std::byte* region, uint64_t bytes, ControlTxn& txn)>;

  RegionHandle() = default;
  // Lock-free lookup of NAME as KIND (throws kNotFound / kWrongKind); binds
  // this handle to it. The caller validates the region's header next.
  RegionInfo bind(Segment& seg, std::string_view name, Kind kind);
  // Binds to a region already looked up (INFO as the directory gave it).
  void bind(Segment& seg, const RegionInfo& info);
  // Throws kReadOnly when seg is a read-only attachment and info's kind cannot
  // be used through one (Roaring, Window: their reads write). bind() calls it;
  // a handle that touches the region before bind() must call it first.
  static void refuse_read_only_kind(const Segment& seg, const RegionInfo& info);
  // Control plane, takes the segment lock: drops NAME if it holds KIND
  // (on_drop frees the structure's extra extents); false when absent;
  // kWrongKind, naming both kinds, when it holds another kind.
  static bool drop_region(Segment& seg, std::string_view name, Kind kind, const DropFn& on_drop = {});
  // Throws kDropped unless valid().
  void require_valid() const;
  // The bound region's identity (slot, generation, name, kind), e.g. for ControlTxn::charge_to.
  RegionInfo identity() const;

  Segment seg_;
  std::string name_;
  std::byte* region_ = nullptr;  // seg_.base() + the region's offset; nullptr until bound
  uint32_t slot_ = 0, generation_ = 0;
  Kind kind_ = Kind::kNone;
  // The attachment is read-only (OpenOptions::read_only): every writer of the
  // handle refuses first (its "not done" status, kReadOnly when it throws).
  bool read_only_ = false;
};

}  // namespace shmfilter::internal
