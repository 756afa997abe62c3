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
#include "base/kill_point.h"
#include "base/safe_file.h"
#include "segment/backing_file.h"
#include "segment/segment_impl.h"
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
  int fd = internal::open_regular_file(path, "save file");  // a FIFO is refused, never waited on
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail(ErrorCode::kIo, "cannot stat '" + path + "': " + std::strerror(errno));
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
    if (name.find('\0') != std::string::npos) fail(ErrorCode::kBadInput, in.what + " has a name with a NUL byte: the file is damaged");
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
  std::vector<std::string_view> names;
  for (const auto& e : out.entries) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  if (auto d = std::adjacent_find(names.begin(), names.end()); d != names.end())
    fail(ErrorCode::kBadInput, file + " holds two structures named '" + std::string(*d) + "': the file is damaged");
  return out;
}

}  // namespace

SnapshotInfo save(Segment& seg, const std::string& path, const SaveOptions& opts) {
  // A consistent copy takes each Cuckoo/ExactSet/window table's writer lock and pins Roaring snapshots: writes
  // a PROT_READ mapping cannot make (and a read-only attachment has no owner token to lock with).
  if (seg.read_only())
    throw Error(ErrorCode::kReadOnly, "segment '" + seg.name() + "': save needs a read-write attachment (the copy "
                                      "takes each structure's writer lock), and the segment was opened read-only: "
                                      "run the save as a user who may write the segment");
  if (seg.owner_token() == 0)  // as every writer of lock words: the parent's token is not ours (kForked)
    throw Error(ErrorCode::kForked, "segment '" + seg.name() + "': save through a Segment inherited across fork(): "
                                    "the copy takes writer locks in the name of this attachment, which belongs to "
                                    "the parent; call Segment::open(\"" + seg.name() + "\") in this process");
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

  // Atomic replace: an O_EXCL|O_NOFOLLOW temporary in the same folder with the segment's mode
  // (and owner, as root), fsync, rename, fsync of the folder (lib/base/safe_file.h).
  internal::write_file_atomically(path, o.b, internal::segment_file_mode(seg));
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

namespace {

internal::snapshot::RestoreHook g_restore_hook = nullptr;
void* g_restore_hook_ctx = nullptr;

// An error about the temporary segment names the target instead (the user never sees the temporary).
[[noreturn]] void rethrow_naming(const Error& e, const std::string& tmp, const std::string& target) {
  std::string m = e.what();
  for (size_t at = m.find(tmp); at != std::string::npos; at = m.find(tmp, at + target.size())) m.replace(at, tmp.size(), target);
  throw Error(e.code(), m);
}

struct NameSlack {  // the temporary's name may pass the segment-name limit by its suffix (lib/segment/mapping.cpp)
  NameSlack() { internal::t_segment_name_slack = 32; }
  ~NameSlack() { internal::t_segment_name_slack = 0; }
};

}  // namespace

namespace internal::snapshot {
void set_restore_hook(RestoreHook fn, void* ctx) noexcept {
  g_restore_hook = fn;
  g_restore_hook_ctx = ctx;
}
}  // namespace internal::snapshot

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
  const std::string target(segment_name);
  auto restore_one = [&](Segment& seg, const Parsed::Entry& e) {
    In in{e.data, e.len, "save file '" + path + "' entry '" + e.name + "'"};
    const KindRow* row = kind_row(e.kind);  // parse() refused kinds without a row
    try {
      row->restore(seg, e.name, in);
    } catch (const Error& err) {
      // A value from the file that the library refuses as an argument is bad data in the file (exit 1, not 2).
      if (err.code() == ErrorCode::kInvalidArgument || err.code() == ErrorCode::kNameTooLong)
        fail(ErrorCode::kBadInput, in.what + " is not valid: " + err.what());
      throw;
    }
    try {  // open() validates what was copied, as it does any segment bytes
      row->open(seg, e.name);
    } catch (const Error& err) {
      fail(ErrorCode::kBadInput, in.what + " does not validate: " + err.what());
    }
  };
  SnapshotInfo info = parsed.info;
  if (opts.into_existing) {
    // All or nothing, also under SIGKILL: every structure is created STAGED (a directory entry
    // visible only to this attachment, tagged with its owner token), then one transaction
    // publishes them all (one commit store). A failure removes what this restore staged, by
    // identity (slot + generation); staged entries of a restorer that died are removed by the
    // next restore (below) or check --repair. docs/save-restore.md, "restore --into".
    OpenOptions oo;
    oo.file = opts.create.file;
    Segment seg = Segment::open(segment_name, oo);
    internal::SegmentImpl* im = seg.impl();
    const uint64_t me = seg.owner_token();
    im->drop_staged(seg, 0);  // leftovers of restores that were killed
    for (const auto* e : chosen)
      if (seg.find(e->name))
        fail(ErrorCode::kExists, "segment '" + target + "' already has a structure '" + e->name +
                                     "': drop it first, or restore the others with --structures");
    struct Staging {
      internal::SegmentImpl* im;
      ~Staging() { im->staging = 0; }
    } staging{im};
    try {
      im->staging = me;
      size_t k = 0;
      for (const auto* e : chosen) {
        restore_one(seg, *e);
        SHMF_KILL_POINT("restore.into.after_entry");
        if (g_restore_hook) g_restore_hook(k, g_restore_hook_ctx);
        ++k;
      }
      SHMF_KILL_POINT("restore.into.before_publish");
      im->staging = 0;
      im->publish_staged(seg, me, target);
      SHMF_KILL_POINT("restore.into.after_publish");
    } catch (...) {
      im->staging = 0;
      try {
        im->drop_staged(seg, me);  // only what this restore staged; never a name another process made
      } catch (const Error&) {
        // keep the first error; what is left is a dead restorer's staging for the next restore or check --repair
      }
      throw;
    }
    return info;
  }
  // A new segment: built under a temporary name, renamed into place when complete. Its sizes
  // come from the file only as far as its content justifies (or opts.size_limit allows).
  CreateOptions co = opts.create;
  const CreateOptions defaults;
  uint64_t need = 0;
  for (const auto* e : chosen) need += e->len + 4096;
  const uint64_t backing_cap = opts.size_limit ? std::max<uint64_t>(opts.size_limit, need + (16ull << 20)) : need * 2 + (64ull << 20);
  const uint64_t reserve_cap = std::max<uint64_t>(defaults.max_size, opts.size_limit);
  if (co.size == defaults.size) co.size = std::max<uint64_t>(need + (16ull << 20), std::min(parsed.info.segment_size, backing_cap));
  if (co.max_size == defaults.max_size && parsed.info.segment_max_size)
    co.max_size = std::min(parsed.info.segment_max_size, reserve_cap);
  if (co.max_size < co.size) co.max_size = co.size;
  if (co.directory_capacity == defaults.directory_capacity && parsed.info.directory_capacity) {
    uint64_t cap = parsed.info.directory_capacity;
    if (cap < internal::kMinDirectoryCapacity || cap > internal::kMaxDirectoryCapacity || (cap & (cap - 1)) != 0)
      fail(ErrorCode::kBadInput, "save file '" + path + "' records a directory capacity of " + std::to_string(cap) +
                                     " (a power of two in 16..4194304 is written by save): the file is damaged");  // the directory costs 128 bytes an entry: at most half the backing
    while (cap > defaults.directory_capacity && cap > 2 * chosen.size() && cap * 128 > backing_cap / 2) cap /= 2;
    co.directory_capacity = static_cast<uint32_t>(cap);
  }
  const std::string final_path = co.file.empty() ? "/dev/shm/" + target : co.file;
  (void)internal::restoring_leftovers(final_path, true);  // temporaries of restores that were killed
  if (::access(final_path.c_str(), F_OK) == 0)
    fail(ErrorCode::kExists, "segment '" + target + "' exists (" + final_path +
                                 "): remove it first, or add to it with --into");
  const std::string tmp_name = target + ".restoring-" + std::to_string(getpid());
  CreateOptions tco = co;
  if (!co.file.empty()) tco.file = co.file + ".restoring-" + std::to_string(getpid());
  const std::string tmp_path = tco.file.empty() ? "/dev/shm/" + tmp_name : tco.file;
  OpenOptions too;
  too.file = tco.file;
  NameSlack slack;
  try {
    Segment seg = Segment::create(tmp_name, tco);
    for (const auto* e : chosen) restore_one(seg, *e);
    SHMF_KILL_POINT("restore.new.before_rename");
  } catch (const Error& e) {
    Segment::remove(tmp_name, too);
    rethrow_naming(e, tmp_name, target);
  } catch (...) {
    Segment::remove(tmp_name, too);
    throw;
  }
  // No-replace rename: a segment created meanwhile under the final name is never overwritten.
  if (::renameat2(AT_FDCWD, tmp_path.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
    int e = errno;
    Segment::remove(tmp_name, too);
    if (e == EEXIST)
      fail(ErrorCode::kExists, "segment '" + target + "' was created during the restore: nothing restored");
    fail(ErrorCode::kIo, "cannot rename '" + tmp_path + "' to '" + final_path + "': " + std::strerror(e));
  }
  internal::move_lock_file(tmp_path, final_path);  // its lock file goes with it (docs/SECURITY.md)
  return info;
}

}  // namespace shmfilter
