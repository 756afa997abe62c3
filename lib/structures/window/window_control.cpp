// lib/structures/window/window_control.cpp: the Window's control plane and inspection:
// options and sizing (plan), create, open (validation of the region), drop,
// stats and the integrity checker check_window.
#include <cinttypes>
#include <cmath>
#include <string>

#include "structures/window/window_ops.h"

namespace shmfilter {


std::string_view window_variant_name(WindowVariant v) noexcept { return v == WindowVariant::kCuckoo ? "cuckoo" : "bloom"; }

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
  if (o.variant != WindowVariant::kBloom && o.variant != WindowVariant::kCuckoo)
    bad("unknown window variant: use bloom (insert-only) or cuckoo (deletable)");
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
  p.variant = o.variant == WindowVariant::kCuckoo ? wi::kVariantCuckoo : wi::kVariantBloom;
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
void bucket_fp(std::byte* base, const WindowHeader* h, TableHead* t, uint64_t distinct, double& now, double& bound, bool& over) {
  const uint64_t cap = t->capacity;
  const bool layered = (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;  // relaxed: immutable
  over = false;
  if (h->variant == wi::kVariantBloom) {
    const double m_bits = static_cast<double>(t->geometry) * bl::kBlockBits;
    BloomLayerView l[wi::kBloomMaxLayers];
    const uint32_t n = bloom_layer_views(base, h, t, l);
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
  ck::Header* ch = cuckoo_of(t, h);
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
  if (sz.region_bytes + 2 * sz.table_bytes > max)
    throw Error(ErrorCode::kInvalidArgument,
                "expected_per_bucket " + std::to_string(opts.expected_per_bucket) + " needs " +
                    format_size(sz.region_bytes + 2 * sz.table_bytes) + " for the first two buckets, more than segment '" +
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
// Overflow layers (docs/window.md "Overload"): every descriptor the data plane follows past the
// first overflow, checked against the file. Kept apart from validate()'s own checks (the trust
// rule's) so that each layer kind's rule reads in one place.
// kCuckoo sub-filters 2.. of a layered table: each in an allocated extent of its size, of the shape
// its index gives (cuckoo_sub_log2), one chunk.
template <class ExtentOk>
bool cuckoo_layers_ok(const ck::Header* ch, uint32_t n, uint32_t g, uint32_t lane_bits, ExtentOk&& extent_ok) {
  if (ch->max_subs != 2 && ch->max_subs != wi::kLayeredMaxSubs) return false;
  if (n > ch->max_subs) return false;
  for (uint32_t j = 2; j < n; ++j) {
    const ck::SubDesc& d = ch->subs[j];
    const uint32_t l2 = wi::cuckoo_sub_log2(g, j);
    if (d.log2_buckets != l2 || d.chunks_minus_1 != 0 || d.log2_stripes != ck::stripes_for(l2) ||
        !extent_ok(d.offset, ck::sub_bytes(l2, d.log2_stripes, lane_bits)))
      return false;
  }
  return true;
}
// kBloom layers 2.. of a layered table: the dir at the end of the overflow extent, its count, and
// each layer's lines in an allocated extent, with a probe count in range.
template <class ExtentOk>
bool bloom_layers_ok(const std::byte* base, const TableHead* t, uint64_t ovf, ExtentOk&& extent_ok) {
  if (!extent_ok(ovf, t->overflow_geometry * 64 + sizeof(wi::BloomLayerDir))) return false;
  const auto* d = reinterpret_cast<const wi::BloomLayerDir*>(base + ovf + t->overflow_geometry * 64);
  const uint64_t c = d->count.load(std::memory_order_acquire);  // acquire: the entries it publishes
  if (c > wi::kBloomMaxExtra || d->k1 < 1 || d->k1 > bl::kMaxK) return false;
  for (uint64_t j = 0; j < c; ++j) {
    const wi::BloomLayer& l = d->layer[j];
    if (l.blocks < 1 || l.blocks > bl::kMaxLayerBlocks || l.k < 1 || l.k > bl::kMaxK || !extent_ok(l.offset, l.blocks * 64))
      return false;
  }
  return true;
}

// Validates a region; one line per problem. Safe on any bytes.
void validate(const std::byte* base, uint64_t seg_size, const RegionInfo& r, std::vector<std::string>& problems) {
  if (r.size < sizeof(WindowHeader) || r.offset % 64 != 0) {
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
  if (h->variant > wi::kVariantCuckoo) problems.push_back("unknown variant " + std::to_string(h->variant));
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
  if (h->bucket_seconds == 0 || h->expected == 0 || !(h->error > 0 && h->error < 1) || !(h->p1 > 0 && h->p1 < 1) ||
      h->error_window < 1 || h->error_window > h->retention)
    problems.push_back("parameters out of range (bucket_seconds, expected, error)");
  if (h->variant == wi::kVariantBloom && (h->k_main < 1 || h->k_main > bl::kMaxK || h->k_overflow < 1 || h->k_overflow > bl::kMaxK))
    problems.push_back("probe counts out of range");
  if (h->variant == wi::kVariantCuckoo && h->k_main != 8 && h->k_main != 12 && h->k_main != 16)
    problems.push_back("fingerprint bits " + std::to_string(h->k_main));
  if (!problems.empty()) return;
  const BucketSlot* s = reinterpret_cast<const BucketSlot*>(h + 1);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  auto extent_ok = [&](uint64_t off, uint64_t bytes) {
    if (off % 64 != 0 || off < sizeof(internal::ExtentHeader) || off > seg_size || bytes > seg_size - off) return false;
    auto* eh = reinterpret_cast<const internal::ExtentHeader*>(base + off - sizeof(internal::ExtentHeader));
    return eh->magic == internal::kExtentMagic && eh->state == internal::kExtentAllocated &&
           eh->size >= bytes + sizeof(internal::ExtentHeader);
  };
  // Bytes of one cuckoo sub-filter of table T (main or overflow: one chunk of its geometry).
  auto cuckoo_sub_bytes = [&](const TableHead* t) {
    const uint32_t g = static_cast<uint32_t>(t->geometry);
    return ck::sub_bytes(g, ck::stripes_for(g), h->k_main <= 8 ? 8 : 16);
  };
  for (uint32_t i = 0; i < h->slots; ++i) {
    std::string at = "slot " + std::to_string(i) + ": ";
    uint64_t tag = s[i].tag.load(std::memory_order_acquire);  // acquire: the table it names
    uint64_t off = std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed);  // relaxed: checker snapshot
    if (tag == wi::kRetired) continue;  // may still own a table (a preparer died): freed by the next maintain()
    if (tag != 0 && (tag - 1) % h->slots != i) problems.push_back(at + "holds bucket " + std::to_string(tag - 1) + " in the wrong slot");
    if (off == 0) {
      problems.push_back(at + "tag " + std::to_string(tag) + " but no table");
      continue;
    }
    if (!extent_ok(off, moff)) {
      problems.push_back(at + "table at " + std::to_string(off) + " is not an allocated extent inside the segment");
      continue;
    }
    auto* t = reinterpret_cast<const TableHead*>(base + off);
    uint64_t mb = 0;
    if (h->variant == wi::kVariantBloom) {
      if (t->geometry == 0 || t->geometry > bl::kMaxLayerBlocks) {
        problems.push_back(at + "table has " + std::to_string(t->geometry) + " blocks");
        continue;
      }
      mb = wi::bloom_main_bytes(t->geometry);
    } else {
      if (t->geometry < 1 || t->geometry > 32) {
        problems.push_back(at + "table has 2^" + std::to_string(t->geometry) + " buckets");
        continue;
      }
      mb = wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), h->k_main <= 8 ? 8 : 16);
    }
    if (t->capacity == 0) problems.push_back(at + "table capacity 0");
    // relaxed: checker snapshot; a published or claimed slot's table is complete (prep_cursor 0).
    if (t->prep_cursor.load(std::memory_order_relaxed) != 0)
      problems.push_back(at + "tag " + std::to_string(tag) + " names a table still in preparation");
    if (!extent_ok(off, moff + mb)) {
      problems.push_back(at + "table extent is smaller than its geometry");
      continue;
    }
    uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry
    if (h->variant == wi::kVariantCuckoo) {
      // Every descriptor the data plane follows: sub-filter 0 right after the header, and
      // the overflow sub-filter (once published) in an allocated extent of its size, both
      // one chunk of the table's geometry with its stripe count. The expanding writer
      // publishes subs[1] (sub_count 2) before t->overflow, so a writer killed between the
      // two leaves overflow 0 with a sound subs[1]: allowed; otherwise the two must agree.
      auto* ch = reinterpret_cast<const ck::Header*>(base + off + moff);
      const uint32_t n = ck::sub_count_acquire(ch);  // acquire: subs[1] it publishes
      const uint32_t g = static_cast<uint32_t>(t->geometry);
      const auto shape_ok = [&](const ck::SubDesc& d) {
        return d.log2_buckets == g && d.chunks_minus_1 == 0 && d.log2_stripes == ck::stripes_for(g);
      };
      if (ch->magic != ck::kMagic || ch->fp_bits != h->k_main || n < 1 || n > ck::kMaxSubs ||
          !cuckoo_layers_ok(ch, n, g, h->k_main <= 8 ? 8 : 16, extent_ok) ||
          ch->subs[0].offset != off + moff + sizeof(ck::Header) || !shape_ok(ch->subs[0]) ||
          (n >= 2 && (!shape_ok(ch->subs[1]) || !extent_ok(ch->subs[1].offset, cuckoo_sub_bytes(t)) ||
                      (ovf != 0 && ch->subs[1].offset != ovf))))
        problems.push_back(at + "cuckoo table header is corrupt");
    }
    if (ovf != 0) {
      const uint64_t ob = h->variant == wi::kVariantBloom ? t->overflow_geometry * 64 : cuckoo_sub_bytes(t);
      if (ob == 0 || !extent_ok(ovf, ob)) problems.push_back(at + "overflow at " + std::to_string(ovf) + " is not a valid extent");
      else if (h->variant == wi::kVariantBloom && (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0 &&
               !bloom_layers_ok(base, t, ovf, extent_ok))  // relaxed: kTableLayered is immutable
        problems.push_back(at + "overflow layers of the table are corrupt");
    }
  }
}
}  // namespace

Window Window::open(Segment& seg, std::string_view name) {
  Window w;
  RegionInfo r = w.bind(seg, name, Kind::kWindow);
  internal::validate_prefix(r, seg.base() + r.offset, sizeof(WindowHeader), seg.size(), wi::kMagic, wi::kVersion);
  std::vector<std::string> problems;
  validate(seg.base(), seg.size(), r, problems);
  if (!problems.empty()) throw internal::corrupt_error(Kind::kWindow, name, problems.front());
  w.base_ = seg.base();
  w.offset_ = r.offset;
  return w;
}

bool Window::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kWindow, [&](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    auto* h = reinterpret_cast<WindowHeader*>(region);
    if (bytes < sizeof(WindowHeader) || h->magic != wi::kMagic || h->slots < 2 || h->slots > wi::kMaxRetention + 1) return;
    if (wi::region_bytes(h->slots, h->space_table) > bytes) return;
    BucketSlot* s = wi::slot_table(h);
    for (uint32_t i = 0; i < h->slots; ++i) {
      if (s[i].table == 0) continue;
      free_table(txn, txn.base(), h, s[i].table);
      txn.store_u64(&s[i].table, 0);
    }
  });
}

WindowStats Window::stats() const {
  require_valid();
  WindowHeader* h = WindowOps::hdr(*this);
  WindowStats st;
  st.variant = h->variant == wi::kVariantCuckoo ? WindowVariant::kCuckoo : WindowVariant::kBloom;
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
  for (uint32_t i = 0; i < h->slots; ++i) {
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
  for (uint32_t age = 0; age < h->retention; ++age) {
    WindowBucketStats b;
    b.bucket = e - static_cast<int64_t>(age);
    b.age = age;
    TableHead* t = table_for(base_, h, b.bucket);
    if (t != nullptr) {
      b.distinct = table_distinct(t);
      b.capacity = t->capacity;
      bucket_fp(base_, h, t, b.distinct, b.fp_rate_now, b.fp_bound, b.over_capacity);
      b.bytes = wi::main_offset_in_table(T) + main_bytes_of(h, t) + layer_bytes_of(base_, h, t, &b.layers);
      b.overflow = b.layers > 0;
      st.other_marks += std::atomic_ref<uint64_t>(counters_of(t)[T]).load(std::memory_order_relaxed);  // relaxed
    }
    st.buckets.push_back(b);
  }
  return st;
}


// ---------------------------------------------------------------------------
// Integrity.

namespace internal::window {

void check_window(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  if (!scope.validated([&] {
        validate_prefix(region, seg.base() + region.offset, sizeof(WindowHeader), seg.size(), kMagic, kVersion);
      }))
    return;
  std::vector<std::string> problems;
  validate(seg.base(), seg.size(), region, problems);
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
}

}  // namespace internal::window

}  // namespace shmfilter
