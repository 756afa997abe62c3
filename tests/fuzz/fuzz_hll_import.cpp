// tests/fuzz/fuzz_hll_import.cpp: libFuzzer target for the Redis HLL string
// import (`shmtool hll import`, bytes from a Redis GET anyone may hand us).
//
// count_redis() and import_redis() must reject malformed dense/sparse strings
// with kBadInput and never read or write outside the input or the 16384
// registers; after an accepted import every register is still <= 51 and the
// count is finite.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shmfilter/error.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/segment.hpp"

using namespace shmfilter;

namespace {
std::string g_name;
Segment* g_seg = nullptr;
Hll* g_hll = nullptr;
void cleanup() {
  delete g_hll;
  delete g_seg;
  if (!g_name.empty()) Segment::remove(g_name);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_name = "shmf-fuzz-hll-" + std::to_string(getpid());
  CreateOptions o;
  o.size = 0;
  o.max_size = 16ull << 20;
  o.directory_capacity = 16;
  g_seg = new Segment(Segment::create(g_name, o));
  g_hll = new Hll(Hll::create(*g_seg, "uv"));
  Segment::remove(g_name);  // unlinked now: the mapping lives on, nothing is left behind however we exit
  std::atexit(cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bool parsed = false;
  try {
    (void)Hll::count_redis(bytes);
    parsed = true;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadInput) abort();
  }
  try {
    g_hll->import_redis(bytes);
    if (!parsed) abort();  // import accepted what count rejected
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadInput) abort();
    if (parsed) abort();  // count accepted what import rejected
    return 0;
  }
  for (uint8_t r : g_hll->registers())
    if (r > 51) abort();  // a register beyond 64 - 14 + 1
  (void)g_hll->count();
  (void)g_hll->export_redis();
  if (size > 0 && (data[0] & 0x3f) == 0) g_hll->clear();
  return 0;
}
