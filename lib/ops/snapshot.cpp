// lib/ops/snapshot.cpp: save() and restore() (shmfilter/snapshot.hpp): the
// container format of docs/save-restore.md. Each entry's data is its kind's:
// the kinds table (lib/structures/kind.h) gives every kind's save and restore,
// defined in its folder (lib/structures/<kind>/<kind>_snapshot.cpp).
//
// Raw kinds (bloom, hll, set, blob): the structure's own bytes, region and
// extents, read word by word with relaxed atomic loads while writers run;
// restore copies them into a fresh region inside create_region's init
// (unpublished until complete), relocates the offsets the layout stores, resets
// what belongs to the source's processes (lock words, intents, clear tokens).
// Cuckoo: the same raw copy, taken under the filter's writer lock (items move
// between buckets). Roaring: the portable serialization, restored with
// create_from (published complete). Window: the slot ring, each bucket table
// under its own protocol. After a restore, the kind's open/validate checks
// every field as untrusted. Kinds this build does not know are listed in `skipped`.
#include "shmfilter/snapshot.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/hash.h"
#include "segment/lock_file.h"
#include "structures/kind.h"
#include "structures/snapshot_io.h"

namespace shmfilter {
namespace {

using namespace internal::snapshot;
using internal::kind_row;
using internal::KindRow;

constexpr char kFileMagic[8] = {'S', 'H', 'M', 'F', 'S', 'A', 'V', 'E'};
constexpr char kTrailerMagic[8] = {'S', 'H', 'M', 'F', 'E', 'N', 'D', '!'};
constexpr uint32_t kEntryMagic = 0x52544e45;  // "ENTR"
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryHeaderBytes = 24;
constexpr size_t kTrailerBytes = 24;
constexpr uint32_t kKindFormat = 1;  // per-kind data layout version (docs/save-restore.md)

// ---- the container ----------------------------------------------------------------
struct Parsed {
  SnapshotInfo info;
  struct Entry {
    std::string name;
    Kind kind;
    const unsigned char* data;
    uint64_t len;
  };
  std::vector<Entry> entries;
};

struct Mapped {
  void* p = MAP_FAILED;
  size_t n = 0;
  ~Mapped() {
    if (p != MAP_FAILED && n) munmap(p, n);
  }
};

void map_file(const std::string& path, Mapped& m) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kIo, "cannot open save file '" + path + "': " + std::strerror(errno) + "; check the path");
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::kBadInput, "'" + path + "' is not a regular file: pass a file written by 'shmtool save'");
  }
  m.n = static_cast<size_t>(st.st_size);
  if (m.n > 0) m.p = mmap(nullptr, m.n, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m.n > 0 && m.p == MAP_FAILED) fail(ErrorCode::kIo, "cannot map '" + path + "': " + std::strerror(errno));
}

Parsed parse(const std::string& path, const unsigned char* p, size_t n) {
  Parsed out;
  const std::string file = "save file '" + path + "'";
  if (n < 8 || std::memcmp(p, kFileMagic, 8) != 0)
    fail(ErrorCode::kBadInput, file + " is not a shmfilter save (no SHMFSAVE magic): pass a file written by 'shmtool save'");
  if (n < kHeaderBytes) fail(ErrorCode::kBadInput, file + " is truncated inside its header");
  uint32_t version = get32(p + 8);
  if (get32(p + 12) != kByteOrderMark)
    fail(ErrorCode::kForeignByteOrder, file + " has an unknown byte-order mark: it is damaged");
  if (version > kSnapshotFormatVersion)
    fail(ErrorCode::kVersionMismatch, file + " is format version " + std::to_string(version) + "; this shmfilter reads " +
                                          "up to " + std::to_string(kSnapshotFormatVersion) + ": restore it with a newer shmtool");
  if (version == 0) fail(ErrorCode::kBadInput, file + " has format version 0: it is damaged");
  if (internal::hash_bytes(p, 56, 0) != get64(p + 56))
    fail(ErrorCode::kBadInput, file + ": header checksum mismatch: the file is damaged");
  SnapshotInfo& info = out.info;
  info.format_version = version;
  info.created_unix_ns = get64(p + 16);
  uint32_t count = get32(p + 24);
  uint32_t name_len = get32(p + 28);
  info.segment_max_size = get64(p + 32);
  info.directory_capacity = get32(p + 40);
  info.segment_size = get64(p + 48);
  info.file_bytes = n;
  // The trailer first: a truncated file is named as such, not as a bad entry.
  if (n < kHeaderBytes + name_len + kTrailerBytes || std::memcmp(p + n - kTrailerBytes, kTrailerMagic, 8) != 0)
    fail(ErrorCode::kBadInput, file + " is truncated (no end marker): the save did not finish or the copy is incomplete");
  const unsigned char* t = p + n - kTrailerBytes;
  if (get32(t + 8) != count) fail(ErrorCode::kBadInput, file + ": the trailer's entry count differs from the header's");
  if (internal::hash_bytes(p, n - kTrailerBytes, 0) != get64(t + 16))
    fail(ErrorCode::kBadInput, file + ": checksum mismatch: the file is damaged (corrupted bytes)");
  In in{p + kHeaderBytes, n - kHeaderBytes - kTrailerBytes, file};
  const unsigned char* nm = in.take(name_len);
  info.source_segment.assign(reinterpret_cast<const char*>(nm), name_len);
  for (uint32_t i = 0; i < count; ++i) {
    in.what = file + " entry " + std::to_string(i + 1);
    const unsigned char* start = in.p;
    if (in.u32() != kEntryMagic) fail(ErrorCode::kBadInput, in.what + " has no entry marker: the file is damaged");
    uint32_t kind = in.u32(), kind_format = in.u32(), len = in.u32();
    uint64_t data_len = in.u64();
    if (len == 0 || len > kMaxStructureNameLength) fail(ErrorCode::kBadInput, in.what + " has a bad name length");
    std::string name(reinterpret_cast<const char*>(in.take(len)), len);
    in.what = file + " entry '" + name + "'";
    const unsigned char* data = in.take(data_len);
    uint64_t sum = in.u64();
    if (internal::hash_bytes(start, static_cast<size_t>(in.p - 8 - start), 0) != sum)
      fail(ErrorCode::kBadInput, in.what + ": checksum mismatch: the file is damaged");
    if (kind_format > kKindFormat)
      fail(ErrorCode::kVersionMismatch, in.what + " uses data format " + std::to_string(kind_format) +
                                            "; this shmfilter reads " + std::to_string(kKindFormat) + ": use a newer shmtool");
    if (kind_row(static_cast<Kind>(kind)) == nullptr)
      fail(ErrorCode::kBadInput, in.what + " has kind " + std::to_string(kind) + ", which this build cannot restore");
    out.entries.push_back({name, static_cast<Kind>(kind), data, data_len});
    info.entries.push_back({name, static_cast<Kind>(kind), data_len});
  }
  if (in.left != 0) fail(ErrorCode::kBadInput, file + " has bytes after its last entry: the file is damaged");
  return out;
}

void write_all(int fd, const std::string& b, const std::string& path) {
  size_t done = 0;
  while (done < b.size()) {
    ssize_t w = ::write(fd, b.data() + done, b.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(ErrorCode::kIo, "cannot write '" + path + "': " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
}

}  // namespace

SnapshotInfo save(Segment& seg, const std::string& path, const SaveOptions& opts) {
  // A consistent copy takes each Cuckoo/ExactSet/window table's writer lock and pins Roaring snapshots: writes
  // a PROT_READ mapping cannot make (and a read-only attachment has no owner token to lock with).
  if (seg.read_only())
    throw Error(ErrorCode::kReadOnly, "segment '" + seg.name() + "': save needs a read-write attachment (the copy "
                                      "takes each structure's writer lock), and the segment was opened read-only: "
                                      "run the save as a user who may write the segment");
  SnapshotInfo info;
  std::vector<RegionInfo> chosen;
  const std::vector<RegionInfo> all = seg.list();
  if (opts.structures.empty()) {
    for (const auto& r : all) {
      if (kind_row(r.kind))
        chosen.push_back(r);
      else
        info.skipped.push_back(r.name + " (" + std::string(kind_name(r.kind)) + ": this build cannot save that kind)");
    }
  } else {
    for (const auto& want : opts.structures) {
      auto r = seg.find(want);
      if (!r) fail(ErrorCode::kNotFound, "no structure '" + want + "' in segment '" + seg.name() + "': check 'shmtool list'");
      if (!kind_row(r->kind))
        fail(ErrorCode::kInvalidArgument, "'" + want + "' is a " + std::string(kind_name(r->kind)) +
                                              ", which this build cannot save: leave it out of --structures");
      chosen.push_back(*r);
    }
  }
  SegmentStats st = seg.stats();
  Out o;
  o.bytes(kFileMagic, 8);
  o.u32(kSnapshotFormatVersion);
  o.u32(kByteOrderMark);
  o.u64(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count()));
  o.u32(static_cast<uint32_t>(chosen.size()));
  o.u32(static_cast<uint32_t>(seg.name().size()));
  o.u64(st.max_size);
  o.u32(st.directory_capacity);
  o.u32(0);
  o.u64(st.size);
  o.u64(internal::hash_bytes(o.b.data(), 56, 0));
  o.bytes(seg.name().data(), seg.name().size());
  for (const auto& r : chosen) {
    std::string data;
    {
      // One call in flight for the copy (docs/CONCURRENCY.md "Reader announcements"): a table
      // freed under it stays quarantined until the copy is taken and checked.
      const ReadGuard in_call(seg);
      data = kind_row(r.kind)->save(seg, r);
      if (!seg.region_live(r.slot, r.generation))
        fail(ErrorCode::kDropped, "'" + r.name + "' was dropped during the save: save again");
    }
    size_t start = o.b.size();
    o.u32(kEntryMagic);
    o.u32(static_cast<uint32_t>(r.kind));
    o.u32(kKindFormat);
    o.u32(static_cast<uint32_t>(r.name.size()));
    o.u64(data.size());
    o.bytes(r.name.data(), r.name.size());
    o.b += data;
    o.u64(internal::hash_bytes(o.b.data() + start, o.b.size() - start, 0));
    info.entries.push_back({r.name, r.kind, data.size()});
  }
  uint64_t file_sum = internal::hash_bytes(o.b.data(), o.b.size(), 0);
  o.bytes(kTrailerMagic, 8);
  o.u32(static_cast<uint32_t>(chosen.size()));
  o.u32(0);
  o.u64(file_sum);

  // Atomic replace: temporary file in the same folder, fsync, rename.
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kIo, "cannot create '" + tmp + "': " + std::strerror(errno) + "; check the folder");
  try {
    write_all(fd, o.b, tmp);
    if (fsync(fd) != 0) fail(ErrorCode::kIo, "cannot fsync '" + tmp + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(ErrorCode::kIo, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(e));
  }
  info.format_version = kSnapshotFormatVersion;
  info.created_unix_ns = get64(reinterpret_cast<const unsigned char*>(o.b.data()) + 16);
  info.source_segment = seg.name();
  info.segment_size = st.size;
  info.segment_max_size = st.max_size;
  info.directory_capacity = st.directory_capacity;
  info.file_bytes = o.b.size();
  return info;
}

SnapshotInfo read_snapshot_info(const std::string& path) {
  Mapped m;
  map_file(path, m);
  return parse(path, static_cast<const unsigned char*>(m.p), m.n).info;
}

SnapshotInfo restore(const std::string& path, std::string_view segment_name, const RestoreOptions& opts) {
  Mapped m;
  map_file(path, m);
  Parsed parsed = parse(path, static_cast<const unsigned char*>(m.p), m.n);  // the whole file, before anything changes
  std::vector<const Parsed::Entry*> chosen;
  for (const auto& e : parsed.entries)
    if (opts.structures.empty() || std::find(opts.structures.begin(), opts.structures.end(), e.name) != opts.structures.end())
      chosen.push_back(&e);
  for (const auto& want : opts.structures) {
    bool found = false;
    for (const auto* e : chosen) found = found || e->name == want;
    if (!found) fail(ErrorCode::kNotFound, "save file '" + path + "' holds no structure '" + want + "'");
  }
  auto restore_one = [&](Segment& seg, const Parsed::Entry& e) {
    In in{e.data, e.len, "save file '" + path + "' entry '" + e.name + "'"};
    const KindRow* row = kind_row(e.kind);  // parse() refused kinds without a row
    row->restore(seg, e.name, in);
    try {  // open() validates what was copied, as it does any segment bytes
      row->open(seg, e.name);
    } catch (const Error& err) {
      fail(ErrorCode::kBadInput, in.what + " does not validate: " + err.what());
    }
  };
  SnapshotInfo info = parsed.info;
  if (opts.into_existing) {
    OpenOptions oo;
    oo.file = opts.create.file;
    Segment seg = Segment::open(segment_name, oo);
    for (const auto* e : chosen)
      if (seg.find(e->name))
        fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' already has a structure '" + e->name +
                                     "': drop it first, or restore the others with --structures");
    std::vector<std::string> made;
    try {
      for (const auto* e : chosen) {
        made.push_back(e->name);
        restore_one(seg, *e);
      }
    } catch (...) {
      for (const auto& n : made) {  // all or nothing
        auto r = seg.find(n);
        if (!r) continue;
        try {
          const KindRow* row = kind_row(r->kind);  // each kind's drop frees its extents too
          row ? (void)row->drop(seg, n) : (void)seg.drop(n);
        } catch (const Error&) {
          // keep the first error; check() reports what is left
        }
      }
      throw;
    }
    return info;
  }
  // A new segment: built under a temporary name, renamed into place when complete.
  CreateOptions co = opts.create;
  const CreateOptions defaults;
  uint64_t need = 0;
  for (const auto* e : chosen) need += e->len + 4096;
  if (co.size == defaults.size) co.size = std::max<uint64_t>(parsed.info.segment_size, need + (16ull << 20));
  if (co.max_size == defaults.max_size && parsed.info.segment_max_size) co.max_size = parsed.info.segment_max_size;
  if (co.max_size < co.size) co.max_size = co.size;
  if (co.directory_capacity == defaults.directory_capacity && parsed.info.directory_capacity)
    co.directory_capacity = parsed.info.directory_capacity;
  const std::string final_path = co.file.empty() ? "/dev/shm/" + std::string(segment_name) : co.file;
  if (::access(final_path.c_str(), F_OK) == 0)
    fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' exists (" + final_path +
                                 "): remove it first, or add to it with --into");
  const std::string tmp_name = std::string(segment_name) + ".restoring-" + std::to_string(getpid());
  CreateOptions tco = co;
  if (!co.file.empty()) tco.file = co.file + ".restoring-" + std::to_string(getpid());
  const std::string tmp_path = tco.file.empty() ? "/dev/shm/" + tmp_name : tco.file;
  OpenOptions too;
  too.file = tco.file;
  try {
    Segment seg = Segment::create(tmp_name, tco);
    for (const auto* e : chosen) restore_one(seg, *e);
  } catch (...) {
    Segment::remove(tmp_name, too);
    throw;
  }
  // No-replace rename: a segment created meanwhile under the final name is never overwritten.
  if (::renameat2(AT_FDCWD, tmp_path.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    int e = errno;
    Segment::remove(tmp_name, too);
    if (e == EEXIST)
      fail(ErrorCode::kExists, "segment '" + std::string(segment_name) + "' was created during the restore: nothing restored");
    fail(ErrorCode::kIo, "cannot rename '" + tmp_path + "' to '" + final_path + "': " + std::strerror(e));
  }
  internal::move_lock_file(tmp_path, final_path);  // its lock file goes with it (docs/SECURITY.md)
  return info;
}

}  // namespace shmfilter
