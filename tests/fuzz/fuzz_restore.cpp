// tests/fuzz/fuzz_restore.cpp: libFuzzer target for save files (`shmtool restore FILE`,
// bytes anyone may hand us: a copied archive, a truncated transfer, a crafted file).
//
// Each input is written to a file and restored into one scratch segment (--into).
// shmfilter::Error is the expected outcome of a bad file, and then the segment must
// hold nothing (restore is all or nothing). An accepted file's structures must open,
// answer, take writes and pass check() without a crash; they are dropped afterwards.
// Seeds (corpus/fuzz_restore/): saves of a segment with every kind, windows of both
// variants included (their day ring, an overflowing bucket, a forget).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/window.hpp"

using namespace shmfilter;

namespace {
std::string g_name, g_file;
Segment* g_seg = nullptr;
void cleanup() {
  delete g_seg;
  if (!g_name.empty()) Segment::remove(g_name);
  if (!g_file.empty()) std::remove(g_file.c_str());
}

void exercise(const RegionInfo& r) {
  switch (r.kind) {
    case Kind::kBloom: {
      Bloom b = Bloom::open(*g_seg, r.name);
      (void)b.stats();
      (void)b.contains(uint64_t{1});
      b.add(uint64_t{2});
      break;
    }
    case Kind::kCuckoo: {
      Cuckoo c = Cuckoo::open(*g_seg, r.name);
      (void)c.stats();
      (void)c.contains(uint64_t{1});
      (void)c.add(uint64_t{2});
      (void)c.erase(uint64_t{2});
      break;
    }
    case Kind::kExactSet: {
      ExactSet s = ExactSet::open(*g_seg, r.name);
      (void)s.contains(uint64_t{1});
      (void)s.insert(uint64_t{2});
      break;
    }
    case Kind::kHll: {
      Hll h = Hll::open(*g_seg, r.name);
      (void)h.count();
      h.add(uint64_t{2});
      break;
    }
    case Kind::kRoaring: {
      RoaringSet s = RoaringSet::open(*g_seg, r.name);
      (void)s.contains(1);
      (void)s.add(2);
      break;
    }
    case Kind::kWindow: {
      Window w = Window::open(*g_seg, r.name);
      w.set_now(1764550800);
      (void)w.stats();
      (void)w.seen(1, uint64_t{1}, 0);
      (void)w.mark_if_unseen(1, uint64_t{2}, 0);
      (void)w.new_count(1, 0);
      w.set_now(1764637200);  // the next day: a rotation
      (void)w.mark_if_unseen(1, uint64_t{3}, 0);
      (void)w.stats();
      break;
    }
    default: break;
  }
}

bool drop_any(const RegionInfo& r) {
  switch (r.kind) {
    case Kind::kBloom: return Bloom::drop(*g_seg, r.name);
    case Kind::kCuckoo: return Cuckoo::drop(*g_seg, r.name);
    case Kind::kExactSet: return ExactSet::drop(*g_seg, r.name);
    case Kind::kHll: return Hll::drop(*g_seg, r.name);
    case Kind::kRoaring: return RoaringSet::drop(*g_seg, r.name);
    case Kind::kWindow: return Window::drop(*g_seg, r.name);
    default: return g_seg->drop(r.name);
  }
}
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
