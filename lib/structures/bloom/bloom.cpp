// lib/structures/bloom/bloom.cpp: the Bloom handle: finds layers in the segment, calls the
// kernels of bloom_impl.h, grows layers under the segment lock, validates.
//
// Protocol (docs/bloom.md has the full table):
//  - bits: relaxed load, relaxed fetch_or of the missing bits only (kernels).
//  - layer_count: acquire load by every op; raised by compare_exchange
//    (release) only AFTER the transaction that allocated and described the
//    new layer committed. A grower killed between commit and publish leaves a
//    ready slot that the next grower (or open()) publishes under the lock.
//  - slot i < layer_count: immutable. Slot >= layer_count: lock holder only.
//  - counters (stripes, racing_adds, flags): relaxed; statistics and the
//    growth trigger only.
#include "shmfilter/bloom.hpp"

#include <algorithm>
#include <cstddef>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <string>

#include "segment/extents.h"
#include "structures/bloom/bloom_impl.h"
#include "structures/region_handle.h"
#include "base/kill_point.h"
#include "segment/layout.h"

static_assert(offsetof(shmfilter::internal::bloom::BloomHeader, magic) == 0 && offsetof(shmfilter::internal::bloom::BloomHeader, version) == 4,
              "check_prefix (region_handle.h) reads the magic at byte 0 and the layout version at byte 4");

namespace shmfilter {

using namespace internal::bloom;
using internal::hash_key;

std::string_view bloom_layout_name(BloomLayout layout) noexcept {
  return layout == BloomLayout::kClassic ? "classic" : "blocked";
}

namespace {

constexpr size_t kBatch = 16;  // keys in flight per prefetch round

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void validate_options(const BloomOptions& o) {
  if (o.capacity == 0)
    throw Error(ErrorCode::kInvalidArgument, "capacity 0 is invalid: pass a capacity >= 1 (the keys the filter must hold)");
  if (!(o.error > 0 && o.error < 1))
    throw Error(ErrorCode::kInvalidArgument,
                "error rate " + fmt_double(o.error) + " is outside (0, 1): pass e.g. 0.01 for 1% false positives");
  if (o.layout != BloomLayout::kBlocked && o.layout != BloomLayout::kClassic)
    throw Error(ErrorCode::kInvalidArgument, "unknown layout: use blocked or classic");
  if (!(o.growth == 0 || (o.growth >= 1 && o.growth <= 16)))
    throw Error(ErrorCode::kInvalidArgument,
                "growth " + fmt_double(o.growth) + " is invalid: pass 0 (no scaling) or a factor in [1, 16], e.g. 2");
  if (!(o.tightening > 0 && o.tightening < 1))
    throw Error(ErrorCode::kInvalidArgument,
                "tightening " + fmt_double(o.tightening) + " is outside (0, 1): pass e.g. 0.5");
  if (o.growth != 0 && (o.max_layers < 1 || o.max_layers > kMaxLayersLimit))
    throw Error(ErrorCode::kInvalidArgument, "max_layers " + std::to_string(o.max_layers) + " is outside [1, 64]");
}

uint32_t layout_code(BloomLayout l) { return l == BloomLayout::kClassic ? kLayoutClassic : kLayoutBlocked; }

Sizing size_or_throw(uint32_t layout, uint64_t n, double p) {
  Sizing s;
  if (!size_layer(layout, n, p, s))
    throw Error(ErrorCode::kInvalidArgument,
                "capacity " + std::to_string(n) + " at error " + fmt_double(p) +
                    " cannot be sized (too many bits or probes): lower the capacity or raise the error rate");
  return s;
}

// Fills a slot from its sizing; the "full" mark and the check interval.
void describe_slot(BloomLayer& s, uint32_t layout, uint64_t offset, uint64_t n, double p, const Sizing& z) {
  s.offset = offset;
  s.bits = z.bits;
  s.capacity = n;
  s.error = p;
  s.bits_per_key = z.bits_per_key;
  s.grow_at_bits = static_cast<uint64_t>(expected_set_bits(layout, z.bits, z.k, static_cast<double>(n)));
  s.k = z.k;
  // Each stripe sums all stripes when it crosses a multiple of 2^shift:
  // overshoot of the full mark <= kStripes * 2^shift <= grow_at_bits / 256.
  uint32_t shift = 0;
  while (shift < 12 && (uint64_t{kStripes} << (shift + 1)) <= s.grow_at_bits / 256) ++shift;
  s.check_shift = shift;
  s.reserved = 0;
}

uint64_t layer_capacity(const BloomHeader& h, uint32_t i) {
  double c = std::ceil(static_cast<double>(h.capacity) * std::pow(h.growth, i));
  return c >= 1.8e19 ? ~uint64_t{0} : static_cast<uint64_t>(c);
}
double layer_error(const BloomHeader& h, uint32_t i) { return h.error * std::pow(h.tightening, i); }

// Validates slot i of a filter whose header passed validate(); appends one line
// per problem. Every size is bounded before arithmetic on it (a bit count near
// 2^64 must not wrap the extent size). Safe on any bytes.
void validate_layer(const Segment& seg, const std::byte* base, uint64_t seg_size, const RegionInfo& r, const BloomHeader* h, uint64_t i,
                    std::vector<std::string>& problems) {
  const BloomLayer* s = slots(h);
  const uint64_t hb = header_bytes(h->max_layers);
  std::string at = "layer " + std::to_string(i) + ": ";
  const BloomLayer& L = s[i];
  if (L.state != kSlotReady) problems.push_back(at + "published but not marked ready");
  if (L.k < 1 || L.k > kMaxK) problems.push_back(at + "k=" + std::to_string(L.k) + " outside [1, 32]");
  if (L.check_shift > 12) problems.push_back(at + "check interval 2^" + std::to_string(L.check_shift) + " out of range");
  // A layer's bits fit the segment: bounds the extent arithmetic below (no wrap).
  if (L.bits == 0 || L.bits / 8 > seg_size ||
      (h->layout == kLayoutBlocked && (L.bits % kBlockBits != 0 || L.bits / kBlockBits > kMaxLayerBlocks))) {
    problems.push_back(at + "bit count " + std::to_string(L.bits) + " invalid for the layout or the segment");
    return;
  }
  if (L.capacity == 0 || !(L.error > 0 && L.error < 1)) problems.push_back(at + "capacity/error out of range");
  uint64_t ext = layer_extent_bytes(L.bits);
  if (L.offset % 64 != 0 || L.offset > seg_size || ext > seg_size - L.offset) {
    problems.push_back(at + "extent [" + std::to_string(L.offset) + ", +" + std::to_string(ext) +
                       ") lies outside the segment (" + std::to_string(seg_size) + " bytes)");
    return;
  }
  if (i == 0) {
    if (L.offset != r.offset + hb || hb + ext > r.size) problems.push_back(at + "first layer is not inside its region");
    return;
  }
  if (L.offset < r.offset + r.size && r.offset < L.offset + ext) problems.push_back(at + "extent overlaps the region");
  // Owned: the allocator's in-band header just below says "allocated", big enough.
  using internal::ExtentHeader;
  if (L.offset < sizeof(ExtentHeader)) {
    problems.push_back(at + "extent has no allocator header");
  } else {
    auto* eh = reinterpret_cast<const ExtentHeader*>(base + L.offset - sizeof(ExtentHeader));
    if (eh->magic != internal::kExtentMagic || eh->state != internal::kExtentAllocated ||
        eh->size < ext + sizeof(ExtentHeader))
      problems.push_back(at + "extent at " + std::to_string(L.offset) +
                         " is not an allocated extent of that size (freed, or never allocated)");
    // ... and one the allocator's own walk reaches (lib/segment/extents.h): not a forged header
    // inside another extent, so no other live extent overlaps it.
    else if (internal::reached_extent_size(seg, L.offset) != eh->size)
      problems.push_back(at + "extent at " + std::to_string(L.offset) +
                         " is not an extent of the allocator's walk (a forged extent header, or extents overlap)");
  }
  for (uint64_t j = 1; j < i; ++j) {
    if (s[j].bits / 8 > seg_size) continue;  // reported for layer j itself
    uint64_t e2 = layer_extent_bytes(s[j].bits);
    if (L.offset < s[j].offset + e2 && s[j].offset < L.offset + ext)
      problems.push_back(at + "extent overlaps layer " + std::to_string(j));
  }
}

// Validates a region; appends one line per problem. Safe on any bytes.
void validate(const Segment& seg, const std::byte* base, uint64_t seg_size, const RegionInfo& r, std::vector<std::string>& problems,
              uint64_t* count_out = nullptr) {
  if (r.offset % 64 != 0) {
    problems.push_back("region at offset " + std::to_string(r.offset) + " is not 64-byte aligned");
    return;
  }
  if (auto pre = internal::check_prefix(r, base + r.offset, sizeof(BloomHeader), seg_size, kMagic, kLayoutVersion);
      !pre.problem.empty()) {
    problems.push_back(pre.problem);
    return;
  }
  auto* h = reinterpret_cast<const BloomHeader*>(base + r.offset);
  if (h->layout != kLayoutBlocked && h->layout != kLayoutClassic) problems.push_back("unknown layout code");
  if (h->max_layers < 1 || h->max_layers > kMaxLayersLimit) {
    problems.push_back("max_layers " + std::to_string(h->max_layers) + " outside [1, 64]");
    return;
  }
  if (h->region_offset != r.offset) problems.push_back("header's own offset disagrees with the directory");
  if (h->capacity == 0 || !(h->error > 0 && h->error < 1)) problems.push_back("capacity/error out of range");
  if (!(h->growth == 0 || (h->growth >= 1 && h->growth <= 16)) || !(h->tightening > 0 && h->tightening < 1))
    problems.push_back("growth/tightening out of range");
  uint64_t hb = header_bytes(h->max_layers);
  if (hb > r.size) {
    problems.push_back("slot table runs past the region");
    return;
  }
  uint64_t count = h->layer_count.load(std::memory_order_acquire);  // acquire: pairs with the publisher's release
  if (count < 1 || count > h->max_layers) {
    problems.push_back("layer count " + std::to_string(count) + " outside [1, " + std::to_string(h->max_layers) + "]");
    return;
  }
  if (count_out) *count_out = count;
  for (uint64_t i = 0; i < count; ++i) validate_layer(seg, base, seg_size, r, h, i, problems);
}

}  // namespace

// The private operations of Bloom (its friend; include/shmfilter/bloom.hpp keeps only
// data): the per-key and batched data plane, the growth trigger and layer growth.
// Defined below, in this file, so the public calls inline them.
struct BloomOps {
  template <class K>
  static bool add_one(Bloom& b, const K& key) noexcept;
  template <class K>
  static bool contains_one(const Bloom& b, const K& key) noexcept;
  template <class K>
  static uint64_t add_batch(Bloom& b, std::span<const K> keys, std::span<uint8_t> out) noexcept;
  template <class K>
  static uint64_t contains_batch(const Bloom& b, std::span<const K> keys, std::span<uint8_t> out) noexcept;
  // After an add set NEWLY bits in layer LAYER: counts them; at the layer's full mark, grows
  // (or flags max layers). True when the layer was found full (the layer count may have changed).
  static bool after_add(Bloom& b, uint32_t layer, uint32_t newly) noexcept;
  // Adds layer SEEN_COUNT under the segment lock (or publishes one a dead grower left ready).
  static void grow(Bloom& b, uint64_t seen_count) noexcept;
};

// ---------------------------------------------------------------------------
// Control plane.

BloomSizing Bloom::plan(const BloomOptions& o) {
  validate_options(o);
  Sizing z = size_or_throw(layout_code(o.layout), o.capacity, o.error);
  BloomSizing s;
  s.bits = z.bits;
  s.k = z.k;
  s.bits_per_key = z.bits_per_key;
  s.model_fp = z.model_fp;
  s.region_bytes = header_bytes(o.growth == 0 ? 1 : o.max_layers) + layer_extent_bytes(z.bits);
  return s;
}

Bloom Bloom::create(Segment& seg, std::string_view name, const BloomOptions& opts) {
  if (name.empty()) throw Error(ErrorCode::kInvalidArgument, "empty structure name: pass a NAME of 1..63 bytes");
  if (name.size() > kMaxStructureNameLength)
    throw Error(ErrorCode::kNameTooLong, "structure name of " + std::to_string(name.size()) + " bytes is longer than " +
                                             std::to_string(kMaxStructureNameLength) + ": use a shorter name");
  BloomSizing plan_ = plan(opts);
  uint64_t max = seg.stats().max_size;
  // The options are valid, the segment too small: kNoSpace (shmtool exit 1), as every
  // structure answers a capacity beyond the segment's maximum size.
  if (plan_.region_bytes > max)
    throw Error(ErrorCode::kNoSpace,
                "capacity " + std::to_string(opts.capacity) + " needs " + format_size(plan_.region_bytes) +
                    ", more than segment '" + seg.name() + "' can ever hold (" + format_size(max) +
                    "): lower the capacity, raise the error rate, or create the segment with a larger max size");
  if (auto existing = seg.find(name)) {
    throw Error(ErrorCode::kExists, "'" + std::string(name) + "' already exists in segment '" + seg.name() + "' as a " +
                                        std::string(kind_name(existing->kind)) +
                                        ": choose another name, or drop it first");
  }
  const uint32_t layout = layout_code(opts.layout);
  const uint32_t max_layers = opts.growth == 0 ? 1 : opts.max_layers;
  const uint64_t seed = opts.seed ? *opts.seed : internal::random_seed();
  Sizing z = size_or_throw(layout, opts.capacity, opts.error);
  RegionInfo info = seg.create_region(
      name, Kind::kBloom, plan_.region_bytes, [&](std::byte* region, uint64_t, ControlTxn& txn) {
        // Fresh zeroed region, unpublished until init returns: plain stores.
        auto* h = new (region) BloomHeader{};
        h->magic = kMagic;
        h->version = kLayoutVersion;
        h->layout = layout;
        h->max_layers = max_layers;
        h->seed = seed;
        h->capacity = opts.capacity;
        h->error = opts.error;
        h->growth = opts.growth;
        h->tightening = opts.tightening;
        h->region_offset = static_cast<uint64_t>(region - txn.base());
        BloomLayer* s = slots(h);
        for (uint32_t i = 0; i < max_layers; ++i) s[i] = BloomLayer{};
        describe_slot(s[0], layout, h->region_offset + header_bytes(max_layers), opts.capacity, opts.error, z);
        s[0].state = kSlotReady;
        // relaxed: the directory entry's release store publishes the whole region.
        h->layer_count.store(1, std::memory_order_relaxed);
      });
  (void)info;
  return open(seg, name);
}

Bloom Bloom::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  Bloom b;
  RegionInfo r = b.bind(seg, name, Kind::kBloom);
  std::vector<std::string> problems;
  uint64_t count = 0;
  validate(seg, seg.base(), seg.size(), r, problems, &count);
  if (!problems.empty()) throw internal::corrupt_error(Kind::kBloom, name, problems.front());
  b.base_ = seg.base();
  b.offset_ = r.offset;
  b.stripe_ = static_cast<uint32_t>(fmix64(seg.owner_token()) % kStripes);
  // A grower killed between commit and publish left slot[count] ready: publish it (under the lock).
  auto* h = reinterpret_cast<BloomHeader*>(b.base_ + b.offset_);
  if (count < h->max_layers && slots(h)[count].state == kSlotReady) BloomOps::grow(b, count);
  return b;
}

bool Bloom::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kBloom, [&](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    auto* h = reinterpret_cast<BloomHeader*>(region);
    if (bytes < sizeof(BloomHeader) || h->magic != kMagic || h->max_layers > kMaxLayersLimit) return;
    if (header_bytes(h->max_layers) > bytes) return;
    const uint64_t region_off = static_cast<uint64_t>(region - txn.base());
    BloomLayer* s = slots(h);
    // Every ready slot past 0 owns an extent, published or not (a grower may have died before publishing).
    for (uint32_t i = 1; i < h->max_layers; ++i) {
      if (s[i].state != kSlotReady || s[i].offset == 0 || s[i].offset == region_off) continue;
      txn.free(s[i].offset);
      txn.store_u32(&s[i].state, kSlotEmpty);
    }
  });
}

// ---------------------------------------------------------------------------
// Data plane.

namespace {
inline BloomHeader* header_at(std::byte* base, uint64_t off) { return reinterpret_cast<BloomHeader*>(base + off); }
inline LayerView layer(std::byte* base, const BloomHeader* h, uint64_t i) {
  const BloomLayer& s = slots(h)[i];
  return view_of(base + s.offset, s, h->layout);
}
// acquire: pairs with the grower's release compare_exchange; makes slot i < count (and its zeroed extent) visible.
inline uint64_t layer_count(const BloomHeader* h) { return h->layer_count.load(std::memory_order_acquire); }
}  // namespace

bool BloomOps::after_add(Bloom& b, uint32_t li, uint32_t newly) noexcept {
  BloomHeader* h = header_at(b.base_, b.offset_);
  const BloomLayer& s = slots(h)[li];
  LayerView v = layer(b.base_, h, li);
  // relaxed: a statistic and a growth trigger; no data is published by it.
  uint64_t old = v.stripes[b.stripe_].bits_set.fetch_add(newly, std::memory_order_relaxed);
  if ((old >> s.check_shift) == ((old + newly) >> s.check_shift)) return false;
  if (v.set_bits() < s.grow_at_bits) return false;
  uint64_t count = layer_count(h);
  if (li + 1 != count) return false;  // someone grew already
  if (h->growth == 0) return true;    // fixed size: over capacity, stats() says so
  if (count >= h->max_layers) {
    // relaxed: a sticky diagnostic flag.
    h->flags.fetch_or(kFlagMaxLayersFull, std::memory_order_relaxed);
    return true;
  }
  grow(b, count);
  return true;
}

void BloomOps::grow(Bloom& b, uint64_t seen) noexcept {
  BloomHeader* h = header_at(b.base_, b.offset_);
  uint64_t publish = 0;
  try {
    b.seg_.transact([&](ControlTxn& txn) {
      // Under the segment lock: the filter is still published, so `h` is ours.
      // (The transaction quiesces this process; a filter dropped meanwhile
      // could otherwise be reclaimed by the allocation below, and the stores
      // into its slot table would land in someone else's memory.)
      if (!b.seg_.region_live(b.slot_, b.generation_)) return;
      uint64_t c = layer_count(h);
      if (c != seen || c >= h->max_layers) return;
      BloomLayer& s = slots(h)[c];
      if (s.state == kSlotReady) {  // committed by a grower that died before publishing
        // Publish it only if it is a valid layer: a corrupt slot must never become visible.
        RegionInfo r;
        r.offset = b.offset_;
        auto info = b.seg_.find(b.name_);
        r.size = info ? info->size : 0;
        std::vector<std::string> problems;
        validate_layer(b.seg_, b.base_, b.seg_.size(), r, h, c, problems);
        if (problems.empty()) publish = c + 1;
        return;
      }
      const uint32_t i = static_cast<uint32_t>(c);
      uint64_t n = layer_capacity(*h, i);
      double p = layer_error(*h, i);
      Sizing z = size_or_throw(h->layout, n, p);
      txn.charge_to(b.identity());  // check() reports the layer as leaked if the filter is dropped without it
      uint64_t off = txn.allocate(layer_extent_bytes(z.bits));  // zeroed: stripes and bits start at 0
      SHMF_KILL_POINT("bloom.grow.after_allocate");
      // Slot c >= layer_count: private to the lock holder and unreachable while
      // state is empty, so plain stores; state is the logged commit of the slot.
      describe_slot(s, h->layout, off, n, p, z);
      txn.store_u32(&s.state, kSlotReady);
      SHMF_KILL_POINT("bloom.grow.before_commit");
      publish = c + 1;
    });
  } catch (...) {
    // kNoSpace or a dead segment: keep answering with the layers we have.
    h->flags.fetch_or(kFlagGrowthFailed, std::memory_order_relaxed);  // relaxed: sticky diagnostic flag
    return;
  }
  SHMF_KILL_POINT("bloom.grow.after_commit");
  if (publish != 0) {
    uint64_t expect = publish - 1;
    // release: the slot and the zeroed extent (written before, or under the lock we
    // took after their writer) become visible with the count. Never an undo-logged
    // write: once published, a rollback must not unpublish what others use.
    h->layer_count.compare_exchange_strong(expect, publish, std::memory_order_release, std::memory_order_relaxed);
  }
}

template <class K>
bool BloomOps::add_one(Bloom& b, const K& key) noexcept {
  if (b.read_only_ || !b.valid()) return false;  // read-only attachment: nothing set (docs/SECURITY.md)
  BloomHeader* h = header_at(b.base_, b.offset_);
  uint64_t hv = hash_key(key, h->seed);
  uint64_t count = layer_count(h);
  uint32_t newest = static_cast<uint32_t>(count - 1);
  LayerView top = layer(b.base_, h, newest);
  if (count > 1) {
    if (top.contains(hv)) return false;
    for (uint64_t i = newest; i-- > 0;)
      if (layer(b.base_, h, i).contains(hv)) return false;
  }
  AddResult r = top.add(hv);
  if (r.newly_set == 0) return false;
  // relaxed: a statistic (upper bound on same-instant double counts).
  if (r.raced) h->racing_adds.fetch_add(1, std::memory_order_relaxed);
  after_add(b, newest, r.newly_set);
  return true;
}

template <class K>
bool BloomOps::contains_one(const Bloom& b, const K& key) noexcept {
  if (!b.valid()) return false;
  const BloomHeader* h = header_at(b.base_, b.offset_);
  uint64_t hv = hash_key(key, h->seed);
  for (uint64_t i = layer_count(h); i-- > 0;)  // newest (largest, most keys) first
    if (layer(b.base_, h, i).contains(hv)) return true;
  return false;
}

template <class K>
uint64_t BloomOps::add_batch(Bloom& b, std::span<const K> keys, std::span<uint8_t> out) noexcept {
  const bool want_out = out.size() >= keys.size();
  if (b.read_only_ || !b.valid()) {
    if (want_out) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(keys.size()), uint8_t{0});
    return 0;
  }
  BloomHeader* h = header_at(b.base_, b.offset_);
  const uint64_t seed = h->seed;
  size_t added = 0;
  uint64_t hs[kBatch];
  for (size_t at = 0; at < keys.size(); at += kBatch) {
    const size_t n = std::min(kBatch, keys.size() - at);
    uint64_t count = layer_count(h);
    uint32_t newest = static_cast<uint32_t>(count - 1);
    LayerView top = layer(b.base_, h, newest);
    for (size_t j = 0; j < n; ++j) {
      hs[j] = hash_key(keys[at + j], seed);
      top.prefetch(hs[j]);
    }
    for (size_t j = 0; j < n; ++j) {
      bool done = false, fresh = false;
      if (count > 1) {
        if (top.contains(hs[j])) done = true;
        for (uint64_t i = newest; !done && i-- > 0;)
          if (layer(b.base_, h, i).contains(hs[j])) done = true;
      }
      if (!done) {
        AddResult r = top.add(hs[j]);
        if (r.newly_set != 0) {
          fresh = true;
          // relaxed: a statistic (upper bound on same-instant double counts).
          if (r.raced) h->racing_adds.fetch_add(1, std::memory_order_relaxed);
          if (after_add(b, newest, r.newly_set)) {
            // the layer count may have changed: later keys of this round use the new newest layer
            count = layer_count(h);
            newest = static_cast<uint32_t>(count - 1);
            top = layer(b.base_, h, newest);
          }
        }
      }
      added += fresh;
      if (want_out) out[at + j] = fresh;
    }
  }
  return added;
}

template <class K>
uint64_t BloomOps::contains_batch(const Bloom& b, std::span<const K> keys, std::span<uint8_t> out) noexcept {
  const bool want_out = out.size() >= keys.size();
  if (!b.valid()) {
    if (want_out) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(keys.size()), uint8_t{0});
    return 0;
  }
  const BloomHeader* h = header_at(b.base_, b.offset_);
  const uint64_t seed = h->seed;
  size_t present = 0;
  uint64_t hs[kBatch];
  for (size_t at = 0; at < keys.size(); at += kBatch) {
    const size_t n = std::min(kBatch, keys.size() - at);
    const uint64_t count = layer_count(h);
    LayerView top = layer(b.base_, h, count - 1);
    for (size_t j = 0; j < n; ++j) {
      hs[j] = hash_key(keys[at + j], seed);
      top.prefetch(hs[j]);
      for (uint64_t i = count - 1; i-- > 0;) layer(b.base_, h, i).prefetch(hs[j]);
    }
    for (size_t j = 0; j < n; ++j) {
      bool hit = top.contains(hs[j]);
      for (uint64_t i = count - 1; !hit && i-- > 0;) hit = layer(b.base_, h, i).contains(hs[j]);
      present += hit;
      if (want_out) out[at + j] = hit;
    }
  }
  return present;
}

bool Bloom::add(std::string_view key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::add_one(*this, key);
}
bool Bloom::add(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::add_one(*this, key);
}
bool Bloom::contains(std::string_view key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::contains_one(*this, key);
}
bool Bloom::contains(uint64_t key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::contains_one(*this, key);
}
uint64_t Bloom::add_many(std::span<const uint64_t> keys, std::span<uint8_t> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::add_batch(*this, keys, out);
}
uint64_t Bloom::add_many(std::span<const std::string_view> keys, std::span<uint8_t> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::add_batch(*this, keys, out);
}
uint64_t Bloom::contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::contains_batch(*this, keys, out);
}
uint64_t Bloom::contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return BloomOps::contains_batch(*this, keys, out);
}

void Bloom::clear() {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_) internal::throw_read_only(kind_, name_, "clear");
  require_valid();
  BloomHeader* h = header_at(base_, offset_);
  uint64_t count = layer_count(h);
  for (uint64_t i = 0; i < count; ++i) {
    LayerView v = layer(base_, h, i);
    const uint64_t words = (v.m + 63) / 64;
    for (uint64_t w = 0; w < words; ++w) {
      // relaxed: clear is documented as not atomic with concurrent adds.
      std::atomic_ref<uint64_t>(v.words[w]).store(0, std::memory_order_relaxed);
      if (w == words / 2) SHMF_KILL_POINT("bloom.clear.half_done");
    }
    for (uint32_t s = 0; s < kStripes; ++s) v.stripes[s].bits_set.store(0, std::memory_order_relaxed);  // relaxed: statistics
  }
  h->racing_adds.store(0, std::memory_order_relaxed);  // relaxed: statistic
  h->flags.store(0, std::memory_order_relaxed);        // relaxed: diagnostic flags
}

BloomStats Bloom::stats() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  const BloomHeader* h = header_at(base_, offset_);
  BloomStats st;
  st.layout = h->layout == kLayoutClassic ? BloomLayout::kClassic : BloomLayout::kBlocked;
  st.capacity = h->capacity;
  st.error = h->error;
  st.growth = h->growth;
  st.tightening = h->tightening;
  st.fp_bound = h->growth == 0 ? h->error : h->error / (1 - h->tightening);
  st.max_layers = h->max_layers;
  st.seed = h->seed;
  const uint64_t count = layer_count(h);
  st.layers = static_cast<uint32_t>(count);
  st.memory_bytes = header_bytes(h->max_layers);
  double keep = 1.0;
  uint64_t set_total = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const BloomLayer& s = slots(h)[i];
    LayerView v = layer(base_, h, i);
    BloomLayerStats ls;
    ls.capacity = s.capacity;
    ls.error = s.error;
    ls.bits = s.bits;
    ls.k = s.k;
    ls.set_bits = std::min(v.set_bits(), s.bits);
    ls.fill_ratio = static_cast<double>(ls.set_bits) / static_cast<double>(s.bits);
    ls.inserted_estimate = estimate_inserted(h->layout, s.bits, s.k, ls.set_bits);
    ls.fp_rate_now = fp_now(h->layout, s.bits, s.k, ls.set_bits);
    keep *= 1 - ls.fp_rate_now;
    st.total_capacity += s.capacity;
    st.bits += s.bits;
    st.inserted_estimate += ls.inserted_estimate;
    st.memory_bytes += layer_extent_bytes(s.bits);
    set_total += ls.set_bits;
    st.layer.push_back(ls);
  }
  if (!st.layer.empty()) {
    st.k = st.layer[0].k;
    // Over capacity: the newest layer holds more than its capacity (2% slack
    // for the estimate's noise) and no further layer can be added.
    bool full = st.layer.back().inserted_estimate > 1.02 * static_cast<double>(st.layer.back().capacity);
    bool can_grow = h->growth != 0 && count < h->max_layers &&
                    (h->flags.load(std::memory_order_relaxed) & kFlagGrowthFailed) == 0;  // relaxed: diagnostic
    st.over_capacity = full && !can_grow;
  }
  st.fill_ratio = st.bits ? static_cast<double>(set_total) / static_cast<double>(st.bits) : 0;
  st.fp_rate_now = 1 - keep;
  st.bits_per_element = st.inserted_estimate >= 1 ? static_cast<double>(st.memory_bytes) * 8 / st.inserted_estimate : 0;
  st.racing_adds = h->racing_adds.load(std::memory_order_relaxed);  // relaxed: statistic
  return st;
}

// ---------------------------------------------------------------------------
// Integrity.

namespace internal::bloom {

void check_bloom(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  std::vector<std::string> problems;
  uint64_t count = 0;
  validate(seg, seg.base(), seg.size(), region, problems, &count);
  for (auto& p : problems) scope.add(p);
  if (!problems.empty() || count == 0) return;
  // Counts plausible: the striped counters against a popcount of the bits.
  // A killed adder can leave up to k set bits uncounted, and adds running now
  // move both numbers, so only a gap above 1% (and 4096 bits) is a finding.
  auto* h = reinterpret_cast<BloomHeader*>(seg.base() + region.offset);
  for (uint64_t i = 0; i < count; ++i) {
    LayerView v = layer(seg.base(), h, i);
    uint64_t counted = v.set_bits(), actual = v.popcount();
    uint64_t gap = counted > actual ? counted - actual : actual - counted;
    if (gap > std::max<uint64_t>(4096, actual / 100)) {
      CheckFinding f{scope.where, "layer " + std::to_string(i) + ": counters say " + std::to_string(counted) +
                                " bits set, the array has " + std::to_string(actual),
                     false};
      if (repair) {
        // relaxed: statistics; concurrent adders keep adding to their stripes.
        for (uint32_t s = 0; s < kStripes; ++s) v.stripes[s].bits_set.store(s == 0 ? actual : 0, std::memory_order_relaxed);
        f.repaired = true;
      }
      report.findings.push_back(f);
    }
  }
}

}  // namespace internal::bloom

}  // namespace shmfilter
