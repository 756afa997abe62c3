// lib/capi/c_api_ops.cpp: the C API of lib/ops: shmf_segment_prometheus_text(_ex), and
// shmf_escape (the escaping policy of shmfilter/text.hpp, for C front ends)
// (for the nginx module and C sidecars that serve /metrics).
#include <cstring>

#include "capi/c_api_internal.h"
#include "shmfilter/metrics.hpp"
#include "shmfilter/text.hpp"

using namespace shmfilter;
using namespace shmfilter::capi;

void shmf_metrics_options_init(shmf_metrics_options* opts) {
  if (opts == nullptr) return;
  const MetricsOptions d;
  *opts = shmf_metrics_options{};
  opts->max_structures = d.max_structures;
  opts->max_spaces = d.max_spaces;
  opts->max_bytes = d.max_bytes;
}

namespace {

int prometheus(const char* call, shmf_segment* seg, const shmf_metrics_options* opts, char* buf, size_t cap,
               size_t* needed) {
  return guard([&] {
    need(seg, call, "seg");
    need(needed, call, "needed");
    MetricsOptions o;
    if (opts != nullptr) {
      if (opts->reserved[0] != 0 || opts->reserved[1] != 0)
        throw Error(ErrorCode::kInvalidArgument, std::string(call) +
                                                     ": opts->reserved must be 0 "
                                                     "(fill the options with shmf_metrics_options_init)");
      o.max_structures = opts->max_structures;
      o.max_spaces = opts->max_spaces;
      o.max_bytes = opts->max_bytes;
    }
    const std::string text = prometheus_text(seg->seg, o);
    *needed = text.size() + 1;
    if (buf == nullptr || cap < *needed)
      return fail(SHMF_EFULL, std::string(call) + ": the buffer holds " + std::to_string(cap) +
                                  " bytes, the text needs " + std::to_string(*needed) +
                                  ": call again with a buffer of *needed bytes");
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    return 0;
  });
}

}  // namespace

int shmf_segment_prometheus_text(shmf_segment* seg, char* buf, size_t cap, size_t* needed) {
  return prometheus("shmf_segment_prometheus_text", seg, nullptr, buf, cap, needed);
}

int shmf_segment_prometheus_text_ex(shmf_segment* seg, const shmf_metrics_options* opts, char* buf, size_t cap,
                                    size_t* needed) {
  return prometheus("shmf_segment_prometheus_text_ex", seg, opts, buf, cap, needed);
}

int shmf_escape(int how, const char* in, size_t len, char* out, size_t cap, size_t* needed) {
  return guard([&] {
    need(needed, "shmf_escape", "needed");
    if (in == nullptr && len != 0) need(in, "shmf_escape", "in");
    const std::string_view s(in == nullptr ? "" : in, len);
    std::string text;
    switch (how) {
      case SHMF_ESCAPE_TEXT: text = escape_text(s); break;
      case SHMF_ESCAPE_JSON: text = escape_json(s); break;
      case SHMF_ESCAPE_LABEL: text = escape_label(s); break;
      default:
        throw Error(ErrorCode::kInvalidArgument,
                    "shmf_escape: how " + std::to_string(how) +
                        " is none of SHMF_ESCAPE_TEXT, SHMF_ESCAPE_JSON, SHMF_ESCAPE_LABEL");
    }
    *needed = text.size() + 1;
    if (out == nullptr || cap < *needed)
      return fail(SHMF_EFULL, "shmf_escape: the buffer holds " + std::to_string(cap) + " bytes, the text needs " +
                                  std::to_string(*needed) + ": call again with a buffer of *needed bytes");
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = '\0';
    return 0;
  });
}
