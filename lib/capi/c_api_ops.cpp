// lib/capi/c_api_ops.cpp: the C API of lib/ops: shmf_segment_prometheus_text
// (for the nginx module and C sidecars that serve /metrics).
#include <cstring>

#include "capi/c_api_internal.h"
#include "shmfilter/metrics.hpp"

using namespace shmfilter;
using namespace shmfilter::capi;

int shmf_segment_prometheus_text(shmf_segment* seg, char* buf, size_t cap, size_t* needed) {
  return guard([&] {
    need(seg, "shmf_segment_prometheus_text", "seg");
    need(needed, "shmf_segment_prometheus_text", "needed");
    const std::string text = prometheus_text(seg->seg);
    *needed = text.size() + 1;
    if (buf == nullptr || cap < *needed)
      return fail(SHMF_EFULL, "shmf_segment_prometheus_text: the buffer holds " + std::to_string(cap) +
                                  " bytes, the text needs " + std::to_string(*needed) +
                                  ": call again with a buffer of *needed bytes");
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    return 0;
  });
}
