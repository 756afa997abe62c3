// lib/structures/cuckoo/cuckoo.cpp: the Cuckoo handle over a Segment region, and check_cuckoo.
#include "shmfilter/cuckoo.hpp"

#include <chrono>
#include <cstddef>
#include <cmath>
#include <string>
#include <thread>

#include "segment/extents.h"
#include "segment/layout.h"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/region_handle.h"
#include "base/hash.h"
#include "base/kill_point.h"

static_assert(offsetof(shmfilter::internal::cuckoo::Header, magic) == 0 && offsetof(shmfilter::internal::cuckoo::Header, layout_version) == 4,
              "check_prefix (region_handle.h) reads the magic at byte 0 and the layout version at byte 4");

namespace shmfilter {

namespace ck = internal::cuckoo;

std::string_view cuckoo_status_name(CuckooStatus s) noexcept {
  switch (s) {
    case CuckooStatus::kInserted: return "inserted";
    case CuckooStatus::kExists: return "exists";
    case CuckooStatus::kFull: return "full";
    case CuckooStatus::kDropped: return "dropped";
    case CuckooStatus::kForked: return "forked";
    case CuckooStatus::kNoSpace: return "no-space";
    case CuckooStatus::kReadOnly: return "read-only";
  }
  return "?";
}

namespace {

bool seg_token_alive(const void* ctx, uint64_t token) { return static_cast<const Segment*>(ctx)->token_alive(token); }

uint64_t seg_owner_token(const void* ctx) { return static_cast<const Segment*>(ctx)->owner_token(); }

ck::Liveness liveness_of(const Segment& seg) noexcept {
  return ck::Liveness{0, &seg, &seg_token_alive, &seg_owner_token};
}

// Layouts this build reads: 1 (2^n buckets), 2 (chunked), 3 (chunked, packed 12-bit lanes).
bool known_layout(uint32_t v) noexcept {
  return v == ck::kLayoutVersionPow2 || v == ck::kLayoutVersion || v == ck::kLayoutVersionPacked;
}

std::string hdr_problem(const Segment& seg, const ck::Header* h, const RegionInfo& r, uint64_t seg_size) {
  if (auto pre = internal::check_prefix(r, reinterpret_cast<const std::byte*>(h), sizeof(ck::Header), seg_size,
                                        ck::kMagic, ck::kLayoutVersion);
      !pre.problem.empty() && !(pre.version_mismatch && known_layout(h->layout_version)))
    return pre.problem;  // layout 1 (2^n buckets) is read as one chunk, layout 3 packs lanes: see cuckoo_layout.h
  if (h->fp_bits != 8 && h->fp_bits != 12 && h->fp_bits != 16) return "fingerprint bits " + std::to_string(h->fp_bits);
  // Layout 3 is exactly f = 12 in packed 12-bit lanes; layouts 1 and 2 keep 8 or 16.
  const bool packed = h->layout_version == ck::kLayoutVersionPacked;
  if (packed ? (h->lane_bits != 12 || h->fp_bits != 12) : h->lane_bits != (h->fp_bits <= 8 ? 8u : 16u))
    return "lane bits " + std::to_string(h->lane_bits) + " with " + std::to_string(h->fp_bits) +
           "-bit fingerprints in layout " + std::to_string(h->layout_version);
  if (h->max_path < 1 || h->max_path > ck::kMaxPathLimit) return "max path " + std::to_string(h->max_path);
  if (h->max_subs < 1 || h->max_subs > ck::kMaxSubs) return "max sub-filters " + std::to_string(h->max_subs);
  if (h->expansion == 1 || h->expansion > 1024) return "expansion " + std::to_string(h->expansion) + " (valid: 0 or 2..1024)";
  uint32_t n = ck::sub_count_acquire(h);
  if (n < 1 || n > h->max_subs) return "sub-filter count " + std::to_string(n);
  for (uint32_t j = 0; j < n; ++j) {
    const ck::SubDesc& d = h->subs[j];
    // One chunk of 2^1..2^32 buckets, or chunks of 2^1..2^16; <= 2^32 buckets; every
    // sub-filter nests in the one before (same chunk size, a multiple of its chunks).
    const bool shape_ok = ck::sub_shape_ok(d);
    const bool nests = j == 0 || ck::nests_in(h->subs[j - 1], d);
    if (!shape_ok || !nests)
      return "sub-filter " + std::to_string(j) + " has bad geometry (" + std::to_string(ck::sub_chunks(d)) +
             " chunks of 2^" + std::to_string(d.log2_buckets) + " buckets, 2^" + std::to_string(d.log2_stripes) +
             " stripes" + (shape_ok ? ", not nested in sub-filter " + std::to_string(j - 1) : std::string()) + ")";
    if (h->layout_version == ck::kLayoutVersionPow2 && d.chunks_minus_1 != 0)
      return "sub-filter " + std::to_string(j) + " has " + std::to_string(ck::sub_chunks(d)) +
             " chunks in a layout-1 region (layout 1 has one)";
    uint64_t bytes = ck::sub_bytes(d, h->lane_bits);
    if (d.offset % 64 != 0 || d.offset > seg_size || bytes > seg_size - d.offset)
      return "sub-filter " + std::to_string(j) + " lies outside the segment";
    if (j == 0 && (d.offset != r.offset + sizeof(ck::Header) || sizeof(ck::Header) + bytes > r.size))
      return "sub-filter 0 lies outside its region";
    // Sub-filters 1..: each its own extent, one the allocator's walk reaches (lib/segment/extents.h),
    // of its size, charged to this filter (or unattributed, as an older build left it), and
    // distinct from the region's and from every other sub-filter's: never another structure's bytes.
    if (j > 0) {
      const uint64_t ext = internal::reached_extent_size(seg, d.offset);  // 0 unless d.offset >= 64 is reached
      const uint64_t owner = (uint64_t{r.generation} << 32) | (uint64_t{r.slot} + 1);
      const uint64_t eh_owner =
          ext == 0 ? 0 : reinterpret_cast<const internal::ExtentHeader*>(seg.base() + d.offset - sizeof(internal::ExtentHeader))->owner;
      bool dup = d.offset == r.offset;
      for (uint32_t k = 1; k < j; ++k) dup |= h->subs[k].offset == d.offset;
      if (ext == 0 || ext - sizeof(internal::ExtentHeader) < bytes || (eh_owner != owner && eh_owner != 0) || dup)
        return "sub-filter " + std::to_string(j) + " at " + std::to_string(d.offset) +
               " is not an extent of this filter of its size in the allocator's walk";
    }
  }
  return {};
}

}  // namespace

// Data-plane implementation, one instantiation per lane width.
template <class LT>
struct CuckooOps {
  // What an insert hands its expand callback: the handle, and why an expansion failed.
  struct ExpandCtx {
    Cuckoo* self;
    CuckooStatus failed = CuckooStatus::kFull;  // kFull: no larger sub-filter (or another failure)
  };
  static bool expand(void* ctx_v, ck::Header* h) {
    auto* ctx = static_cast<ExpandCtx*>(ctx_v);
    Cuckoo* self = ctx->self;
    try {
      uint32_t n = ck::sub_count_acquire(h);
      const ck::SubDesc& last = h->subs[n - 1];
      uint32_t grow = 1;
      while ((1u << grow) < h->expansion) ++grow;  // next power of two of the expansion factor
      const bool one_chunk = h->layout_version == ck::kLayoutVersionPow2;  // layout 1 stays layout 1
      const ck::Geometry g = ck::expansion_geometry(last, grow, one_chunk);  // nests in `last` (cuckoo_layout.h)
      if (g.buckets() > ck::kMaxBuckets) return false;             // no larger sub-filter: kFull
      const ck::SubDesc next = ck::sub_desc(0, g);
      uint64_t bytes = ck::sub_bytes(next, h->lane_bits);
      uint64_t off = 0;
      // The allocation and the record of it commit together; if this process dies inside,
      // both roll back. Publishing happens after the commit, under the writer lock, so no
      // writer can ever place an acknowledged item in an extent that a rollback later frees.
      self->seg_.transact([&](ControlTxn& txn) {
        // Under the segment lock: still published, so `h` is ours (the
        // transaction quiesces us; a filter dropped meanwhile could otherwise
        // be reclaimed by the allocation below while we write through `h`).
        if (!self->seg_.region_live(self->slot_, self->generation_))
          throw Error(ErrorCode::kDropped, "cuckoo filter '" + self->name_ + "' was dropped");
        uint64_t left = h->pending_extent;
        bool published = false;
        for (uint32_t j = 0; j < n; ++j) published |= h->subs[j].offset == left;
        if (left != 0 && !published) txn.free(left);  // a dead expander's committed, unpublished extent
        txn.charge_to(self->identity());  // check() then reports the extent as leaked if a drop ever missed it
        off = txn.allocate(bytes);
        SHMF_KILL_POINT("cuckoo.expand.inside_txn");
        txn.store_u64(&h->pending_extent, off);
      });
      SHMF_KILL_POINT("cuckoo.expand.after_commit");
      h->subs[n] = ck::sub_desc(off, g);  // invisible until sub_count grows
      // release: subs[n] is complete before a reader's acquire of sub_count can see n + 1.
      ck::A(h->sub_count).store(n + 1, std::memory_order_release);
      SHMF_KILL_POINT("cuckoo.expand.after_publish");
      ck::A(h->pending_extent).store(0, std::memory_order_relaxed);  // relaxed: lock holder; read under seg lock
      SHMF_KILL_POINT("cuckoo.expand.after_publish");
      return true;
    } catch (const Error& e) {
      // The insert answers kNoSpace (no room in the segment for the sub-filter), kDropped, else kFull.
      if (e.code() == ErrorCode::kNoSpace) ctx->failed = CuckooStatus::kNoSpace;
      if (e.code() == ErrorCode::kDropped) ctx->failed = CuckooStatus::kDropped;
      return false;
    } catch (...) {
      ctx->failed = CuckooStatus::kNoSpace;  // std::bad_alloc
      return false;
    }
  }
  static CuckooStatus insert(Cuckoo& c, uint64_t hv, bool unique) noexcept {
    ck::Liveness lv = liveness_of(c.seg_);
    lv.self = c.seg_.owner_token();
    if (lv.self == 0)  // no token of our own: a read-only attachment, or a handle inherited across fork()
      return c.seg_.read_only() ? CuckooStatus::kReadOnly : CuckooStatus::kForked;
    ExpandCtx ctx{&c};
    auto st = ck::insert<LT>(c.base_, c.hdr_, ck::split_hash(hv, c.hdr_->fp_bits), unique, lv,
                             &CuckooOps::expand, &ctx);
    if (st == ck::Status::kFull) return ctx.failed;
    return static_cast<CuckooStatus>(st);
  }
  static uint32_t count(const Cuckoo& c, uint64_t hv, bool one) noexcept {
    return ck::count_in<LT>(c.base_, c.hdr_, ck::split_hash(hv, c.hdr_->fp_bits), liveness_of(c.seg_), one);
  }
  static bool erase(Cuckoo& c, uint64_t hv) noexcept {
    ck::Liveness lv = liveness_of(c.seg_);
    lv.self = c.seg_.owner_token();
    if (lv.self == 0) return false;  // a handle inherited across fork()
    return ck::erase<LT>(c.base_, c.hdr_, ck::split_hash(hv, c.hdr_->fp_bits), lv);
  }
  static void contains_batch(const Cuckoo& c, const ck::KeyHash* ks, size_t n, uint8_t* out) noexcept {
    ck::contains_batch<LT>(c.base_, c.hdr_, ks, n, out, liveness_of(c.seg_));
  }
};

#define SHMF_CK_DISPATCH(call)                                                               \
  (lane_bits_ == 12   ? CuckooOps<ck::Lanes12>::call                                          \
   : lane_bits_ == 16 ? CuckooOps<ck::Lanes16>::call                                          \
                      : CuckooOps<ck::Lanes8>::call)

Cuckoo Cuckoo::create(Segment& seg, std::string_view name, const CuckooOptions& o) {
  if (o.capacity < 1) throw Error(ErrorCode::kInvalidArgument, "capacity 0 is invalid: pass --capacity >= 1");
  uint32_t f = o.fingerprint_bits;
  if (f != 0 && o.error != 0.0)
    throw Error(ErrorCode::kInvalidArgument,
                "both fingerprint bits and an error rate were given: pass only one of --fingerprint-bits / --error");
  if (f == 0 && o.error != 0.0) {
    if (!(o.error > 0.0 && o.error < 1.0))
      throw Error(ErrorCode::kInvalidArgument, "error rate " + std::to_string(o.error) +
                                                    " is outside (0, 1): pass e.g. --error 0.002");
    if (o.error < 8.0 / 65536.0)
      throw Error(ErrorCode::kInvalidArgument, "error rate " + std::to_string(o.error) +
                                                    " needs more than 16 fingerprint bits: pass --error >= 0.000123");
    f = ck::fp_bits_for_error(o.error);
  }
  if (f == 0) f = 12;
  if (f != 8 && f != 12 && f != 16)
    throw Error(ErrorCode::kInvalidArgument,
                "fingerprint bits " + std::to_string(f) + " is unsupported: pass --fingerprint-bits 8, 12 or 16");
  if (o.expansion == 1)
    throw Error(ErrorCode::kInvalidArgument, "expansion 1 would add sub-filters no larger than the last: pass 0 (none) or >= 2");
  if (o.expansion > 1024) throw Error(ErrorCode::kInvalidArgument, "expansion " + std::to_string(o.expansion) + " is too large: pass 0..1024");
  if (o.max_subfilters < 1 || o.max_subfilters > ck::kMaxSubs)
    throw Error(ErrorCode::kInvalidArgument, "max sub-filters " + std::to_string(o.max_subfilters) + " is invalid: pass 1..16");
  if (o.max_path < 1 || o.max_path > ck::kMaxPathLimit)
    throw Error(ErrorCode::kInvalidArgument, "max path " + std::to_string(o.max_path) + " is invalid: pass 1..6");
  const ck::Geometry geo = ck::geometry_for(o.capacity);
  if (geo.buckets() > ck::kMaxBuckets)
    throw Error(ErrorCode::kInvalidArgument,
                "capacity " + std::to_string(o.capacity) + " needs more than 2^32 buckets: pass a smaller --capacity");
  const uint32_t lane = ck::lane_bits_for(f);  // f = 12: packed 12-bit lanes, layout 3
  uint64_t bytes = ck::region_bytes_for(geo, lane);
  uint64_t seed = o.seed != 0 ? o.seed : internal::random_seed();
  uint32_t max_subs = o.expansion >= 2 ? o.max_subfilters : 1;
  seg.create_region(name, Kind::kCuckoo, bytes, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    uint64_t off = static_cast<uint64_t>(region - txn.base());
    ck::init_header(reinterpret_cast<ck::Header*>(region), f, o.max_path, o.expansion, max_subs, seed, o.capacity,
                    o.fingerprint_bits == 0 ? o.error : 0.0, got, geo, off + sizeof(ck::Header), lane);
  });
  return open(seg, name);
}

Cuckoo Cuckoo::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  Cuckoo c;
  RegionInfo r = c.bind(seg, name, Kind::kCuckoo);
  c.base_ = seg.base();
  c.hdr_ = reinterpret_cast<ck::Header*>(c.region_);
  if (r.offset % 64 != 0) throw internal::corrupt_error(Kind::kCuckoo, name, "region is not 64-byte aligned");
  // Layouts 1 and 3 are read too (known_layout); any other version is named as such.
  if (auto pre = internal::check_prefix(r, c.region_, sizeof(ck::Header), seg.size(), ck::kMagic, ck::kLayoutVersion);
      pre.version_mismatch && !known_layout(c.hdr_->layout_version))
    throw internal::version_error(Kind::kCuckoo, name, c.hdr_->layout_version, ck::kLayoutVersionPacked);
  if (std::string p = hdr_problem(seg, c.hdr_, r, seg.size()); !p.empty()) throw internal::corrupt_error(Kind::kCuckoo, name, p);
  c.lane_bits_ = c.hdr_->lane_bits;  // 8, 12 or 16 (hdr_problem)
  return c;
}

bool Cuckoo::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kCuckoo, [](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    if (bytes < sizeof(ck::Header)) return;
    auto* h = reinterpret_cast<ck::Header*>(region);
    if (h->magic != ck::kMagic) return;
    uint32_t n = std::min(ck::sub_count_acquire(h), ck::kMaxSubs);
    bool pending_published = h->pending_extent == 0;
    for (uint32_t j = 1; j < n; ++j) {
      txn.free(h->subs[j].offset);  // sub-filter 0 lives in the region
      pending_published |= h->subs[j].offset == h->pending_extent;
    }
    if (!pending_published) txn.free(h->pending_extent);  // committed by a dead expander, never published
  });
}

static uint64_t hv_of(const Cuckoo*, const ck::Header* h, std::string_view k) noexcept {
  return internal::hash_key(k, h->seed);
}
static uint64_t hv_of(const Cuckoo*, const ck::Header* h, uint64_t k) noexcept { return internal::hash_key(k, h->seed); }

CuckooStatus Cuckoo::add(std::string_view key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return CuckooStatus::kDropped;
  return SHMF_CK_DISPATCH(insert(*this, hv_of(this, hdr_, key), false));
}
CuckooStatus Cuckoo::add(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return CuckooStatus::kDropped;
  return SHMF_CK_DISPATCH(insert(*this, hv_of(this, hdr_, key), false));
}
CuckooStatus Cuckoo::insert_unique(std::string_view key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return CuckooStatus::kDropped;
  return SHMF_CK_DISPATCH(insert(*this, hv_of(this, hdr_, key), true));
}
CuckooStatus Cuckoo::insert_unique(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return CuckooStatus::kDropped;
  return SHMF_CK_DISPATCH(insert(*this, hv_of(this, hdr_, key), true));
}

template <class K>
static uint64_t add_many_impl(Cuckoo& c, std::span<const K> keys, std::span<CuckooStatus> out, bool unique) noexcept {
  uint64_t n = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    CuckooStatus s = unique ? c.insert_unique(keys[i]) : c.add(keys[i]);
    n += s == CuckooStatus::kInserted;
    if (i < out.size()) out[i] = s;
  }
  return n;
}
uint64_t Cuckoo::add_many(std::span<const uint64_t> keys, std::span<CuckooStatus> out, bool unique) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return add_many_impl(*this, keys, out, unique);
}
uint64_t Cuckoo::add_many(std::span<const std::string_view> keys, std::span<CuckooStatus> out, bool unique) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return add_many_impl(*this, keys, out, unique);
}

bool Cuckoo::contains(std::string_view key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return false;
  return SHMF_CK_DISPATCH(count(*this, hv_of(this, hdr_, key), true)) != 0;
}
bool Cuckoo::contains(uint64_t key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return false;
  return SHMF_CK_DISPATCH(count(*this, hv_of(this, hdr_, key), true)) != 0;
}
uint32_t Cuckoo::count(std::string_view key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0;
  return SHMF_CK_DISPATCH(count(*this, hv_of(this, hdr_, key), false));
}
uint32_t Cuckoo::count(uint64_t key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0;
  return SHMF_CK_DISPATCH(count(*this, hv_of(this, hdr_, key), false));
}
bool Cuckoo::erase(std::string_view key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return false;
  return SHMF_CK_DISPATCH(erase(*this, hv_of(this, hdr_, key)));
}
bool Cuckoo::erase(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return false;
  return SHMF_CK_DISPATCH(erase(*this, hv_of(this, hdr_, key)));
}

template <class K>
static uint64_t contains_many_impl(const Cuckoo& c, uint32_t lane_bits, const ck::Header* h, std::span<const K> keys,
                               std::span<uint8_t> out) noexcept {
  constexpr size_t kChunk = 256;
  ck::KeyHash ks[kChunk];
  for (size_t g = 0; g < keys.size(); g += kChunk) {
    size_t m = std::min(kChunk, keys.size() - g);
    for (size_t i = 0; i < m; ++i) ks[i] = ck::split_hash(internal::hash_key(keys[g + i], h->seed), h->fp_bits);
    if (lane_bits == 12)
      CuckooOps<ck::Lanes12>::contains_batch(c, ks, m, out.data() + g);
    else if (lane_bits == 16)
      CuckooOps<ck::Lanes16>::contains_batch(c, ks, m, out.data() + g);
    else
      CuckooOps<ck::Lanes8>::contains_batch(c, ks, m, out.data() + g);
  }
  uint64_t present = 0;
  for (size_t i = 0; i < keys.size(); ++i) present += out[i] != 0;
  return present;
}
uint64_t Cuckoo::contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  size_t n = std::min(keys.size(), out.size());
  if (!valid()) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n), uint8_t{0});
    return 0;
  }
  return contains_many_impl(*this, lane_bits_, hdr_, keys.first(n), out);
}
uint64_t Cuckoo::contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  size_t n = std::min(keys.size(), out.size());
  if (!valid()) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n), uint8_t{0});
    return 0;
  }
  return contains_many_impl(*this, lane_bits_, hdr_, keys.first(n), out);
}

uint64_t Cuckoo::size() const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return valid() ? ck::load_relaxed(hdr_->size) : 0;  // relaxed: a statistic
}
double Cuckoo::load_factor() const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0.0;
  uint64_t slots = 0;
  uint32_t n = ck::sub_count_acquire(hdr_);
  for (uint32_t j = 0; j < n; ++j) slots += ck::kSlots * ck::sub_buckets(hdr_->subs[j]);
  return static_cast<double>(ck::load_relaxed(hdr_->size)) / static_cast<double>(slots);
}

CuckooStats Cuckoo::stats() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  const ck::Header* h = hdr_;
  CuckooStats s;
  s.capacity = h->capacity;
  s.fingerprint_bits = h->fp_bits;
  s.lane_bits = h->lane_bits;
  s.target_error = h->target_error;
  s.max_path = h->max_path;
  s.expansion = h->expansion;
  s.subfilters = ck::sub_count_acquire(h);
  // relaxed: statistics, racy by contract.
  s.size = ck::load_relaxed(h->size);
  s.failures = ck::load_relaxed(h->failures);
  s.longest_path = ck::load_relaxed(h->longest_path);
  s.moves = ck::load_relaxed(h->moves);
  s.inserts = ck::load_relaxed(h->inserts);
  s.erases = ck::load_relaxed(h->erases);
  s.repairs = ck::load_relaxed(h->repairs);
  s.expansions = ck::load_relaxed(h->expansions);
  double q = 1.0 / (std::ldexp(1.0, static_cast<int>(h->fp_bits)) - 1.0);  // P(one fingerprint matches)
  uint64_t bucket_bits = 0;
  s.bytes = h->region_bytes;
  for (uint32_t j = 0; j < s.subfilters; ++j) {
    uint64_t slots = ck::kSlots * ck::sub_buckets(h->subs[j]);
    s.slots += slots;
    bucket_bits += 8 * ck::bucket_bytes_of(ck::sub_buckets(h->subs[j]), h->lane_bits);
    if (j > 0) s.bytes += ck::sub_bytes(h->subs[j], h->lane_bits);
    s.fp_rate_bound += 2.0 * ck::kSlots * q;
  }
  s.load_factor = s.slots ? static_cast<double>(s.size) / static_cast<double>(s.slots) : 0.0;
  s.bits_per_item = s.size ? static_cast<double>(bucket_bits) / static_cast<double>(s.size) : 0.0;
  s.bits_per_item_at_95 = h->lane_bits / 0.95;
  // Each sub-filter j at load a_j contributes 1 - (1 - q)^(2b a_j) (2b probed slots, each full w.p. a_j);
  // the per-sub load is not tracked, so the total load is spread over sub-filters by slots (an estimate).
  double expect_full = 2.0 * ck::kSlots * s.load_factor;
  s.fp_rate_estimate = s.subfilters * (1.0 - std::pow(1.0 - q, expect_full));
  return s;
}

// ---- check -------------------------------------------------------------------------
namespace internal::cuckoo {

template <class LT>
static void check_body(Segment& seg, const RegionInfo& region, ck::Header* h, const std::string& where, bool repair,
                       CheckReport& report) {
  std::byte* base = seg.base();
  ck::Liveness lv = liveness_of(seg);
  // 1. The writer lock: a dead owner is taken over (and its step repaired) with --repair.
  uint64_t owner = ck::A(h->lock_owner).load(std::memory_order_acquire);  // acquire: see the owner's intent
  if (owner != 0 && !seg.token_alive(owner)) {
    CheckFinding f{where, "writer lock held by dead owner token " + std::to_string(owner) +
                              (ck::load_relaxed(h->intent.op) ? " mid-step (intent record set)" : ""), false};
    if (repair && ck::try_takeover<LT>(base, h, owner, lv)) {
      ck::unlock(h);
      f.repaired = true;
    }
    report.findings.push_back(f);
  }
  // 2. Quiescent checks need the lock; wait at most ~1 s for a live writer, else skip them.
  // A read-only attachment cannot take it (a write): they are skipped.
  if (seg.read_only() || lv.token() == 0) return;
  bool locked = false;
  for (int i = 0; i < 1000 && !locked; ++i) {
    uint64_t e = 0;
    // acquire: pairs with unlock's release; the counters and buckets are then stable.
    locked = ck::A(h->lock_owner).compare_exchange_strong(e, lv.token(), std::memory_order_acquire, std::memory_order_relaxed);
    if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!locked) {
    internal::note_wait_expired("cuckoo check, waiting for the writer lock");
    return;
  }
  if (h->intent.op != ck::kOpNone) {
    CheckFinding f{where, "intent record set (op " + std::to_string(h->intent.op) + ") with the lock free", false};
    if (repair) {
      ck::repair_locked<LT>(base, h);
      f.repaired = true;
    }
    report.findings.push_back(f);
  }
  uint32_t subs = ck::sub_count_acquire(h);
  uint64_t odd = 0;
  for (uint32_t j = 0; j < subs; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    for (uint64_t i = 0; i <= s.stripe_mask; ++i) odd += s.versions[i] & 1;
  }
  if (odd) {
    CheckFinding f{where, std::to_string(odd) + " seqlock version(s) odd with no writer", false};
    if (repair) {
      ck::repair_locked<LT>(base, h);
      f.repaired = true;
    }
    report.findings.push_back(f);
  }
  uint64_t pending = h->pending_extent;
  bool published = pending == 0;
  for (uint32_t j = 0; j < subs; ++j) published |= h->subs[j].offset == pending;
  if (!published) {
    CheckFinding f{where, "expansion extent at " + std::to_string(pending) +
                              " was allocated by a writer that died before publishing it (leak until the next "
                              "expansion or drop)", false};
    if (repair) {
      try {
        seg.transact([&](ControlTxn& txn) {
          if (!seg.region_live(region.slot, region.generation)) return;  // dropped meanwhile: its memory is not ours
          txn.free(pending);
          txn.store_u64(&h->pending_extent, 0);
        });
        f.repaired = true;
      } catch (const Error&) {
      }
    }
    report.findings.push_back(f);
  } else if (pending != 0) {
    ck::A(h->pending_extent).store(0, std::memory_order_relaxed);  // published already; relaxed: lock holder
  }
  uint64_t bad = 0;
  uint64_t occupied = ck::count_occupied<LT>(base, h, h->fp_bits, &bad);
  if (bad)
    report.findings.push_back({where, std::to_string(bad) + " slot(s) hold values wider than " +
                                          std::to_string(h->fp_bits) + " bits (not fingerprints)", false});
  if (occupied != h->size) {
    CheckFinding f{where, "size counter " + std::to_string(h->size) + " but " + std::to_string(occupied) +
                              " occupied slots", false};
    if (repair) {
      ck::A(h->size).store(occupied, std::memory_order_relaxed);  // relaxed: lock holder
      f.repaired = true;
    }
    report.findings.push_back(f);
  }
  ck::unlock(h);
}

void check_cuckoo(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  auto* h = reinterpret_cast<ck::Header*>(seg.base() + region.offset);
  if (std::string p = hdr_problem(seg, h, region, seg.size()); !p.empty()) {
    scope.add("corrupt header: " + p + " (drop and recreate the filter)");
    return;
  }
  if (h->lane_bits == 12)
    check_body<ck::Lanes12>(seg, region, h, scope.where, repair, report);
  else if (h->lane_bits == 16)
    check_body<ck::Lanes16>(seg, region, h, scope.where, repair, report);
  else
    check_body<ck::Lanes8>(seg, region, h, scope.where, repair, report);
}

}  // namespace internal::cuckoo
}  // namespace shmfilter
