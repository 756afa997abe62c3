// lib/structures/snapshot_io.h: the byte helpers the save/restore serializers share
// (lib/ops/snapshot.cpp: the container; each kind's <kind>/<kind>_snapshot.cpp: its
// entry's data). Little-endian building (Out), a bounded reader over untrusted bytes
// (In: every read checks what is left), and copy_live (word-by-word relaxed
// atomic loads of shared memory that writers may be changing).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter::internal::snapshot {

[[noreturn]] inline void fail(ErrorCode c, const std::string& m) { throw Error(c, m); }

// ---- little-endian byte building ----------------------------------------------
struct Out {
  std::string b;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
  }
  void bytes(const void* p, size_t n) { b.append(static_cast<const char*>(p), n); }
};

inline uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
inline uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// A bounded reader over untrusted bytes: every read checks what is left.
struct In {
  const unsigned char* p;
  size_t left;
  std::string what;
  void need(size_t n) const {
    if (n > left) fail(ErrorCode::kBadInput, what + " is truncated: the save file is damaged or incomplete");
  }
  uint32_t u32() {
    need(4);
    uint32_t v = get32(p);
    p += 4, left -= 4;
    return v;
  }
  uint64_t u64() {
    need(8);
    uint64_t v = get64(p);
    p += 8, left -= 8;
    return v;
  }
  const unsigned char* take(uint64_t n) {
    need(n);
    const unsigned char* r = p;
    p += n, left -= n;
    return r;
  }
};

// Copies live shared memory word by word (relaxed atomic loads: writers may be running).
inline void copy_live(std::string& out, const std::byte* src, uint64_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(src);
  size_t at = out.size();
  out.resize(at + bytes);
  for (uint64_t i = 0; i < bytes / 8; ++i) {
    uint64_t v = __atomic_load_n(w + i, __ATOMIC_RELAXED);  // relaxed: per-word; the save's guarantee is per word
    std::memcpy(out.data() + at + i * 8, &v, 8);
  }
  std::memcpy(out.data() + at + bytes / 8 * 8, src + bytes / 8 * 8, bytes % 8);
}

// A kind whose state is its region alone (hll, set): [u64 region bytes][region][u32 0 extents].
inline std::string save_region_only(Segment& seg, const RegionInfo& r) {
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  o.u32(0);
  return o.b;
}

// Test hook (process-local; set it before save() and clear it after, from one
// thread): save_window calls it after copying slot `slot`'s table and before
// re-reading the slot, so a test can make a rotation or maintain() race with
// the copy at a chosen point. nullptr (the default): nothing is called.
using WindowCopyHook = void (*)(uint32_t slot, int attempt, void* ctx);
void set_window_copy_hook(WindowCopyHook fn, void* ctx) noexcept;

// Test hook (process-local, as above): restore --into calls it after staging entry `index`
// (0-based, in file order), before the next one, so a test can act between two entries.
using RestoreHook = void (*)(size_t index, void* ctx);
void set_restore_hook(RestoreHook fn, void* ctx) noexcept;

}  // namespace shmfilter::internal::snapshot
