// lib/segment/directory.cpp: the directory of named regions.
//
// An open-addressing table of DirEntry (hash_key(name, kDirectorySeed)),
// read lock-free by any process through a per-entry seqlock word
// (state_gen: generation << 32 | state); written only under the control lock,
// published (create_region) and unpublished (drop) by one release store that
// is the transaction's commit point (txn.cpp).
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "base/hash.h"
#include "base/kill_point.h"
#include "segment/segment_impl.h"

namespace shmfilter::internal {

void validate_structure_name(std::string_view name) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "structure name is empty: pass a name such as 'seen'");
  if (name.size() > kMaxStructureNameLength)
    fail(ErrorCode::kNameTooLong, "structure name '" + std::string(name.substr(0, 40)) + "...' is " +
                                      std::to_string(name.size()) + " bytes; the limit is " +
                                      std::to_string(kMaxStructureNameLength) + ": use a shorter name");
  if (name.find('\0') != std::string_view::npos)
    fail(ErrorCode::kInvalidArgument, "structure name contains a NUL byte: remove it");
}

// Next directory generation (under the lock; unlogged, never rolls back; 0 is skipped).
uint64_t SegmentImpl::next_generation() noexcept {
  Header* h = hdr();
  uint32_t g = static_cast<uint32_t>(h->generation_counter + 1);
  if (g == 0) g = 1;
  store_release(&h->generation_counter, uint64_t{g});
  return g;
}

// Seqlock read of entry i. False when it is not live or changed under us.
bool SegmentImpl::read_entry(uint32_t i, RegionInfo& out, uint64_t* hash_out) const {
  const DirEntry& e = directory()[i];
  for (int attempt = 0; attempt < 1000; ++attempt) {
    uint64_t sg = load_acquire(&e.state_gen);  // acquire: pairs with the publishing release store
    const uint32_t st = static_cast<uint32_t>(sg & 0xffffffffu);
    if (st != kEntryLive && st != kEntryStaged) return false;
    // Field loads are acquire (free on x86) so the re-check below cannot move
    // before them; this replaces the usual acquire fence, which TSan does not model.
    uint64_t words[8];
    for (int k = 0; k < 8; ++k) words[k] = load_acquire(&e.name[k]);
    uint32_t len = load_acquire(&e.name_len);
    uint32_t kind = load_acquire(&e.kind);
    uint64_t off = load_acquire(&e.offset);
    uint64_t size = load_acquire(&e.size);
    uint64_t hash = load_acquire(&e.hash);
    // A staged entry is visible to its stager, and to everyone while Header::publishing names
    // it. Read before the re-check: an entry flipped to live meanwhile fails the re-check.
    const bool visible = st == kEntryLive || staged_visible(load_acquire(&e.stager));
    if (load_relaxed(&e.state_gen) != sg) continue;  // relaxed: ordered after the acquire loads above
    if (!visible) return false;
    if (len == 0 || len > kMaxStructureNameLength) return false;
    out.name.assign(reinterpret_cast<const char*>(words), len);
    out.kind = static_cast<Kind>(kind);
    out.offset = off;
    out.size = size;
    out.slot = i;
    out.generation = static_cast<uint32_t>(sg >> 32);
    if (hash_out != nullptr) *hash_out = hash;
    return true;
  }
  return false;
}

// Lock-free lookup; returns the slot or UINT32_MAX.
std::optional<RegionInfo> SegmentImpl::find(std::string_view nm) const {
  if (nm.empty() || nm.size() > kMaxStructureNameLength) return std::nullopt;
  uint64_t h = hash_key(nm, kDirectorySeed);
  uint32_t mask = dir_capacity - 1;
  for (uint32_t probe = 0; probe < dir_capacity; ++probe) {
    uint32_t i = (static_cast<uint32_t>(h) + probe) & mask;
    uint64_t sg = load_acquire(&directory()[i].state_gen);
    uint32_t st = static_cast<uint32_t>(sg & 0xffffffffu);
    if (st == kEntryEmpty) return std::nullopt;
    if (st != kEntryLive && st != kEntryStaged) continue;
    RegionInfo info;
    uint64_t eh = 0;
    if (!read_entry(i, info, &eh)) continue;
    if (eh == h && info.name == nm) {
      if (!region_in_bounds(info)) return std::nullopt;
      return info;
    }
  }
  return std::nullopt;
}

bool SegmentImpl::region_in_bounds(const RegionInfo& info) const noexcept {
  uint64_t data = lay.data_offset;
  uint64_t size = std::min(load_acquire(&hdr()->size), map_size);  // never trust a header word past the mapping
  return info.offset >= data && info.offset <= size && info.size <= size - info.offset;
}

std::vector<RegionInfo> SegmentImpl::list() const {
  std::vector<RegionInfo> out;
  for (uint32_t i = 0; i < dir_capacity; ++i) {
    RegionInfo info;
    if (read_entry(i, info) && region_in_bounds(info)) out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const RegionInfo& a, const RegionInfo& b) { return a.name < b.name; });
  return out;
}

RegionInfo SegmentImpl::create_region(Segment& seg, std::string_view nm, Kind kind, uint64_t bytes,
                                       const std::function<void(std::byte*, uint64_t, ControlTxn&)>& init) {
  validate_structure_name(nm);
  if (kind == Kind::kNone) fail(ErrorCode::kInvalidArgument, "kind none is not a structure kind: pass a real kind");
  if (bytes == 0) fail(ErrorCode::kInvalidArgument, "region of 0 bytes: pass a size >= 1");
  SegmentImpl* im = this;
  RegionInfo result;
  im->run_txn([&] {
    ControlTxn txn(&seg);
    uint64_t h = hash_key(nm, kDirectorySeed);
    uint32_t mask = im->dir_capacity - 1;
    uint32_t target = UINT32_MAX;
    for (uint32_t probe = 0; probe < im->dir_capacity; ++probe) {
      uint32_t i = (static_cast<uint32_t>(h) + probe) & mask;
      uint32_t st = static_cast<uint32_t>(im->directory()[i].state_gen & 0xffffffffu);
      if (st == kEntryEmpty) {
        if (target == UINT32_MAX) target = i;
        break;
      }
      if (st == kEntryTombstone) {
        if (target == UINT32_MAX) target = i;
        continue;
      }
      RegionInfo info;
      if (im->read_entry(i, info) && info.name == nm)
        fail(ErrorCode::kExists, "structure '" + std::string(nm) + "' already exists in segment '" + im->name +
                                     "' (a " + std::string(kind_name(info.kind)) +
                                     "): open it, or drop it first (shmtool drop)");
    }
    if (target == UINT32_MAX)
      fail(ErrorCode::kFull, "the directory of segment '" + im->name + "' is full (" +
                                 std::to_string(im->dir_capacity) +
                                 " entries): drop structures or recreate the segment with a larger directory capacity");
    DirEntry& e = im->directory()[target];
    uint64_t gen = im->next_generation();
    struct OwnerScope {  // nested in a larger transact(): restore the caller's owner afterwards
      SegmentImpl* im;
      uint64_t saved;
      ~OwnerScope() { im->txn_owner = saved; }
    } owner_scope{im, im->txn_owner};
    im->txn_owner = (gen << 32) | (target + 1);
    uint64_t payload = im->allocate(bytes);
    SHMF_KILL_POINT("segment.create_region.after_allocate");
    // The entry is not live now, but it may have been at the start of this
    // transaction (a nested drop of the same slot), so its fields are logged.
    // The generation comes from a segment-wide counter that never rolls back,
    // so a rolled-back publish never reappears as the same (generation, live)
    // word that a lock-free reader may have seen.
    im->log64(&e.hash, h);
    im->log32(&e.kind, static_cast<uint32_t>(kind));
    im->log32(&e.name_len, static_cast<uint32_t>(nm.size()));
    im->log64(&e.offset, payload);
    im->log64(&e.size, bytes);
    uint64_t words[8] = {};
    std::memcpy(words, nm.data(), nm.size());
    for (int k = 0; k < 8; ++k) im->log64(&e.name[k], words[k]);  // release stores; published by state_gen below
    im->log64(&e.stager, im->staging);
    if (init) init(im->base + payload, bytes, txn);
    SHMF_KILL_POINT("segment.create_region.before_publish");
    if (im->staging != 0) {  // restore --into: staged, published later with the others by publish_staged
      im->commit_store(&e.state_gen, (gen << 32) | kEntryStaged);
    } else {
      im->log64(&im->hdr()->structures, im->hdr()->structures + 1);
      im->commit_store(&e.state_gen, (gen << 32) | kEntryLive);  // the publish: one release store, the commit point
    }
    SHMF_KILL_POINT("segment.create_region.after_publish");
    result.name = std::string(nm);
    result.kind = kind;
    result.offset = payload;
    result.size = bytes;
    result.slot = target;
    result.generation = static_cast<uint32_t>(gen);
  });
  return result;
}

bool SegmentImpl::drop(Segment& seg, std::string_view nm,
                       const std::function<void(std::byte*, uint64_t, ControlTxn&)>& on_drop) {
  validate_structure_name(nm);
  SegmentImpl* im = this;
  bool dropped = false;
  im->run_txn([&] {
    auto info = im->find(nm);
    if (!info) return;
    ControlTxn txn(&seg);
    if (on_drop) on_drop(im->base + info->offset, info->size, txn);
    SHMF_KILL_POINT("segment.drop.after_on_drop");
    DirEntry& e = im->directory()[info->slot];
    if ((e.state_gen & 0xffffffffu) == kEntryLive) im->log64(&im->hdr()->structures, im->hdr()->structures - 1);
    im->free_extent(info->offset);  // quarantined; its epoch is stamped at commit, after the unpublish
    SHMF_KILL_POINT("segment.drop.after_free");
    uint64_t gen = im->next_generation();
    im->commit_store(&e.state_gen, (gen << 32) | kEntryTombstone);  // unpublish: the commit point
    SHMF_KILL_POINT("segment.drop.after_unpublish");
    dropped = true;
  });
  return dropped;
}

// ---- staged entries (restore --into, docs/save-restore.md) ------------------------
bool SegmentImpl::staged_visible(uint64_t stager) const noexcept {
  // acquire: pairs with publish_staged's commit store, so the entries' fields are seen complete.
  return stager != 0 && (stager == staging || stager == load_acquire(&hdr()->publishing));
}

uint32_t SegmentImpl::publish_staged(Segment& seg, uint64_t stager, const std::string& target) {
  (void)seg;
  uint32_t published = 0;
  run_txn([&] {
    std::vector<uint32_t> mine;
    for (uint32_t i = 0; i < dir_capacity; ++i) {
      const DirEntry& e = directory()[i];
      if ((e.state_gen & 0xffffffffu) == kEntryStaged && e.stager == stager) mine.push_back(i);
    }
    if (mine.empty()) return;
    // A live entry that took one of the names meanwhile (another process's create): nothing is published.
    const uint32_t mask = dir_capacity - 1;
    for (uint32_t i : mine) {
      const DirEntry& s = directory()[i];
      for (uint32_t probe = 0; probe < dir_capacity; ++probe) {
        const DirEntry& o = directory()[(static_cast<uint32_t>(s.hash) + probe) & mask];
        const uint32_t st = static_cast<uint32_t>(o.state_gen & 0xffffffffu);
        if (st == kEntryEmpty) break;
        if (st != kEntryLive || o.hash != s.hash || o.name_len != s.name_len ||
            std::memcmp(o.name, s.name, sizeof s.name) != 0)
          continue;
        std::string nm(reinterpret_cast<const char*>(s.name), std::min<uint32_t>(s.name_len, kMaxStructureNameLength));
        fail(ErrorCode::kExists, "segment '" + target + "' got a structure '" + nm +
                                     "' from another process during the restore: nothing was restored; drop it "
                                     "and restore again, or restore the others with --structures");
      }
    }
    log64(&hdr()->structures, hdr()->structures + mine.size());
    SHMF_KILL_POINT("segment.publish.before_commit");
    commit_store(&hdr()->publishing, stager);  // the commit point: every staged entry of STAGER is live now
    SHMF_KILL_POINT("segment.publish.after_commit");
    finish_publish();
    published = static_cast<uint32_t>(mine.size());
  });
  return published;
}

// Unlogged, forward only, idempotent: each staged entry of the publishing stager becomes
// live with the generation it had (a RegionInfo taken while it was staged stays valid), then
// the publishing word is cleared. A death here is finished by the next locker (settle_locked).
void SegmentImpl::finish_publish() noexcept {
  const uint64_t t = load_acquire(&hdr()->publishing);
  if (t == 0) return;
  uint32_t flipped = 0;
  for (uint32_t i = 0; i < dir_capacity; ++i) {
    DirEntry& e = directory()[i];
    const uint64_t sg = load_relaxed(&e.state_gen);
    if ((sg & 0xffffffffu) != kEntryStaged || load_relaxed(&e.stager) != t) continue;
    store_release(&e.state_gen, (sg & ~uint64_t{0xffffffffu}) | kEntryLive);
    if (++flipped == 2) SHMF_KILL_POINT("segment.publish.mid_flip");
  }
  store_release(&hdr()->publishing, uint64_t{0});
}

uint32_t SegmentImpl::drop_staged(Segment& seg, uint64_t stager) {
  (void)seg;
  uint32_t total = 0;
  for (bool more = true; more;) {
    more = false;
    run_txn([&] {
      // Candidates by identity: (generation << 32) | (slot + 1), the owner word of their extents.
      std::map<uint64_t, std::vector<uint64_t>> owned;
      std::vector<uint32_t> slots;
      for (uint32_t i = 0; i < dir_capacity; ++i) {
        const DirEntry& e = directory()[i];
        if ((e.state_gen & 0xffffffffu) != kEntryStaged) continue;
        const uint64_t s = e.stager;
        if (s == load_relaxed(&hdr()->publishing)) continue;  // being published (settle_locked finishes it)
        if (stager != 0 ? s != stager : (s == token || s == staging || token_alive(s))) continue;
        owned[((e.state_gen >> 32) << 32) | (i + 1)];
        slots.push_back(i);
      }
      if (slots.empty()) return;
      // Their extents: a walk of the allocated space, past the free and quarantined spans.
      Header* h = hdr();
      std::map<uint64_t, uint64_t> holes;
      for (uint32_t j = 0; j < std::min(h->free_count, kFreeCapacity); ++j)
        if (span_ok(free_table()[j].offset, free_table()[j].size)) holes[free_table()[j].offset] = free_table()[j].size;
      for (uint32_t j = 0; j < std::min(h->quarantine_count, kQuarantineCapacity); ++j)
        if (span_ok(quarantine()[j].offset, quarantine()[j].size)) holes[quarantine()[j].offset] = quarantine()[j].size;
      for (uint64_t p = lay.data_offset; p < h->top;) {
        if (auto it = holes.find(p); it != holes.end()) {
          p += it->second;
          continue;
        }
        const ExtentHeader* eh = at<ExtentHeader>(p);
        if (eh->magic != kExtentMagic || eh->size < 64 || eh->size % 64 != 0 || eh->size > h->top - p) break;  // check reports it
        if (eh->state == kExtentAllocated)
          if (auto it = owned.find(eh->owner); it != owned.end()) it->second.push_back(p + sizeof(ExtentHeader));
        p += eh->size;
      }
      // Extents first, the entry last: a transaction that runs out of undo space stops between
      // extents and the next one walks again (what it freed is quarantined, skipped then).
      const auto room = [&] { return load_relaxed(&h->undo_count) + 64 < kUndoCapacity; };
      for (uint32_t i : slots) {
        DirEntry& e = directory()[i];
        const uint64_t id = ((e.state_gen >> 32) << 32) | (i + 1);
        for (uint64_t payload : owned[id]) {
          if (!room()) break;
          free_extent(payload);
          SHMF_KILL_POINT("segment.drop_staged.after_free");
        }
        if (!room()) {
          more = true;
          break;
        }
        log64(&e.state_gen, (next_generation() << 32) | kEntryTombstone);
        ++total;
      }
    });
  }
  return total;
}

}  // namespace shmfilter::internal
