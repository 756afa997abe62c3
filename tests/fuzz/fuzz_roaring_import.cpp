// tests/fuzz/fuzz_roaring_import.cpp: libFuzzer target for RoaringSet's portable
// import (the bytes of `shmtool roaring import`, a file anyone may hand us).
//
// parse_portable() must reject malformed bytes with kBadInput and never read
// outside them; import_portable() into a live set must then keep it exact:
// every value of the parsed bitmap is in the set afterwards.
#include <roaring/roaring.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shmfilter/error.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"

using namespace shmfilter;

namespace {
std::string g_name;
Segment* g_seg = nullptr;
RoaringSet* g_set = nullptr;
void cleanup() {
  delete g_set;
  delete g_seg;
  if (!g_name.empty()) Segment::remove(g_name);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_name = "shmf-fuzz-roaring-" + std::to_string(getpid());
  CreateOptions o;
  o.size = 8ull << 20;
  o.max_size = 256ull << 20;
  o.directory_capacity = 16;
  g_seg = new Segment(Segment::create(g_name, o));
  RoaringOptions r;
  r.delta_capacity = 256;
  g_set = new RoaringSet(RoaringSet::create(*g_seg, "ids", r));
  Segment::remove(g_name);  // unlinked now: the mapping lives on, nothing is left behind however we exit
  std::atexit(cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  roaring_bitmap_t* b = nullptr;
  try {
    b = RoaringSet::parse_portable(bytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadInput) abort();  // malformed bytes are kBadInput, nothing else
    return 0;
  }
  uint64_t card = roaring_bitmap_get_cardinality(b);
  try {
    if (card <= 100000) {  // keep each run fast: a big bitmap is still parsed above
      g_set->import_portable(bytes);
      if (card > 0) {  // (CRoaring 0.2's iterator dereferences the first container even when there is none)
        roaring_uint32_iterator_t* it = roaring_create_iterator(b);
        for (int i = 0; it->has_value && i < 64; ++i, roaring_advance_uint32_iterator(it))
          if (!g_set->contains(it->current_value)) abort();  // an imported value must be present
        roaring_free_uint32_iterator(it);
      }
      if (g_set->cardinality() > 3000000) {  // start over: keeps the segment small
        RoaringSet::drop(*g_seg, "ids");
        RoaringOptions r;
        r.delta_capacity = 256;
        *g_set = RoaringSet::create(*g_seg, "ids", r);
      }
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNoSpace && e.code() != ErrorCode::kFull) abort();
  }
  roaring_bitmap_free(b);
  return 0;
}
