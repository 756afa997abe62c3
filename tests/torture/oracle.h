// tests/torture/oracle.h: the expected-state oracle of shmfilter_torture,
// kept OUTSIDE the segment (RocksDB's crash-test expected state, one file per
// worker id).
//
// Protocol. Before an operation a worker appends a PENDING record, after the
// operation returned an ACK record carrying its outcome; each record is one
// write() of 32 bytes with a check word, so a record cut short by SIGKILL is a
// torn tail that load() drops. A pending record never followed by its ack is an
// operation that may or may not have happened: the key's state becomes
// kUnknown (either answer is accepted) until a later acknowledged operation on
// the same key settles it.
//
// Per-key ownership. Every key index belongs to exactly one worker id for the
// whole run (a restarted worker reuses its id and its file), so the per-key
// history in that one file is the total order of every operation ever made on
// the key, and the expected state is exact.
//
// The model. Replaying a file gives a WorkerModel: per target, per key index, a
// KeyState; the replay also checks each acknowledged outcome against the state
// before it (an erase that found nothing where the oracle says the key was
// present is a LOST key). After each round the parent folds the log into a
// model snapshot (w<id>.model) and truncates the log, so restarts stay cheap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torture {

// What an operation touched. Values are stored in the oracle files.
enum class Target : uint8_t {
  kBloom = 1,         // fixed-size Bloom filter: add / contains
  kBloomScaling = 2,  // scaling Bloom filter (adds layers under the segment lock)
  kCuckoo = 3,        // insert_unique / erase / contains
  kExactSet = 4,      // insert / erase / contains (exact)
  kRoaring = 5,       // add / remove / contains (exact), compactions
  kHll = 6,           // add (verified as a distinct count)
  kScratch = 7,       // control plane: create / drop of a scratch structure
  kResize = 8,        // control plane: Segment::resize growth
  kWindow = 9,        // deletable Window: mark_if_unseen / forget / seen over buckets that rotate
  kWindowStamped = 10,  // the same over the stamped variant (one shared table for every bucket)
};
inline constexpr int kTargetCount = 11;  // indices 0..10 (0 unused)
const char* target_name(Target t) noexcept;

enum class Op : uint8_t { kAdd = 1, kErase = 2, kContains = 3, kCreate = 4, kDrop = 5, kGrow = 6 };

// What the acknowledged call answered, in library-neutral terms.
enum class Outcome : uint8_t {
  kNone = 0,       // (pending records)
  kChanged = 1,    // inserted / erased / created / dropped
  kUnchanged = 2,  // already present / nothing to erase / name exists / name absent
  kRejected = 3,   // full, no space, busy: nothing was done
  kDone = 4,       // applied, the API does not say whether it changed anything (Roaring)
  kYes = 5,        // contains: present; resize: the size is at least what was asked
  kNo = 6,         // contains: absent; resize: the size is below what was asked
};

enum KeyState : uint8_t { kAbsent = 0, kPresent = 1, kUnknown = 2 };

struct Record {
  uint64_t seq = 0;   // per worker id, strictly increasing across restarts; pending and ack share it
  uint64_t key = 0;   // key index inside the worker's domain (scratch: the scratch number; resize: bytes)
  uint32_t aux = 0;   // scratch: the Kind created
  uint8_t phase = 0;  // 1 pending, 2 ack
  uint8_t target = 0;
  uint8_t op = 0;
  uint8_t outcome = 0;
  uint32_t incarnation = 0;  // which start of this worker id wrote it (diagnostics)
  uint32_t check = 0;        // checksum of the fields above: torn or foreign bytes fail it
};
static_assert(sizeof(Record) == 32, "oracle records are 32 bytes: one write() each, never crossing a page");
inline constexpr uint8_t kPending = 1, kAck = 2;

// Problems the oracle found. lost and resurrected must stay 0.
struct Anomalies {
  uint64_t lost = 0;          // acknowledged insert missing (false negative), or an erase found nothing
  uint64_t resurrected = 0;   // acknowledged erase undone (exact structures)
  uint64_t inconsistent = 0;  // an outcome impossible under the oracle (double insert, torn log, ...)
  std::vector<std::string> samples;  // first few, for the report
  void note(uint64_t& counter, const std::string& what);
  void merge(const Anomalies& o);
  uint64_t total() const { return lost + resurrected + inconsistent; }
};

struct WorkerModel {
  uint64_t next_seq = 1;
  std::vector<uint8_t> keys[kTargetCount];  // per target: KeyState by key index
  std::vector<uint32_t> scratch_kind;       // by scratch number: the Kind created
  uint64_t acked = 0;                       // acknowledged operations replayed (all time)
  uint64_t unacked = 0;                     // pending records never acknowledged (killed mid-operation)
  uint64_t fp_matches = 0;                  // cuckoo insert_unique answered "exists" for an absent key

  KeyState state(Target t, uint64_t key) const;
  void set(Target t, uint64_t key, KeyState s);
};

// Replays records into a model, checking every acknowledged outcome.
class Replayer {
 public:
  Replayer(WorkerModel& m, Anomalies& a, int wid) : m_(m), a_(a), wid_(wid) {}
  void feed(const Record& r);
  void finish();  // a trailing pending record: settled as "unknown"

 private:
  void apply_ack(const Record& r);
  void settle_unacked(const Record& r);
  WorkerModel& m_;
  Anomalies& a_;
  int wid_;
  bool have_pending_ = false;
  Record pending_{};
};

// One worker id's oracle files in `dir`: w<id>.log (append-only records) and
// w<id>.model (snapshot folded by the parent between rounds).
class Oracle {
 public:
  Oracle(std::string dir, int wid) : dir_(std::move(dir)), wid_(wid) {}
  ~Oracle();
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;

  // Snapshot + log, replayed; a torn tail is cut off the log (the caller owns it now).
  WorkerModel load(Anomalies& anomalies, bool truncate_torn);
  // Worker side: opens the log for appending (after load).
  void open_for_append(uint32_t incarnation);
  // Appends one record (one write()). Aborts the worker if the file system fails.
  void append(Record r);
  // Parent side, workers stopped: writes the snapshot of `m` and empties the log.
  void checkpoint(const WorkerModel& m);
  void remove_files();

  std::string log_path() const;
  std::string model_path() const;

 private:
  std::string dir_;
  int wid_;
  int fd_ = -1;
  uint32_t incarnation_ = 0;
};

uint32_t record_check(const Record& r) noexcept;

}  // namespace torture
