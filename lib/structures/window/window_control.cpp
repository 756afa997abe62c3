// lib/structures/window/window_control.cpp: the Window's control plane and inspection:
// options and sizing (plan), create, open (validation of the region), drop,
// stats and the integrity checker check_window.
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <string>

#include "segment/segment_impl.h"
#include "structures/window/window_ops.h"

namespace shmfilter {


std::string_view window_variant_name(WindowVariant v) noexcept {
  return v == WindowVariant::kCuckoo ? "cuckoo" : v == WindowVariant::kStamped ? "stamped" : "bloom";
}

std::string_view window_status_name(WindowStatus s) noexcept {
  switch (s) {
    case WindowStatus::kNew: return "new";
    case WindowStatus::kSeen: return "seen";
    case WindowStatus::kRemoved: return "removed";
    case WindowStatus::kAbsent: return "absent";
    case WindowStatus::kFull: return "full";
    case WindowStatus::kUnsupported: return "unsupported";
    case WindowStatus::kDropped: return "dropped";
    case WindowStatus::kNoSpace: return "no-space";
    case WindowStatus::kBusy: return "busy";
    case WindowStatus::kForked: return "forked";
    case WindowStatus::kInvalidArgument: return "invalid-argument";
    case WindowStatus::kCorrupt: return "corrupt";
    case WindowStatus::kCapped: return "capped";
  }
  return "?";
}

double WindowStats::window_fp_now(uint32_t w) const noexcept {
  double keep = 1;
  for (size_t i = 0; i < buckets.size() && i < w; ++i) keep *= 1 - buckets[i].fp_rate_now;
  return 1 - keep;
}
double WindowStats::window_fp_bound(uint32_t w) const noexcept {
  double keep = 1;
  for (size_t i = 0; i < buckets.size() && i < w; ++i) keep *= 1 - buckets[i].fp_bound;
  return 1 - keep;
}

namespace {

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void validate_options(const WindowOptions& o) {
  auto bad = [](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, m); };
  if (o.variant != WindowVariant::kBloom && o.variant != WindowVariant::kCuckoo && o.variant != WindowVariant::kStamped)
    bad("unknown window variant: use stamped (deletable, every w in one place), bloom (insert-only) or cuckoo "
        "(deletable, a table per bucket)");
  if (o.expected_per_bucket == 0)
    bad("expected_per_bucket 0 is invalid: pass the distinct (space, item) pairs one bucket must hold, >= 1");
  if (!(o.error > 0 && o.error < 1))
    bad("error rate " + fmt_double(o.error) + " is outside (0, 1): pass e.g. 0.01 for 1% false positives");
  if (o.bucket_seconds == 0) bad("bucket_seconds 0 is invalid: pass the bucket length in seconds, e.g. 86400 for days");
  if (o.bucket_seconds > (uint64_t{1} << 40)) bad("bucket_seconds " + std::to_string(o.bucket_seconds) + " is too large: pass <= 2^40");
  if (o.utc_offset <= -(int64_t{1} << 40) || o.utc_offset >= (int64_t{1} << 40))
    bad("utc_offset " + std::to_string(o.utc_offset) + " is out of range: pass seconds east of UTC, e.g. 28800 for UTC+8");
  if (o.retention == 0 || o.retention > kWindowMaxRetention)
    bad("retention " + std::to_string(o.retention) + " is outside [1, " + std::to_string(kWindowMaxRetention) +
        "]: pass the number of buckets a window keeps, e.g. 7");
  if (o.error_window > o.retention)
    bad("error_window " + std::to_string(o.error_window) + " is larger than retention " + std::to_string(o.retention) +
        ": pass a window w <= retention (0 means retention)");
  if (o.max_spaces == 0 || o.max_spaces > kWindowMaxSpaces)
    bad("max_spaces " + std::to_string(o.max_spaces) + " is outside [1, " + std::to_string(kWindowMaxSpaces) + "]");
}

struct Plan {
  uint32_t variant, slots, space_table, error_window;
  double p1, pm, po;
  uint32_t k_main = 0, k_ovf = 0;
  uint64_t region = 0;
};

Plan make_plan(const WindowOptions& o) {
  validate_options(o);
  Plan p;
  p.variant = o.variant == WindowVariant::kCuckoo    ? wi::kVariantCuckoo
              : o.variant == WindowVariant::kStamped ? wi::kVariantStamped
                                                     : wi::kVariantBloom;
  p.slots = o.retention + 1;
  p.space_table = wi::space_table_for(o.max_spaces);
  p.error_window = o.error_window == 0 ? o.retention : o.error_window;
  p.p1 = wi::one_bucket_error(o.error, p.error_window);
  p.pm = p.p1 * wi::kMainShare;
  p.po = p.p1 * (1 - wi::kMainShare);
  if (p.variant == wi::kVariantBloom) {
    bl::Sizing a, b;
    // k_overflow: the probes of overflow layer 1, sized at p1/6 (wi::bloom_layer_error(p1, 1): layer
    // i at p1/3 x 2^-i, so the layers together stay within p.po = p1/3 at any count).
    if (!bl::size_blocked(o.expected_per_bucket, p.pm, a) ||
        !bl::size_blocked(o.expected_per_bucket, wi::bloom_layer_error(p.p1, 1), b))
      throw Error(ErrorCode::kInvalidArgument, "expected_per_bucket " + std::to_string(o.expected_per_bucket) +
                                                   " at error " + fmt_double(o.error) +
                                                   " cannot be sized: lower the count or raise the error rate");
    p.k_main = a.k;
    p.k_ovf = b.k;
  } else if (p.variant == wi::kVariantStamped) {
    // One lookup answers every w: its rate is 2b x load / 2^12 (<= 0.2% at the 95% load the
    // table is sized for), per sub-filter in use, whatever error_window is.
    if (o.retention > internal::stamped::kMaxRetention)
      throw Error(ErrorCode::kInvalidArgument, "retention " + std::to_string(o.retention) + " is more than the stamped variant's " +
                                                   std::to_string(internal::stamped::kMaxRetention) +
                                                   " buckets (4-bit stamps): use variant bloom or cuckoo for longer windows");
    if (o.error < 2.0 * ck::kSlots / 4096.0)
      throw Error(ErrorCode::kInvalidArgument, "error " + fmt_double(o.error) +
                                                   " is below the stamped variant's 0.2% (12-bit fingerprints): raise the "
                                                   "error rate, or use variant cuckoo");
    p.k_main = p.k_ovf = internal::stamped::kFpBits;
    if (internal::stamped::table_geometry(o.expected_per_bucket * o.retention).buckets() > ck::kMaxBuckets)
      throw Error(ErrorCode::kInvalidArgument, "expected_per_bucket " + std::to_string(o.expected_per_bucket) + " x retention " +
                                                   std::to_string(o.retention) + " needs more than 2^32 cuckoo buckets: lower it");
  } else {
    if (p.p1 / 2 < 2.0 * ck::kSlots / 65536.0)
      throw Error(ErrorCode::kInvalidArgument, "error " + fmt_double(o.error) + " over " + std::to_string(p.error_window) +
                                                   " buckets needs more than 16 fingerprint bits per bucket: raise the "
                                                   "error rate or lower error_window (the cuckoo variant reaches 2.4e-4 per bucket)");
    p.k_main = p.k_ovf = wi::cuckoo_fp_bits(p.p1);
    if (ck::log2_buckets_for(o.expected_per_bucket) > 32)
      throw Error(ErrorCode::kInvalidArgument, "expected_per_bucket " + std::to_string(o.expected_per_bucket) +
                                                   " needs more than 2^32 cuckoo buckets: lower it");
  }
  p.region = wi::region_bytes(p.slots, p.space_table);
  return p;
}

// Per-bucket FP model now and the bound the sizing guarantees at this load. over: the load is
// past what the sizing holds the bound to (or a layer could not be had): bound is then the rate now.
void bucket_fp(std::byte* base, const wi::Geometry& g, const WindowHeader* h, TableHead* t, uint64_t distinct, double& now,
               double& bound, bool& over) {
  const uint64_t cap = t->capacity;
  const bool layered = (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;  // relaxed: immutable
  over = false;
  if (h->variant == wi::kVariantBloom) {
    const double m_bits = static_cast<double>(t->geometry) * bl::kBlockBits;
    BloomLayerView l[wi::kBloomMaxLayers];
    const uint32_t n = bloom_layer_views(base, g, t, l);
    // Where the pairs are: main up to C; layer j (1-based) up to C x 2^(j-1); the newest all the rest.
    uint64_t rem = distinct;
    const uint64_t in_main = n == 0 ? rem : std::min(rem, cap);
    rem -= in_main;
    double keep = 1 - (in_main > 0 ? bl::blocked_fp(m_bits / static_cast<double>(in_main), h->k_main) : 0);
    for (uint32_t j = 0; j < n; ++j) {
      const uint64_t room = j + 1 < n ? (layered ? wi::bloom_layer_capacity(cap, j + 1) : cap) : rem;
      const uint64_t in = std::min(rem, room);
      rem -= in;
      if (in > 0) keep *= 1 - bl::blocked_fp(static_cast<double>(l[j].blocks) * bl::kBlockBits / static_cast<double>(in), l[j].k);
    }
    now = 1 - keep;
    // Layered: each layer holds its share of p1 up to its capacity, so the bound holds while the
    // layers the count asks for exist (up to kBloomMaxLayers: 2^10 x capacity). Older tables: 2x.
    const uint64_t held = layered ? (n == 0 ? cap : cap << n) : (n == 0 ? cap : 2 * cap);
    over = distinct > held;
    bound = over ? std::max(now, h->p1) : h->p1;
    return;
  }
  ck::Header* ch = cuckoo_of(t, g);
  const uint32_t subs = std::min<uint32_t>(ck::sub_count_acquire(ch), ck::kMaxSubs);  // acquire: the subs it publishes
  const double f = std::ldexp(1.0, static_cast<int>(h->k_main)) - 1;
  // Sum of the sub-filters' loads, at most (the smallest fill first: an upper bound): a lookup's
  // FP is about 2b/2^f per full sub-filter (Fan et al.).
  double rem = static_cast<double>(ck::load_relaxed(ch->size));  // relaxed: statistic
  double loads = 0;
  for (uint32_t j = 0; j < subs && rem > 0; ++j) {
    const double lanes = 4.0 * std::ldexp(1.0, static_cast<int>(ch->subs[j].log2_buckets));
    const double a = std::min(1.0, rem / lanes);
    loads += a;
    rem -= a * lanes;
  }
  now = std::min(1.0, 2.0 * ck::kSlots * loads / f);
  // Over: an insert answered kFull, more sub-filters' worth than the fingerprint was sized for, or
  // a rate past p1 anyway (f capped at 16 bits: p1 < 4 x 2b/2^16 holds only 2 full sub-filters).
  over = ck::load_relaxed(ch->failures) != 0 ||  // relaxed: statistic (an insert answered kFull)
         (layered ? loads > wi::kCuckooBudgetSubs : subs > 1 && distinct > 2 * cap) || now > h->p1;
  bound = over ? std::max(now, h->p1) : h->p1;
}

}  // namespace

// ---------------------------------------------------------------------------
// Control plane.

WindowSizing Window::plan(const WindowOptions& o) {
  Plan p = make_plan(o);
  WindowSizing s;
  s.one_bucket_error = p.p1;
  s.main_error = p.pm;
  s.overflow_error = p.po;
  s.k = p.k_main;
  WindowHeader tmp{};
  tmp.variant = p.variant;
  tmp.space_table = p.space_table;
  tmp.main_error = p.pm;
  tmp.k_main = p.k_main;
  uint64_t geom = 0;
  uint64_t mb = main_bytes_for(&tmp, o.expected_per_bucket, &geom);
  s.table_bytes = wi::main_offset_in_table(p.space_table) + mb;
  s.bits_per_pair = static_cast<double>(mb) * 8 / static_cast<double>(o.expected_per_bucket);
  s.region_bytes = p.region;
  s.full_window_bytes = p.region + uint64_t{p.slots} * s.table_bytes;
  if (p.variant == wi::kVariantStamped) {
    // The one shared table holds retention x expected lanes (a pair marked on several days: one).
    uint64_t buckets = 0;
    const uint64_t lanes = o.expected_per_bucket * o.retention;
    const uint64_t sm = shared_main_bytes(lanes, &buckets);
    s.shared_bytes = wi::main_offset_in_table(p.space_table) + sm;
    s.bits_per_pair = static_cast<double>(sm) * 8 / static_cast<double>(lanes);
    s.full_window_bytes += s.shared_bytes;
  }
  return s;
}

Window Window::create(Segment& seg, std::string_view name, const WindowOptions& opts) {
  if (name.empty()) throw Error(ErrorCode::kInvalidArgument, "empty structure name: pass a NAME of 1..63 bytes");
  if (name.size() > kMaxStructureNameLength)
    throw Error(ErrorCode::kNameTooLong, "structure name of " + std::to_string(name.size()) + " bytes is longer than " +
                                             std::to_string(kMaxStructureNameLength) + ": use a shorter name");
  Plan p = make_plan(opts);
  WindowSizing sz = plan(opts);
  uint64_t max = seg.stats().max_size;
  if (sz.region_bytes + 2 * sz.table_bytes + sz.shared_bytes > max)
    throw Error(ErrorCode::kInvalidArgument,
                "expected_per_bucket " + std::to_string(opts.expected_per_bucket) + " needs " +
                    format_size(sz.region_bytes + 2 * sz.table_bytes + sz.shared_bytes) +
                    " for the first two buckets, more than segment '" +
                    seg.name() + "' can ever hold (" + format_size(max) +
                    "): lower the count, raise the error rate, or create the segment with a larger max size");
  if (auto existing = seg.find(name))
    throw Error(ErrorCode::kExists, "'" + std::string(name) + "' already exists in segment '" + seg.name() + "' as a " +
                                        std::string(kind_name(existing->kind)) + ": choose another name, or drop it first");
  const uint64_t seed = opts.seed ? *opts.seed : internal::random_seed();
  seg.create_region(name, Kind::kWindow, p.region, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    // Fresh zeroed region, unpublished until init returns: plain stores.
    auto* h = new (region) WindowHeader{};
    h->magic = wi::kMagic;
    h->version = wi::kVersion;
    h->variant = p.variant;
    h->retention = opts.retention;
    h->slots = p.slots;
    h->max_spaces = opts.max_spaces;
    h->space_table = p.space_table;
    h->error_window = p.error_window;
    h->bucket_seconds = opts.bucket_seconds;
    h->utc_offset = opts.utc_offset;
    h->seed = seed;
    h->expected = opts.expected_per_bucket;
    h->error = opts.error;
    h->p1 = p.p1;
    h->main_error = p.pm;
    h->overflow_error = p.po;
    h->k_main = p.k_main;
    h->k_overflow = p.k_ovf;
    h->region_offset = static_cast<uint64_t>(region - txn.base());
    h->region_bytes = got;
    BucketSlot* s = wi::slot_table(h);
    for (uint32_t i = 0; i < p.slots; ++i) s[i].tag.store(wi::kRetired, std::memory_order_relaxed);  // relaxed: unpublished
    // The first two buckets' tables: the current one by the creator's clock (opts.now, else the
    // system clock) and its spare.
    int64_t e = wi::bucket_number(opts.now ? *opts.now : system_now(), opts.utc_offset, opts.bucket_seconds);
    for (int64_t x = e; x <= e + 1; ++x) {
      BucketSlot& b = s[static_cast<uint64_t>(x) % p.slots];
      b.table = alloc_table(txn, h, opts.expected_per_bucket);
      b.tag.store(0, std::memory_order_relaxed);  // relaxed: unpublished
    }
    if (p.variant == wi::kVariantStamped) {
      h->shared = alloc_shared(txn, h, opts.expected_per_bucket * opts.retention);
      // swept stays 0 ("no lane yet"): the first writer sets it to its bucket (stamped_write),
      // so a clock that is not the creator's (an injected one, behind) decodes the same stamps.
    }
  });
  return open(seg, name);
}

Window Window::create(Segment& seg, std::string_view name, const WindowOptions& opts, int64_t (*clock)(void*), void* ctx) {
  if (clock == nullptr) return create(seg, name, opts);
  WindowOptions o = opts;
  o.now = clock(ctx);
  Window w = create(seg, name, o);
  w.set_clock(clock, ctx);
  return w;
}

namespace {
struct Span {
  uint64_t lo, hi;  // [lo, hi): an extent, its ExtentHeader included
  uint32_t slot;
  const char* what;
};
}  // namespace

namespace internal::window_ops {

WindowExtents extents_of(const Segment& seg, const RegionInfo& r) {
  WindowExtents x;
  x.seg = &seg;
  x.base = seg.base();
  const internal::SegmentImpl* im = seg.impl();
  x.data_lo = im->lay.data_offset;
  // acquire: the extents below top (grown under the lock) are initialised. top <= size always;
  // min() keeps a damaged top from naming bytes past the mapping.
  x.top = std::min(internal::load_acquire(&im->hdr()->top), seg.size());
  x.owner = (uint64_t{r.generation} << 32) | (uint64_t{r.slot} + 1);
  // The region's extent: its ExtentHeader through its payload (the directory's size, or the
  // extent's own when that is larger and sound).
  constexpr uint64_t kEh = sizeof(internal::ExtentHeader);
  x.region_lo = r.offset >= kEh ? r.offset - kEh : 0;
  x.region_hi = r.offset + r.size;
  if (r.offset >= x.data_lo + kEh && r.offset <= x.top) {
    auto* eh = reinterpret_cast<const internal::ExtentHeader*>(x.base + x.region_lo);
    if (eh->magic == internal::kExtentMagic && eh->size <= x.top - x.region_lo)
      x.region_hi = std::max(x.region_hi, x.region_lo + eh->size);
  }
  return x;
}

uint64_t owned_extent_end(const WindowExtents& x, uint64_t off, uint64_t bytes) {
  constexpr uint64_t kEh = sizeof(internal::ExtentHeader);
  if (off % 64 != 0 || off < x.data_lo + kEh || off > x.top || bytes > x.top - off) return 0;
  auto* eh = reinterpret_cast<const internal::ExtentHeader*>(x.base + off - kEh);
  const uint64_t lo = off - kEh;
  if (eh->magic != internal::kExtentMagic || eh->state != internal::kExtentAllocated || eh->size % 64 != 0 ||
      eh->size < bytes + kEh || eh->size > x.top - lo || eh->owner != x.owner)
    return 0;
  const uint64_t hi = lo + eh->size;
  if (lo < x.region_hi && x.region_lo < hi) return 0;  // the window's own region (header, ring, keys)
  // The allocator's own walk reaches this extent, of this size (lib/segment/extents.h): its header
  // is not a forgery inside another extent, so no other live extent overlaps it.
  if (x.seg == nullptr || internal::reached_extent_size(*x.seg, off) != eh->size) return 0;
  return hi;
}

std::string table_problem(const WindowExtents& x, const WindowHeader* h, uint64_t off, bool in_preparation,
                          std::vector<uint64_t>* layers, bool shared) {
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  if (owned_extent_end(x, off, moff) == 0)
    return "table at " + std::to_string(off) + " is not an allocated extent of this window in the segment's data area";
  auto* t = reinterpret_cast<const TableHead*>(x.base + off);
  uint64_t mb = 0;
  ck::Geometry sg;  // kStamped's shared table: its sub-filter 0
  if (shared) {
    if (h->variant != wi::kVariantStamped) return "a shared table in a window of another variant";
    sg = ck::geometry_of_buckets(t->geometry);
    if (t->geometry < 2 || t->geometry > ck::kMaxBuckets || sg.buckets() != t->geometry)
      return "shared table has " + std::to_string(t->geometry) + " buckets";
    mb = ck::region_bytes_for(sg, internal::stamped::kLaneBits);
  } else if (h->variant == wi::kVariantStamped) {
    if (t->geometry != 0) return "bucket table of a stamped window has geometry " + std::to_string(t->geometry);
  } else if (h->variant == wi::kVariantBloom) {
    if (t->geometry == 0 || t->geometry > bl::kMaxLayerBlocks) return "table has " + std::to_string(t->geometry) + " blocks";
    mb = wi::bloom_main_bytes(t->geometry);
  } else {
    if (t->geometry < 1 || t->geometry > 32) return "table has 2^" + std::to_string(t->geometry) + " buckets";
    mb = wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), h->k_main <= 8 ? 8 : 16);
  }
  if (t->capacity == 0) return "table capacity 0";
  if (t->check_shift >= 64) return "table check shift " + std::to_string(t->check_shift);
  if (owned_extent_end(x, off, moff + mb) == 0) return "table extent is smaller than its geometry";
  // acquire: pairs with prepare_chunk's release of 0 (the zeroed body and cuckoo header first).
  const uint64_t cur = t->prep_cursor.load(std::memory_order_acquire);
  if (!in_preparation && cur != 0) return "names a table still in preparation";
  if (cur != 0) {
    // A spare being zeroed (tag kRetired): only its head and geometry are read until it is
    // complete; start_table wrote no overflow.
    if (t->overflow.load(std::memory_order_relaxed) != 0 || t->pending_overflow != 0)  // relaxed: snapshot
      return "spare in preparation names an overflow";
    return {};
  }
  // Every extent beyond the table's own that a path follows (the data plane, stats, free_table),
  // each checked as an owned extent of the bytes its descriptor gives, and listed once.
  std::vector<uint64_t> own;
  const auto owned = [&](uint64_t o, uint64_t bytes) {
    if (bytes == 0 || owned_extent_end(x, o, bytes) == 0) return false;
    own.push_back(o);
    return true;
  };
  const uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry
  const uint64_t pending = t->pending_overflow;
  // relaxed: kTableLayered is written before the table is reachable and never changes.
  const bool layered = (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;
  if (shared) {
    // Sub-filter 0 right after the header, of the table's geometry; sub j >= 1 stamped_sub_geometry
    // of sub j - 1, an owned extent of its size; the pending one (see the kCuckoo case below).
    auto* ch = reinterpret_cast<const ck::Header*>(x.base + off + moff);
    const uint32_t n = ck::sub_count_acquire(ch);  // acquire: the subs it publishes
    constexpr uint32_t kLane = internal::stamped::kLaneBits;
    if (ch->magic != ck::kMagic || ch->fp_bits != internal::stamped::kFpBits || ch->lane_bits != kLane ||
        ch->max_subs != wi::kStampedMaxSubs || n < 1 || n > wi::kStampedMaxSubs)
      return "shared table's cuckoo header is corrupt";
    const auto same = [](const ck::SubDesc& a, const ck::SubDesc& b) {
      return a.offset == b.offset && a.log2_buckets == b.log2_buckets && a.log2_stripes == b.log2_stripes &&
             a.chunks_minus_1 == b.chunks_minus_1;
    };
    if (!same(ch->subs[0], ck::sub_desc(off + moff + sizeof(ck::Header), sg))) return "shared table's sub-filter 0 is corrupt";
    for (uint32_t j = 1; j < n; ++j) {
      const ck::Geometry g = stamped_sub_geometry(ch->subs[j - 1], j);
      const ck::SubDesc& d = ch->subs[j];
      if (g.buckets() > ck::kMaxBuckets || !same(d, ck::sub_desc(d.offset, g)) ||
          !owned(d.offset, ck::sub_bytes(d, kLane)))
        return "shared table's sub-filter " + std::to_string(j) + " is corrupt";
    }
    if (ovf != 0 && (n < 2 || ovf != ch->subs[1].offset)) return "shared table's overflow disagrees with its sub-filters";
    if (pending != 0 && std::find(own.begin(), own.end(), pending) == own.end()) {
      const ck::Geometry g = n < wi::kStampedMaxSubs ? stamped_sub_geometry(ch->subs[n - 1], n) : ck::Geometry{};
      if (n >= wi::kStampedMaxSubs || g.buckets() > ck::kMaxBuckets ||
          !owned(pending, ck::sub_bytes_of(g.buckets(), ck::stripes_for_buckets(g.buckets()), kLane)))
        return "overflow at " + std::to_string(pending) + " is not an allocated extent of this window of its size";
    }
  } else if (h->variant == wi::kVariantStamped) {
    if (ovf != 0 || pending != 0) return "bucket table of a stamped window names an overflow";
  } else if (h->variant == wi::kVariantCuckoo) {
    // Every descriptor the data plane follows: sub-filter 0 right after the header; sub-filters
    // 1.. (overflow layers, docs/window.md "Overload"): sub j one chunk of 2^cuckoo_sub_log2(g, j)
    // buckets with its stripe count, in an owned extent of its size; at most max_subs (2, or
    // kLayeredMaxSubs for a layered table). The expanding writer publishes subs[n] (sub_count
    // n + 1) before t->overflow (n = 1 only), so a writer killed between the two leaves overflow
    // 0 with sub-filters: allowed; a published overflow is subs[1]. pending_overflow is the last
    // sub-filter committed: one of subs[1..n-1], or (its allocator died before publishing) an
    // owned extent of the next sub-filter's size.
    auto* ch = reinterpret_cast<const ck::Header*>(x.base + off + moff);
    const uint32_t n = ck::sub_count_acquire(ch);  // acquire: the subs it publishes
    const uint32_t g = static_cast<uint32_t>(t->geometry);
    const uint32_t lane = h->k_main <= 8 ? 8u : 16u;
    const uint32_t most = ch->max_subs;
    const auto sub_ok = [&](uint32_t j) {
      const ck::SubDesc& d = ch->subs[j];
      const uint32_t l2 = j == 0 ? g : wi::cuckoo_sub_log2(g, j);
      return d.log2_buckets == l2 && d.chunks_minus_1 == 0 && d.log2_stripes == ck::stripes_for(l2) &&
             (j == 0 ? d.offset == off + moff + sizeof(ck::Header) : owned(d.offset, ck::sub_bytes(l2, ck::stripes_for(l2), lane)));
    };
    if (ch->magic != ck::kMagic || ch->fp_bits != h->k_main || ch->lane_bits != lane ||
        (most != 2 && !(layered && most == wi::kLayeredMaxSubs)) || n < 1 || n > most)
      return "cuckoo table header is corrupt";
    for (uint32_t j = 0; j < n; ++j)
      if (!sub_ok(j)) return j < 2 ? "cuckoo table header is corrupt" : "cuckoo sub-filter " + std::to_string(j) + " is corrupt";
    if (ovf != 0 && (n < 2 || ovf != ch->subs[1].offset)) return "cuckoo table header is corrupt";
    if (pending != 0 && std::find(own.begin(), own.end(), pending) == own.end()) {
      const uint32_t l2 = n == 1 ? g : wi::cuckoo_sub_log2(g, n);
      if (n >= most || !owned(pending, ck::sub_bytes(l2, ck::stripes_for(l2), lane)))
        return "overflow at " + std::to_string(pending) + " is not an allocated extent of this window of its size";
    }
  } else {
    if (ovf != 0 && pending != 0 && pending != ovf) return "overflow and pending overflow disagree";
    // Layer 1: the overflow's lines (a layered table's BloomLayerDir after them).
    const uint64_t l1 = ovf != 0 ? ovf : pending;
    const uint64_t lines = t->overflow_geometry <= bl::kMaxLayerBlocks ? t->overflow_geometry * 64 : 0;
    if (l1 != 0 && !owned(l1, lines == 0 ? 0 : lines + (layered ? sizeof(wi::BloomLayerDir) : 0)))
      return "overflow at " + std::to_string(l1) + " is not an allocated extent of this window of its size";
    if (l1 != 0 && layered) {
      // Layers 2.. (docs/window.md "Overload"): the dir's published entries, each an owned extent
      // of its lines with a probe count in range; its pending one of them, or (its allocator died
      // before publishing) the next entry, logged with it. An unpublished layer 1 has no more.
      const auto* d = reinterpret_cast<const wi::BloomLayerDir*>(x.base + l1 + lines);
      const uint64_t c = d->count.load(std::memory_order_acquire);  // acquire: the entries it publishes
      const auto layer_ok = [&](uint64_t j) {
        const wi::BloomLayer& l = d->layer[j];
        return l.blocks >= 1 && l.blocks <= bl::kMaxLayerBlocks && l.k >= 1 && l.k <= bl::kMaxK && owned(l.offset, l.blocks * 64);
      };
      if (c > wi::kBloomMaxExtra || d->k1 < 1 || d->k1 > bl::kMaxK || (ovf == 0 && (c != 0 || d->pending != 0)))
        return "overflow layer directory is corrupt";
      for (uint64_t j = 0; j < c; ++j)
        if (!layer_ok(j)) return "overflow layer " + std::to_string(j + 2) + " is corrupt";
      if (d->pending != 0 && std::find(own.begin() + 1, own.end(), d->pending) == own.end() &&
          (c >= wi::kBloomMaxExtra || d->layer[c].offset != d->pending || !layer_ok(c)))
        return "overflow layer " + std::to_string(c + 2) + " (pending) is corrupt";
    }
  }
  // No two of the table's own extents overlap (another table's: validate_window's span check), so
  // free_table frees each once.
  own.push_back(off);
  std::sort(own.begin(), own.end());
  for (size_t j = 1; j < own.size(); ++j)
    if (own[j] - sizeof(internal::ExtentHeader) < owned_extent_end(x, own[j - 1], 0))
      return "overflow layers at " + std::to_string(own[j - 1]) + " and " + std::to_string(own[j]) + " overlap";
  if (layers)
    for (const uint64_t o : own)
      if (o != off) layers->push_back(o);
  return {};
}

void validate_window(const Segment& seg, const RegionInfo& r, std::vector<std::string>& problems) {
  const std::byte* base = seg.base();
  const uint64_t seg_size = seg.size();
  if (r.size < sizeof(WindowHeader) || r.offset % 64 != 0 || r.offset > seg_size || r.size > seg_size - r.offset) {
    problems.push_back("region of " + std::to_string(r.size) + " bytes is too small for a window header");
    return;
  }
  auto* h = reinterpret_cast<const WindowHeader*>(base + r.offset);
  if (h->magic != wi::kMagic) {
    problems.push_back("bad magic (not a window region)");
    return;
  }
  if (h->version != wi::kVersion) {
    problems.push_back("layout version " + std::to_string(h->version) + ", this build reads " + std::to_string(wi::kVersion));
    return;
  }
  if (h->variant > wi::kVariantStamped) problems.push_back("unknown variant " + std::to_string(h->variant));
  if (h->retention < 1 || h->retention > wi::kMaxRetention || h->slots != h->retention + 1) {
    problems.push_back("retention " + std::to_string(h->retention) + " / slots " + std::to_string(h->slots) + " invalid");
    return;
  }
  if (h->max_spaces < 1 || h->max_spaces > wi::kMaxSpaces || h->space_table != wi::space_table_for(h->max_spaces)) {
    problems.push_back("max_spaces / space table size invalid");
    return;
  }
  if (wi::region_bytes(h->slots, h->space_table) > r.size) {
    problems.push_back("slot and key tables run past the region");
    return;
  }
  if (h->region_offset != r.offset) problems.push_back("header's own offset disagrees with the directory");
  if (h->bucket_seconds == 0 || h->bucket_seconds > (uint64_t{1} << 40) || h->utc_offset <= -(int64_t{1} << 40) ||
      h->utc_offset >= (int64_t{1} << 40) || h->expected == 0 || !(h->error > 0 && h->error < 1) ||
      !(h->p1 > 0 && h->p1 < 1) || h->error_window < 1 || h->error_window > h->retention)
    problems.push_back("parameters out of range (bucket_seconds, utc_offset, expected, error)");
  if (h->variant == wi::kVariantBloom && (h->k_main < 1 || h->k_main > bl::kMaxK || h->k_overflow < 1 || h->k_overflow > bl::kMaxK))
    problems.push_back("probe counts out of range");
  if (h->variant == wi::kVariantCuckoo && h->k_main != 8 && h->k_main != 12 && h->k_main != 16)
    problems.push_back("fingerprint bits " + std::to_string(h->k_main));
  if (h->variant == wi::kVariantStamped && (h->k_main != internal::stamped::kFpBits ||
                                            h->retention > internal::stamped::kMaxRetention || h->shared == 0))
    problems.push_back("stamped window parameters invalid (fingerprint bits, retention or shared table)");
  if (!problems.empty()) return;
  const BucketSlot* s = reinterpret_cast<const BucketSlot*>(h + 1);
  const uint64_t* top = &seg.impl()->hdr()->top;
  std::vector<Span> spans;  // every extent the window's tables name: none may overlap another
  for (uint32_t i = 0; i < h->slots; ++i) {
    std::string at = "slot " + std::to_string(i) + ": ";
    uint64_t tag = 0, off = 0;
    bool retired = false;
    std::string p;
    std::vector<uint64_t> layers;  // the table's overflow layers / sub-filters (published or pending)
    WindowExtents x;
    // A slot's verdict counts when the slot did not change while its table was read: a lock
    // holder retiring or replacing a table stores the slot (table 0 or the new one) before it
    // frees the old extents, so a validation racing it sees the slot move and reads it again
    // (bounded: a slot changes under the lock, once per transaction).
    // The data area's top is read after the slot, per attempt: a table (or a layer) allocated
    // from top after an earlier read of top is past it, and a top read once per validation
    // called a table that a lock holder allocated meanwhile "not an allocated extent"
    // (torture_ci, seed 20261130). A problem counts only if top did not move while the table
    // was read either (a layer allocated meanwhile: read again with the new top).
    for (int attempt = 0; attempt < 8; ++attempt) {
      tag = s[i].tag.load(std::memory_order_acquire);  // acquire: the table it names
      off = std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed);  // relaxed: re-checked below
      std::atomic_thread_fence(std::memory_order_acquire);  // the slot before top (its table below top)
      x = extents_of(seg, r);
      retired = tag == wi::kRetired;
      p.clear();
      layers.clear();
      if (!retired && tag != 0 && (tag - 1) % h->slots != i)
        p = "holds bucket " + std::to_string(tag - 1) + " in the wrong slot";
      else if (off == 0 && !retired)  // retired: no table (maintain() freed it); anything else names one
        p = "tag " + std::to_string(tag) + " but no table";
      else if (off != 0)
        // A retired slot that names a table holds a spare in preparation (maintain, or an inline
        // preparer that died): prepare_chunk zeroes it, stats counts it, drop and the next
        // preparation free it. So it is validated like every other table, its body excepted.
        p = table_problem(x, h, off, /*in_preparation=*/retired, &layers);
      std::atomic_thread_fence(std::memory_order_acquire);  // the reads above before the re-check
      if (s[i].tag.load(std::memory_order_relaxed) == tag &&  // relaxed: after the fence
          std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed) == off &&
          (p.empty() || std::min(internal::load_acquire(top), seg.size()) == x.top))  // acquire: as extents_of
        break;
    }
    if (off == 0 && p.empty()) continue;
    if (!p.empty()) {
      problems.push_back(at + (retired ? "retired slot's " : "") + p);
      continue;
    }
    // Every extent the table owns (itself, its overflow layers / sub-filters, published or
    // pending: table_problem listed each) joins the overlap check.
    constexpr uint64_t kEh = sizeof(internal::ExtentHeader);
    spans.push_back(Span{off - kEh, owned_extent_end(x, off, 0), i, "table"});
    for (const uint64_t o : layers) spans.push_back(Span{o - kEh, owned_extent_end(x, o, 0), i, "overflow layer"});
  }
  if (h->variant == wi::kVariantStamped) {
    // The shared table: immutable offset (create), its sub-filters published under its writer lock.
    std::vector<uint64_t> layers;
    std::string p;
    WindowExtents x;
    for (int attempt = 0; attempt < 8; ++attempt) {
      x = extents_of(seg, r);
      layers.clear();
      p = table_problem(x, h, h->shared, false, &layers, /*shared=*/true);
      if (p.empty() || std::min(internal::load_acquire(top), seg.size()) == x.top) break;  // acquire: as extents_of
    }
    if (!p.empty()) {
      problems.push_back(p);
    } else {
      constexpr uint64_t kEh = sizeof(internal::ExtentHeader);
      spans.push_back(Span{h->shared - kEh, owned_extent_end(x, h->shared, 0), h->slots, "shared table"});
      for (const uint64_t o : layers) spans.push_back(Span{o - kEh, owned_extent_end(x, o, 0), h->slots, "shared sub-filter"});
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  for (size_t j = 1; j < spans.size(); ++j)
    if (spans[j].lo < spans[j - 1].hi)
      problems.push_back("slot " + std::to_string(spans[j].slot) + "'s " + spans[j].what + " overlaps slot " +
                         std::to_string(spans[j - 1].slot) + "'s " + spans[j - 1].what);
}

void require_sound(const Segment& seg, const RegionInfo& r) {
  internal::validate_prefix(r, seg.base() + r.offset, sizeof(WindowHeader), seg.size(), wi::kMagic, wi::kVersion);
  std::vector<std::string> problems;
  validate_window(seg, r, problems);
  if (!problems.empty()) throw internal::corrupt_error(Kind::kWindow, r.name, problems.front());
}

wi::Geometry geometry_of(const WindowHeader* h, uint64_t data_lo, uint64_t map_limit) noexcept {
  wi::Geometry g;
  g.bucket_seconds = h->bucket_seconds;
  g.utc_offset = h->utc_offset;
  g.seed = h->seed;
  g.expected = h->expected;
  g.variant = h->variant;
  g.shared = h->variant == wi::kVariantStamped ? h->shared : 0;
  g.retention = h->retention;
  g.slots = h->slots;
  g.max_spaces = h->max_spaces;
  g.space_table = h->space_table;
  g.k_main = h->k_main;
  g.k_overflow = h->k_overflow;
  g.main_offset = wi::main_offset_in_table(g.space_table);
  g.keys_offset = sizeof(WindowHeader) + wi::slots_bytes(g.slots);
  g.data_lo = data_lo;
  g.map_limit = map_limit;
  // Bytes a table needs before its main part's lines (kBloom: checked per query against its block
  // count) or its cuckoo header (kCuckoo); 0 when even that does not fit (geometry_problem refuses).
  const uint64_t need = g.main_offset + (g.variant == wi::kVariantCuckoo ? sizeof(ck::Header) : 0);
  g.table_span = map_limit >= data_lo && map_limit - data_lo >= need + 64 ? map_limit - data_lo - need : 0;
  return g;
}

// "" when G (a copy, so no other writer can change it while it is checked) holds the ranges
// validate_window requires of a header: every divisor >= 1, every index bound inside its array.
std::string geometry_problem(const wi::Geometry& g, uint64_t region_bytes) {
  if (g.bucket_seconds == 0 || g.bucket_seconds > (uint64_t{1} << 40) || g.utc_offset <= -(int64_t{1} << 40) ||
      g.utc_offset >= (int64_t{1} << 40) || g.expected == 0)
    return "parameters out of range (bucket_seconds, utc_offset, expected)";
  if (g.variant > wi::kVariantStamped || g.retention < 1 || g.retention > wi::kMaxRetention || g.slots != g.retention + 1)
    return "variant / retention / slots invalid";
  if (g.max_spaces < 1 || g.max_spaces > wi::kMaxSpaces || g.space_table != wi::space_table_for(g.max_spaces) ||
      wi::region_bytes(g.slots, g.space_table) > region_bytes)
    return "max_spaces / space table size invalid";
  if (g.variant == wi::kVariantBloom && (g.k_main < 1 || g.k_main > bl::kMaxK || g.k_overflow < 1 || g.k_overflow > bl::kMaxK))
    return "probe counts out of range";
  if (g.variant == wi::kVariantCuckoo && g.k_main != 8 && g.k_main != 12 && g.k_main != 16)
    return "fingerprint bits " + std::to_string(g.k_main);
  if (g.variant == wi::kVariantStamped &&
      (g.k_main != internal::stamped::kFpBits || g.retention > internal::stamped::kMaxRetention || g.shared < g.data_lo ||
       g.shared % 64 != 0 || g.shared > g.map_limit || g.map_limit - g.shared < g.main_offset + sizeof(ck::Header)))
    return "stamped window parameters invalid (fingerprint bits, retention or shared table)";
  if (g.table_span == 0) return "segment too small";
  return {};
}

}  // namespace internal::window_ops

void WindowOps::require_sound(const Window& w) {
  const RegionInfo r = region(w);
  internal::window_ops::require_sound(w.seg_, r);
  // The header must still hold the geometry this handle captured at open: the control plane
  // (maintain, the inline preparer, stats, drop) reads the header, the data plane the copy.
  const wi::Geometry now = geometry_of(hdr(w), w.g_.data_lo, w.g_.map_limit);
  if (std::memcmp(&now, &w.g_, sizeof now) != 0)
    throw internal::corrupt_error(Kind::kWindow, r.name, "header parameters changed since the window was opened");
}

RegionInfo WindowOps::region(const Window& w) {
  auto found = w.seg_.find(w.name_);
  if (!found || found->kind != Kind::kWindow || found->slot != w.slot_ || found->generation != w.generation_)
    throw Error(ErrorCode::kDropped, "window '" + w.name_ + "' was dropped by some process: open it again");
  return *found;
}

Window Window::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  Window w;
  RegionInfo r = w.bind(seg, name, Kind::kWindow);
  require_sound(seg, r);
  w.base_ = seg.base();
  w.offset_ = r.offset;
  // The geometry every data-plane and rotation path divides and indexes by, copied once and
  // range-checked on the copy (the header validated above could change under us); what the
  // header says later is never trusted for it (docs/window.md "Validation").
  w.g_ = geometry_of(WindowOps::hdr(w), seg.impl()->lay.data_offset + sizeof(internal::ExtentHeader),
                     seg.impl()->map_size);
  if (std::string p = geometry_problem(w.g_, r.size); !p.empty()) throw internal::corrupt_error(Kind::kWindow, r.name, p);
  return w;
}

bool Window::drop(Segment& seg, std::string_view name) {
  // Frees the tables (and their overflows) that validate (table_problem: allocated extents of
  // this window, outside its region, none overlapping another), each once; a corrupt window
  // is dropped too, and what it owns that nothing vouches for is left to the segment's leak
  // check (the window gone, check --repair frees every extent it owned).
  return drop_region(seg, name, Kind::kWindow, [&](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    auto* h = reinterpret_cast<WindowHeader*>(region);
    if (bytes < sizeof(WindowHeader) || h->magic != wi::kMagic || h->variant > wi::kVariantStamped || h->slots < 2 ||
        h->slots > wi::kMaxRetention + 1 || h->max_spaces < 1 || h->max_spaces > wi::kMaxSpaces ||
        h->space_table != wi::space_table_for(h->max_spaces))
      return;
    if (wi::region_bytes(h->slots, h->space_table) > bytes) return;
    auto info = txn.segment().find(name);  // under the lock: the entry being dropped
    if (!info || txn.base() + info->offset != region) return;
    const WindowExtents x = extents_of(txn.segment(), *info);
    constexpr uint64_t kEh = sizeof(internal::ExtentHeader);
    struct Free {
      uint64_t lo, hi, off;
    };
    std::vector<Free> frees;
    BucketSlot* s = wi::slot_table(h);
    for (uint32_t i = 0; i < h->slots; ++i) {
      const uint64_t off = s[i].table;
      if (off == 0) continue;
      // relaxed: under the lock; a retired slot's table is a spare, maybe still being zeroed.
      const bool retired = s[i].tag.load(std::memory_order_relaxed) == wi::kRetired;
      std::vector<uint64_t> layers;  // every overflow layer / sub-filter that validated with it
      if (!table_problem(x, h, off, retired, &layers).empty()) continue;
      layers.push_back(off);
      for (const uint64_t o : layers) frees.push_back(Free{o - kEh, owned_extent_end(x, o, 0), o});
    }
    if (h->variant == wi::kVariantStamped && h->shared != 0) {
      std::vector<uint64_t> layers;
      if (table_problem(x, h, h->shared, false, &layers, /*shared=*/true).empty()) {
        layers.push_back(h->shared);
        for (const uint64_t o : layers) frees.push_back(Free{o - kEh, owned_extent_end(x, o, 0), o});
      }
    }
    std::sort(frees.begin(), frees.end(), [](const Free& a, const Free& b) { return a.lo < b.lo; });
    for (size_t j = 0; j < frees.size(); ++j) {
      const bool clash = (j > 0 && frees[j].lo < frees[j - 1].hi) || (j + 1 < frees.size() && frees[j + 1].lo < frees[j].hi);
      if (!clash) txn.free(frees[j].off);  // two tables naming one extent: neither is trusted
    }
    for (uint32_t i = 0; i < h->slots; ++i)
      if (s[i].table != 0) txn.store_u64(&s[i].table, 0);
    if (h->variant == wi::kVariantStamped && h->shared != 0) txn.store_u64(&h->shared, 0);
  });
}

WindowStats Window::stats() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  WindowOps::require_sound(*this);  // every table below is followed: re-validated (bytes may have changed since open)
  WindowHeader* h = WindowOps::hdr(*this);
  WindowStats st;
  st.variant = h->variant == wi::kVariantCuckoo    ? WindowVariant::kCuckoo
               : h->variant == wi::kVariantStamped ? WindowVariant::kStamped
                                                   : WindowVariant::kBloom;
  st.retention = h->retention;
  st.bucket_seconds = h->bucket_seconds;
  st.utc_offset = h->utc_offset;
  st.expected_per_bucket = h->expected;
  st.error = h->error;
  st.error_window = h->error_window;
  st.one_bucket_error = h->p1;
  st.max_spaces = h->max_spaces;
  st.spaces = h->spaces_claimed.load(std::memory_order_relaxed);  // relaxed: statistics below
  st.rotations = h->rotations.load(std::memory_order_relaxed);
  st.racing_marks = h->racing_marks.load(std::memory_order_relaxed);
  st.rotation_races = h->rotation_races.load(std::memory_order_relaxed);
  st.inline_allocations = h->inline_allocations.load(std::memory_order_relaxed);
  st.overflow_failures = h->overflow_failures.load(std::memory_order_relaxed);
  st.forget_ambiguous = h->forget_ambiguous.load(std::memory_order_relaxed);
  st.seed = h->seed;
  uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: pairs with raise_epoch
  const int64_t e = WindowOps::read_epoch(*this);
  st.current_bucket = g == 0 ? -1 : e;
  st.memory_bytes = h->region_bytes;
  const uint32_t T = h->space_table;
  const BucketSlot* s = wi::slot_table(h);
  for (uint32_t i = 0; i < g_.slots; ++i) {
    uint64_t off = std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed);  // relaxed: statistic
    if (off == 0) continue;
    auto* t = reinterpret_cast<TableHead*>(base_ + off);
    // From the table's geometry, not re-sized from its capacity (a blocked-Bloom sizing search
    // costs ~2 ms: stats() took 26 ms for 8 slots and 7 buckets, on every metrics scrape).
    st.memory_bytes += wi::main_offset_in_table(T) + main_bytes_of(h, t);
    // A spare in preparation (tag retired, prep_cursor > 0) has no layers yet (its bytes may be a
    // freed table's): its own extent only.
    if (t->prep_cursor.load(std::memory_order_relaxed) == 0) st.memory_bytes += layer_bytes_of(base_, h, t);  // relaxed: statistic
  }
  // kStamped: one table answers every w, so its rate is the window's; it is reported on the
  // current bucket (window_fp_now(w) is then that rate for every w) with its sub-filters.
  double shared_fp = 0, shared_bound = 0;
  bool shared_over = false;
  uint32_t shared_layers = 0;
  uint64_t shared_bytes = 0;
  if (g_.variant == wi::kVariantStamped) {
    const TableHead* t = WindowOps::shared_head(*this);
    const ck::Header* ch = WindowOps::shared_ck(*this);
    const uint32_t subs = std::min<uint32_t>(ck::sub_count_acquire(ch), wi::kStampedMaxSubs);  // acquire: its subs
    shared_bytes = wi::main_offset_in_table(T) + ck::region_bytes_for(ck::geometry_of_buckets(t->geometry),
                                                                      internal::stamped::kLaneBits);
    double rem = static_cast<double>(ck::load_relaxed(ch->size));  // relaxed: statistic
    double loads = 0;
    for (uint32_t j = 0; j < subs; ++j) {
      const double lanes = 4.0 * static_cast<double>(ck::sub_buckets(ch->subs[j]));
      if (j > 0) shared_bytes += ck::sub_bytes(ch->subs[j], internal::stamped::kLaneBits);
      const double a = std::min(1.0, std::max(0.0, rem) / lanes);
      loads += a;
      rem -= a * lanes;
    }
    shared_layers = subs - 1;
    st.lanes = ck::load_relaxed(ch->size);                                         // relaxed: statistic
    st.swept_bucket = static_cast<int64_t>(h->swept.load(std::memory_order_relaxed));  // relaxed: statistic
    shared_fp = std::min(1.0, 2.0 * ck::kSlots * loads / 4095.0);
    // Over: an insert answered kFull, or the sub-filters in use give more than the asked rate.
    shared_over = ck::load_relaxed(ch->failures) != 0 || shared_fp > h->error;  // relaxed: statistic
    shared_bound = shared_over ? std::max(shared_fp, h->error) : h->error;
    st.memory_bytes += shared_bytes;
    st.shared_bytes = shared_bytes;
  }
  for (uint32_t age = 0; age < g_.retention; ++age) {
    WindowBucketStats b;
    b.bucket = e - static_cast<int64_t>(age);
    b.age = age;
    TableHead* t = table_for(base_, g_, h, b.bucket);
    if (t != nullptr) {
      b.distinct = table_distinct(t);
      b.capacity = t->capacity;
      if (g_.variant != wi::kVariantStamped) bucket_fp(base_, g_, h, t, b.distinct, b.fp_rate_now, b.fp_bound, b.over_capacity);
      b.bytes = wi::main_offset_in_table(T) + main_bytes_of(h, t) + layer_bytes_of(base_, h, t, &b.layers);
      b.overflow = b.layers > 0;
      st.other_marks += std::atomic_ref<uint64_t>(counters_of(t)[T]).load(std::memory_order_relaxed);  // relaxed
    }
    if (g_.variant == wi::kVariantStamped) {
      b.capacity = h->expected;
      b.fp_rate_now = age == 0 ? shared_fp : 0;
      b.fp_bound = age == 0 ? shared_bound : 0;
      b.over_capacity = shared_over;
      b.layers = age == 0 ? shared_layers : 0;
      b.overflow = b.layers > 0;
      if (age == 0) b.bytes += shared_bytes;
    }
    st.buckets.push_back(b);
  }
  return st;
}


// ---------------------------------------------------------------------------
// Integrity.

namespace internal::window {

namespace {
// kStamped's shared table (validated by validate_window first): a writer lock held by a dead
// process (--repair takes it over, which repairs from its intent record), lanes whose
// fingerprint is 0 (no writer stores one: damage, reported), the size counter against the
// lanes (a repairer fixes it; --repair recounts when the lock is free), stamps past the window.
void check_stamped(Segment& seg, WindowHeader* h, bool repair, CheckScope& scope) {
  namespace st = internal::stamped;
  auto* ch = reinterpret_cast<ck::Header*>(seg.base() + h->shared + wi::main_offset_in_table(h->space_table));
  const ck::Liveness lv = liveness_of(seg);
  const uint64_t owner = ck::A(ch->lock_owner).load(std::memory_order_acquire);  // acquire: its last stores
  if (owner != 0 && !lv.is_alive(owner)) {
    bool fixed = false;
    if (repair && ck::try_takeover<st::Lanes>(seg.base(), ch, owner, lv)) {
      ck::unlock(ch);
      fixed = true;
    }
    scope.add("shared table's writer lock held by a dead process", fixed);
  }
  const uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: as read_epoch
  const uint64_t swept = h->swept.load(std::memory_order_acquire);  // acquire: as stamped_clock
  const int64_t e = std::max<int64_t>(g > 0 ? static_cast<int64_t>(g - 1) : 0, static_cast<int64_t>(swept));
  const st::Clock c = st::clock_of(e, swept != 0 ? swept : static_cast<uint64_t>(std::max<int64_t>(e, 1)), h->retention);
  const st::Census n = st::census(seg.base(), ch, c);
  if (n.bad != 0) scope.add(std::to_string(n.bad) + " lanes of the shared table have fingerprint 0 (damaged bytes)");
  const uint64_t size = ck::load_relaxed(ch->size);  // relaxed: snapshot
  const bool idle = ck::A(ch->lock_owner).load(std::memory_order_acquire) == 0;  // acquire: a writer's stores
  if (idle && size != n.live + n.dead + n.bad) {
    bool fixed = false;
    if (repair) {
      const ck::Liveness me = liveness_of(seg);
      if (me.token() != 0) {
        ck::lock<st::Lanes>(seg.base(), ch, me);
        const st::Census again = st::census(seg.base(), ch, c);
        ck::A(ch->size).store(again.live + again.dead + again.bad, std::memory_order_relaxed);  // relaxed: lock holder
        ck::unlock(ch);
        fixed = true;
      }
    }
    scope.add("shared table's size counter says " + std::to_string(size) + ", its lanes are " +
                  std::to_string(n.live + n.dead + n.bad),
              fixed);
  }
}
}  // namespace

void check_window(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  if (!scope.validated([&] {
        validate_prefix(region, seg.base() + region.offset, sizeof(WindowHeader), seg.size(), kMagic, kVersion);
      }))
    return;
  std::vector<std::string> problems;
  validate_window(seg, region, problems);
  if (!problems.empty() && repair) {
    // --repair: a retired slot whose spare is unsound only loses its spare (the next maintain()
    // or writer prepares a new one), so it is detached, under the lock, when that alone makes
    // the window sound. The extent is not freed (nothing vouches that it is the window's; if
    // it is, the segment's leak check frees it once the window is dropped). Anything else in a
    // live bucket is not guessed at: the finding says to drop the window (drop frees only what
    // validates) and recreate it.
    auto* h = reinterpret_cast<WindowHeader*>(seg.base() + region.offset);
    std::vector<std::string> after;
    bool detached = false;
    try {
      seg.transact([&](ControlTxn& txn) {
        after.clear();
        detached = false;
        if (h->slots < 2 || h->slots > wi::kMaxRetention + 1 || wi::region_bytes(h->slots, h->space_table) > region.size)
          return;
        const WindowExtents x = extents_of(seg, region);
        BucketSlot* sl = wi::slot_table(h);
        for (uint32_t i = 0; i < h->slots; ++i) {
          const uint64_t off = sl[i].table;
          // relaxed: under the lock (rotators only CAS a tag 0; a retired tag is never claimed).
          if (sl[i].tag.load(std::memory_order_relaxed) != kRetired || off == 0) continue;
          if (!table_problem(x, h, off, /*in_preparation=*/true).empty()) {
            txn.store_u64(&sl[i].table, 0);
            detached = true;
          }
        }
        if (!detached) return;
        validate_window(seg, region, after);
        if (!after.empty()) throw Error(ErrorCode::kCorrupt, "not repairable by detaching retired spares");
      });
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kCorrupt) throw;
      detached = false;  // rolled back: the window is as it was
    }
    if (detached) {
      for (auto& p : problems) scope.add(p + " (repaired: the retired slot's spare was detached; maintain() prepares a new one)", true);
      problems.clear();
    } else {
      for (auto& p : problems)
        scope.add(p + " (not repaired: a live bucket's table is damaged; drop the window and recreate it: drop frees "
                      "only the extents that validate, and the next check --repair frees the rest)");
      return;
    }
  }
  for (auto& p : problems) scope.add(p);
  if (!problems.empty()) return;
  // The claimed-space counter against the key table (a claimer killed between its CAS
  // and its increment leaves it one short; only the soft limit depends on it).
  auto* h = reinterpret_cast<WindowHeader*>(seg.base() + region.offset);
  uint64_t* keys = wi::space_keys(h);
  uint32_t claimed = 0;
  for (uint32_t i = 0; i < h->space_table; ++i)
    claimed += std::atomic_ref<uint64_t>(keys[i]).load(std::memory_order_relaxed) != 0;  // relaxed: snapshot
  uint32_t counted = h->spaces_claimed.load(std::memory_order_relaxed);                  // relaxed: snapshot
  if (claimed > h->space_table / 2 + 64)
    scope.add("space table holds " + std::to_string(claimed) + " keys, more than half its " +
              std::to_string(h->space_table) + " rows");
  if (counted != claimed) {
    if (repair) h->spaces_claimed.store(claimed, std::memory_order_relaxed);  // relaxed: statistic / soft limit
    scope.add("spaces counter says " + std::to_string(counted) + ", the key table holds " + std::to_string(claimed), repair);
  }
  if (h->variant == wi::kVariantStamped) check_stamped(seg, h, repair, scope);
}

}  // namespace internal::window

}  // namespace shmfilter
