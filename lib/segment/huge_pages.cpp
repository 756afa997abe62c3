// lib/segment/huge_pages.cpp: Segment::huge_page_stats(): how much of this
// process's mapping of the segment is on huge pages, read from
// /proc/self/smaps, and what the kernel allows (shmem_enabled). The advice
// itself (madvise MADV_HUGEPAGE) is given in SegmentImpl::map (mapping.cpp).
// docs/huge-pages.md says how to enable huge pages on a host.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "segment/segment_impl.h"
#include "shmfilter/segment.hpp"

namespace shmfilter {

namespace {

// The selected mode of a sysfs THP knob ("always within_size advise [never] deny force" -> "never").
std::string selected_mode(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : line;
}

// "Rss:  1234 kB" -> bytes, if the line starts with `key`.
bool field_kb(const char* line, const char* key, uint64_t& out) {
  const size_t n = std::strlen(key);
  if (std::strncmp(line, key, n) != 0) return false;
  unsigned long long kb = 0;
  if (std::sscanf(line + n, " %llu kB", &kb) != 1) return false;
  out += static_cast<uint64_t>(kb) * 1024;
  return true;
}

}  // namespace

HugePageStats Segment::huge_page_stats() const {
  HugePageStats st;
  const internal::SegmentImpl* im = impl_.get();
  if (im == nullptr) return st;
  st.requested = im->huge_requested;
  st.advised = im->huge_advise_errno == 0;
  st.advise_errno = im->huge_advise_errno > 0 ? im->huge_advise_errno : 0;
  st.shmem_enabled = selected_mode("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  FILE* f = std::fopen("/proc/self/smaps", "re");
  if (f != nullptr) {
    const auto start = reinterpret_cast<uintptr_t>(im->base);
    char line[512];
    bool in = false;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned long long lo = 0, hi = 0;
      // A mapping's first line: "lo-hi perms offset dev inode path".
      if (std::sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && std::strchr(line, '-') != nullptr &&
          std::strchr(line, ':') != nullptr && line[0] != ' ' && std::strncmp(line, "VmFlags", 7) != 0) {
        in = lo == start;
        st.smaps_read |= in;
        continue;
      }
      if (!in) continue;
      uint64_t huge = 0;
      if (field_kb(line, "Rss:", st.resident_bytes)) continue;
      if (field_kb(line, "ShmemPmdMapped:", huge) || field_kb(line, "FilePmdMapped:", huge) ||
          field_kb(line, "AnonHugePages:", huge))
        st.huge_bytes += huge;
    }
    std::fclose(f);
  }
  if (st.requested && st.huge_bytes == 0) {
    if (im->huge_advise_errno > 0)
      st.note = "madvise(MADV_HUGEPAGE) failed (" + std::string(std::strerror(im->huge_advise_errno)) +
                "): this kernel has no transparent huge pages for this mapping";
    else if (st.shmem_enabled == "never" || st.shmem_enabled == "deny")
      st.note = "the kernel's shmem_enabled is '" + st.shmem_enabled +
                "': run 'echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled' as root "
                "(docs/huge-pages.md)";
    else
      st.note = "no huge page mapped yet: pages become huge as 2 MiB-aligned ranges are touched (docs/huge-pages.md)";
  }
  return st;
}

}  // namespace shmfilter
