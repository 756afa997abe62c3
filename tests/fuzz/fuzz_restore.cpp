// tests/fuzz/fuzz_restore.cpp: libFuzzer target for save files (`shmtool restore FILE`,
// bytes anyone may hand us: a copied archive, a truncated transfer, a crafted file).
//
// Each input is written to a file and restored into one scratch segment (--into).
// shmfilter::Error is the expected outcome of a bad file, and then the segment must
// hold nothing (restore is all or nothing). An accepted file's structures must open,
// answer, take writes and pass check() without a crash; they are dropped afterwards.
// Seeds (corpus/fuzz_restore/): saves of a segment with every kind, windows of both
// variants included (their day ring, an overflowing bucket, a forget); dup-names and
// nul-name (re-sealed files the review's issue #23 named: two entries of one name, a
// name with a NUL byte; both kBadInput now).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shmfilter/error.hpp"
#include "shmfilter/kinds.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/snapshot.hpp"
#include "structures/kind.h"

using namespace shmfilter;

namespace {
std::string g_name, g_file;
Segment* g_seg = nullptr;
void cleanup() {
  delete g_seg;
  if (!g_name.empty()) Segment::remove(g_name);
  if (!g_file.empty()) std::remove(g_file.c_str());
}

// Every call a user can make on it, and its drop: through its kind's row (kinds table).
void exercise(const RegionInfo& r) {
  if (const internal::KindRow* row = internal::kind_row(r.kind)) row->fuzz_exercise(*g_seg, r);
}

bool drop_any(const RegionInfo& r) { return drop_structure(*g_seg, r.name); }
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_name = "shmf-fuzz-restore-" + std::to_string(getpid());
  g_file = "/tmp/shmf-fuzz-restore-" + std::to_string(getpid()) + ".save";
  CreateOptions o;
  o.size = 0;
  o.max_size = 256ull << 20;
  o.directory_capacity = 64;
  g_seg = new Segment(Segment::create(g_name, o));
  std::atexit(cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(g_file.c_str(), "wb");
  if (!f) abort();
  if (size && std::fwrite(data, 1, size, f) != size) abort();
  std::fclose(f);
  RestoreOptions ro;
  ro.into_existing = true;
  try {
    restore(g_file, g_name, ro);
  } catch (const Error&) {
    if (!g_seg->list().empty()) abort();  // a refused restore left a structure behind
    return 0;
  }
  for (const auto& r : g_seg->list()) {
    try {
      exercise(r);
    } catch (const Error&) {
      // a structure that opens may still refuse an operation (kNoSpace, kFull): fine
    }
  }
  (void)g_seg->check(false);
  for (const auto& r : g_seg->list()) {
    try {
      drop_any(r);
    } catch (const Error&) {
      abort();  // a restored structure must be droppable
    }
  }
  g_seg->quiesce();
  return 0;
}
