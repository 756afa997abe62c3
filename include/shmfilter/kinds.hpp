// shmfilter/kinds.hpp: the kinds of structure this build knows, and what works on any kind.
//
// The library keeps one kinds table (lib/structures/kinds.cpp): a row per kind with its
// name, open/validate, checker, drop, save/restore, metrics and fuzz image. Front ends
// (shmtool, the C API, nginx, Python) read kinds from here instead of keeping their own
// lists, so a kind added to the library reaches them all.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "shmfilter/segment.hpp"

namespace shmfilter {

// Every kind this build knows, in Kind order (kind_name() spells each).
std::vector<Kind> known_kinds();

// The kind that kind_name() spells NAME ("bloom", "cuckoo", "roaring", "hll", "set",
// "blob", "window"); nullopt for anything else.
std::optional<Kind> kind_from_name(std::string_view name) noexcept;

// Control plane: drops the structure NAME, whatever its kind, through its kind's own drop,
// which frees the region and every extent it owns. false when NAME does not exist;
// kVersionMismatch for a kind this build does not know (written by a newer build).
bool drop_structure(Segment& seg, std::string_view name);

}  // namespace shmfilter
