// tests/consumer/main.cpp: uses only the installed public headers and library.
// Creates a segment and a region, finds it again, removes the segment.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <shmfilter/error.hpp>
#include <shmfilter/segment.hpp>

int main() {
  const std::string name = "shmf-consumer-" + std::to_string(getpid());
  try {
    shmfilter::CreateOptions opts;
    opts.size = 1 << 20;
    opts.max_size = 64 << 20;
    auto seg = shmfilter::Segment::create(name, opts);
    seg.create_region("hello", shmfilter::Kind::kBlob, 4096,
                      [](std::byte* p, uint64_t, shmfilter::ControlTxn&) { std::memcpy(p, "hi", 3); });
    auto info = seg.open_region("hello", shmfilter::Kind::kBlob);
    bool ok = std::strcmp(reinterpret_cast<const char*>(seg.base() + info.offset), "hi") == 0;
    shmfilter::Segment::remove(name);
    std::printf(ok ? "consumer ok (%s)\n" : "consumer FAILED: region bytes differ (%s)\n", name.c_str());
    return ok ? 0 : 1;
  } catch (const shmfilter::Error& e) {
    shmfilter::Segment::remove(name);
    std::printf("consumer FAILED: %s\n", e.what());
    return 1;
  }
}
