// lib/capi/c_api_window.cpp: the C API of the Window (include/shmfilter/shmfilter.h,
// "window" block) over shmfilter::Window. Same shapes as c_api.cpp: guard() turns
// every exception into a negative SHMF_E* code and a thread-local message.
#include <climits>
#include <span>
#include <string_view>
#include <vector>

#include "capi/c_api_internal.h"
#include "shmfilter/window.hpp"

struct shmf_window {
  shmfilter::Window h;
  // The window's retention, read once per handle (it never changes after creation):
  // window_arg() checks every query's W against it without a stats() snapshot per
  // call (a snapshot walks the space table: it made each call cost milliseconds).
  mutable uint32_t retention = 0;
};

using namespace shmfilter;
using namespace shmfilter::capi;

namespace {

int window_arg(const shmf_window* w, uint32_t window, const char* fn) {
  if (!w->h.valid())  // lock-free: the directory slot's generation
    throw Error(ErrorCode::kDropped, std::string(fn) +
                                         ": the structure was dropped by some process: close this handle and open "
                                         "the new structure of that name, if any");
  if (w->retention == 0) w->retention = w->h.stats().retention;  // throws kDropped
  if (window == 0 || window > w->retention)
    throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": window " + std::to_string(window) +
                                                 " is outside [1, " + std::to_string(w->retention) +
                                                 "]: pass how many buckets the query covers (1 = the current one)");
  return 0;
}

int mark_status(WindowStatus s, const char* fn);

// mark_if_under's CAP (1..15) and WINDOW (1..retention), each refused with its own message.
void cap_arg(const shmf_window* w, uint32_t cap, uint32_t window, const char* fn) {
  window_arg(w, window, fn);
  if (cap == 0 || cap > 15)
    throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": cap " + std::to_string(cap) +
                                                 " is outside [1, 15]: pass how many marks a pair may have in the "
                                                 "window (e.g. 3: at most 3 impressions)");
}

// mark_if_under: 1 allowed (counted), 0 capped; a bloom or cuckoo window cannot count.
int under_status(WindowStatus s, const char* fn) {
  if (s == WindowStatus::kUnsupported)
    return fail(SHMF_EINVAL, std::string(fn) +
                                 ": frequency caps need the stamped variant: create the window with variant "
                                 "SHMF_WINDOW_STAMPED (nothing stored)");
  if (s == WindowStatus::kSeen) return fail(SHMF_EINTERNAL, std::string(fn) + ": answered seen (please report it)");
  return mark_status(s, fn);
}

int mark_status(WindowStatus s, const char* fn) {
  switch (s) {
    case WindowStatus::kNew: return 1;
    case WindowStatus::kSeen: return 0;
    case WindowStatus::kCapped: return 0;  // mark_if_under: the pair has its cap of marks
    case WindowStatus::kRemoved: return 1;
    case WindowStatus::kAbsent: return 0;
    case WindowStatus::kFull:
      return fail(SHMF_EFULL, std::string(fn) +
                                  ": the current bucket's cuckoo table and its overflow are full: create the window "
                                  "with a larger expected_per_bucket");
    case WindowStatus::kUnsupported:
      return fail(SHMF_EINVAL, std::string(fn) +
                                   ": forget needs the deletable variant: create the window with variant "
                                   "SHMF_WINDOW_CUCKOO");
    case WindowStatus::kDropped: return dropped(fn);
    case WindowStatus::kNoSpace:
      return fail(SHMF_ENOSPACE, std::string(fn) +
                                     ": no bucket table could be allocated (the segment is out of space): grow the "
                                     "segment (shmtool resize) or run shmf_window_maintain ahead of the boundary");
    case WindowStatus::kBusy:
      return fail(SHMF_EBUSY, std::string(fn) +
                                  ": the buckets rotated in faster than this call could write (the clocks of the "
                                  "processes disagree, or bucket_seconds is very short): retry");
    case WindowStatus::kForked: return forked(fn);
    case WindowStatus::kInvalidArgument:
      return fail(SHMF_EINVAL, std::string(fn) + ": window outside [1, retention]: pass how many buckets the query "
                                                 "covers (1 = the current one)");
    case WindowStatus::kCorrupt:
      return fail(SHMF_ECORRUPT, std::string(fn) + ": the window's bytes fail validation (a bucket table it would "
                                                    "prepare): run 'shmtool check', then drop and recreate the window");
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown window status (please report it)");
}

// The batched calls' one body for both item types (Item: uint64_t or std::string_view; ITEMS
// already checked): the same checks, answers and errors whatever the items are.
template <class Item>
int seen_many(const shmf_window* w, const uint64_t* spaces, std::span<const Item> items, uint32_t window,
              uint8_t* out, const char* fn) {
  const size_t n = items.size();
  if (n) need(spaces, fn, "spaces");
  window_arg(w, window, fn);
  std::vector<uint8_t> tmp;
  if (out == nullptr) tmp.resize(n);
  size_t k = w->h.seen_many({spaces, n}, items, window, {out ? out : tmp.data(), n});
  return static_cast<int>(k);
}

template <class Item>
int mark_if_unseen_many(shmf_window* w, const uint64_t* spaces, std::span<const Item> items, uint32_t window,
                        uint8_t* out, const char* fn) {
  const size_t n = items.size();
  if (n) need(spaces, fn, "spaces");
  window_arg(w, window, fn);
  std::vector<WindowStatus> st(n);
  size_t k = w->h.mark_if_unseen_many({spaces, n}, items, window, st);
  for (size_t i = 0; i < n; ++i) {
    if (st[i] != WindowStatus::kNew && st[i] != WindowStatus::kSeen) return mark_status(st[i], fn);
    if (out) out[i] = st[i] == WindowStatus::kNew;
  }
  return static_cast<int>(k);
}

// String items of a batch: ITEMS[i], LENS[i] bytes. An item may be NULL only with length 0
// (an empty item, as the single calls take it); any other NULL is refused before anything
// is read or stored.
std::vector<std::string_view> item_views(const void* const* items, const size_t* lens, size_t n, const char* fn) {
  if (n == 0) return {};
  need(items, fn, "items");
  need(lens, fn, "lens");
  std::vector<std::string_view> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (items[i] == nullptr && lens[i] != 0)
      throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": items[" + std::to_string(i) + "] is NULL with lens[" +
                                                   std::to_string(i) + "] = " + std::to_string(lens[i]) +
                                                   ": pass the item's bytes (NULL only with length 0)");
    v[i] = sv(items[i], lens[i]);
  }
  return v;
}

}  // namespace

extern "C" {

void shmf_window_options_init(shmf_window_options* opts) {
  if (opts == nullptr) return;
  WindowOptions d;
  *opts = shmf_window_options{};
  opts->variant = d.variant == WindowVariant::kStamped  ? SHMF_WINDOW_STAMPED
                  : d.variant == WindowVariant::kCuckoo ? SHMF_WINDOW_CUCKOO
                                                        : SHMF_WINDOW_BLOOM;  // the C++ default (kStamped)
  opts->retention = d.retention;
  opts->expected_per_bucket = 0;
  opts->error = d.error;
  opts->error_window = 0;
  opts->max_spaces = d.max_spaces;
  opts->bucket_seconds = d.bucket_seconds;
  opts->utc_offset = d.utc_offset;
  opts->seed = 0;
}

int shmf_window_create(shmf_segment* seg, const char* name, const shmf_window_options* opts, shmf_window** out) {
  return guard([&] {
    need(seg, "shmf_window_create", "seg");
    need(name, "shmf_window_create", "name");
    need(opts, "shmf_window_create", "opts");
    if (opts->variant != SHMF_WINDOW_BLOOM && opts->variant != SHMF_WINDOW_CUCKOO &&
        opts->variant != SHMF_WINDOW_STAMPED)
      throw Error(ErrorCode::kInvalidArgument, "shmf_window_create: variant " + std::to_string(opts->variant) +
                                                   " is unknown: pass SHMF_WINDOW_BLOOM, SHMF_WINDOW_CUCKOO or "
                                                   "SHMF_WINDOW_STAMPED");
    WindowOptions o;
    o.variant = opts->variant == SHMF_WINDOW_CUCKOO    ? WindowVariant::kCuckoo
                : opts->variant == SHMF_WINDOW_STAMPED ? WindowVariant::kStamped
                                                       : WindowVariant::kBloom;
    o.retention = opts->retention;
    o.expected_per_bucket = opts->expected_per_bucket;
    o.error = opts->error;
    o.error_window = opts->error_window;
    o.max_spaces = opts->max_spaces;
    o.bucket_seconds = opts->bucket_seconds;
    o.utc_offset = opts->utc_offset;
    if (opts->seed != 0) o.seed = opts->seed;
    return make_handle(out, "shmf_window_create", [&] { return Window::create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_window_open, shmf_window, Window)
SHMF_CLOSE_FN(shmf_window_close, shmf_window)
SHMF_DROP_FN(shmf_window_drop, Window)

int shmf_window_set_now(shmf_window* w, int64_t unix_seconds) {
  return guard([&] {
    need(w, "shmf_window_set_now", "w");
    if (unix_seconds == INT64_MIN)
      w->h.use_system_clock();
    else
      w->h.set_now(unix_seconds);
    return 0;
  });
}

int shmf_window_mark(shmf_window* w, uint64_t space, const void* item, size_t len) {
  return guard([&] {
    need(w, "shmf_window_mark", "w");
    if (len) need(item, "shmf_window_mark", "item");
    return mark_status(w->h.mark(space, sv(item, len)), "shmf_window_mark");
  });
}
int shmf_window_mark_u64(shmf_window* w, uint64_t space, uint64_t item) {
  return guard([&] {
    need(w, "shmf_window_mark_u64", "w");
    return mark_status(w->h.mark(space, item), "shmf_window_mark_u64");
  });
}

int shmf_window_seen(const shmf_window* w, uint64_t space, const void* item, size_t len, uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_seen", "w");
    if (len) need(item, "shmf_window_seen", "item");
    window_arg(w, window, "shmf_window_seen");
    return w->h.seen(space, sv(item, len), window) ? 1 : 0;
  });
}
int shmf_window_seen_u64(const shmf_window* w, uint64_t space, uint64_t item, uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_seen_u64", "w");
    window_arg(w, window, "shmf_window_seen_u64");
    return w->h.seen(space, item, window) ? 1 : 0;
  });
}

int shmf_window_mark_if_unseen(shmf_window* w, uint64_t space, const void* item, size_t len, uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_mark_if_unseen", "w");
    if (len) need(item, "shmf_window_mark_if_unseen", "item");
    window_arg(w, window, "shmf_window_mark_if_unseen");
    return mark_status(w->h.mark_if_unseen(space, sv(item, len), window), "shmf_window_mark_if_unseen");
  });
}
int shmf_window_mark_if_unseen_u64(shmf_window* w, uint64_t space, uint64_t item, uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_mark_if_unseen_u64", "w");
    window_arg(w, window, "shmf_window_mark_if_unseen_u64");
    return mark_status(w->h.mark_if_unseen(space, item, window), "shmf_window_mark_if_unseen_u64");
  });
}

// Frequency cap: CAP and WINDOW checked here (each its own message), the variant by the call.
int shmf_window_mark_if_under(shmf_window* w, uint64_t space, const void* item, size_t len, uint32_t cap,
                              uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_mark_if_under", "w");
    if (len) need(item, "shmf_window_mark_if_under", "item");
    cap_arg(w, cap, window, "shmf_window_mark_if_under");
    return under_status(w->h.mark_if_under(space, sv(item, len), cap, window), "shmf_window_mark_if_under");
  });
}
int shmf_window_mark_if_under_u64(shmf_window* w, uint64_t space, uint64_t item, uint32_t cap, uint32_t window) {
  return guard([&] {
    need(w, "shmf_window_mark_if_under_u64", "w");
    cap_arg(w, cap, window, "shmf_window_mark_if_under_u64");
    return under_status(w->h.mark_if_under(space, item, cap, window), "shmf_window_mark_if_under_u64");
  });
}

int shmf_window_forget(shmf_window* w, uint64_t space, const void* item, size_t len) {
  return guard([&] {
    need(w, "shmf_window_forget", "w");
    if (len) need(item, "shmf_window_forget", "item");
    return mark_status(w->h.forget(space, sv(item, len)), "shmf_window_forget");
  });
}
int shmf_window_forget_u64(shmf_window* w, uint64_t space, uint64_t item) {
  return guard([&] {
    need(w, "shmf_window_forget_u64", "w");
    return mark_status(w->h.forget(space, item), "shmf_window_forget_u64");
  });
}

int shmf_window_seen_many_u64(const shmf_window* w, const uint64_t* spaces, const uint64_t* items, size_t n,
                              uint32_t window, uint8_t* out) {
  return guard([&] {
    need(w, "shmf_window_seen_many_u64", "w");
    need_batch(n, "shmf_window_seen_many_u64");
    if (n) need(items, "shmf_window_seen_many_u64", "items");
    return seen_many(w, spaces, std::span<const uint64_t>(items, n), window, out, "shmf_window_seen_many_u64");
  });
}

int shmf_window_mark_if_unseen_many_u64(shmf_window* w, const uint64_t* spaces, const uint64_t* items, size_t n,
                                        uint32_t window, uint8_t* out) {
  return guard([&] {
    need(w, "shmf_window_mark_if_unseen_many_u64", "w");
    need_batch(n, "shmf_window_mark_if_unseen_many_u64");
    if (n) need(items, "shmf_window_mark_if_unseen_many_u64", "items");
    return mark_if_unseen_many(w, spaces, std::span<const uint64_t>(items, n), window, out,
                               "shmf_window_mark_if_unseen_many_u64");
  });
}

int shmf_window_seen_many(const shmf_window* w, const uint64_t* spaces, const void* const* items, const size_t* lens,
                          size_t n, uint32_t window, uint8_t* out) {
  return guard([&] {
    need(w, "shmf_window_seen_many", "w");
    need_batch(n, "shmf_window_seen_many");
    const auto v = item_views(items, lens, n, "shmf_window_seen_many");
    return seen_many(w, spaces, std::span<const std::string_view>(v), window, out, "shmf_window_seen_many");
  });
}

int shmf_window_mark_if_unseen_many(shmf_window* w, const uint64_t* spaces, const void* const* items,
                                    const size_t* lens, size_t n, uint32_t window, uint8_t* out) {
  return guard([&] {
    need(w, "shmf_window_mark_if_unseen_many", "w");
    need_batch(n, "shmf_window_mark_if_unseen_many");
    const auto v = item_views(items, lens, n, "shmf_window_mark_if_unseen_many");
    return mark_if_unseen_many(w, spaces, std::span<const std::string_view>(v), window, out,
                               "shmf_window_mark_if_unseen_many");
  });
}

int shmf_window_new_count(const shmf_window* w, uint64_t space, uint32_t age, uint64_t* out) {
  return guard([&] {
    need(w, "shmf_window_new_count", "w");
    need(out, "shmf_window_new_count", "out");
    if (!w->h.valid()) return dropped("shmf_window_new_count");
    if (w->retention == 0) w->retention = w->h.stats().retention;  // throws kDropped
    if (age >= w->retention)
      throw Error(ErrorCode::kInvalidArgument, "shmf_window_new_count: age " + std::to_string(age) +
                                                   " is outside [0, " + std::to_string(w->retention - 1) +
                                                   "]: pass how many buckets ago (0 = the current one)");
    *out = w->h.new_count(space, age);
    return 0;
  });
}

int shmf_window_maintain(shmf_window* w) {
  return guard([&] {
    need(w, "shmf_window_maintain", "w");
    w->h.maintain();
    return 0;
  });
}

int shmf_window_stats_get(const shmf_window* w, shmf_window_stats* out) {
  return guard([&] {
    need(w, "shmf_window_stats_get", "w");
    need(out, "shmf_window_stats_get", "out");
    WindowStats st = w->h.stats();
    *out = shmf_window_stats{};
    out->variant = st.variant == WindowVariant::kCuckoo    ? SHMF_WINDOW_CUCKOO
                   : st.variant == WindowVariant::kStamped ? SHMF_WINDOW_STAMPED
                                                           : SHMF_WINDOW_BLOOM;
    out->retention = st.retention;
    out->spaces = st.spaces;
    out->max_spaces = st.max_spaces;
    out->current_bucket = st.current_bucket;
    out->memory_bytes = st.memory_bytes;
    out->rotations = st.rotations;
    out->racing_marks = st.racing_marks;
    out->rotation_races = st.rotation_races;
    out->inline_allocations = st.inline_allocations;
    out->overflow_failures = st.overflow_failures;
    out->other_marks = st.other_marks;
    out->forget_ambiguous = st.forget_ambiguous;
    out->one_bucket_error = st.one_bucket_error;
    if (!st.buckets.empty()) {
      out->today_distinct = st.buckets[0].distinct;
      out->today_capacity = st.buckets[0].capacity;
      out->today_overflow = st.buckets[0].overflow;
      out->today_over_capacity = st.buckets[0].over_capacity;
    }
    out->fp_now_1 = st.window_fp_now(1);
    out->fp_bound_1 = st.window_fp_bound(1);
    out->fp_now_all = st.window_fp_now(st.retention);
    out->fp_bound_all = st.window_fp_bound(st.retention);
    if (st.variant == WindowVariant::kStamped) {
      out->lanes = st.lanes;
      out->swept_bucket = st.swept_bucket;
      out->shared_bytes = st.shared_bytes;
    }
    return 0;
  });
}

}  // extern "C"
