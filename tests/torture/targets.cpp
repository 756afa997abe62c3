// tests/torture/targets.cpp: one workload and one verifier per structure kind.
//
// Each section compiles only when its public header exists, so the torture
// grows with the library. A worker process holds one handle per structure (a
// worker is one process, so the handles are file-level statics).
//
// Key ownership: worker `wid` only ever touches key indices of its own domain
// (key64(target, wid, idx), Roaring value wid * keys + idx), so the oracle's
// per-key order is total (oracle.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "torture.h"

#if __has_include("shmfilter/bloom.hpp")
#include "shmfilter/bloom.hpp"
#define TORTURE_BLOOM 1
#endif
#if __has_include("shmfilter/cuckoo.hpp")
#include "shmfilter/cuckoo.hpp"
#include "base/hash.h"                 // hash_key: the filter's key hash, for explain_lost
#include "structures/cuckoo/cuckoo_layout.h"  // bucket derivation, for explain_lost
#define TORTURE_CUCKOO 1
#endif
#if __has_include("shmfilter/exact_set.hpp")
#include "shmfilter/exact_set.hpp"
#define TORTURE_EXACT_SET 1
#endif
#if __has_include("shmfilter/roaring_set.hpp")
#include "shmfilter/roaring_set.hpp"
#define TORTURE_ROARING 1
#endif
#if __has_include("shmfilter/window.hpp")
#include "shmfilter/window.hpp"
#define TORTURE_WINDOW 1
#endif
#if __has_include("shmfilter/hll.hpp")
#include "shmfilter/hll.hpp"
#define TORTURE_HLL 1
#endif

namespace torture {

using shmfilter::Segment;

std::string scratch_name(int wid, uint64_t n) { return "s." + std::to_string(wid) + "." + std::to_string(n); }

namespace {

constexpr size_t kBatch = 4096;

// Probes every key index of `t` in state `want` with `probe` (batched), calling
// on_mismatch(idx) when the answer differs from `expect`.
template <class Probe, class OnMismatch>
uint64_t probe_state(const std::vector<WorkerModel>& models, Target t, KeyState want, bool expect, Probe probe,
                     OnMismatch on_mismatch) {
  uint64_t probed = 0;
  for (size_t wid = 0; wid < models.size(); ++wid) {
    const auto& st = models[wid].keys[static_cast<int>(t)];
    std::vector<uint64_t> idx;
    for (uint64_t i = 0; i < st.size(); ++i) {
      if (st[i] == want) idx.push_back(i);
      if (idx.size() == kBatch || (i + 1 == st.size() && !idx.empty())) {
        std::vector<uint8_t> out(idx.size());
        probe(static_cast<int>(wid), std::span<const uint64_t>(idx), std::span<uint8_t>(out));
        for (size_t j = 0; j < idx.size(); ++j)
          if ((out[j] != 0) != expect) on_mismatch(static_cast<int>(wid), idx[j]);
        probed += idx.size();
        idx.clear();
      }
    }
  }
  return probed;
}

std::string key_text(Target t, int wid, uint64_t idx) {
  return std::string(target_name(t)) + " worker " + std::to_string(wid) + " key " + std::to_string(idx);
}

// Counts key states of target t over all workers.
struct Census {
  uint64_t present = 0, absent = 0, unknown = 0;
};
Census census(const std::vector<WorkerModel>& models, Target t) {
  Census c;
  for (const auto& m : models)
    for (uint8_t s : m.keys[static_cast<int>(t)]) (s == kPresent ? c.present : s == kAbsent ? c.absent : c.unknown)++;
  return c;
}

// A random index in [0, n) whose state is `want`, or n if a few tries find none.
uint64_t pick_in_state(Worker& w, Target t, uint64_t n, KeyState want) {
  for (int i = 0; i < 8 && n > 0; ++i) {
    uint64_t idx = w.rng.below(n);
    if (w.model.state(t, idx) == want) return idx;
  }
  return n;
}

// Verifies an exact structure: present keys answer yes, absent keys answer no,
// the size lies in [present, present + unknown].
template <class Probe>
void verify_exact(const std::vector<WorkerModel>& models, Target t, Probe probe, uint64_t size, Verdict& v) {
  auto& a = v.anomalies;
  v.keys_verified += probe_state(models, t, kPresent, true, probe, [&](int wid, uint64_t idx) {
    a.note(a.lost, "LOST: acknowledged insert absent: " + key_text(t, wid, idx));
  });
  v.keys_verified += probe_state(models, t, kAbsent, false, probe, [&](int wid, uint64_t idx) {
    a.note(a.resurrected, "acknowledged erase present again: " + key_text(t, wid, idx));
  });
  Census c = census(models, t);
  if (size < c.present || size > c.present + c.unknown)
    v.size_issues.push_back(std::string(target_name(t)) + ": size " + std::to_string(size) + " outside [" +
                            std::to_string(c.present) + ", " + std::to_string(c.present + c.unknown) + "]");
}

}  // namespace

// ---- Bloom (fixed and scaling): add / contains; no false negative, ever ---------
#ifdef TORTURE_BLOOM
namespace bloom_target {
std::optional<shmfilter::Bloom> g_fixed, g_scaling;

shmfilter::Bloom& handle(Target t) { return t == Target::kBloom ? *g_fixed : *g_scaling; }
const char* name_of(Target t) { return t == Target::kBloom ? "t.bloom" : "t.bloom-scaling"; }

void create(Segment& seg, const Config&) {
  shmfilter::BloomOptions fixed;
  fixed.capacity = 1u << 20;
  fixed.error = 0.01;
  fixed.seed = 7;
  shmfilter::Bloom::create(seg, name_of(Target::kBloom), fixed);
  shmfilter::BloomOptions scaling;
  scaling.capacity = 2048;  // small: layers are added (bloom.grow.*) during the run
  scaling.error = 0.01;
  scaling.growth = 2;
  scaling.max_layers = 16;
  scaling.seed = 8;
  shmfilter::Bloom::create(seg, name_of(Target::kBloomScaling), scaling);
}
void attach(Worker& w) {
  g_fixed = shmfilter::Bloom::open(w.seg, name_of(Target::kBloom));
  g_scaling = shmfilter::Bloom::open(w.seg, name_of(Target::kBloomScaling));
}
void step_target(Worker& w, Target t) {
  shmfilter::Bloom& b = handle(t);
  const uint64_t n = w.model.keys[static_cast<int>(t)].size();
  if (w.rng.below(100) < 15) {
    uint64_t idx = pick_in_state(w, t, n, kPresent);
    if (idx < n) {
      uint64_t k = key64(t, w.wid(), idx);
      w.logged(t, Op::kContains, idx, 0, [&] { return b.contains(k) ? Outcome::kYes : Outcome::kNo; });
      return;
    }
  }
  uint64_t k = key64(t, w.wid(), n);  // a new index: adds only grow
  w.logged(t, Op::kAdd, n, 0, [&] { return b.add(k) ? Outcome::kChanged : Outcome::kUnchanged; });
}
void step_fixed(Worker& w) { step_target(w, Target::kBloom); }
void step_scaling(Worker& w) { step_target(w, Target::kBloomScaling); }
void verify_target(Segment& seg, Target t, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::Bloom b = shmfilter::Bloom::open(seg, name_of(t));
  auto probe = [&](int wid, std::span<const uint64_t> idx, std::span<uint8_t> out) {
    std::vector<uint64_t> keys(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) keys[i] = key64(t, wid, idx[i]);
    b.contains_many(std::span<const uint64_t>(keys), out);
  };
  auto& a = v.anomalies;
  v.keys_verified += probe_state(models, t, kPresent, true, probe, [&](int wid, uint64_t idx) {
    a.note(a.lost, "LOST: false negative: " + key_text(t, wid, idx));
  });
}
void verify_fixed(Segment& seg, const Config&, const std::vector<WorkerModel>& m, Verdict& v) {
  verify_target(seg, Target::kBloom, m, v);
}
void verify_scaling(Segment& seg, const Config&, const std::vector<WorkerModel>& m, Verdict& v) {
  verify_target(seg, Target::kBloomScaling, m, v);
  v.notes.push_back("bloom-scaling layers: " +
                    std::to_string(shmfilter::Bloom::open(seg, name_of(Target::kBloomScaling)).stats().layers));
}
}  // namespace bloom_target
#endif

// ---- Cuckoo: insert_unique / erase (only keys known present) / contains ---------
#ifdef TORTURE_CUCKOO
namespace cuckoo_target {
std::optional<shmfilter::Cuckoo> g_cuckoo;
constexpr Target kT = Target::kCuckoo;

void create(Segment& seg, const Config& cfg) {
  shmfilter::CuckooOptions o;
  // About half of all key indices end up present; a first sub-filter of 1/16
  // of them fills early, so inserts move items (cuckoo.move.*) and expand
  // (cuckoo.expand.*); 4 sub-filters (1 + 2 + 4 + 8 = 15/16) hold them all.
  o.capacity = std::max<uint64_t>(64, uint64_t(cfg.workers + 1) * cfg.keys / 16);
  // f = 12: layout 3's packed 12-bit lanes, whose stores straddle two words
  // (cuckoo.packed.between_words); f = 16 shares layout 2's one-word path with
  // the window's Cuckoo tables, which the window target drives.
  o.fingerprint_bits = 12;
  o.expansion = 2;
  o.max_subfilters = 4;
  o.seed = 11;
  shmfilter::Cuckoo::create(seg, "t.cuckoo", o);
}
void attach(Worker& w) { g_cuckoo = shmfilter::Cuckoo::open(w.seg, "t.cuckoo"); }
void step(Worker& w) {
  shmfilter::Cuckoo& c = *g_cuckoo;
  uint64_t idx = w.rng.below(w.cfg.keys);
  uint64_t k = key64(kT, w.wid(), idx);
  auto status = [](shmfilter::CuckooStatus s) {
    return s == shmfilter::CuckooStatus::kInserted ? Outcome::kChanged
           : s == shmfilter::CuckooStatus::kExists ? Outcome::kUnchanged
                                                   : Outcome::kRejected;
  };
  switch (w.model.state(kT, idx)) {
    case kAbsent:
    case kUnknown:  // never erased (it may be someone else's fingerprint), only re-inserted
      w.logged(kT, Op::kAdd, idx, 0, [&] { return status(c.insert_unique(k)); });
      return;
    case kPresent:
      if (w.rng.below(100) < 40) {
        w.logged(kT, Op::kContains, idx, 0, [&] { return c.contains(k) ? Outcome::kYes : Outcome::kNo; });
      } else {
        w.logged(kT, Op::kErase, idx, 0, [&] { return c.erase(k) ? Outcome::kChanged : Outcome::kUnchanged; });
      }
      return;
  }
}
// A lost key, explained: its fingerprint and bucket pair in every sub-filter, and
// every other oracle key with the same fingerprint that shares a pair with it in
// some sub-filter (the keys an erase could have taken a copy from). Read-only.
std::string explain_lost(Segment& seg, const std::vector<WorkerModel>& models, int wid, uint64_t idx) {
  namespace ck = shmfilter::internal::cuckoo;
  const shmfilter::RegionInfo r = seg.open_region("t.cuckoo", shmfilter::Kind::kCuckoo);
  const auto* h = reinterpret_cast<const ck::Header*>(seg.base() + r.offset);
  const uint32_t subs = std::min(ck::sub_count_acquire(h), ck::kMaxSubs);
  auto pairs = [&](uint64_t key, uint32_t& fp) {
    const ck::KeyHash kh = ck::split_hash(shmfilter::internal::hash_key(key, h->seed), h->fp_bits);
    fp = kh.fp;
    std::vector<std::pair<uint64_t, uint64_t>> p;
    for (uint32_t j = 0; j < subs; ++j) {
      const ck::Sub s = ck::sub_view(seg.base(), h->subs[j]);
      const uint64_t i1 = ck::primary_bucket(kh.h, s.chunks, s.log2_chunk), i2 = ck::alt_bucket(i1, kh.fp, s.chunk_mask);
      p.emplace_back(std::min(i1, i2), std::max(i1, i2));
    }
    return p;
  };
  uint32_t fp = 0;
  const auto mine = pairs(key64(kT, wid, idx), fp);
  std::string out = " (fp " + std::to_string(fp) + ", pairs";
  for (const auto& p : mine) out += " {" + std::to_string(p.first) + "," + std::to_string(p.second) + "}";
  out += "; same fp sharing a pair:";
  for (size_t w = 0; w < models.size(); ++w) {
    const auto& st = models[w].keys[static_cast<int>(kT)];
    for (uint64_t i = 0; i < st.size(); ++i) {
      if (static_cast<int>(w) == wid && i == idx) continue;
      uint32_t f2 = 0;
      const auto theirs = pairs(key64(kT, static_cast<int>(w), i), f2);
      if (f2 != fp) continue;
      std::string shared;
      for (uint32_t j = 0; j < subs; ++j) shared += mine[j] == theirs[j] ? "=" : "x";
      if (shared.find('=') == std::string::npos) continue;
      out += " worker " + std::to_string(w) + " key " + std::to_string(i) + " (" +
             (st[i] == kPresent ? "present" : st[i] == kAbsent ? "absent" : "unknown") + ", sub-filters " + shared + ")";
    }
  }
  return out + ")";
}
void verify(Segment& seg, const Config&, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::Cuckoo c = shmfilter::Cuckoo::open(seg, "t.cuckoo");
  auto probe = [&](int wid, std::span<const uint64_t> idx, std::span<uint8_t> out) {
    std::vector<uint64_t> keys(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) keys[i] = key64(kT, wid, idx[i]);
    c.contains_many(std::span<const uint64_t>(keys), out);
  };
  auto& a = v.anomalies;
  v.keys_verified += probe_state(models, kT, kPresent, true, probe, [&](int wid, uint64_t idx) {
    a.note(a.lost, "LOST: acknowledged insert absent: " + key_text(kT, wid, idx) + explain_lost(seg, models, wid, idx));
  });
  uint64_t fp = 0;
  const uint64_t absent = probe_state(models, kT, kAbsent, false, probe, [&](int, uint64_t) { ++fp; });
  v.keys_verified += absent;
  v.cuckoo_erased_fp += fp;
  // An erased key may still match another key's fingerprint: at most the
  // filter's FP bound 2b/2^f per sub-filter (f = 12: 0.195%), here with slack
  // 3x + 10 so only a real resurrection trips it.
  shmfilter::CuckooStats st = c.stats();
  const double bound = 3.0 * double(absent) * st.fp_rate_bound + 10;
  if (double(fp) > bound)
    a.note(a.resurrected, "cuckoo: " + std::to_string(fp) + " erased keys answer yes, above the FP bound " +
                              std::to_string(bound));
  Census cs = census(models, kT);
  if (st.size < cs.present || st.size > cs.present + cs.unknown)
    v.size_issues.push_back("cuckoo: size " + std::to_string(st.size) + " outside [" + std::to_string(cs.present) +
                            ", " + std::to_string(cs.present + cs.unknown) + "]");
  v.notes.push_back("cuckoo: size " + std::to_string(st.size) + ", load " + std::to_string(st.load_factor) +
                    ", sub-filters " + std::to_string(st.subfilters) + ", moves " + std::to_string(st.moves) +
                    ", repairs " + std::to_string(st.repairs) + ", erased keys answering yes " + std::to_string(fp));
}
}  // namespace cuckoo_target
#endif

// ---- ExactSet: insert / erase / contains, exact ------------------------------
#ifdef TORTURE_EXACT_SET
namespace exact_target {
std::optional<shmfilter::ExactSet> g_set;
constexpr Target kT = Target::kExactSet;

void create(Segment& seg, const Config& cfg) {
  shmfilter::ExactSetOptions o;
  o.capacity = uint64_t(cfg.workers + 1) * cfg.keys;  // every key index may be present at once
  shmfilter::ExactSet::create(seg, "t.exact", o);
}
void attach(Worker& w) { g_set = shmfilter::ExactSet::open(w.seg, "t.exact"); }
Outcome insert_outcome(shmfilter::InsertResult r) {
  return r == shmfilter::InsertResult::kInserted ? Outcome::kChanged
         : r == shmfilter::InsertResult::kExists ? Outcome::kUnchanged
                                                 : Outcome::kRejected;
}
void step(Worker& w) {
  shmfilter::ExactSet& s = *g_set;
  uint64_t idx = w.rng.below(w.cfg.keys);
  uint64_t k = key64(kT, w.wid(), idx);
  uint64_t dice = w.rng.below(100);
  if (dice < 50)
    w.logged(kT, Op::kAdd, idx, 0, [&] { return insert_outcome(s.insert(k)); });
  else if (dice < 85)
    w.logged(kT, Op::kErase, idx, 0, [&] { return s.erase(k) ? Outcome::kChanged : Outcome::kUnchanged; });
  else
    w.logged(kT, Op::kContains, idx, 0, [&] { return s.contains(k) ? Outcome::kYes : Outcome::kNo; });
}
void verify(Segment& seg, const Config&, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::ExactSet s = shmfilter::ExactSet::open(seg, "t.exact");
  auto probe = [&](int wid, std::span<const uint64_t> idx, std::span<uint8_t> out) {
    std::vector<uint64_t> keys(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) keys[i] = key64(kT, wid, idx[i]);
    s.contains_many(std::span<const uint64_t>(keys), out);
  };
  verify_exact(models, kT, probe, s.size(), v);
}
}  // namespace exact_target
#endif

// ---- Roaring: add / remove / contains, exact; compactions --------------------
#ifdef TORTURE_ROARING
namespace roaring_target {
std::optional<shmfilter::RoaringSet> g_set;
constexpr Target kT = Target::kRoaring;

uint32_t value_of(const Config& cfg, int wid, uint64_t idx) { return uint32_t(uint64_t(wid) * cfg.keys + idx); }
void create(Segment& seg, const Config&) {
  shmfilter::RoaringOptions o;
  o.delta_capacity = 1024;  // small: a compaction every few hundred writes (roaring.compact.*)
  o.compact_at = 0.5;
  shmfilter::RoaringSet::create(seg, "t.roaring", o);
}
void attach(Worker& w) { g_set = shmfilter::RoaringSet::open(w.seg, "t.roaring"); }
Outcome status(shmfilter::RoaringStatus s) {
  return s == shmfilter::RoaringStatus::kOk ? Outcome::kDone : Outcome::kRejected;
}
void step(Worker& w) {
  shmfilter::RoaringSet& s = *g_set;
  uint64_t idx = w.rng.below(w.cfg.keys);
  uint32_t v = value_of(w.cfg, w.wid(), idx);
  uint64_t dice = w.rng.below(1000);
  if (dice < 3) {
    try {
      s.compact();  // explicit compaction now and then (not an oracle operation)
    } catch (const shmfilter::Error&) {
    }
  } else if (dice < 500) {
    w.logged(kT, Op::kAdd, idx, 0, [&] { return status(s.add(v)); });
  } else if (dice < 850) {
    w.logged(kT, Op::kErase, idx, 0, [&] { return status(s.remove(v)); });
  } else {
    w.logged(kT, Op::kContains, idx, 0, [&] { return s.contains(v) ? Outcome::kYes : Outcome::kNo; });
  }
}
void verify(Segment& seg, const Config& cfg, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::RoaringSet s = shmfilter::RoaringSet::open(seg, "t.roaring");
  auto probe = [&](int wid, std::span<const uint64_t> idx, std::span<uint8_t> out) {
    std::vector<uint32_t> vals(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) vals[i] = value_of(cfg, wid, idx[i]);
    s.contains_many(std::span<const uint32_t>(vals), out);
  };
  verify_exact(models, kT, probe, s.cardinality(), v);
  shmfilter::RoaringStats st = s.stats();
  v.notes.push_back("roaring: cardinality " + std::to_string(st.cardinality) + ", compactions " +
                    std::to_string(st.compactions) + ", readers " + std::to_string(st.readers) +
                    ", pending_free " + std::to_string(st.pending_free));
}
}  // namespace roaring_target
#endif

// ---- HLL: add; the count stays within 5 sigma of the oracle's distinct count ----
#ifdef TORTURE_HLL
namespace hll_target {
std::optional<shmfilter::Hll> g_hll;
constexpr Target kT = Target::kHll;

void create(Segment& seg, const Config&) { shmfilter::Hll::create(seg, "t.hll"); }
void attach(Worker& w) { g_hll = shmfilter::Hll::open(w.seg, "t.hll"); }
void step(Worker& w) {
  const uint64_t n = w.model.keys[static_cast<int>(kT)].size();
  uint64_t idx = (n > 0 && w.rng.below(100) < 30) ? w.rng.below(n) : n;  // 30% repeats
  uint64_t k = key64(kT, w.wid(), idx);
  w.logged(kT, Op::kAdd, idx, 0, [&] { return g_hll->add(k) ? Outcome::kChanged : Outcome::kUnchanged; });
  if (w.rng.below(100) < 5) (void)g_hll->count();  // writes the count cache while others add and die
}
void verify(Segment& seg, const Config&, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::Hll h = shmfilter::Hll::open(seg, "t.hll");
  Census c = census(models, kT);
  const uint64_t est = h.count();
  // The count cache never answers for registers it was not computed from:
  // count() (cached or not) equals the estimate recomputed from the registers.
  const uint64_t recomputed = h.stats().estimate;
  if (est != recomputed || h.count() != recomputed)
    v.anomalies.note(v.anomalies.inconsistent, "hll: count() " + std::to_string(est) + " != estimate of the registers " +
                                                   std::to_string(recomputed) + " (stale count cache)");
  // Relative standard error 1.04/sqrt(16384) = 0.81% (Flajolet et al. 2007);
  // 5 sigma plus 3 for tiny counts. Unacknowledged adds may or may not count.
  const double sigma = 1.04 / std::sqrt(16384.0);
  const double lo = double(c.present) * (1 - 5 * sigma) - 3, hi = double(c.present + c.unknown) * (1 + 5 * sigma) + 3;
  if (double(est) < lo || double(est) > hi)
    v.anomalies.note(v.anomalies.inconsistent, "hll: count " + std::to_string(est) + " outside 5 sigma [" +
                                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  v.keys_verified += 1;
  v.notes.push_back("hll: count " + std::to_string(est) + ", oracle distinct " + std::to_string(c.present) + " (+" +
                    std::to_string(c.unknown) + " unacknowledged)");
}
}  // namespace hll_target
#endif

// ---- control plane: scratch structures (create, exercise, drop) and resize -----
namespace scratch_target {
constexpr Target kT = Target::kScratch;

// Builds scratch structure `name` of `kind` and works it so that its
// multi-step paths run (bloom layers, cuckoo expansion, roaring compaction,
// hll merge and clear). Throws Error like any control-plane call.
void create_kind(Worker& w, const std::string& name, shmfilter::Kind kind) {
  const uint64_t scale = 1 + w.rng.below(w.plan.area == "segment" ? 64 : 4);
  switch (kind) {
#ifdef TORTURE_BLOOM
    case shmfilter::Kind::kBloom: {
      shmfilter::BloomOptions o;
      o.capacity = 64 * scale;
      o.growth = 2;
      o.max_layers = 8;
      shmfilter::Bloom::create(w.seg, name, o);
      return;
    }
#endif
#ifdef TORTURE_CUCKOO
    case shmfilter::Kind::kCuckoo: {
      shmfilter::CuckooOptions o;
      o.capacity = 64 * scale;
      o.fingerprint_bits = 12;
      o.expansion = 2;
      o.max_subfilters = 4;
      shmfilter::Cuckoo::create(w.seg, name, o);
      return;
    }
#endif
#ifdef TORTURE_EXACT_SET
    case shmfilter::Kind::kExactSet: {
      shmfilter::ExactSetOptions o;
      o.capacity = 256 * scale;
      shmfilter::ExactSet::create(w.seg, name, o);
      return;
    }
#endif
#ifdef TORTURE_ROARING
    case shmfilter::Kind::kRoaring: {
      shmfilter::RoaringOptions o;
      o.delta_capacity = 64;
      shmfilter::RoaringSet::create(w.seg, name, o);
      return;
    }
#endif
#ifdef TORTURE_HLL
    case shmfilter::Kind::kHll:
      shmfilter::Hll::create(w.seg, name);
      return;
#endif
    default: {  // a blob
      const uint64_t bytes = 4096 * scale;
      w.seg.create_region(name, shmfilter::Kind::kBlob, bytes, {});
      return;
    }
  }
}

void exercise(Worker& w, const std::string& name, shmfilter::Kind kind) {
  (void)name;
  const uint64_t base = w.rng.next();
  switch (kind) {
#ifdef TORTURE_BLOOM
    case shmfilter::Kind::kBloom: {
      auto b = shmfilter::Bloom::open(w.seg, name);
      for (uint64_t i = 0; i < 600; ++i) b.add(base + i);  // past capacity: layers (bloom.grow.*)
      if (w.rng.below(2) == 0) b.clear();                  // bloom.clear.*
      return;
    }
#endif
#ifdef TORTURE_CUCKOO
    case shmfilter::Kind::kCuckoo: {
      auto c = shmfilter::Cuckoo::open(w.seg, name);
      for (uint64_t i = 0; i < 300; ++i) c.add(base + i);  // past capacity: expansion (cuckoo.expand.*)
      for (uint64_t i = 0; i < 100; ++i) c.erase(base + i);
      return;
    }
#endif
#ifdef TORTURE_EXACT_SET
    case shmfilter::Kind::kExactSet: {
      auto s = shmfilter::ExactSet::open(w.seg, name);
      for (uint64_t i = 0; i < 100; ++i) s.insert(base + i);
      for (uint64_t i = 0; i < 50; ++i) s.erase(base + i);
      return;
    }
#endif
#ifdef TORTURE_ROARING
    case shmfilter::Kind::kRoaring: {
      auto r = shmfilter::RoaringSet::open(w.seg, name);
      for (uint32_t i = 0; i < 200; ++i) r.add(static_cast<uint32_t>(base) + i * 7);
      r.compact();
      r.reclaim();
      return;
    }
#endif
#ifdef TORTURE_HLL
    case shmfilter::Kind::kHll: {
      auto h = shmfilter::Hll::open(w.seg, name);
      for (uint64_t i = 0; i < 100; ++i) h.add(base + i);
      shmfilter::Hll main = shmfilter::Hll::open(w.seg, "t.hll");
      h.merge_from(std::span<const shmfilter::Hll>(&main, 1));  // hll.merge.*
      h.clear();                                                // hll.clear.*
      return;
    }
#endif
    default:
      return;
  }
}

bool drop_kind(Segment& seg, const std::string& name, shmfilter::Kind kind) {
  switch (kind) {
#ifdef TORTURE_BLOOM
    case shmfilter::Kind::kBloom: return shmfilter::Bloom::drop(seg, name);
#endif
#ifdef TORTURE_CUCKOO
    case shmfilter::Kind::kCuckoo: return shmfilter::Cuckoo::drop(seg, name);
#endif
#ifdef TORTURE_EXACT_SET
    case shmfilter::Kind::kExactSet: return shmfilter::ExactSet::drop(seg, name);
#endif
#ifdef TORTURE_ROARING
    case shmfilter::Kind::kRoaring: return shmfilter::RoaringSet::drop(seg, name);
#endif
#ifdef TORTURE_HLL
    case shmfilter::Kind::kHll: return shmfilter::Hll::drop(seg, name);
#endif
    default: return seg.drop(name);
  }
}

Outcome control(const std::function<void()>& fn) {
  try {
    fn();
    return Outcome::kChanged;
  } catch (const shmfilter::Error& e) {
    if (e.code() == shmfilter::ErrorCode::kExists) return Outcome::kUnchanged;
    return Outcome::kRejected;  // no space, directory full, busy: nothing was done
  }
}

// Drops scratch number n (its kind from the model, or from the directory when unknown).
void drop_scratch(Worker& w, uint64_t n) {
  const std::string name = scratch_name(w.wid(), n);
  w.logged(kT, Op::kDrop, n, 0, [&] {
    std::optional<shmfilter::RegionInfo> info;
    try {
      info = w.seg.find(name);
    } catch (const shmfilter::Error&) {
    }
    if (!info) return Outcome::kUnchanged;
    bool dropped = false;
    Outcome o = control([&] { dropped = drop_kind(w.seg, name, info->kind); });
    return o == Outcome::kChanged && !dropped ? Outcome::kUnchanged : o;
  });
}

// At start: drop what an earlier incarnation left (present or unknown).
void attach(Worker& w) {
  const auto& st = w.model.keys[static_cast<int>(kT)];
  for (uint64_t n = 0; n < st.size(); ++n)
    if (st[n] != kAbsent) drop_scratch(w, n);
}

void step(Worker& w) {
  const uint64_t n = w.model.keys[static_cast<int>(kT)].size();
  if (n > 0 && w.model.state(kT, n - 1) != kAbsent) {
    drop_scratch(w, n - 1);
    return;
  }
  std::vector<shmfilter::Kind> kinds = scratch_kinds();
  shmfilter::Kind kind = kinds[w.rng.below(kinds.size())];
  if (w.plan.area == "segment" && w.rng.below(2) == 0) kind = shmfilter::Kind::kBlob;
  for (shmfilter::Kind k : kinds)  // a sweep of area X exercises X's scratch kind
    if (!w.plan.area.empty() && (shmfilter::kind_name(k) == w.plan.area ||
                                 (k == shmfilter::Kind::kExactSet && w.plan.area == "exact_set")))
      kind = k;
  const std::string name = scratch_name(w.wid(), n);
  Outcome o = w.logged(kT, Op::kCreate, n, static_cast<uint32_t>(kind),
                       [&] { return control([&] { create_kind(w, name, kind); }); });
  if (o == Outcome::kChanged) {
    try {
      exercise(w, name, kind);
    } catch (const shmfilter::Error&) {  // full / no space while exercising: fine, it is scratch
    }
  }
}

void verify(Segment& seg, const Config&, const std::vector<WorkerModel>& models, Verdict& v) {
  auto& a = v.anomalies;
  for (size_t wid = 0; wid < models.size(); ++wid) {
    const auto& st = models[wid].keys[static_cast<int>(kT)];
    for (uint64_t n = 0; n < st.size(); ++n) {
      if (st[n] == kUnknown) continue;
      auto info = seg.find(scratch_name(static_cast<int>(wid), n));
      ++v.keys_verified;
      if (st[n] == kPresent && !info)
        a.note(a.lost, "LOST: created structure " + scratch_name(static_cast<int>(wid), n) + " is gone");
      if (st[n] == kPresent && info && n < models[wid].scratch_kind.size() &&
          static_cast<uint32_t>(info->kind) != models[wid].scratch_kind[n])
        a.note(a.inconsistent, "structure " + scratch_name(static_cast<int>(wid), n) + " has another kind");
      if (st[n] == kAbsent && info) {
        a.note(a.resurrected, "dropped structure " + scratch_name(static_cast<int>(wid), n) + " exists");
        drop_kind(seg, info->name, info->kind);  // reported once: make the segment match the oracle again
      }
    }
  }
}
}  // namespace scratch_target

namespace resize_target {
constexpr Target kT = Target::kResize;
constexpr uint64_t kStep = 1ull << 20, kCap = 32ull << 20;  // grow to 32 MiB at most

// Creates and removes a second segment (segment.create.*): sweep only.
void scratch_segment(Worker& w) {
  const std::string name = w.cfg.segment + "-x";
  try {
    shmfilter::CreateOptions o;
    o.size = 1 << 20;
    o.max_size = 16 << 20;
    shmfilter::Segment::create(name, o);
  } catch (const shmfilter::Error&) {
  }
  shmfilter::Segment::remove(name);
}

// Grows the segment by resize() (segment.resize.after_grow), allocates a blob
// as large as the segment (the allocator must grow it: segment.grow.*), drops
// it and shrinks the segment back, which first moves the quarantined blob back
// to the free tail (segment.resize.before_truncate). Sweep only: a shrink is
// not an oracle operation, and only the sweep child is attached then.
void grow_by_allocation(Worker& w) {
  const std::string name = "g." + std::to_string(w.wid());
  try {
    w.seg.drop(name);  // left by a killed predecessor
    const uint64_t before = w.seg.size();
    w.seg.resize(before + kStep);  // segment.resize.after_grow
    w.seg.create_region(name, shmfilter::Kind::kBlob, before, {});
    w.seg.drop(name);
    w.seg.quiesce();      // the only attachment: the blob leaves quarantine
    w.seg.resize(before);
  } catch (const shmfilter::Error&) {
  }
}

void step(Worker& w) {
  const uint64_t cur = w.seg.size();
  if (w.plan.area == "segment" && w.rng.below(4) == 0) {
    scratch_segment(w);
    return;
  }
  if (w.plan.area == "segment" && w.rng.below(2) == 0) {
    grow_by_allocation(w);  // its shrink is the sweep's segment.resize.before_truncate
    return;
  }
  if (cur + kStep > kCap) return;
  // resize() sets an absolute size: racing a grower (or an allocation that
  // grew the segment) it may legitimately shrink a free tail back, so the
  // oracle only records that it returned; Segment::check verifies the rest.
  const uint64_t want = cur + kStep;
  w.logged(kT, Op::kGrow, want, 0, [&] {
    try {
      w.seg.resize(want);
    } catch (const shmfilter::Error&) {
      return Outcome::kRejected;
    }
    return Outcome::kDone;
  });
}
}  // namespace resize_target

// ---- Window (deletable variant): mark_if_unseen / forget / seen, buckets rotating --
// The clock is virtual: one bucket (1 s) per 8192 operations of all workers together,
// capped at bucket 62, so buckets rotate (window.rotate.*, window.prepare.* when no
// spare is ready, window.overflow.* on busy buckets) while nothing leaves the
// 64-bucket window and every acknowledged mark must stay visible. A run longer than
// ~500k operations (longer than the CI run: a soak) stops rotating at the cap. Expiry (maintain's retire,
// window.maintain.after_retire) is killed in tests/multiprocess/test_window_multiprocess.cpp.
#ifdef TORTURE_WINDOW
// The same target runs the stamped variant (Target::kWindowStamped, "t.window-stamped"): one
// shared table for every bucket (its writer lock, restamps, lazy reclaim, sub-filters when busy,
// maintain's sweep: window.stamped.*). Its retention is at most 12, so its clock is slower
// (a bucket per 6 x 8192 operations) and capped at bucket 11: nothing leaves its window either.
// Params: the target, its region name, variant, retention, operations per bucket, last bucket.
template <Target kT>
struct WindowParams;
template <>
struct WindowParams<Target::kWindow> {
  static constexpr const char* kName = "t.window";
  static constexpr shmfilter::WindowVariant kVariant = shmfilter::WindowVariant::kCuckoo;
  static constexpr uint32_t kRetention = 64;
  static constexpr uint64_t kOpsPerBucket = 8192;
  static constexpr uint64_t kLastBucket = 62;
};
template <>
struct WindowParams<Target::kWindowStamped> {
  static constexpr const char* kName = "t.window-stamped";
  static constexpr shmfilter::WindowVariant kVariant = shmfilter::WindowVariant::kStamped;
  static constexpr uint32_t kRetention = 12;
  static constexpr uint64_t kOpsPerBucket = 6 * 8192;
  static constexpr uint64_t kLastBucket = 11;
};
template <Target kT>
struct window_target {
using P = WindowParams<kT>;
static inline std::optional<shmfilter::Window> g_window;
static inline SharedState* g_shared = nullptr;

static int64_t virtual_clock(void*) {
  uint64_t ops = 0;
  for (int i = 0; i <= kMaxWorkers; ++i) ops += g_shared->beat[i].ops.load(std::memory_order_relaxed);
  return static_cast<int64_t>(std::min<uint64_t>(ops / P::kOpsPerBucket, P::kLastBucket));
}

static void create(Segment& seg, const Config&) {
  shmfilter::WindowOptions o;
  o.variant = P::kVariant;
  o.expected_per_bucket = 32;  // small (16 cuckoo buckets): busy buckets overflow into a second table
  o.error = 0.05;
  o.bucket_seconds = 1;
  o.retention = P::kRetention;
  o.max_spaces = 4096;  // rows for the workers and the throwaway spaces below
  o.seed = 13;
  shmfilter::Window::create(seg, P::kName, o);
}
static void attach(Worker& w) {
  g_shared = w.shared;
  g_window = shmfilter::Window::open(w.seg, P::kName);
  g_window->set_clock(&virtual_clock, nullptr);
}
static void step(Worker& w) {
  shmfilter::Window& win = *g_window;
  if (w.rng.below(100) == 0) {  // control plane, not keyed: the oracle has nothing to record
    try {
      win.maintain();
    } catch (const shmfilter::Error&) {
    }
    return;
  }
  if (w.rng.below(500) == 0) {  // a pair of a never-seen space (window.space.*); outside the oracle's keys
    win.mark(1000 + w.rng.below(1u << 30), w.rng.next());
    return;
  }
  uint64_t idx = w.rng.below(w.cfg.keys);
  uint64_t k = key64(kT, w.wid(), idx);
  const uint64_t space = static_cast<uint64_t>(w.wid());
  switch (w.model.state(kT, idx)) {
    case kAbsent:
    case kUnknown:
      w.logged(kT, Op::kAdd, idx, 0, [&] {
        auto s = win.mark_if_unseen(space, k, P::kRetention);
        return s == shmfilter::WindowStatus::kNew    ? Outcome::kChanged
               : s == shmfilter::WindowStatus::kSeen ? Outcome::kUnchanged
                                                     : Outcome::kRejected;
      });
      return;
    case kPresent:
      if (w.rng.below(100) < 50) {
        w.logged(kT, Op::kContains, idx, 0, [&] { return win.seen(space, k, P::kRetention) ? Outcome::kYes : Outcome::kNo; });
      } else {
        w.logged(kT, Op::kErase, idx, 0, [&] {
          return win.forget(space, k) == shmfilter::WindowStatus::kRemoved ? Outcome::kChanged : Outcome::kUnchanged;
        });
      }
      return;
  }
}
static void verify(Segment& seg, const Config&, const std::vector<WorkerModel>& models, Verdict& v) {
  shmfilter::Window win = shmfilter::Window::open(seg, P::kName);
  win.set_now(0);  // readers use the newest bucket any worker rotated to
  auto probe = [&](int wid, std::span<const uint64_t> idx, std::span<uint8_t> out) {
    for (size_t i = 0; i < idx.size(); ++i) out[i] = win.seen(static_cast<uint64_t>(wid), key64(kT, wid, idx[i]), P::kRetention);
  };
  auto& a = v.anomalies;
  v.keys_verified += probe_state(models, kT, kPresent, true, probe, [&](int wid, uint64_t idx) {
    a.note(a.lost, "LOST: acknowledged window mark absent: " + key_text(kT, wid, idx));
  });
  uint64_t fp = 0;
  const uint64_t absent = probe_state(models, kT, kAbsent, false, probe, [&](int, uint64_t) { ++fp; });
  v.keys_verified += absent;
  shmfilter::WindowStats st = win.stats();
  const double bound = 3.0 * double(absent) * st.window_fp_bound(P::kRetention) + 10;
  if (double(fp) > bound)
    a.note(a.resurrected, "window: " + std::to_string(fp) + " forgotten pairs answer yes, above the FP bound " +
                              std::to_string(bound));
  uint32_t live = 0, overflowed = 0;
  for (const auto& b : st.buckets) {
    live += b.capacity != 0;
    overflowed += b.overflow;
  }
  v.notes.push_back(std::string(P::kName) + ": bucket " + std::to_string(st.current_bucket) + ", rotations " + std::to_string(st.rotations) +
                    ", inline allocations " + std::to_string(st.inline_allocations) + ", buckets with tables " +
                    std::to_string(live) + ", overflowed " + std::to_string(overflowed) +
                    ", forgotten pairs answering yes " + std::to_string(fp));
}
};  // struct window_target
#endif

std::vector<shmfilter::Kind> scratch_kinds() {
  std::vector<shmfilter::Kind> k;
#ifdef TORTURE_BLOOM
  k.push_back(shmfilter::Kind::kBloom);
#endif
#ifdef TORTURE_CUCKOO
  k.push_back(shmfilter::Kind::kCuckoo);
#endif
#ifdef TORTURE_EXACT_SET
  k.push_back(shmfilter::Kind::kExactSet);
#endif
#ifdef TORTURE_ROARING
  k.push_back(shmfilter::Kind::kRoaring);
#endif
#ifdef TORTURE_HLL
  k.push_back(shmfilter::Kind::kHll);
#endif
  k.push_back(shmfilter::Kind::kBlob);
  return k;
}

const std::vector<TargetDef>& targets() {
  static const std::vector<TargetDef> all = [] {
    std::vector<TargetDef> t;
    auto nothing_create = [](Segment&, const Config&) {};
    auto nothing_attach = [](Worker&) {};
    auto nothing_verify = [](Segment&, const Config&, const std::vector<WorkerModel>&, Verdict&) {};
#ifdef TORTURE_BLOOM
    t.push_back({Target::kBloom, "bloom", 15, bloom_target::create, bloom_target::attach, bloom_target::step_fixed,
                 bloom_target::verify_fixed});
    t.push_back({Target::kBloomScaling, "bloom", 5, nothing_create, nothing_attach, bloom_target::step_scaling,
                 bloom_target::verify_scaling});
#endif
#ifdef TORTURE_CUCKOO
    t.push_back({Target::kCuckoo, "cuckoo", 20, cuckoo_target::create, cuckoo_target::attach, cuckoo_target::step,
                 cuckoo_target::verify});
#endif
#ifdef TORTURE_EXACT_SET
    t.push_back({Target::kExactSet, "exact_set", 20, exact_target::create, exact_target::attach, exact_target::step,
                 exact_target::verify});
#endif
#ifdef TORTURE_ROARING
    t.push_back({Target::kRoaring, "roaring", 20, roaring_target::create, roaring_target::attach,
                 roaring_target::step, roaring_target::verify});
#endif
#ifdef TORTURE_HLL
    t.push_back({Target::kHll, "hll", 10, hll_target::create, hll_target::attach, hll_target::step,
                 hll_target::verify});
#endif
#ifdef TORTURE_WINDOW
    using W = window_target<Target::kWindow>;
    using WS = window_target<Target::kWindowStamped>;
    t.push_back({Target::kWindow, "window", 10, W::create, W::attach, W::step, W::verify});
    t.push_back({Target::kWindowStamped, "window", 10, WS::create, WS::attach, WS::step, WS::verify});
#endif
    t.push_back({Target::kScratch, "segment", 2, nothing_create, scratch_target::attach, scratch_target::step,
                 scratch_target::verify});
    t.push_back({Target::kResize, "segment", 1, nothing_create, nothing_attach, resize_target::step, nothing_verify});
    return t;
  }();
  return all;
}

}  // namespace torture
