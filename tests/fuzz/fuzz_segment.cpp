// tests/fuzz/fuzz_segment.cpp: structure-aware libFuzzer target over a real segment image.
//
// At start-up a real file-backed segment is built from every kind's fuzz image
// (its row in the kinds table, lib/structures/kind.h: each kind in every state,
// fixed seeds) and its bytes kept as the base image. An input is a list
// of PATCHES applied to a copy of that image:
//
//   patch := anchor:u8  offset:u32le  len:u8  bytes[len % 33]
//
// `anchor` picks a part of the image (the header page, the first undo / free /
// quarantine entries, the registry, the directory, the data area, each extent
// header with the start of its payload; the last anchor resizes the file to
// `offset` bytes instead), `offset` is taken modulo that part's length. The
// custom mutator adds patches that write "interesting" 1/2/4/8-byte values
// (0, ~0, 2^63, the file length, offsets of other anchors, existing value +- 1)
// at field-aligned places; a quarter of its patches are structure-aware: they pick
// a structure of the base image and one of the fields its kind's row lists
// (KindRow::fuzz_fields: header and table offsets, sizes, counts, shifts,
// descriptors, slot tags) and write a value chosen for the field's role
// (fuzz_fields.h), or swap two of its offsets; otherwise libFuzzer mutates the bytes.
//
// Each input: write the patched image to a file, then Segment::open, every
// structure's fuzz exercise (its row's: open, stats, queries, writes, growth),
// check(), check(repair) and the structures once more. shmfilter::Error is the expected outcome of a corrupt
// image; a crash, hang, sanitizer report or huge allocation is a bug.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "segment/layout.h"
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"
#include "structures/kind.h"
#include "fuzz_fields.h"

using namespace shmfilter;
using shmfilter::internal::FuzzField;

namespace {

struct Anchor {
  uint64_t off;
  uint64_t len;
};

std::string g_dir;
std::string g_path;
std::vector<uint8_t> g_base;
std::vector<Anchor> g_anchors;
std::vector<shmf_fuzz::RegionFields> g_fields;  // every structure's fields (its row's fuzz_fields)
std::vector<uint64_t> g_offsets;                 // their tables' offsets ("another table's offset")
int g_fd = -1;

// Removes DIR and every file in it (the images and their lock files, PATH.lock-<id>).
void remove_dir_files(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        ::unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  ::rmdir(dir.c_str());
}

void cleanup() {
  if (g_fd >= 0) ::close(g_fd);
  if (!g_dir.empty()) remove_dir_files(g_dir);
}

void build_seed(const std::string& path) {
  CreateOptions o;
  o.file = path;
  o.size = 0;                  // the minimum: the tables plus 64 KiB
  o.max_size = 4ull << 20;     // small reservation: offsets past the file are reachable
  o.directory_capacity = 32;  // room for every row's image in every state (16 was full once the UV family joined)
  Segment seg = Segment::create("fuzz", o);
  // Every kind's fuzz image (its row in the kinds table): each kind in every state it can be in,
  // the window's included (#23: its open and check validate every table any path follows). The
  // findings of runs that had it in the image are seeds window-*: a bucket table over the
  // window's own header (maintain divided by a zeroed slot count), a double past 2^64 converted
  // in maintain (window-desired-capacity-double-overflow), stats following a table offset that
  // is not 64-aligned (window-stats-misaligned-table), a sub-filter log2_stripes of 324
  // (window-cuckoo-table-log2-stripes), a check_shift of 615936 (window-bloom-check-shift).
  for (const internal::KindRow* row : internal::kind_rows()) row->fuzz_image(seg, "");
  g_fields = shmf_fuzz::gather_fields(seg);
}

bool read_file(const std::string& path, std::vector<uint8_t>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  fstat(fd, &st);
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return got == out.size();
}

void compute_anchors() {
  using namespace shmfilter::internal;
  Header h;
  std::memcpy(static_cast<void*>(&h), g_base.data(), sizeof h);
  g_anchors.push_back({0, 4096});                                          // header page
  g_anchors.push_back({h.undo_offset, 16 * sizeof(UndoEntry)});             // undo log head
  g_anchors.push_back({h.free_offset, 16 * sizeof(FreeExtent)});
  g_anchors.push_back({h.quarantine_offset, 16 * sizeof(QuarantineEntry)});
  g_anchors.push_back({h.registry_offset, 8 * sizeof(RegistrySlot)});
  g_anchors.push_back({h.directory_offset, uint64_t{h.directory_capacity} * sizeof(DirEntry)});
  g_anchors.push_back({h.data_offset, h.top - h.data_offset});             // all structures
  // Each extent: its header and the first 1 KiB of its payload (structure headers, tables).
  uint64_t p = h.data_offset;
  while (p + sizeof(ExtentHeader) <= h.top) {
    ExtentHeader eh;
    std::memcpy(static_cast<void*>(&eh), g_base.data() + p, sizeof eh);
    if (eh.magic != kExtentMagic || eh.size < 64 || p + eh.size > h.top) break;
    g_anchors.push_back({p, std::min<uint64_t>(eh.size, 1024 + sizeof(ExtentHeader))});
    p += eh.size;
  }
}

struct Patch {
  uint8_t anchor;
  uint32_t offset;
  std::vector<uint8_t> bytes;
};

std::vector<Patch> parse(const uint8_t* data, size_t size) {
  std::vector<Patch> out;
  size_t i = 0;
  while (i + 6 <= size && out.size() < 64) {
    Patch p;
    p.anchor = data[i];
    std::memcpy(&p.offset, data + i + 1, 4);
    size_t len = data[i + 5] % 33;
    i += 6;
    len = std::min(len, size - i);
    p.bytes.assign(data + i, data + i + len);
    i += len;
    out.push_back(std::move(p));
  }
  return out;
}

size_t serialize(const std::vector<Patch>& ps, uint8_t* out, size_t max) {
  size_t n = 0;
  for (const auto& p : ps) {
    if (n + 6 + p.bytes.size() > max) break;
    out[n] = p.anchor;
    std::memcpy(out + n + 1, &p.offset, 4);
    out[n + 5] = static_cast<uint8_t>(p.bytes.size());
    if (!p.bytes.empty()) std::memcpy(out + n + 6, p.bytes.data(), p.bytes.size());
    n += 6 + p.bytes.size();
  }
  return n;
}

// Writes the patched image to the work file (same size as the base unless a resize patch says otherwise).
void materialise(const std::vector<Patch>& ps) {
  std::vector<uint8_t> img = g_base;
  uint64_t file_len = img.size();
  const size_t n_anchors = g_anchors.size() + 1;  // the last one is "resize the file"
  for (const auto& p : ps) {
    size_t a = p.anchor % n_anchors;
    if (a == g_anchors.size()) {
      file_len = p.offset % (img.size() + (1u << 20));
      continue;
    }
    const Anchor& an = g_anchors[a];
    if (an.len == 0) continue;
    uint64_t at = an.off + p.offset % an.len;
    for (size_t k = 0; k < p.bytes.size() && at + k < img.size(); ++k) img[at + k] = p.bytes[k];
  }
  if (ftruncate(g_fd, 0) != 0) abort();
  size_t w = std::min<uint64_t>(img.size(), file_len);
  size_t done = 0;
  while (done < w) {
    ssize_t n = pwrite(g_fd, img.data() + done, w - done, static_cast<off_t>(done));
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  if (ftruncate(g_fd, static_cast<off_t>(file_len)) != 0) abort();
}

template <class Fn>
void guarded(Fn&& fn) {
  try {
    fn();
  } catch (const shmfilter::Error&) {
    // a named error is the right answer to a corrupt image
  }
}

void exercise(Segment& seg) {
  guarded([&] { (void)seg.stats(); });
  guarded([&] { (void)seg.processes(); });
  std::vector<RegionInfo> regions;
  guarded([&] { regions = seg.list(); });
  for (const RegionInfo& r : regions) {
    // Every call a user can make on it, through its kind's row (kinds table).
    if (const internal::KindRow* row = internal::kind_row(r.kind)) guarded([&] { row->fuzz_exercise(seg, r); });
  }
}

}  // namespace

// Work directories of fuzzer processes that are gone (libFuzzer's -fork jobs
// end without running atexit handlers): /tmp/shmf-fuzz-<pid> with a dead pid.
static void remove_stale_dirs() {
  DIR* d = opendir("/tmp");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    if (std::sscanf(e->d_name, "shmf-fuzz-%d", &pid) != 1 || pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    remove_dir_files(std::string("/tmp/") + e->d_name);
  }
  closedir(d);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  remove_stale_dirs();
  g_dir = "/tmp/shmf-fuzz-" + std::to_string(getpid());
  if (mkdir(g_dir.c_str(), 0700) != 0 && errno != EEXIST) abort();
  std::atexit(cleanup);
  std::string seed = g_dir + "/seed.seg";
  build_seed(seed);
  if (!read_file(seed, g_base)) abort();
  ::unlink(seed.c_str());
  compute_anchors();
  g_offsets = shmf_fuzz::offsets_of(g_fields, g_base.data(), g_base.size());
  g_path = g_dir + "/work.seg";
  g_fd = ::open(g_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (g_fd < 0) abort();
  if (getenv("SHMF_FUZZ_VERBOSE") != nullptr)
    fprintf(stderr, "fuzz_segment: base image %zu bytes, %zu anchors, %zu structures with fields\n", g_base.size(),
            g_anchors.size(), g_fields.size());
  return 0;
}

// Open descriptors of this process (/proc/self/fd, less the one opendir holds).
static int open_fds() {
  int n = -1;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n - 2;  // "." and ".."
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  materialise(parse(data, size));
  const int fds_before = open_fds();
  guarded([&] {
    OpenOptions oo;
    oo.file = g_path;
    Segment seg = Segment::open("fuzz", oo);
    exercise(seg);
    guarded([&] { (void)seg.check(false); });
    guarded([&] { (void)seg.check(true); });
    exercise(seg);
    guarded([&] { (void)seg.check(false); });
  });
  // Every descriptor the library opened for this input (segment file, lock file) is closed
  // once the handles are gone, whatever the image held: a leak per corrupt image would
  // exhaust a long-lived process (the fuzzer itself died of it after ~72,000 inputs).
  const int fds_after = open_fds();
  if (fds_before >= 0 && fds_after > fds_before) {
    std::fprintf(stderr, "fuzz_segment: %d file descriptor(s) leaked by this input\n", fds_after - fds_before);
    abort();
  }
  return 0;
}

// ---- structure-aware mutation ------------------------------------------------

namespace {

uint64_t rnd(unsigned& state) {
  state = state * 1103515245u + 12345u;
  uint64_t hi = state;
  state = state * 1103515245u + 12345u;
  return (hi << 32) ^ state;
}

Patch interesting_patch(unsigned& st) {
  Patch p;
  const size_t n_anchors = g_anchors.size() + 1;
  size_t a = rnd(st) % n_anchors;
  p.anchor = static_cast<uint8_t>(a);
  if (a == g_anchors.size()) {  // resize the file
    uint64_t choices[] = {0, 8, 4096, g_base.size() / 2, g_base.size() - 4096, g_base.size() - 1,
                          g_base.size() + 4096};
    p.offset = static_cast<uint32_t>(choices[rnd(st) % 7]);
    return p;
  }
  const Anchor& an = g_anchors[a];
  static const unsigned widths[] = {1, 2, 4, 8, 8, 8};
  unsigned w = widths[rnd(st) % 6];
  uint64_t off = an.len ? (rnd(st) % an.len) & ~uint64_t{w - 1} : 0;
  p.offset = static_cast<uint32_t>(off);
  uint64_t at = an.off + off;
  uint64_t cur = 0;
  if (at + w <= g_base.size()) std::memcpy(&cur, g_base.data() + at, w);
  const Anchor& other = g_anchors[rnd(st) % g_anchors.size()];
  uint64_t vals[] = {0,
                     1,
                     ~uint64_t{0},
                     uint64_t{1} << 63,
                     (uint64_t{1} << 32) - 1,
                     uint64_t{1} << 32,
                     cur + 1,
                     cur - 1,
                     cur ^ (uint64_t{1} << (rnd(st) % (8 * w))),
                     g_base.size(),
                     g_base.size() - 8,
                     g_base.size() + 64,
                     4ull << 20,              // max_size of the seed
                     (4ull << 20) - 8,
                     other.off,
                     other.off + 64,
                     other.off + 8,
                     1ull << 30,
                     rnd(st),
                     rnd(st) % 256};
  uint64_t v = vals[rnd(st) % (sizeof vals / sizeof vals[0])];
  p.bytes.resize(w);
  std::memcpy(p.bytes.data(), &v, w);
  return p;
}

// A patch writing V (WIDTH bytes) at segment offset AT: through the header-page anchor below
// the data area, else the data area's (compute_anchors: anchor 6).
Patch patch_at(uint64_t at, unsigned width, uint64_t v) {
  Patch p;
  const Anchor& data = g_anchors[6];
  if (at >= data.off && at - data.off < data.len) {
    p.anchor = 6;
    p.offset = static_cast<uint32_t>(at - data.off);
  } else {
    p.anchor = 0;
    p.offset = static_cast<uint32_t>(at);
  }
  p.bytes.resize(width);
  std::memcpy(p.bytes.data(), &v, width);
  return p;
}

// Structure-aware: one field of one structure (its row's list) gets a value chosen for its
// role, or two offset fields of the structure swap their values.
void field_patches(unsigned seed, std::vector<Patch>& ps) {
  if (g_fields.empty()) return;
  shmf_fuzz::Rng rng(seed);
  const shmf_fuzz::RegionFields& rf = g_fields[rng.below(g_fields.size())];
  const FuzzField& f = rf.fields[rng.below(rf.fields.size())];
  if (f.offset + f.width > g_base.size()) return;
  const uint64_t cur = shmf_fuzz::load_le(g_base.data() + f.offset, f.width);
  if (f.role == FuzzField::kOffset && rng.below(4) == 0) {
    const FuzzField& g = rf.fields[rng.below(rf.fields.size())];
    if (g.role == FuzzField::kOffset && g.offset != f.offset && g.offset + g.width <= g_base.size()) {
      ps.push_back(patch_at(f.offset, f.width, shmf_fuzz::load_le(g_base.data() + g.offset, g.width)));
      ps.push_back(patch_at(g.offset, g.width, cur));
      return;
    }
  }
  const uint64_t v =
      shmf_fuzz::interesting_value(rng, f, cur, rf.region.offset, rf.region.size, g_base.size(), g_offsets);
  ps.push_back(patch_at(f.offset, f.width, v));
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  unsigned st = seed;
  unsigned choice = static_cast<unsigned>(rnd(st) % 8);
  if (choice < 3) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<Patch> ps = parse(data, size);
  if (choice >= 6) {
    field_patches(static_cast<unsigned>(rnd(st)), ps);
  } else if (choice == 3 && !ps.empty()) {
    ps.erase(ps.begin() + static_cast<long>(rnd(st) % ps.size()));
  } else if (choice == 4 && !ps.empty()) {
    ps[rnd(st) % ps.size()] = interesting_patch(st);
  } else {
    ps.push_back(interesting_patch(st));
  }
  if (ps.size() > 64) ps.erase(ps.begin());  // parse() reads at most 64
  return serialize(ps, data, max_size);
}
