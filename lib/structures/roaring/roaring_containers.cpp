// lib/structures/roaring/roaring_containers.cpp: layout 4's container kernels
// (roaring_containers.h): validation, value decoding, chunk encoding,
// full and incremental snapshot builds, portable serialization.
#include "structures/roaring/roaring_containers.h"

#include <algorithm>
#include <bit>

namespace shmfilter::internal::roaring::c4 {
namespace {

inline uint16_t load16(const std::byte* p) noexcept {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Low halves of container w, ascending, appended to out.
void low_values(const std::byte* base, uint64_t w, std::vector<uint16_t>& out) {
  const std::byte* p = base + cw_off(w);
  const uint32_t n = cw_count(w);
  switch (cw_type(w)) {
    case kArray: {
      const size_t at = out.size();
      out.resize(at + n);
      std::memcpy(out.data() + at, p, uint64_t{n} * 2);
      break;
    }
    case kBitmap:
      for (uint32_t i = 0; i < kBitmapBytes / 8; ++i) {
        uint64_t word;
        std::memcpy(&word, p + 8 * i, 8);
        while (word != 0) {
          out.push_back(static_cast<uint16_t>(i * 64 + static_cast<uint32_t>(std::countr_zero(word))));
          word &= word - 1;
        }
      }
      break;
    case kRun:
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t s = load16(p + 4 * i), len = load16(p + 4 * i + 2);
        for (uint32_t v = s; v <= s + len && v <= 0xffff; ++v) out.push_back(static_cast<uint16_t>(v));
      }
      break;
    default: break;
  }
}

// Appends `bytes` to the pack at an offset aligned to `align`; returns the local offset.
uint64_t pack_append(Built& b, const void* src, uint64_t bytes, uint64_t align) {
  uint64_t at = b.pack.size() * 8;
  at = (at + align - 1) & ~(align - 1);
  b.pack.resize((at + bytes + 7) / 8, 0);
  std::memcpy(reinterpret_cast<std::byte*>(b.pack.data()) + at, src, bytes);
  return at;
}

// Index of the pack of `dir` holding [off, off + bytes); dir_by_off sorted by off. -1 if none.
int pack_of(const std::vector<PackRef>& dir, const std::vector<uint32_t>& by_off, uint64_t off, uint64_t bytes) {
  uint32_t lo = 0, hi = static_cast<uint32_t>(by_off.size());
  while (lo < hi) {  // last pack with off <= container off
    uint32_t mid = (lo + hi) / 2;
    if (dir[by_off[mid]].off <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return -1;
  const PackRef& p = dir[by_off[lo - 1]];
  if (off - p.off > p.bytes || bytes > p.bytes - (off - p.off)) return -1;
  return static_cast<int>(by_off[lo - 1]);
}

}  // namespace

uint32_t container_cardinality(const std::byte* base, uint64_t w) noexcept {
  if (cw_type(w) != kRun) return cw_type(w) == kNone ? 0 : cw_count(w);
  const std::byte* p = base + cw_off(w);
  uint32_t c = 0;
  for (uint32_t i = 0; i < cw_count(w); ++i) c += uint32_t{load16(p + 4 * i + 2)} + 1;
  return c;
}

std::string container_validate(const std::byte* base, uint64_t size, uint64_t w) {
  if (cw_bytes(w) == 0) return "container word has an unknown type or a count out of range";
  if (!cw_ok(w, size)) return "container data lies outside the segment or is misaligned";
  const std::byte* p = base + cw_off(w);
  const uint32_t n = cw_count(w);
  switch (cw_type(w)) {
    case kArray:
      for (uint32_t i = 1; i < n; ++i)
        if (load16(p + 2 * i) <= load16(p + 2 * i - 2)) return "array container values are not strictly increasing";
      return "";
    case kBitmap: {
      uint32_t c = 0;
      for (uint32_t i = 0; i < kBitmapBytes / 8; ++i) {
        uint64_t word;
        std::memcpy(&word, p + 8 * i, 8);
        c += static_cast<uint32_t>(std::popcount(word));
      }
      return c == n ? "" : "bitmap container popcount differs from its word's count";
    }
    case kRun: {
      uint32_t prev_end = 0;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t s = load16(p + 4 * i), len = load16(p + 4 * i + 2);
        if (s + len > 0xffff) return "run container run passes the end of its chunk";
        if (i > 0 && s <= prev_end + 1) return "run container runs overlap, touch or are out of order";
        prev_end = s + len;
      }
      return "";
    }
    default: return "container word has an unknown type";
  }
}

void container_values(const std::byte* base, uint64_t w, uint32_t key, std::vector<uint32_t>& out) {
  std::vector<uint16_t> lows;
  low_values(base, w, lows);
  for (uint16_t l : lows) out.push_back(key << 16 | l);
}

std::string table_validate(const std::byte* base, uint64_t size, const Table& t, const PackRef* packs,
                           uint32_t npacks, bool deep, uint64_t* cardinality_out) {
  if (npacks > kMaxPacks) return "pack directory has more than 64 entries";
  std::vector<PackRef> dir(packs, packs + npacks);
  std::vector<uint32_t> by_off(npacks);
  for (uint32_t i = 0; i < npacks; ++i) {
    by_off[i] = i;
    const PackRef& p = dir[i];
    if (p.off == 0 || p.off % 64 != 0 || p.off > size || p.bytes > size - p.off) return "pack extent outside the segment or misaligned";
  }
  std::sort(by_off.begin(), by_off.end(), [&](uint32_t a, uint32_t b) { return dir[a].off < dir[b].off; });
  for (uint32_t i = 1; i < npacks; ++i)
    if (dir[by_off[i - 1]].off + dir[by_off[i - 1]].bytes > dir[by_off[i]].off) return "pack extents overlap";
  if (t.indexed) {  // the rank entries first: table_for_each and lookups trust `before` only up to n
    uint64_t count = 0;
    for (uint32_t k = 0; k < kRankEntries; ++k) {
      if (t.rank[k].before != count || t.rank[k].zero != 0) return "container table rank entry " + std::to_string(k) + " is inconsistent";
      count += static_cast<uint64_t>(std::popcount(t.rank[k].bits));
    }
    if (count != t.n) return "container table index names a different number of containers than its header says";
  }
  std::vector<uint64_t> live(npacks, 0);
  std::string err;
  uint64_t card = 0;
  uint32_t seen = 0;
  int32_t prev_key = -1;
  table_for_each(t, [&](uint16_t key, uint64_t w) {
    if (!err.empty()) return;
    ++seen;
    if (static_cast<int32_t>(key) <= prev_key) {
      err = "container table keys are not strictly increasing";
      return;
    }
    prev_key = key;
    if (!cw_ok(w, size)) {
      err = "container word " + std::to_string(key) + " is malformed or points outside the segment";
      return;
    }
    int k = pack_of(dir, by_off, cw_off(w), cw_bytes(w));
    if (k < 0) {
      err = "container " + std::to_string(key) + " lies in no pack of the snapshot's directory";
      return;
    }
    live[static_cast<uint32_t>(k)] += cw_footprint(w);
    if (deep) {
      std::string e = container_validate(base, size, w);
      if (!e.empty()) {
        err = "container " + std::to_string(key) + ": " + e;
        return;
      }
      card += container_cardinality(base, w);
    }
  });
  if (!err.empty()) return err;
  for (uint32_t i = 0; i < npacks; ++i)
    if (live[i] != dir[i].live_bytes) return "pack live_bytes differs from the containers that point into it";
  if (cardinality_out) *cardinality_out = card;
  return "";
}

uint64_t encode_chunk(Built& b, const uint16_t* vals, uint32_t n) {
  if (n == 0) return 0;
  uint32_t runs = 1;
  for (uint32_t i = 1; i < n; ++i)
    if (vals[i] != vals[i - 1] + 1) ++runs;
  const uint64_t array_b = n <= kArrayMax ? uint64_t{n} * 2 : UINT64_MAX;
  const uint64_t bitmap_b = n > kArrayMax ? kBitmapBytes : UINT64_MAX;
  const uint64_t run_b = uint64_t{runs} * 4;
  if (run_b < std::min(array_b, bitmap_b)) {
    std::vector<uint16_t> r;
    r.reserve(2 * runs);
    uint32_t s = vals[0];
    for (uint32_t i = 1; i <= n; ++i) {
      if (i == n || vals[i] != vals[i - 1] + 1) {
        r.push_back(static_cast<uint16_t>(s));
        r.push_back(static_cast<uint16_t>(vals[i - 1] - s));
        if (i < n) s = vals[i];
      }
    }
    return cw_make(kRun, runs, pack_append(b, r.data(), run_b, 8));
  }
  if (array_b <= bitmap_b) return cw_make(kArray, n, pack_append(b, vals, array_b, 8));
  uint64_t bits[kBitmapBytes / 8] = {};
  for (uint32_t i = 0; i < n; ++i) bits[vals[i] >> 6] |= uint64_t{1} << (vals[i] & 63);
  return cw_make(kBitmap, n, pack_append(b, bits, kBitmapBytes, 64));
}

namespace {
void push(Built& b, uint16_t key, uint64_t w, bool fresh) {
  b.keys.push_back(key);
  b.words.push_back(w);
  b.fresh.push_back(fresh ? 1 : 0);
  if (fresh)
    ++b.rebuilt;
  else
    ++b.shared;
}
void finish_new_pack(Built& b, uint64_t gen) {
  if (b.pack.empty()) return;
  uint64_t live = 0;
  for (size_t i = 0; i < b.words.size(); ++i)
    if (b.fresh[i]) live += cw_footprint(b.words[i]);
  b.packs.push_back(PackRef{0, b.pack.size() * 8, live, gen});
}
}  // namespace

namespace {
// Index of the first set bit at or after `from` in the 65,536-bit set
// (`want` = true), or of the first clear bit (`want` = false); 65,536 if none.
uint32_t next_bit(const uint64_t* bits, uint32_t from, bool want) noexcept {
  uint32_t k = from >> 6;
  if (k >= 1024) return 65536;
  uint64_t w = (want ? bits[k] : ~bits[k]) & (~uint64_t{0} << (from & 63));
  while (w == 0) {
    if (++k == 1024) return 65536;
    w = want ? bits[k] : ~bits[k];
  }
  return k * 64 + static_cast<uint32_t>(std::countr_zero(w));
}

// Encodes a chunk given as a 65,536-bit set (encode_chunk's rule: the
// smallest of array / bitmap / run; ties array, then run) into b.pack;
// returns its word with a LOCAL offset (0 when empty) and the count.
uint64_t encode_bits(Built& b, const uint64_t* bits, uint32_t* count) {
  uint32_t n = 0, runs = 0;
  uint64_t carry = 0;
  for (uint32_t k = 0; k < 1024; ++k) {
    const uint64_t w = bits[k];
    n += static_cast<uint32_t>(std::popcount(w));
    runs += static_cast<uint32_t>(std::popcount(w & ~((w << 1) | carry)));  // a run starts where a bit follows a clear one
    carry = w >> 63;
  }
  *count = n;
  if (n == 0) return 0;
  const uint64_t array_b = n <= kArrayMax ? uint64_t{n} * 2 : UINT64_MAX;
  const uint64_t bitmap_b = n > kArrayMax ? kBitmapBytes : UINT64_MAX;
  const uint64_t run_b = uint64_t{runs} * 4;
  if (run_b < std::min(array_b, bitmap_b)) {
    std::vector<uint16_t> r;
    r.reserve(2 * uint64_t{runs});
    for (uint32_t at = next_bit(bits, 0, true); at < 65536;) {
      const uint32_t end = next_bit(bits, at, false);  // one past the run
      r.push_back(static_cast<uint16_t>(at));
      r.push_back(static_cast<uint16_t>(end - 1 - at));
      at = end < 65536 ? next_bit(bits, end, true) : 65536;
    }
    return cw_make(kRun, runs, pack_append(b, r.data(), run_b, 8));
  }
  if (array_b <= bitmap_b) {
    std::vector<uint16_t> v;
    v.reserve(n);
    for (uint32_t k = 0; k < 1024; ++k)
      for (uint64_t w = bits[k]; w != 0; w &= w - 1) v.push_back(static_cast<uint16_t>(k * 64 + static_cast<uint32_t>(std::countr_zero(w))));
    return cw_make(kArray, n, pack_append(b, v.data(), array_b, 8));
  }
  return cw_make(kBitmap, n, pack_append(b, bits, kBitmapBytes, 64));
}

// The old container w (a bitmap or runs) as a 65,536-bit set.
void container_bits(const std::byte* base, uint64_t w, uint64_t* bits) noexcept {
  std::memset(bits, 0, kBitmapBytes);
  const std::byte* p = base + cw_off(w);
  if (cw_type(w) == kBitmap) {
    std::memcpy(bits, p, kBitmapBytes);
    return;
  }
  for (uint32_t i = 0; i < cw_count(w); ++i) {  // runs [s, s + len]: whole words at once
    uint32_t s = load16(p + 4 * i);
    const uint32_t e = std::min<uint32_t>(65535, s + load16(p + 4 * i + 2));
    while (s <= e) {
      const uint32_t k = s >> 6, lo = s & 63, hi = std::min<uint32_t>(63, e - (s & ~63u));
      bits[k] |= (hi == 63 ? ~uint64_t{0} : (uint64_t{1} << (hi + 1)) - 1) & (~uint64_t{0} << lo);
      s = (s & ~63u) + 64;
    }
  }
}
// Which old packs to drop: empty, less than half live, or beyond the
// directory bound (keep the largest live ones; the new pack takes one entry).
// `dir` is the old directory with the live bytes the build left in each.
std::vector<uint8_t> packs_to_drop(const std::vector<PackRef>& dir) {
  const auto old_npacks = static_cast<uint32_t>(dir.size());
  std::vector<uint8_t> drop(old_npacks, 0);
  std::vector<uint32_t> kept;
  for (uint32_t i = 0; i < old_npacks; ++i) {
    if (dir[i].live_bytes == 0 || dir[i].live_bytes * 2 < dir[i].bytes)
      drop[i] = 1;
    else
      kept.push_back(i);
  }
  if (kept.size() > kMaxPacks - 1) {
    std::sort(kept.begin(), kept.end(), [&](uint32_t a, uint32_t c) { return dir[a].live_bytes > dir[c].live_bytes; });
    for (size_t j = kMaxPacks - 1; j < kept.size(); ++j) drop[kept[j]] = 1;
  }
  return drop;
}

// The shared containers of dropped packs (pack_idx: per b.words entry, the
// old pack of a shared word, -1 for fresh) are copied into the new pack.
void repack_dropped(Built& b, const std::byte* base, const std::vector<int>& pack_idx,
                    const std::vector<uint8_t>& drop) {
  for (size_t i = 0; i < b.words.size(); ++i) {
    if (b.fresh[i] || pack_idx[i] < 0 || !drop[static_cast<uint32_t>(pack_idx[i])]) continue;
    const uint64_t w = b.words[i];  // repack: copy the container's bytes into the new pack
    const uint64_t at = pack_append(b, base + cw_off(w), cw_bytes(w), cw_type(w) == kBitmap ? 64 : 8);
    b.words[i] = cw_make(cw_type(w), cw_count(w), at);
    b.fresh[i] = 1;
    --b.shared;
    ++b.rebuilt;
  }
}
}  // namespace

void build_full(Built& b, const uint32_t* vals, size_t n, uint64_t gen) {
  b = Built{};
  std::vector<uint16_t> lows;
  size_t i = 0;
  while (i < n) {
    const uint32_t key = vals[i] >> 16;
    lows.clear();
    while (i < n && (vals[i] >> 16) == key) lows.push_back(static_cast<uint16_t>(vals[i++]));
    push(b, static_cast<uint16_t>(key), encode_chunk(b, lows.data(), static_cast<uint32_t>(lows.size())), true);
  }
  b.cardinality = n;
  finish_new_pack(b, gen);
}

void build_incremental(Built& b, const std::byte* base, const Table& old, const PackRef* old_packs,
                       uint32_t old_npacks, uint64_t old_cardinality, const uint64_t* ops, size_t nops,
                       uint64_t gen) {
  b = Built{};
  std::vector<PackRef> dir(old_packs, old_packs + old_npacks);
  std::vector<uint32_t> by_off(old_npacks);
  for (uint32_t i = 0; i < old_npacks; ++i) by_off[i] = i;
  std::sort(by_off.begin(), by_off.end(), [&](uint32_t a, uint32_t c) { return dir[a].off < dir[c].off; });
  std::vector<int> pack_idx;  // per b.words entry: old pack of a shared word (-1 for fresh)
  int64_t card = static_cast<int64_t>(old_cardinality);
  std::vector<uint16_t> cur, next;
  size_t oi = 0;  // next op
  uint64_t bits[kBitmapBytes / 8];
  auto rebuild = [&](uint16_t key, uint64_t w) {
    if (w != 0) {
      int k = pack_of(dir, by_off, cw_off(w), cw_bytes(w));
      if (k >= 0) dir[static_cast<uint32_t>(k)].live_bytes -= std::min(dir[static_cast<uint32_t>(k)].live_bytes, cw_footprint(w));
    }
    if (w != 0 && cw_type(w) != kArray) {
      // A bitmap or runs (up to 65,536 values: decoding them to a list cost
      // 150 ms for a dense 1e8 set): set and clear the ops' bits in an 8 KiB
      // set, then encode from it.
      container_bits(base, w, bits);
      const uint32_t was = container_cardinality(base, w);
      while (oi < nops && (ops[oi] >> 17) == key) {
        const uint32_t low = static_cast<uint32_t>(ops[oi] >> 1) & 0xffff;
        if (ops[oi] & 1)
          bits[low >> 6] &= ~(uint64_t{1} << (low & 63));
        else
          bits[low >> 6] |= uint64_t{1} << (low & 63);
        ++oi;
      }
      uint32_t now = 0;
      const uint64_t nw = encode_bits(b, bits, &now);
      card += static_cast<int64_t>(now) - static_cast<int64_t>(was);
      if (nw != 0) {
        push(b, key, nw, true);
        pack_idx.push_back(-1);
      }
      return;
    }
    // Merge the old array's values with this chunk's ops (sorted by value).
    cur.clear();
    if (w != 0) low_values(base, w, cur);
    next.clear();
    size_t ci = 0;
    while (oi < nops && (ops[oi] >> 17) == key) {
      const uint16_t low = static_cast<uint16_t>(ops[oi] >> 1);
      const bool rm = ops[oi] & 1;
      ++oi;
      // The old values below `low`, copied as one block (an op touches a few of ~2,000).
      const size_t to = static_cast<size_t>(std::lower_bound(cur.begin() + static_cast<std::ptrdiff_t>(ci), cur.end(), low) - cur.begin());
      next.insert(next.end(), cur.begin() + static_cast<std::ptrdiff_t>(ci), cur.begin() + static_cast<std::ptrdiff_t>(to));
      ci = to;
      const bool had = ci < cur.size() && cur[ci] == low;
      if (had) ++ci;
      if (!rm) next.push_back(low);
    }
    next.insert(next.end(), cur.begin() + static_cast<std::ptrdiff_t>(ci), cur.end());
    card += static_cast<int64_t>(next.size()) - static_cast<int64_t>(cur.size());
    if (!next.empty()) {
      push(b, key, encode_chunk(b, next.data(), static_cast<uint32_t>(next.size())), true);
      pack_idx.push_back(-1);
    }
  };
  table_for_each(old, [&](uint16_t key, uint64_t w) {
    while (oi < nops && (ops[oi] >> 17) < key) rebuild(static_cast<uint16_t>(ops[oi] >> 17), 0);  // new chunks
    if (oi < nops && (ops[oi] >> 17) == key) {
      rebuild(key, w);
    } else {
      push(b, key, w, false);
      pack_idx.push_back(pack_of(dir, by_off, cw_off(w), cw_bytes(w)));
    }
  });
  while (oi < nops) rebuild(static_cast<uint16_t>(ops[oi] >> 17), 0);
  const std::vector<uint8_t> drop = packs_to_drop(dir);
  repack_dropped(b, base, pack_idx, drop);
  for (uint32_t i = 0; i < old_npacks; ++i) {
    if (drop[i])
      b.dropped.push_back(old_packs[i]);
    else
      b.packs.push_back(dir[i]);
  }
  b.cardinality = static_cast<uint64_t>(card < 0 ? 0 : card);
  finish_new_pack(b, gen);
}

bool build_from_portable(Built& b, const char* buf, size_t len, uint64_t gen) {
  b = Built{};
  size_t at = 0;
  auto get16 = [&](uint16_t& v) {
    if (len - at < 2) return false;
    std::memcpy(&v, buf + at, 2);
    at += 2;
    return true;
  };
  auto get32 = [&](uint32_t& v) {
    if (len - at < 4) return false;
    std::memcpy(&v, buf + at, 4);
    at += 4;
    return true;
  };
  uint32_t cookie = 0, n = 0;
  if (!get32(cookie)) return false;
  const char* runbits = nullptr;
  const bool has_run = (cookie & 0xffff) == 12347;
  if (has_run) {
    n = (cookie >> 16) + 1;
    if (len - at < (n + 7) / 8) return false;
    runbits = buf + at;
    at += (n + 7) / 8;
  } else if (cookie == 12346) {
    if (!get32(n)) return false;
  } else {
    return false;
  }
  if (n > kChunks) return false;
  std::vector<uint16_t> keys(n);
  std::vector<uint32_t> cards(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint16_t k = 0, c = 0;
    if (!get16(k) || !get16(c)) return false;
    if (i > 0 && k <= keys[i - 1]) return false;
    keys[i] = k;
    cards[i] = uint32_t{c} + 1;
  }
  if (!has_run || n >= 4) {  // the offset header: not needed, the containers follow in order
    if (len - at < uint64_t{n} * 4) return false;
    at += uint64_t{n} * 4;
  }
  uint64_t card = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const bool run = runbits && ((static_cast<uint8_t>(runbits[i / 8]) >> (i % 8)) & 1);
    uint64_t w = 0;
    if (run) {
      uint16_t nr = 0;
      if (!get16(nr) || nr == 0 || nr > kMaxRuns || len - at < uint64_t{nr} * 4) return false;
      uint32_t c = 0;
      for (uint32_t r = 0; r < nr; ++r) {
        uint16_t len16;
        std::memcpy(&len16, buf + at + 4 * uint64_t{r} + 2, 2);
        c += uint32_t{len16} + 1;
      }
      w = cw_make(kRun, nr, pack_append(b, buf + at, uint64_t{nr} * 4, 8));
      at += uint64_t{nr} * 4;
      card += c;
    } else if (cards[i] <= kArrayMax) {
      if (len - at < uint64_t{cards[i]} * 2) return false;
      w = cw_make(kArray, cards[i], pack_append(b, buf + at, uint64_t{cards[i]} * 2, 8));
      at += uint64_t{cards[i]} * 2;
      card += cards[i];
    } else {
      if (len - at < kBitmapBytes) return false;
      w = cw_make(kBitmap, cards[i], pack_append(b, buf + at, kBitmapBytes, 64));
      at += kBitmapBytes;
      card += cards[i];
    }
    push(b, keys[i], w, true);
  }
  b.cardinality = card;
  finish_new_pack(b, gen);
  return true;
}

void relocate(Built& b, uint64_t pack_off) noexcept {
  for (size_t i = 0; i < b.words.size(); ++i)
    if (b.fresh[i]) b.words[i] = cw_make(cw_type(b.words[i]), cw_count(b.words[i]), cw_off(b.words[i]) + pack_off);
  if (!b.pack.empty()) b.packs.back().off = pack_off;
}

bool table_indexed_for(uint32_t n) noexcept { return n >= kIndexedMinContainers; }

void table_image(const Built& b, std::byte* out) noexcept {
  const uint32_t n = static_cast<uint32_t>(b.keys.size());
  if (table_indexed_for(n)) {
    RankEntry rank[kRankEntries] = {};
    for (uint32_t i = 0; i < n; ++i) rank[b.keys[i] >> 6].bits |= uint64_t{1} << (b.keys[i] & 63);
    uint32_t before = 0;
    for (auto& e : rank) {
      e.before = before;
      before += static_cast<uint32_t>(std::popcount(e.bits));
    }
    std::memcpy(out, rank, kRankBytes);
    std::memcpy(out + kRankBytes, b.words.data(), uint64_t{n} * 8);
    return;
  }
  const uint64_t kb = (uint64_t{n} * 2 + 7) & ~uint64_t{7};
  if (n == 0) return;  // an empty table has no bytes (and memcpy from an empty vector's null is UB)
  std::memset(out, 0, kb);
  std::memcpy(out, b.keys.data(), uint64_t{n} * 2);
  std::memcpy(out + kb, b.words.data(), uint64_t{n} * 8);
}

// RoaringFormatSpec (the portable format): cookie 12346 + u32 count with no
// run containers, else 12347 | (count - 1) << 16 and a run bitset; then
// {key, cardinality - 1} u16 pairs; then u32 offsets (always without runs,
// with runs only from 4 containers on); then the containers: arrays of u16,
// 8 KiB bitsets, runs as u16 n_runs + {start, length} pairs.
std::string table_portable(const std::byte* base, const Table& t) {
  std::vector<uint16_t> keys;
  std::vector<uint64_t> words;
  table_for_each(t, [&](uint16_t k, uint64_t w) {
    keys.push_back(k);
    words.push_back(w);
  });
  const uint32_t n = static_cast<uint32_t>(keys.size());
  bool has_run = false;
  for (uint64_t w : words) has_run |= cw_type(w) == kRun;
  std::string out;
  auto put16 = [&](uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); };
  auto put32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  if (has_run) {
    put32(12347u | ((n - 1) << 16));
    std::string bits((n + 7) / 8, '\0');
    for (uint32_t i = 0; i < n; ++i)
      if (cw_type(words[i]) == kRun) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
    out += bits;
  } else {
    put32(12346u);
    put32(n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    put16(keys[i]);
    put16(static_cast<uint16_t>(container_cardinality(base, words[i]) - 1));
  }
  const bool offsets = !has_run || n >= 4;
  size_t off_at = out.size();
  if (offsets) out.resize(out.size() + 4 * uint64_t{n});
  for (uint32_t i = 0; i < n; ++i) {
    if (offsets) {
      uint32_t o = static_cast<uint32_t>(out.size());
      std::memcpy(out.data() + off_at + 4 * uint64_t{i}, &o, 4);
    }
    const uint64_t w = words[i];
    if (cw_type(w) == kRun) put16(static_cast<uint16_t>(cw_count(w)));
    out.append(reinterpret_cast<const char*>(base + cw_off(w)), cw_bytes(w));
  }
  return out;
}

}  // namespace shmfilter::internal::roaring::c4
