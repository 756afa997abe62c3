// tests/torture/oracle.cpp: see oracle.h.
#include "oracle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace torture {

const char* target_name(Target t) noexcept {
  switch (t) {
    case Target::kBloom: return "bloom";
    case Target::kBloomScaling: return "bloom-scaling";
    case Target::kCuckoo: return "cuckoo";
    case Target::kExactSet: return "exact-set";
    case Target::kRoaring: return "roaring";
    case Target::kHll: return "hll";
    case Target::kScratch: return "scratch";
    case Target::kResize: return "resize";
    case Target::kWindow: return "window";
    case Target::kWindowStamped: return "window-stamped";
  }
  return "?";
}

uint32_t record_check(const Record& r) noexcept {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mixin = [&](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  };
  mixin(r.seq);
  mixin(r.key);
  mixin(r.aux);
  mixin(uint64_t{r.phase} | uint64_t{r.target} << 8 | uint64_t{r.op} << 16 | uint64_t{r.outcome} << 24);
  mixin(r.incarnation);
  return static_cast<uint32_t>(h ^ (h >> 32)) | 1u;  // never 0: a zero-filled tail fails it
}

void Anomalies::note(uint64_t& counter, const std::string& what) {
  ++counter;
  if (samples.size() < 20) samples.push_back(what);
}

void Anomalies::merge(const Anomalies& o) {
  lost += o.lost;
  resurrected += o.resurrected;
  inconsistent += o.inconsistent;
  for (const auto& s : o.samples)
    if (samples.size() < 20) samples.push_back(s);
}

KeyState WorkerModel::state(Target t, uint64_t key) const {
  const auto& v = keys[static_cast<int>(t)];
  return key < v.size() ? static_cast<KeyState>(v[key]) : kAbsent;
}

void WorkerModel::set(Target t, uint64_t key, KeyState s) {
  auto& v = keys[static_cast<int>(t)];
  if (key >= v.size()) v.resize(key + 1, kAbsent);
  v[key] = s;
}

// ---- replay ------------------------------------------------------------------

namespace {

enum class Semantics { kFilterAdd, kExact, kCuckoo, kScratch, kResize };

Semantics semantics_of(Target t) {
  switch (t) {
    case Target::kBloom:
    case Target::kBloomScaling:
    case Target::kHll: return Semantics::kFilterAdd;
    case Target::kExactSet:
    case Target::kRoaring: return Semantics::kExact;
    case Target::kCuckoo:
    case Target::kWindow:
    case Target::kWindowStamped: return Semantics::kCuckoo;
    case Target::kScratch: return Semantics::kScratch;
    case Target::kResize: return Semantics::kResize;
  }
  return Semantics::kResize;
}

const char* state_name(KeyState s) { return s == kPresent ? "present" : s == kAbsent ? "absent" : "unknown"; }

}  // namespace

void Replayer::feed(const Record& r) {
  if (r.seq + 1 > m_.next_seq) m_.next_seq = r.seq + 1;
  if (r.phase == kPending) {
    if (have_pending_) settle_unacked(pending_);
    pending_ = r;
    have_pending_ = true;
    return;
  }
  if (!have_pending_ || pending_.seq != r.seq || pending_.key != r.key || pending_.target != r.target) {
    a_.note(a_.inconsistent, "worker " + std::to_string(wid_) + ": ack seq " + std::to_string(r.seq) +
                                 " without its pending record (oracle log damaged)");
    have_pending_ = false;
    return;
  }
  have_pending_ = false;
  ++m_.acked;
  apply_ack(r);
}

void Replayer::finish() {
  if (have_pending_) settle_unacked(pending_);
  have_pending_ = false;
}

// An operation that may or may not have happened.
void Replayer::settle_unacked(const Record& r) {
  ++m_.unacked;
  const Target t = static_cast<Target>(r.target);
  const Op op = static_cast<Op>(r.op);
  if (op == Op::kContains || op == Op::kGrow) return;
  const KeyState before = m_.state(t, r.key);
  if (op == Op::kAdd || op == Op::kCreate) {
    if (before != kPresent) m_.set(t, r.key, kUnknown);  // adds never remove: present stays present
  } else if (op == Op::kErase || op == Op::kDrop) {
    if (before != kAbsent) m_.set(t, r.key, kUnknown);  // erases never add: absent stays absent
  }
}

void Replayer::apply_ack(const Record& r) {
  const Target t = static_cast<Target>(r.target);
  const Op op = static_cast<Op>(r.op);
  const Outcome o = static_cast<Outcome>(r.outcome);
  const KeyState before = m_.state(t, r.key);
  auto where = [&] {
    return std::string(target_name(t)) + " worker " + std::to_string(wid_) + " key " + std::to_string(r.key) +
           " seq " + std::to_string(r.seq) + " (was " + state_name(before) + ")";
  };
  if (o == Outcome::kRejected) return;  // full / no space: nothing done, the state stands

  switch (semantics_of(t)) {
    case Semantics::kFilterAdd:
      if (op == Op::kAdd) {
        m_.set(t, r.key, kPresent);
      } else if (op == Op::kContains && before == kPresent && o == Outcome::kNo) {
        a_.note(a_.lost, "LOST: false negative on read: " + where());
      }
      return;
    case Semantics::kExact:
      if (op == Op::kAdd) {
        if (o == Outcome::kChanged && before == kPresent) a_.note(a_.inconsistent, "inserted twice: " + where());
        if (o == Outcome::kUnchanged && before == kAbsent) a_.note(a_.resurrected, "insert found a phantom: " + where());
        m_.set(t, r.key, kPresent);
      } else if (op == Op::kErase) {
        if (o == Outcome::kChanged && before == kAbsent) a_.note(a_.resurrected, "erase found an erased key: " + where());
        if (o == Outcome::kUnchanged && before == kPresent) a_.note(a_.lost, "LOST: erase found nothing: " + where());
        m_.set(t, r.key, kAbsent);
      } else if (op == Op::kContains) {
        if (o == Outcome::kNo && before == kPresent) a_.note(a_.lost, "LOST: false negative on read: " + where());
        if (o == Outcome::kYes && before == kAbsent) a_.note(a_.resurrected, "erased key read back: " + where());
      }
      return;
    case Semantics::kCuckoo:
      if (op == Op::kAdd) {
        if (o == Outcome::kChanged) {
          if (before == kPresent) a_.note(a_.inconsistent, "insert_unique stored a present key twice: " + where());
          m_.set(t, r.key, kPresent);
        } else if (o == Outcome::kUnchanged && before != kPresent) {
          if (before == kAbsent) ++m_.fp_matches;  // a fingerprint match with another key: ours is not stored
          m_.set(t, r.key, kUnknown);
        }
      } else if (op == Op::kErase) {
        if (o == Outcome::kUnchanged && before == kPresent) a_.note(a_.lost, "LOST: erase found nothing: " + where());
        m_.set(t, r.key, kAbsent);
      } else if (op == Op::kContains && o == Outcome::kNo && before == kPresent) {
        a_.note(a_.lost, "LOST: false negative on read: " + where());
      }
      return;
    case Semantics::kScratch:
      if (op == Op::kCreate) {
        if (o == Outcome::kChanged && before == kPresent) a_.note(a_.inconsistent, "created twice: " + where());
        if (o == Outcome::kUnchanged && before == kAbsent) a_.note(a_.resurrected, "dropped name exists: " + where());
        if (r.key >= m_.scratch_kind.size()) m_.scratch_kind.resize(r.key + 1, 0);
        if (o == Outcome::kChanged) m_.scratch_kind[r.key] = r.aux;
        m_.set(t, r.key, o == Outcome::kChanged ? kPresent : kUnknown);
      } else if (op == Op::kDrop) {
        if (o == Outcome::kChanged && before == kAbsent) a_.note(a_.resurrected, "dropped a dropped name: " + where());
        if (o == Outcome::kUnchanged && before == kPresent) a_.note(a_.lost, "LOST: created structure gone: " + where());
        m_.set(t, r.key, kAbsent);
      }
      return;
    case Semantics::kResize:
      if (o == Outcome::kNo) a_.note(a_.inconsistent, "resize returned but the size is smaller: " + where());
      return;
  }
}

// ---- files -------------------------------------------------------------------

namespace {

[[noreturn]] void die_io(const std::string& what) {
  std::fprintf(stderr, "torture: %s: %s\n", what.c_str(), std::strerror(errno));
  std::_Exit(96);
}

std::string slurp(const std::string& path) {
  std::string s;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return s;
}

void write_all(int fd, const void* p, size_t n, const std::string& what) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die_io(what);
    c += w;
    n -= static_cast<size_t>(w);
  }
}

// Snapshot format: "TMOD" v1, then the fields, each vector as (u64 size, bytes).
constexpr uint32_t kModelMagic = 0x444f4d54;

template <class T>
void put(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
bool get(const std::string& s, size_t& off, T& v) {
  if (off + sizeof v > s.size()) return false;
  std::memcpy(&v, s.data() + off, sizeof v);
  off += sizeof v;
  return true;
}

}  // namespace

Oracle::~Oracle() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Oracle::log_path() const { return dir_ + "/w" + std::to_string(wid_) + ".log"; }
std::string Oracle::model_path() const { return dir_ + "/w" + std::to_string(wid_) + ".model"; }

WorkerModel Oracle::load(Anomalies& anomalies, bool truncate_torn) {
  WorkerModel m;
  const std::string snap = slurp(model_path());
  if (!snap.empty()) {
    size_t off = 0;
    uint32_t magic = 0;
    bool ok = get(snap, off, magic) && magic == kModelMagic && get(snap, off, m.next_seq) && get(snap, off, m.acked) &&
              get(snap, off, m.unacked) && get(snap, off, m.fp_matches);
    for (int t = 0; ok && t < kTargetCount; ++t) {
      uint64_t n = 0;
      ok = get(snap, off, n) && off + n <= snap.size();
      if (ok) m.keys[t].assign(snap.data() + off, snap.data() + off + n), off += n;
    }
    uint64_t n = 0;
    ok = ok && get(snap, off, n) && off + n * 4 <= snap.size();
    if (ok) {
      m.scratch_kind.resize(n);
      if (n) std::memcpy(m.scratch_kind.data(), snap.data() + off, n * 4);
    }
    if (!ok) anomalies.note(anomalies.inconsistent, "worker " + std::to_string(wid_) + ": model snapshot unreadable");
  }
  const std::string log = slurp(log_path());
  const size_t whole = log.size() / sizeof(Record) * sizeof(Record);
  if (truncate_torn && whole != log.size()) {
    // A record cut short by SIGKILL: never acknowledged, dropped.
    if (::truncate(log_path().c_str(), static_cast<off_t>(whole)) != 0) die_io("truncate " + log_path());
  }
  Replayer rp(m, anomalies, wid_);
  for (size_t off = 0; off < whole; off += sizeof(Record)) {
    Record r;
    std::memcpy(&r, log.data() + off, sizeof r);
    if (r.check != record_check(r)) {
      anomalies.note(anomalies.inconsistent, "worker " + std::to_string(wid_) + ": oracle record " +
                                                 std::to_string(off / sizeof(Record)) + " fails its check");
      continue;
    }
    rp.feed(r);
  }
  rp.finish();
  return m;
}

void Oracle::open_for_append(uint32_t incarnation) {
  incarnation_ = incarnation;
  fd_ = ::open(log_path().c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) die_io("open " + log_path());
}

void Oracle::append(Record r) {
  r.incarnation = incarnation_;
  r.check = record_check(r);
  write_all(fd_, &r, sizeof r, "append to " + log_path());  // one write(): 32 bytes, page-aligned slots
}

void Oracle::checkpoint(const WorkerModel& m) {
  std::string s;
  put(s, kModelMagic);
  put(s, m.next_seq);
  put(s, m.acked);
  put(s, m.unacked);
  put(s, m.fp_matches);
  for (int t = 0; t < kTargetCount; ++t) {
    put(s, static_cast<uint64_t>(m.keys[t].size()));
    s.append(reinterpret_cast<const char*>(m.keys[t].data()), m.keys[t].size());
  }
  put(s, static_cast<uint64_t>(m.scratch_kind.size()));
  s.append(reinterpret_cast<const char*>(m.scratch_kind.data()), m.scratch_kind.size() * 4);
  const std::string tmp = model_path() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die_io("open " + tmp);
  write_all(fd, s.data(), s.size(), "write " + tmp);
  ::close(fd);
  if (::rename(tmp.c_str(), model_path().c_str()) != 0) die_io("rename " + tmp);
  if (::truncate(log_path().c_str(), 0) != 0 && errno != ENOENT) die_io("truncate " + log_path());
}

void Oracle::remove_files() {
  ::unlink(log_path().c_str());
  ::unlink(model_path().c_str());
}

}  // namespace torture
