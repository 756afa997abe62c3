/* shmfilter/shmfilter.h: the C API of shmfilter (valid C99 and C++).
 *
 * A thin front end over the public C++ API, for C programs and for sidecars in
 * Python (ctypes) or Go (cgo); see docs/c_api.md.
 *
 * Conventions (LMDB's return codes, fmt's C API):
 *  - Every function returns int: 0 or a positive result on success, a negative
 *    -SHMF_E* code on failure. No C++ exception ever crosses this boundary.
 *  - shmf_strerror(code) gives a static description of a code;
 *    shmf_last_error_message() gives this thread's detailed message of its last
 *    failure (what was wrong and what to do), safe to log: a name it quotes is
 *    escaped as SHMF_ESCAPE_TEXT does (control bytes and invalid UTF-8 as \xNN).
 *  - Handles are opaque. A handle belongs to the process that opened it: after
 *    fork() the child opens the segment and its structures itself.
 *  - Close every structure handle before the segment handle it came from.
 *    Closing NULL is a no-op. A handle may be shared by threads of a process
 *    for the data plane; close it once, when no thread uses it any more.
 *  - uint64 keys are hashed as their 8 little-endian bytes (the same key as the
 *    C++ API's uint64 overloads and shmtool's --u64 inputs).
 *  - A data-plane call on a structure some process dropped returns
 *    -SHMF_EDROPPED (never touches the freed memory). Each failure has its own
 *    code: -SHMF_EDROPPED (dropped), -SHMF_ENOSPACE (no space for a table or
 *    a compaction), -SHMF_EBUSY (other processes kept the call from finishing
 *    within its bound: retry), -SHMF_EFULL (a fixed capacity is reached),
 *    -SHMF_EFORKED (a write through a handle inherited across fork()),
 *    -SHMF_EINVAL (an argument out of range: never clamped).
 */
#ifndef SHMFILTER_SHMFILTER_H
#define SHMFILTER_SHMFILTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMF_VERSION_MAJOR 0
#define SHMF_VERSION_MINOR 1
#define SHMF_VERSION_PATCH 0
#define SHMF_VERSION_NUMBER (SHMF_VERSION_MAJOR * 10000 + SHMF_VERSION_MINOR * 100 + SHMF_VERSION_PATCH)

/* Error codes: functions return their negation (-SHMF_ENOTFOUND). Codes
 * 0..SHMF_ELAST equal shmfilter::ErrorCode values of the C++ API, whose one
 * table (SHMFILTER_ERROR_CODES in shmfilter/error.hpp) lib/capi/c_api.cpp
 * checks these against at compile time. */
#define SHMF_OK 0
#define SHMF_EINVAL 1          /* a parameter is out of range or NULL */
#define SHMF_ENAMETOOLONG 2    /* segment or structure name too long */
#define SHMF_ENOTFOUND 3       /* no segment / structure of that name */
#define SHMF_EEXISTS 4         /* a segment / structure of that name exists */
#define SHMF_EWRONGKIND 5      /* the name holds another kind of structure */
#define SHMF_ENOTSEGMENT 6     /* not a shmfilter segment (bad magic) */
#define SHMF_EBYTEORDER 7      /* segment of the other byte order */
#define SHMF_EVERSION 8        /* segment of another format version */
#define SHMF_EABI 9            /* segment of a build with other struct layouts */
#define SHMF_ETRUNCATED 10     /* backing object shorter than its header says */
#define SHMF_ECORRUPT 11       /* a field fails validation */
#define SHMF_ENOSPACE 12       /* /dev/shm, the disk or the reservation is full */
#define SHMF_EFULL 13          /* a fixed-capacity structure is full */
#define SHMF_EDROPPED 14       /* the structure was dropped by some process */
#define SHMF_EIO 15            /* a system call failed */
#define SHMF_EPERM 16          /* EACCES/EPERM on the backing object */
#define SHMF_EBUSY 17          /* an exclusive state could not be obtained, or other
                                  processes kept the call from finishing: retry later */
#define SHMF_EBADINPUT 18      /* malformed external input */
#define SHMF_EREADONLY 19      /* a write through a read-only attachment */
#define SHMF_EFORKED 20        /* a write through a handle inherited across fork():
                                  open the segment and the structure in the child */
#define SHMF_ELAST 20          /* the highest code shared with the C++ API */
/* Codes of the C API alone (no C++ ErrorCode): */
#define SHMF_ENOMEM 30         /* process memory exhausted (std::bad_alloc) */
#define SHMF_EINTERNAL 31      /* an unexpected internal failure (a bug: report it) */

/* Pure, any thread: "0.1.0", the library's version (may differ from the macros
 * a program was compiled with). */
const char *shmf_version(void);
/* Pure, any thread: static text for CODE (either sign); never NULL. */
const char *shmf_strerror(int code);
/* Thread-local: the detailed message of this thread's last failing call ("" if
 * none); valid until this thread's next failing call. */
const char *shmf_last_error_message(void);

/* ---- segment ----------------------------------------------------------- */
typedef struct shmf_segment shmf_segment;
typedef struct shmf_bloom shmf_bloom;
typedef struct shmf_cuckoo shmf_cuckoo;
typedef struct shmf_roaring shmf_roaring;
typedef struct shmf_hll shmf_hll;
typedef struct shmf_set shmf_set;

typedef struct shmf_segment_options {
  uint64_t size;               /* initial backing bytes (default 64 MiB) */
  uint64_t max_size;           /* reserved address space (default 64 GiB) */
  uint32_t directory_capacity; /* named structures (default 4096) */
  uint32_t mode;               /* permission bits (default 0600) */
  int64_t group;               /* >= 0: chown to this gid; -1: leave */
  const char *file;            /* NULL: POSIX shm; else a regular file path */
} shmf_segment_options;

/* Pure: fills OPTS with the defaults. */
void shmf_segment_options_init(shmf_segment_options *opts);
/* Control plane: creates segment NAME (OPTS NULL = defaults); fails -SHMF_EEXISTS. */
int shmf_segment_create(const char *name, const shmf_segment_options *opts, shmf_segment **out);
/* Control plane: attaches to existing segment NAME (FILE NULL = POSIX shm). */
int shmf_segment_open(const char *name, const char *file, shmf_segment **out);
/* How shmf_segment_open_ex attaches (fill with shmf_open_options_init). */
typedef struct shmf_open_options {
  const char *file;      /* NULL: POSIX shm; else the regular file the segment was created with */
  int read_only;         /* nonzero: inspection only (docs/SECURITY.md): O_RDONLY, PROT_READ, no
                            registry slot, no lock; every write fails -SHMF_EREADONLY (data-plane
                            writes answer "not done"); Roaring sets and windows cannot be opened */
  int huge_pages;        /* nonzero: madvise(MADV_HUGEPAGE) on this mapping (docs/huge-pages.md) */
  int64_t trusted_owner; /* >= 0: also trust a file owned by this uid; -1 (default): only own/root */
} shmf_open_options;

/* Pure: fills OPTS with the defaults (POSIX shm, read-write, no extra owner). */
void shmf_open_options_init(shmf_open_options *opts);
/* Control plane: attaches to existing segment NAME as OPTS says (NULL = defaults). */
int shmf_segment_open_ex(const char *name, const shmf_open_options *opts, shmf_segment **out);
/* Process-local: 1 if SEG was opened read-only, 0 if read-write, negative on a bad handle. */
int shmf_segment_is_read_only(const shmf_segment *seg);
/* Control plane: opens NAME or creates it; of racing callers exactly one creates. */
int shmf_segment_open_or_create(const char *name, const shmf_segment_options *opts, shmf_segment **out);
/* Process-local: detaches this handle (the segment and its data stay). */
int shmf_segment_close(shmf_segment *seg);
/* Control plane: removes the name; attached processes keep their mapping. 1 removed, 0 absent. */
int shmf_segment_remove(const char *name, const char *file);
/* Process-local, two stat calls: 1 when NAME still refers to the backing file SEG has mapped;
 * 0 when that file was removed (shmf_segment_remove, rm /dev/shm/NAME) or the name now holds
 * another file: SEG's data lives on only in the processes that map it (docs/nginx.md). */
int shmf_segment_linked(shmf_segment *seg);
/* Control plane: saves every structure SEG holds to PATH (shmfilter::save, docs/save-restore.md;
 * written atomically, consistent per structure while others write). 0 or a negative code. */
int shmf_segment_save(shmf_segment *seg, const char *path);
/* Control plane: creates segment NAME from the save at PATH (shmfilter::restore: checked whole
 * first, built under a temporary name, renamed into place, never replacing: -SHMF_EEXISTS when
 * NAME exists). OPTS (NULL = defaults): file, mode and group are used; size, max_size and the
 * directory capacity are the saved segment's. */
int shmf_segment_restore(const char *path, const char *name, const shmf_segment_options *opts);

/* ---- Bloom filter (lock-free; false positives, no false negatives) ------ */
typedef struct shmf_bloom_options {
  uint64_t capacity;   /* n (>= 1) */
  double error;        /* target false-positive rate in (0, 1); default 0.01 */
  double growth;       /* 0: fixed size; else scaling factor in [1, 16] */
  double tightening;   /* per-layer error ratio in (0, 1); default 0.5 */
  uint32_t max_layers; /* 1..64, default 32 */
  uint32_t layout;     /* 0 blocked (default), 1 classic */
  uint64_t seed;       /* hash seed, used when has_seed != 0 */
  uint32_t has_seed;   /* 0: random seed */
  uint32_t reserved;   /* must be 0 */
} shmf_bloom_options;

typedef struct shmf_bloom_stats {
  uint64_t capacity, total_capacity, bits, memory_bytes, racing_adds, seed;
  double error, growth, tightening, fp_bound, inserted_estimate, fill_ratio, fp_rate_now, bits_per_element;
  uint32_t layers, max_layers, k, over_capacity;
} shmf_bloom_stats;

/* Pure: fills OPTS with the defaults (capacity 0 must still be set). */
void shmf_bloom_options_init(shmf_bloom_options *opts);
/* Control plane, takes the segment lock: creates Bloom NAME in SEG. */
int shmf_bloom_create(shmf_segment *seg, const char *name, const shmf_bloom_options *opts, shmf_bloom **out);
/* Control plane, lock-free lookup: opens Bloom NAME. */
int shmf_bloom_open(shmf_segment *seg, const char *name, shmf_bloom **out);
/* Process-local: frees the handle (the filter stays). */
int shmf_bloom_close(shmf_bloom *b);
/* Lock-free, any process: 1 if this call set a bit (new key), 0 if all were set. */
int shmf_bloom_add(shmf_bloom *b, const void *key, size_t len);
/* Lock-free, any process: as shmf_bloom_add for a uint64 key. */
int shmf_bloom_add_u64(shmf_bloom *b, uint64_t key);
/* Lock-free, wait-free: 1 maybe present, 0 absent. */
int shmf_bloom_contains(const shmf_bloom *b, const void *key, size_t len);
/* Lock-free, wait-free: 1 maybe present, 0 absent. */
int shmf_bloom_contains_u64(const shmf_bloom *b, uint64_t key);
/* Lock-free: adds N keys; OUT (NULL ok) gets 1 per new key; returns how many were new. */
int shmf_bloom_add_many_u64(shmf_bloom *b, const uint64_t *keys, size_t n, uint8_t *out);
/* Lock-free: OUT[i] = contains(KEYS[i]); returns how many are present. */
int shmf_bloom_contains_many_u64(const shmf_bloom *b, const uint64_t *keys, size_t n, uint8_t *out);
/* Lock-free: as above for N byte keys KEYS[i] of LENS[i] bytes. */
int shmf_bloom_contains_many(const shmf_bloom *b, const void *const *keys, const size_t *lens, size_t n,
                             uint8_t *out);
/* Lock-free snapshot of the numbers. */
int shmf_bloom_stats_get(const shmf_bloom *b, shmf_bloom_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_bloom_drop(shmf_segment *seg, const char *name);

/* ---- Cuckoo filter (deletable; seqlock readers, one writer lock per filter) */
typedef struct shmf_cuckoo_options {
  uint64_t capacity;         /* items at <= 95% load (>= 1) */
  uint32_t fingerprint_bits; /* 8, 12, 16; 0: from error */
  uint32_t expansion;        /* 0: fixed; k >= 2: grow by sub-filters k x larger */
  double error;              /* target false-positive rate, used when fingerprint_bits is 0 */
  uint32_t max_subfilters;   /* 1..16, default 8 */
  uint32_t max_path;         /* 1..6, default 5 */
  uint64_t seed;             /* 0: random */
} shmf_cuckoo_options;

typedef struct shmf_cuckoo_stats {
  uint64_t capacity, slots, size, failures, longest_path, moves, inserts, erases, repairs, expansions, bytes;
  double target_error, load_factor, bits_per_item, fp_rate_bound, fp_rate_estimate;
  uint32_t fingerprint_bits, lane_bits, subfilters, max_path, expansion, reserved;
} shmf_cuckoo_stats;

/* Pure: fills OPTS with the defaults (capacity and bits/error must be set). */
void shmf_cuckoo_options_init(shmf_cuckoo_options *opts);
/* Control plane, takes the segment lock. */
int shmf_cuckoo_create(shmf_segment *seg, const char *name, const shmf_cuckoo_options *opts, shmf_cuckoo **out);
/* Control plane, lock-free lookup. */
int shmf_cuckoo_open(shmf_segment *seg, const char *name, shmf_cuckoo **out);
/* Process-local: frees the handle. */
int shmf_cuckoo_close(shmf_cuckoo *c);
/* The filter's one writer lock: 0 stored, -SHMF_EFULL, -SHMF_EDROPPED. */
int shmf_cuckoo_add(shmf_cuckoo *c, const void *key, size_t len);
int shmf_cuckoo_add_u64(shmf_cuckoo *c, uint64_t key);
/* The filter's one writer lock: 1 stored, 0 already present (or a false-positive match), -SHMF_EFULL. */
int shmf_cuckoo_insert_unique(shmf_cuckoo *c, const void *key, size_t len);
int shmf_cuckoo_insert_unique_u64(shmf_cuckoo *c, uint64_t key);
/* Lock-free optimistic read: 1 maybe present, 0 absent. */
int shmf_cuckoo_contains(const shmf_cuckoo *c, const void *key, size_t len);
int shmf_cuckoo_contains_u64(const shmf_cuckoo *c, uint64_t key);
/* Lock-free: OUT[i] = contains(KEYS[i]); returns how many are present. */
int shmf_cuckoo_contains_many_u64(const shmf_cuckoo *c, const uint64_t *keys, size_t n, uint8_t *out);
int shmf_cuckoo_contains_many(const shmf_cuckoo *c, const void *const *keys, const size_t *lens, size_t n,
                              uint8_t *out);
/* The filter's one writer lock: removes one copy; 1 removed, 0 absent. Erase only added keys. */
int shmf_cuckoo_erase(shmf_cuckoo *c, const void *key, size_t len);
int shmf_cuckoo_erase_u64(shmf_cuckoo *c, uint64_t key);
/* Lock-free: copies of KEY's fingerprint (>= 0). */
int shmf_cuckoo_count_u64(const shmf_cuckoo *c, uint64_t key);
/* Lock-free: items stored, into *OUT. */
int shmf_cuckoo_size(const shmf_cuckoo *c, uint64_t *out);
/* Lock-free snapshot of the numbers. */
int shmf_cuckoo_stats_get(const shmf_cuckoo *c, shmf_cuckoo_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_cuckoo_drop(shmf_segment *seg, const char *name);

/* ---- Roaring set of uint32 (exact; per-container snapshot + shared delta) ------- */
typedef struct shmf_roaring_options {
  uint32_t delta_capacity; /* power of two, 64 .. 2^24; default 65536 */
  uint32_t reader_slots;   /* processes with the set open at once; default 256 */
  double compact_at;       /* delta fill that triggers compaction, (0, 0.9]; default 0.5 */
  uint32_t auto_compact;   /* 1 (default): writes compact; 0: only shmf_roaring_compact */
  uint32_t reserved;       /* must be 0 */
} shmf_roaring_options;

typedef struct shmf_roaring_stats {
  uint64_t cardinality, snapshot_cardinality, snapshot_bytes, snapshot_generation, delta_capacity, delta_fill,
      prev_delta_fill, delta_bytes, total_bytes, pending_free, compactions, claim_owner;
  uint32_t containers, array_containers, bitmap_containers, run_containers, readers, reserved;
} shmf_roaring_stats;

/* Pure: fills OPTS with the defaults. */
void shmf_roaring_options_init(shmf_roaring_options *opts);
/* Control plane, takes the segment lock (OPTS NULL = defaults). */
int shmf_roaring_create(shmf_segment *seg, const char *name, const shmf_roaring_options *opts, shmf_roaring **out);
/* Control plane: opens and takes a reader slot. */
int shmf_roaring_open(shmf_segment *seg, const char *name, shmf_roaring **out);
/* Process-local: frees the handle (and its reader slot once the last copy goes). */
int shmf_roaring_close(shmf_roaring *r);
/* Any process, visible to all on return: 0, -SHMF_EFULL (retry later), -SHMF_EDROPPED. */
int shmf_roaring_add(shmf_roaring *r, uint32_t value);
/* As add; -SHMF_EINVAL for VALUE >= 2^32 (nothing written). */
int shmf_roaring_add_u64(shmf_roaring *r, uint64_t value);
/* Any process: 0, -SHMF_EFULL, -SHMF_EDROPPED. */
int shmf_roaring_remove(shmf_roaring *r, uint32_t value);
/* Any process: adds N values; 0 or a negative code. */
int shmf_roaring_add_many(shmf_roaring *r, const uint32_t *values, size_t n);
/* Lock-free: 1 present, 0 absent. */
int shmf_roaring_contains(const shmf_roaring *r, uint32_t value);
/* Lock-free: 0 for VALUE >= 2^32. */
int shmf_roaring_contains_u64(const shmf_roaring *r, uint64_t value);
/* Lock-free: OUT[i] = contains(VALUES[i]); returns how many are present. */
int shmf_roaring_contains_many(const shmf_roaring *r, const uint32_t *values, size_t n, uint8_t *out);
int shmf_roaring_contains_many_u64(const shmf_roaring *r, const uint64_t *values, size_t n, uint8_t *out);
/* Lock-free: exact cardinality into *OUT. */
int shmf_roaring_cardinality(const shmf_roaring *r, uint64_t *out);
/* Compaction claim (one compactor at a time): 1 compacted, 0 another process holds the claim. */
int shmf_roaring_compact(shmf_roaring *r);
/* Lock-free snapshot of the numbers. */
int shmf_roaring_stats_get(const shmf_roaring *r, shmf_roaring_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_roaring_drop(shmf_segment *seg, const char *name);

/* ---- HyperLogLog (precision 14, Redis-compatible; atomic register max) --- */
typedef struct shmf_hll_stats {
  uint64_t estimate, bytes;
  double standard_error;
  uint32_t registers, nonzero_registers, max_register, reserved;
} shmf_hll_stats;

/* Control plane, takes the segment lock. */
int shmf_hll_create(shmf_segment *seg, const char *name, shmf_hll **out);
/* Control plane, lock-free lookup. */
int shmf_hll_open(shmf_segment *seg, const char *name, shmf_hll **out);
/* Control plane: opens NAME or creates it; of racing callers exactly one creates. */
int shmf_hll_open_or_create(shmf_segment *seg, const char *name, shmf_hll **out);
/* Process-local: frees the handle. */
int shmf_hll_close(shmf_hll *h);
/* Lock-free, any process: 1 if a register grew (Redis PFADD's 1), else 0. */
int shmf_hll_add(shmf_hll *h, const void *key, size_t len);
int shmf_hll_add_u64(shmf_hll *h, uint64_t key);
/* Lock-free: adds N keys; returns how many register updates grew a register
 * (<= N; 0: nothing changed), as Hll::add_many. */
int shmf_hll_add_many_u64(shmf_hll *h, const uint64_t *keys, size_t n);
/* Lock-free snapshot read: the estimate (Redis PFCOUNT's number) into *OUT. */
int shmf_hll_count(const shmf_hll *h, uint64_t *out);
/* Lock-free snapshot of the numbers. */
int shmf_hll_stats_get(const shmf_hll *h, shmf_hll_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_hll_drop(shmf_segment *seg, const char *name);
/* Redis interchange (docs/hll.md): Redis's dense HLL string, SET it in Redis and
 * PFCOUNT/PFMERGE it there; GET a Redis HLL key (dense or sparse) and import it here. */
#define SHMF_HLL_REDIS_DENSE_BYTES 12304 /* what shmf_hll_export_redis writes */
/* Lock-free snapshot as Redis's dense string (cardinality cache marked invalid).
 * *NEEDED gets its length (SHMF_HLL_REDIS_DENSE_BYTES; binary, no NUL). When BUF holds
 * CAP >= *NEEDED bytes the string is copied there and its length returned; otherwise
 * nothing is copied and -SHMF_EFULL returned (BUF may be NULL with CAP 0 to ask the size). */
int shmf_hll_export_redis(const shmf_hll *h, void *buf, size_t cap, size_t *needed);
/* Lock-free register max of a Redis HLL string (dense or sparse, LEN bytes) into H:
 * 0, or -SHMF_EBADINPUT (the message says what is wrong; H unchanged), -SHMF_EDROPPED. */
int shmf_hll_import_redis(shmf_hll *h, const void *bytes, size_t len);
/* Pure: PFCOUNT of a Redis HLL string (dense or sparse) into *OUT, no segment. -SHMF_EBADINPUT. */
int shmf_hll_count_redis(const void *bytes, size_t len, uint64_t *out);

/* ---- exact hash set of 64-bit keys (striped writer locks) --------------- */
typedef struct shmf_set_options {
  uint64_t capacity; /* most live keys (>= 1) */
  double max_load;   /* capacity / slots in [0.1, 0.95]; default 0.8 */
} shmf_set_options;

typedef struct shmf_set_stats {
  uint64_t capacity, slots, size, used_slots, bytes, seed;
  double max_load, load, bytes_per_key_at_capacity;
  uint32_t stripes, reserved;
} shmf_set_stats;

/* Pure: fills OPTS with the defaults (capacity must be set). */
void shmf_set_options_init(shmf_set_options *opts);
/* Control plane, takes the segment lock. */
int shmf_set_create(shmf_segment *seg, const char *name, const shmf_set_options *opts, shmf_set **out);
/* Control plane, lock-free lookup. */
int shmf_set_open(shmf_segment *seg, const char *name, shmf_set **out);
/* Process-local: frees the handle. */
int shmf_set_close(shmf_set *s);
/* Stripe lock, any process: 1 inserted, 0 already present, -SHMF_EFULL, -SHMF_EDROPPED.
 * Exactly one of racing callers inserting the same key gets 1. */
int shmf_set_insert_unique(shmf_set *s, const void *key, size_t len);
int shmf_set_insert_unique_u64(shmf_set *s, uint64_t key);
/* Lock-free: 1 present, 0 absent. */
int shmf_set_contains(const shmf_set *s, const void *key, size_t len);
int shmf_set_contains_u64(const shmf_set *s, uint64_t key);
/* Lock-free: OUT[i] = contains(KEYS[i]); returns how many are present. */
int shmf_set_contains_many_u64(const shmf_set *s, const uint64_t *keys, size_t n, uint8_t *out);
int shmf_set_contains_many(const shmf_set *s, const void *const *keys, const size_t *lens, size_t n, uint8_t *out);
/* Stripe lock: 1 removed, 0 absent. */
int shmf_set_erase(shmf_set *s, const void *key, size_t len);
int shmf_set_erase_u64(shmf_set *s, uint64_t key);
/* Lock-free: live keys (exact) into *OUT. */
int shmf_set_size(const shmf_set *s, uint64_t *out);
/* Lock-free snapshot of the numbers. */
int shmf_set_stats_get(const shmf_set *s, shmf_set_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_set_drop(shmf_segment *seg, const char *name);

/* ---- directory: the named structures of a segment ------------------------
 * What `shmtool list` shows, for C programs and bindings (docs/c_api.md). */
#define SHMF_KIND_BLOOM 1
#define SHMF_KIND_CUCKOO 2
#define SHMF_KIND_ROARING 3
#define SHMF_KIND_HLL 4
#define SHMF_KIND_SET 5    /* exact hash set */
#define SHMF_KIND_BLOB 6   /* raw bytes (tests, the demo's bookkeeping) */
#define SHMF_KIND_WINDOW 7 /* (space, item) pairs over time buckets */
#define SHMF_KIND_UV 8     /* distinct-count sketches per (space, time bucket) */

typedef struct shmf_structure_info {
  char name[64];             /* NUL-terminated (a name is 1..63 bytes without NUL) */
  uint32_t kind;             /* SHMF_KIND_*; a higher value: a kind of a newer build */
  uint32_t readable;         /* 1: the numbers below were read; 0: it could not be read
                                (dropped meanwhile, corrupt): they are 0 */
  uint32_t over_capacity;    /* 1 beyond what it was sized for (docs/metrics.md) */
  uint32_t slot;             /* directory slot */
  uint32_t generation;       /* changes when the slot is dropped or reused */
  uint32_t reserved;         /* 0 */
  uint64_t offset;           /* of its region, from the segment base */
  uint64_t region_bytes;     /* its directory region */
  uint64_t bytes;            /* region + extents (Bloom layers, window tables, snapshots) */
  uint64_t capacity;         /* items sized for; 0 when unbounded (roaring, hll) */
  double items;              /* exact, or estimated (bloom from its fill, hll) */
  double fill_ratio;         /* as shmfilter_structure_fill_ratio */
  double fp_rate_estimate;   /* from the fill now; 0 for exact kinds */
} shmf_structure_info;

/* Pure, any thread: "bloom", "cuckoo", "roaring", "hll", "set", "blob", "window";
 * "unknown" for any other value. Never NULL. */
const char *shmf_kind_name(uint32_t kind);
/* Pure, any thread: the SHMF_KIND_* of the LEN bytes at NAME, spelled as
 * shmf_kind_name spells it ("set" for the exact set); 0 for any other name
 * (NAME may be NULL when LEN is 0). The inverse of shmf_kind_name. */
int shmf_kind_from_name(const char *name, size_t len);
/* Lock-free (directory and stats snapshots, as the metrics): the live structures in
 * name order (bytewise). *COUNT gets how many there are. When OUT holds CAP >= *COUNT
 * entries they are written there and *COUNT returned; otherwise nothing is written
 * and -SHMF_EFULL returned: call again with *COUNT entries (OUT may be NULL with
 * CAP 0 to ask; a structure created in between answers -SHMF_EFULL again: loop). */
int shmf_segment_list(shmf_segment *seg, shmf_structure_info *out, size_t cap, size_t *count);
/* Lock-free: the entry of NAME into *OUT: 1 found, 0 no such structure. */
int shmf_segment_find(shmf_segment *seg, const char *name, shmf_structure_info *out);
/* Control plane: drops NAME whatever its kind, through the kind's own drop (every
 * extent it owns is freed with it): 1 dropped, 0 no such structure. (shmf_KIND_drop
 * drops only that kind: -SHMF_EWRONGKIND for another.) */
int shmf_structure_drop(shmf_segment *seg, const char *name);

/* ---- operating: metrics (docs/metrics.md) ------------------------------- */
/* Lock-free: the segment's Prometheus text (shmfilter::prometheus_text), what a
 * /metrics endpoint serves. *NEEDED gets its length + 1 (the NUL). When BUF holds
 * CAP >= *NEEDED bytes the text is copied there, NUL-terminated, and 0 returned;
 * otherwise nothing is copied and -SHMF_EFULL returned: call again with a buffer
 * of *NEEDED bytes (BUF may be NULL with CAP 0 to ask the size). */
int shmf_segment_prometheus_text(shmf_segment *seg, char *buf, size_t cap, size_t *needed);
/* What a scrape shows (shmfilter::MetricsOptions; docs/metrics.md, "Bounded scrapes"):
 * per-structure series for the MAX_STRUCTURES largest structures (by directory region
 * bytes) while the text stays within MAX_BYTES, the rest counted per kind in the
 * shmfilter_other_* rows; per-space (per-plan) series, MAX_SPACES per keyed structure,
 * are opt-in (0: none). shmf_segment_prometheus_text uses the defaults. */
typedef struct shmf_metrics_options {
  uint32_t max_structures; /* default 64; 0: only the segment's and per-kind families */
  uint32_t max_spaces;     /* default 0 (per-space series off) */
  uint64_t max_bytes;      /* default 96000; at least 16384 */
  uint64_t reserved[2];    /* 0 */
} shmf_metrics_options;
/* Pure: fills OPTS with the defaults. */
void shmf_metrics_options_init(shmf_metrics_options *opts);
/* As shmf_segment_prometheus_text, bounded as OPTS says (NULL = defaults);
 * -SHMF_EINVAL for max_bytes below 16384 or reserved fields not 0. */
int shmf_segment_prometheus_text_ex(shmf_segment *seg, const shmf_metrics_options *opts, char *buf, size_t cap,
                                    size_t *needed);
/* The library's one escaping policy for bytes it did not write (names, keys), as every
 * text output of the library and shmtool uses it (shmfilter/text.hpp; docs/SECURITY.md,
 * "Output encoding"); for a C front end printing names itself (nginx's own families and
 * logs). Each result is valid UTF-8 without control characters:
 *   SHMF_ESCAPE_TEXT   terminals and logs: control bytes, C1, bidi overrides and invalid
 *                      UTF-8 as \xNN, a backslash as \\
 *   SHMF_ESCAPE_JSON   the body of a JSON string (invalid bytes as U+FFFD)
 *   SHMF_ESCAPE_LABEL  a Prometheus label value (reads as SHMF_ESCAPE_TEXT shows it)
 * Pure. *NEEDED gets the escaped length + 1 (the NUL); when OUT holds CAP >= *NEEDED
 * bytes the text is copied there, NUL-terminated, and 0 returned; otherwise nothing is
 * copied and -SHMF_EFULL returned (OUT may be NULL with CAP 0 to ask the size).
 * -SHMF_EINVAL for another HOW. */
#define SHMF_ESCAPE_TEXT 0
#define SHMF_ESCAPE_JSON 1
#define SHMF_ESCAPE_LABEL 2
int shmf_escape(int how, const char *in, size_t len, char *out, size_t cap, size_t *needed);

/* ---- window: (space, item) pairs over time buckets (shmfilter/window.hpp) --
 * One structure for every space (plan) and every bucket (day): mark, seen over
 * the last W buckets, mark_if_unseen, forget (deletable variant), per-space
 * "new" counts. Rotation happens by the clock inside whichever call first sees
 * a new bucket; shmf_window_maintain() prepares the next bucket's table and
 * frees expired ones (call it from a housekeeping thread). docs/window.md. */
typedef struct shmf_window shmf_window;

#define SHMF_WINDOW_BLOOM 0   /* insert-only, least memory */
#define SHMF_WINDOW_CUCKOO 1  /* deletable: shmf_window_forget */
#define SHMF_WINDOW_STAMPED 2 /* deletable, every bucket in one table (a query over W buckets reads one place
                                 whatever W is), frequency caps: shmf_window_mark_if_under; retention 1..12 */

typedef struct shmf_window_options {
  uint32_t variant;             /* SHMF_WINDOW_STAMPED (shmf_window_options_init's default; retention <= 12),
                                   SHMF_WINDOW_BLOOM (0: a zeroed struct) or SHMF_WINDOW_CUCKOO */
  uint32_t retention;           /* buckets kept, 1..64 (default 7) */
  uint64_t expected_per_bucket; /* distinct pairs one bucket must hold at ERROR (>= 1; required) */
  double error;                 /* FP rate of a query over ERROR_WINDOW buckets, in (0, 1) (default 0.01) */
  uint32_t error_window;        /* the W the error is for; 0 = retention (default) */
  uint32_t max_spaces;          /* spaces with their own counter row (default 8192) */
  uint64_t bucket_seconds;      /* bucket length (default 86400) */
  int64_t utc_offset;           /* seconds east of UTC where buckets start at local midnight (default 0) */
  uint64_t seed;                /* hash seed; 0 = random */
} shmf_window_options;

typedef struct shmf_window_stats {
  uint32_t variant, retention, spaces, max_spaces;
  int64_t current_bucket;       /* -1 before the first rotation */
  uint64_t memory_bytes, rotations, racing_marks, rotation_races, inline_allocations, overflow_failures, other_marks;
  double one_bucket_error;      /* p1 = 1 - (1 - p)^(1/error_window) */
  uint64_t today_distinct, today_capacity;
  int32_t today_overflow, today_over_capacity;
  double fp_now_1, fp_bound_1;  /* a query over the current bucket */
  double fp_now_all, fp_bound_all; /* a query over all retention buckets */
  uint64_t forget_ambiguous;    /* kCuckoo: copies forget removed that may belong to another pair (an upper bound; docs/window.md) */
  uint64_t lanes;               /* stamped: lanes the shared table holds (one per pair, one per cap tally; dead ones
                                   until a sweep or an insert reclaims them); 0 otherwise */
  int64_t swept_bucket;         /* stamped: the bucket the last complete sweep of dead lanes began at (0: none) */
  uint64_t shared_bytes;        /* stamped: bytes of the one table every bucket shares, its overflow sub-filters
                                   included (in memory_bytes); 0 otherwise */
} shmf_window_stats;

/* Pure: fills OPTS with the defaults (expected_per_bucket must be set). */
void shmf_window_options_init(shmf_window_options *opts);
/* Control plane, takes the segment lock. Bad options: -SHMF_EINVAL, segment unchanged. */
int shmf_window_create(shmf_segment *seg, const char *name, const shmf_window_options *opts, shmf_window **out);
/* Control plane, lock-free lookup. */
int shmf_window_open(shmf_segment *seg, const char *name, shmf_window **out);
/* Process-local: frees the handle. */
int shmf_window_close(shmf_window *w);
/* Process-local: this handle's clock. UNIX_SECONDS = INT64_MIN: the system clock (default). */
int shmf_window_set_now(shmf_window *w, int64_t unix_seconds);
/* Any process: 1 new (marked), 0 already in the current bucket, -SHMF_EFULL (cuckoo table
 * and overflow full), -SHMF_EDROPPED. */
int shmf_window_mark(shmf_window *w, uint64_t space, const void *item, size_t len);
int shmf_window_mark_u64(shmf_window *w, uint64_t space, uint64_t item);
/* Lock-free: 1 if the pair is in the last WINDOW buckets (1..retention), else 0. */
int shmf_window_seen(const shmf_window *w, uint64_t space, const void *item, size_t len, uint32_t window);
int shmf_window_seen_u64(const shmf_window *w, uint64_t space, uint64_t item, uint32_t window);
/* Any process: 0 if the pair is in the last WINDOW buckets, else marks it and returns 1.
 * Cuckoo: exactly one of racing callers gets 1, across a rotation too (their windows overlapping);
 * bloom: racing callers may both get 1, counted in racing_marks. */
int shmf_window_mark_if_unseen(shmf_window *w, uint64_t space, const void *item, size_t len, uint32_t window);
int shmf_window_mark_if_unseen_u64(shmf_window *w, uint64_t space, uint64_t item, uint32_t window);
/* Frequency cap (SHMF_WINDOW_STAMPED): 1 allowed (the pair had fewer than CAP marks of this call in the
 * last WINDOW buckets; this one is counted and the pair marked), 0 capped (it had CAP: nothing stored).
 * A sliding window, exact up to the false-positive rate; the count, the decision and the store happen
 * under the table's writer lock, so racing callers in any processes never together get more than CAP
 * 1s in a window. CAP 1..15, WINDOW 1..retention (one WINDOW per space: a mark counts in every window
 * it lies in), else -SHMF_EINVAL; bloom and cuckoo windows: -SHMF_EINVAL (nothing stored). */
int shmf_window_mark_if_under(shmf_window *w, uint64_t space, const void *item, size_t len, uint32_t cap,
                              uint32_t window);
int shmf_window_mark_if_under_u64(shmf_window *w, uint64_t space, uint64_t item, uint32_t cap, uint32_t window);
/* Cuckoo and stamped variants: 1 removed from at least one bucket, 0 in none. Bloom: -SHMF_EINVAL. */
int shmf_window_forget(shmf_window *w, uint64_t space, const void *item, size_t len);
int shmf_window_forget_u64(shmf_window *w, uint64_t space, uint64_t item);
/* Batches with prefetch. OUT (may be NULL) gets 1/0 per pair; returns how many are seen / new. */
int shmf_window_seen_many_u64(const shmf_window *w, const uint64_t *spaces, const uint64_t *items, size_t n,
                              uint32_t window, uint8_t *out);
int shmf_window_mark_if_unseen_many_u64(shmf_window *w, const uint64_t *spaces, const uint64_t *items, size_t n,
                                        uint32_t window, uint8_t *out);
/* The same for byte items (e.g. 16-hex device ids), as shmf_bloom_contains_many takes keys:
 * pair i is (SPACES[i], the LENS[i] bytes at ITEMS[i]) and answers what shmf_window_seen /
 * shmf_window_mark_if_unseen answer for it (a byte item and a uint64 item are different
 * items). ITEMS[i] may be NULL only when LENS[i] is 0 (an empty item); otherwise, a NULL
 * array, N > INT_MAX or WINDOW outside 1..retention: -SHMF_EINVAL, nothing read or stored.
 * Returns how many are seen / new; mark_if_unseen_many: when some pair fails (e.g.
 * -SHMF_EFULL) the call returns the first such error, and every other pair was still marked
 * or found seen, as in the _u64 form. For ids in one buffer:
 *   const char ids[N][16]; const void *items[N]; size_t lens[N];
 *   for (i = 0; i < N; i++) { items[i] = ids[i]; lens[i] = 16; } */
int shmf_window_seen_many(const shmf_window *w, const uint64_t *spaces, const void *const *items,
                          const size_t *lens, size_t n, uint32_t window, uint8_t *out);
int shmf_window_mark_if_unseen_many(shmf_window *w, const uint64_t *spaces, const void *const *items,
                                    const size_t *lens, size_t n, uint32_t window, uint8_t *out);
/* Lock-free: kNew answers for SPACE in the bucket AGE buckets ago (0 = current) into *OUT. */
int shmf_window_new_count(const shmf_window *w, uint64_t space, uint32_t age, uint64_t *out);
/* Control plane, takes the segment lock: rotate if due, free expired tables, prepare the next. */
int shmf_window_maintain(shmf_window *w);
/* Lock-free snapshot of the numbers. */
int shmf_window_stats_get(const shmf_window *w, shmf_window_stats *out);
/* Control plane, takes the segment lock: 1 dropped, 0 absent. */
int shmf_window_drop(shmf_segment *seg, const char *name);

/* ---- uv: distinct counts per (space, time bucket) (shmfilter/uv.hpp) ------
 * One structure for every space (plan) and bucket (day): add an item for a
 * space; count the distinct items of a space over the last W buckets (the
 * union: a device counts once), exact up to exact_max (1,000) and a
 * Redis-compatible HLL beyond; count over every space. docs/uv.md. */
typedef struct shmf_uv shmf_uv;

typedef struct shmf_uv_options {
  uint32_t retention;      /* buckets kept, 1..64 (default 7) */
  uint32_t max_spaces;     /* spaces one bucket can hold (default 16384) */
  uint32_t exact_max;      /* exact counts up to this many items per space and bucket, 1..2048 (default 1000) */
  uint32_t reserved;       /* 0 */
  uint64_t bucket_seconds; /* bucket length (default 86400) */
  int64_t utc_offset;      /* seconds east of UTC where buckets start at local midnight (default 0) */
  uint64_t chunk_bytes;    /* sketch page chunk, 64 KiB..256 MiB, a multiple of 256 (default 1 MiB) */
} shmf_uv_options;

typedef struct shmf_uv_stats {
  uint32_t retention, max_spaces, exact_max, buckets;
  int64_t current_bucket;
  uint64_t memory_bytes, rotations, promotions;
  uint64_t refused_spaces_full, refused_no_space, refused_stale;
  uint64_t today_spaces, today_exact_spaces, today_dense_spaces, today_adds;
} shmf_uv_stats;

#define SHMF_UV_REDIS_BYTES 12304 /* what shmf_uv_export_redis writes */

/* Pure: fills OPTS with the defaults. */
void shmf_uv_options_init(shmf_uv_options *opts);
/* Control plane, takes the segment lock. Bad options: -SHMF_EINVAL, segment unchanged. */
int shmf_uv_create(shmf_segment *seg, const char *name, const shmf_uv_options *opts, shmf_uv **out);
int shmf_uv_open(shmf_segment *seg, const char *name, shmf_uv **out);
/* open, or create with OPTS (NULL: defaults) when absent; racing creators: one creates. */
int shmf_uv_open_or_create(shmf_segment *seg, const char *name, const shmf_uv_options *opts, shmf_uv **out);
int shmf_uv_close(shmf_uv *u);
/* Process-local: this handle's clock. UNIX_SECONDS = INT64_MIN: the system clock (default). */
int shmf_uv_set_now(shmf_uv *u, int64_t unix_seconds);
/* Any process: 1 the space's sketch changed, 0 unchanged; -SHMF_EFULL (the bucket's
 * max_spaces are taken), -SHMF_ENOSPACE, -SHMF_EBUSY (retry; also a clock a bucket behind
 * another process's), -SHMF_EDROPPED, -SHMF_EFORKED, -SHMF_EREADONLY, -SHMF_ECORRUPT. */
int shmf_uv_add(shmf_uv *u, uint64_t space, const void *item, size_t len);
int shmf_uv_add_u64(shmf_uv *u, uint64_t space, uint64_t item);
/* Lock-free: distinct items of SPACE over the last WINDOW buckets (1..retention) into *OUT. */
int shmf_uv_count(const shmf_uv *u, uint64_t space, uint32_t window, uint64_t *out);
/* The HLL estimate of the same union: what Redis's PFCOUNT gives for the export. */
int shmf_uv_count_hll(const shmf_uv *u, uint64_t space, uint32_t window, uint64_t *out);
/* Every space's items over the last WINDOW buckets (an estimate). */
int shmf_uv_count_all(const shmf_uv *u, uint32_t window, uint64_t *out);
/* Redis's dense HLL string of SPACE's union over WINDOW buckets into BUF (CAP >=
 * SHMF_UV_REDIS_BYTES); *NEEDED gets the length; -SHMF_EFULL when CAP is short. */
int shmf_uv_export_redis(const shmf_uv *u, uint64_t space, uint32_t window, void *buf, size_t cap, size_t *needed);
int shmf_uv_stats_get(const shmf_uv *u, shmf_uv_stats *out);
int shmf_uv_drop(shmf_segment *seg, const char *name);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHMFILTER_SHMFILTER_H */
