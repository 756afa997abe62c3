// lib/structures/roaring/roaring_kernels.cpp: the out-of-line kernels of roaring_impl.h
// (delta table and portable-format validation): raw memory only, no Segment,
// no CRoaring.
#include <algorithm>
#include <bit>
#include <iterator>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "structures/roaring/roaring_impl.h"

namespace shmfilter::internal::roaring {

void pins_publish(ReaderSlot& s, PinMirror& m, const uint64_t* live, size_t n) noexcept {
  if (n > kExactPins) {
    // Range mode. Narrowing hi before lo: a scanner that mixes old and new
    // words still sees a range containing [live[0], live[n-1]].
    s.hi.store(live[n - 1]);
    s.lo.store(live[0]);
    return;
  }
  auto is_live = [&](uint64_t g) { return std::binary_search(live, live + n, g); };
  for (uint32_t k = 0; k < kExactPins; ++k)
    if (m.at[k] != 0 && !is_live(m.at[k])) {
      m.at[k] = 0;
      s.gens[k].store(0);
    }
  for (size_t i = 0; i < n; ++i) {
    if (std::find(std::begin(m.at), std::end(m.at), live[i]) != std::end(m.at)) continue;
    for (uint32_t k = 0; k < kExactPins; ++k)
      if (m.at[k] == 0) {
        m.at[k] = live[i];
        s.gens[k].store(live[i]);  // while [lo, hi] still covers it (precondition)
        break;
      }
  }
  s.lo.store(0);  // after gens[] is complete: a scanner reads lo/hi first, then gens[]
  s.hi.store(0);
}

bool pins_meet(const ReaderSlot& s, uint64_t lo_gen, uint64_t hi_gen) noexcept {
  uint64_t lo = s.lo.load(), hi = s.hi.load();  // before gens[]: see ReaderSlot
  if (lo != 0 && lo <= hi_gen && lo_gen <= hi) return true;
  for (uint32_t k = 0; k < kExactPins; ++k) {
    uint64_t gk = s.gens[k].load();
    if (gk != 0 && gk >= lo_gen && gk <= hi_gen) return true;
  }
  return false;
}

std::string delta_validate(DeltaHeader* d, uint32_t max_capacity, uint64_t* claimed_out) {
  char buf[192];
  if (d->magic != kDeltaMagic) {
    snprintf(buf, sizeof buf, "delta table magic is 0x%08x, expected 0x%08x", d->magic, kDeltaMagic);
    return buf;
  }
  const uint32_t cap = d->capacity;
  if (cap < kMinDeltaCapacity || cap > max_capacity || !std::has_single_bit(cap)) {
    snprintf(buf, sizeof buf, "delta table capacity %u is not a power of two from %u to the header's maximum %u", cap,
             kMinDeltaCapacity, max_capacity);
    return buf;
  }
  std::atomic<uint64_t>* slots = delta_slots(d);
  std::unordered_set<uint32_t> seen;
  uint64_t claimed = 0;
  for (uint32_t i = 0; i < cap; ++i) {
    uint64_t w = slots[i].load(std::memory_order_acquire);  // acquire: entries are read whole
    if (w == 0) continue;
    if (!word_valid(w)) {
      snprintf(buf, sizeof buf, "delta slot %u holds malformed word 0x%016" PRIx64, i, w);
      return buf;
    }
    ++claimed;
    uint32_t v = word_value(w);
    if (!seen.insert(v).second) {
      snprintf(buf, sizeof buf, "value %u appears twice in the delta table (slot %u)", v, i);
      return buf;
    }
    // Every slot from the value's home up to i must be claimed, or lookups miss it.
    for (uint32_t j = delta_home(v, cap); j != i; j = (j + 1) & (cap - 1)) {
      if (slots[j].load(std::memory_order_relaxed) == 0) {  // relaxed: slots are never cleared
        snprintf(buf, sizeof buf, "value %u in slot %u is unreachable: empty slot %u on its probe path", v, i, j);
        return buf;
      }
    }
  }
  uint64_t fill = d->fill.load();
  if (fill < claimed) {
    snprintf(buf, sizeof buf, "delta fill counter %" PRIu64 " is below the %" PRIu64 " claimed slots", fill, claimed);
    return buf;
  }
  if (claimed_out) *claimed_out = claimed;
  return "";
}

namespace {
inline uint16_t rd16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t rd32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Format: https://github.com/RoaringBitmap/RoaringFormatSpec (little-endian).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "portable format reader assumes little-endian");

// "" when bytes [pos, pos + n) are inside the input of `len` bytes, else the error naming `what`.
std::string need(size_t len, size_t pos, size_t n, const char* what) {
  if (pos + n > len) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "truncated Roaring serialization: %s needs bytes %zu..%zu but the input has %zu bytes", what, pos,
             pos + n, len);
    return msg;
  }
  return "";
}

// The portable format's header: cookie, container count, the run-container
// bitmap, the key/cardinality table and the offset table.
struct PortableHeader {
  uint32_t size = 0;  // containers
  bool has_run = false;
  const char* run_bitmap = nullptr;
  const char* keycards = nullptr;
  size_t pos = 0;  // the first container
};

std::string read_portable_header(const char* buf, size_t len, PortableHeader& h) {
  constexpr uint32_t kCookieNoRun = 12346, kCookieRun = 12347, kNoOffsetThreshold = 4;
  char msg[256];
  if (len < 4) {
    snprintf(msg, sizeof msg, "input of %zu bytes is too short for a Roaring serialization (at least 4)", len);
    return msg;
  }
  uint32_t cookie = rd32(buf);
  size_t pos = 0;
  if ((cookie & 0xFFFF) == kCookieRun) {
    h.has_run = true;
    h.size = (cookie >> 16) + 1;
    pos = 4;
    size_t rb = (h.size + 7) / 8;
    if (auto e = need(len, pos, rb, "the run-container bitmap"); !e.empty()) return e;
    h.run_bitmap = buf + pos;
    pos += rb;
  } else if (cookie == kCookieNoRun) {
    if (auto e = need(len, 4, 4, "the container count"); !e.empty()) return e;
    h.size = rd32(buf + 4);
    pos = 8;
  } else {
    snprintf(msg, sizeof msg,
             "not a Roaring portable serialization: the first 4 bytes are 0x%08x, expected cookie 12346 or 12347 "
             "(pass a file written by Roaring's serialize(), or one decimal id per line)",
             cookie);
    return msg;
  }
  if (h.size > 65536) {
    snprintf(msg, sizeof msg, "corrupt Roaring serialization: %u containers (at most 65536)", h.size);
    return msg;
  }
  h.keycards = buf + pos;
  if (auto e = need(len, pos, size_t{h.size} * 4, "the key/cardinality table"); !e.empty()) return e;
  pos += size_t{h.size} * 4;
  if (!h.has_run || h.size >= kNoOffsetThreshold) {
    if (auto e = need(len, pos, size_t{h.size} * 4, "the offset table"); !e.empty()) return e;
    pos += size_t{h.size} * 4;
  }
  h.pos = pos;
  return "";
}

// Container i, a run container at pos: runs increasing, inside 16 bits, their values adding up to `card`.
std::string check_run_container(const char* buf, size_t len, size_t& pos, uint32_t i, uint32_t card) {
  char msg[256];
  if (auto e = need(len, pos, 2, "a run count"); !e.empty()) return e;
  uint32_t nruns = rd16(buf + pos);
  pos += 2;
  if (auto e = need(len, pos, size_t{nruns} * 4, "a run container"); !e.empty()) return e;
  int64_t prev_end = -1;
  uint64_t values = 0;
  for (uint32_t r = 0; r < nruns; ++r) {
    uint32_t start = rd16(buf + pos + 4 * r), length = rd16(buf + pos + 4 * r + 2);
    if (static_cast<int64_t>(start) <= prev_end || start + length > 65535) {
      snprintf(msg, sizeof msg, "corrupt Roaring serialization: run %u of container %u overlaps or overflows", r, i);
      return msg;
    }
    prev_end = start + length;
    values += uint64_t{length} + 1;
  }
  // A run container with no runs, or whose runs disagree with its header's
  // cardinality, makes CRoaring 0.2 build a container it later dereferences
  // as NULL (found by fuzz_roaring_import: a crash in roaring_bitmap_or_inplace).
  if (nruns == 0 || values != card) {
    snprintf(msg, sizeof msg, "corrupt Roaring serialization: run container %u holds %" PRIu64
             " values in %u runs, header says %u", i, values, nruns, card);
    return msg;
  }
  pos += size_t{nruns} * 4;
  return "";
}

// Container i, a bitmap container at pos: `card` bits set.
std::string check_bitmap_container(const char* buf, size_t len, size_t& pos, uint32_t i, uint32_t card) {
  if (auto e = need(len, pos, 8192, "a bitmap container"); !e.empty()) return e;
  uint64_t pop = 0;
  for (size_t w = 0; w < 1024; ++w) {
    uint64_t word;
    std::memcpy(&word, buf + pos + 8 * w, 8);
    pop += static_cast<uint64_t>(std::popcount(word));
  }
  if (pop != card) {
    char msg[256];
    snprintf(msg, sizeof msg, "corrupt Roaring serialization: bitmap container %u has %" PRIu64
             " bits set, header says %u", i, pop, card);
    return msg;
  }
  pos += 8192;
  return "";
}

// Container i, an array container at pos: `card` values strictly increasing.
std::string check_array_container(const char* buf, size_t len, size_t& pos, uint32_t i, uint32_t card) {
  if (auto e = need(len, pos, size_t{card} * 2, "an array container"); !e.empty()) return e;
  int32_t prev = -1;
  for (uint32_t k = 0; k < card; ++k) {
    int32_t v = rd16(buf + pos + 2 * k);
    if (v <= prev) {
      char msg[256];
      snprintf(msg, sizeof msg, "corrupt Roaring serialization: array container %u is not sorted", i);
      return msg;
    }
    prev = v;
  }
  pos += size_t{card} * 2;
  return "";
}

}  // namespace

std::string portable_validate(const char* buf, size_t len, size_t* consumed) {
  PortableHeader h;
  if (auto e = read_portable_header(buf, len, h); !e.empty()) return e;
  size_t pos = h.pos;
  int64_t prev_key = -1;
  for (uint32_t i = 0; i < h.size; ++i) {
    uint32_t key = rd16(h.keycards + 4 * i);
    uint32_t card = uint32_t{rd16(h.keycards + 4 * i + 2)} + 1;
    if (static_cast<int64_t>(key) <= prev_key) {
      char msg[256];
      snprintf(msg, sizeof msg, "corrupt Roaring serialization: container keys not increasing at container %u", i);
      return msg;
    }
    prev_key = key;
    bool is_run = h.has_run && (static_cast<unsigned char>(h.run_bitmap[i / 8]) >> (i % 8)) & 1;
    std::string e = is_run ? check_run_container(buf, len, pos, i, card)
                    : card > 4096 ? check_bitmap_container(buf, len, pos, i, card)
                                  : check_array_container(buf, len, pos, i, card);
    if (!e.empty()) return e;
  }
  if (consumed) *consumed = pos;
  return "";
}

}  // namespace shmfilter::internal::roaring
