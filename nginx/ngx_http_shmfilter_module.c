
/*
 * nginx/ngx_http_shmfilter_module.c: shmfilter inside nginx.
 *
 * A dynamic HTTP module over the public C API (include/shmfilter/shmfilter.h)
 * and nothing else. The structures of one shmfilter segment become nginx
 * variables evaluated per request from other variables, so ordinary
 * configuration (if, map, return, add_header, log_format) does the policy.
 * The directives, their parameters, answers and failure modes are documented
 * in docs/nginx.md, the one reference: this file does not restate them.
 *
 * Processes: the master opens the segment in init_module only to check the
 * configuration (and to create what "create" asks for), then closes it before
 * it forks; every worker attaches in init_process and never uses anything of
 * the master's. A variable is evaluated at most once per request (nginx
 * caches it in the request), so "if ($fc = new)" and "add_header X-FC $fc"
 * see the same answer of one mark. Per-worker counters live in an nginx
 * shared zone ("shmfilter_counters"), kept across reloads, read by the status
 * handler. The kinds are the library's (shmf_kind_name, shmf_kind_from_name);
 * the module keeps only the list of those it serves.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <shmfilter/shmfilter.h>


#define NGX_HTTP_SHMFILTER_MAX_WORKERS    64
#define NGX_HTTP_SHMFILTER_HLL_CACHE      1024
#define NGX_HTTP_SHMFILTER_HLL_PROBES     16
#define NGX_HTTP_SHMFILTER_MAX_PARTS      8
#define NGX_HTTP_SHMFILTER_NAME_MAX       63
/* names from request data: per variable, created at most (names=N) */
#define NGX_HTTP_SHMFILTER_NAMES_DEFAULT  64
#define NGX_HTTP_SHMFILTER_NAMES_MAX      65536
/* variables with per-request names that the shared zone counts */
#define NGX_HTTP_SHMFILTER_NAME_VARS      32
/* the log's rate limit: a line per (structure, cause), then a count a minute */
#define NGX_HTTP_SHMFILTER_LOG_SLOTS      64
#define NGX_HTTP_SHMFILTER_LOG_PERIOD     60
/* each worker checks its segment's name, flushes the log's counts this often */
#define NGX_HTTP_SHMFILTER_CHECK_MSEC     1000
/* a master whose old workers are rescuing a removed segment waits this long */
#define NGX_HTTP_SHMFILTER_RESCUE_WAIT    10
/* marks a worker keeps for replay while a rescue runs (bytes of records) */
#define NGX_HTTP_SHMFILTER_REPLAY_MAX     (16 * 1024 * 1024)

/* operations: the offset of each variable directive in the commands table */
#define NGX_HTTP_SHMFILTER_MARK           0
#define NGX_HTTP_SHMFILTER_SEEN           1
#define NGX_HTTP_SHMFILTER_FORGET         2
#define NGX_HTTP_SHMFILTER_HLL_ADD        3
#define NGX_HTTP_SHMFILTER_COUNT          4
#define NGX_HTTP_SHMFILTER_UV_ADD         5
#define NGX_HTTP_SHMFILTER_NOPS           6

/* answers counted per worker (shmfilter_answers_total{answer=...}) */
#define NGX_HTTP_SHMFILTER_ANS_NEW        0
#define NGX_HTTP_SHMFILTER_ANS_SEEN       1
#define NGX_HTTP_SHMFILTER_ANS_UNSEEN     2
#define NGX_HTTP_SHMFILTER_ANS_FORGOTTEN  3
#define NGX_HTTP_SHMFILTER_ANS_ABSENT     4
#define NGX_HTTP_SHMFILTER_ANS_FAILED     5
#define NGX_HTTP_SHMFILTER_ANS_EMPTY_KEY  6
#define NGX_HTTP_SHMFILTER_ANS_BAD_SPACE  7
/* shmfilter_mark ... cap=N (a stamped window's frequency cap) */
#define NGX_HTTP_SHMFILTER_ANS_ALLOWED    8
#define NGX_HTTP_SHMFILTER_ANS_CAPPED     9
#define NGX_HTTP_SHMFILTER_NANSWERS       10

#define NGX_HTTP_SHMFILTER_NKINDS                                            \
    (sizeof(ngx_http_shmfilter_kinds) / sizeof(ngx_uint_t))

/*
 * Why a variable could not answer (shmfilter_failures_total{cause=...} and
 * $shmfilter_error), from the library's code or the module's own bounds.
 */
#define NGX_HTTP_SHMFILTER_CAUSE_NONE           0
#define NGX_HTTP_SHMFILTER_CAUSE_NO_SPACE       1
#define NGX_HTTP_SHMFILTER_CAUSE_DROPPED        2
#define NGX_HTTP_SHMFILTER_CAUSE_CORRUPT        3
#define NGX_HTTP_SHMFILTER_CAUSE_FULL           4
#define NGX_HTTP_SHMFILTER_CAUSE_BUSY           5
#define NGX_HTTP_SHMFILTER_CAUSE_NOT_ATTACHED   6
#define NGX_HTTP_SHMFILTER_CAUSE_NOT_FOUND      7
#define NGX_HTTP_SHMFILTER_CAUSE_PERMISSION     8
#define NGX_HTTP_SHMFILTER_CAUSE_BAD_NAME       9
#define NGX_HTTP_SHMFILTER_CAUSE_NAMES_FULL     10
#define NGX_HTTP_SHMFILTER_CAUSE_DIRECTORY_FULL 11
#define NGX_HTTP_SHMFILTER_CAUSE_OTHER          12
#define NGX_HTTP_SHMFILTER_NCAUSES              13

/* the log limiter's keys besides a structure's index */
#define NGX_HTTP_SHMFILTER_WHO_SEGMENT    0x10000
#define NGX_HTTP_SHMFILTER_WHO_NAMES      0x20000

#define NGX_HTTP_SHMFILTER_NCOUNTERS                                         \
    (NGX_HTTP_SHMFILTER_NOPS + NGX_HTTP_SHMFILTER_NANSWERS + 1               \
     + NGX_HTTP_SHMFILTER_NCAUSES + 3)


/*
 * One worker's counters; written only by that worker (ngx_worker indexes the
 * slot), read by whichever worker answers the status request: atomic adds.
 */
typedef struct {
    ngx_atomic_t                     requests[NGX_HTTP_SHMFILTER_NOPS];
    ngx_atomic_t                     answers[NGX_HTTP_SHMFILTER_NANSWERS];
    ngx_atomic_t                     errors;
    ngx_atomic_t                     failures[NGX_HTTP_SHMFILTER_NCAUSES];
    /* gauges of this worker: attached to the segment; its name still ours */
    ngx_atomic_t                     pid;
    ngx_atomic_t                     attached;
    ngx_atomic_t                     linked;
    ngx_atomic_t                     pad[40 - NGX_HTTP_SHMFILTER_NCOUNTERS > 0
                                         ? 40 - NGX_HTTP_SHMFILTER_NCOUNTERS
                                         : 1];
} ngx_http_shmfilter_worker_t;


/*
 * The nginx shared zone "shmfilter_counters": kept across reloads (the master
 * reads it in init_module), reset by a binary upgrade.
 */
typedef struct {
    ngx_http_shmfilter_worker_t      worker[NGX_HTTP_SHMFILTER_MAX_WORKERS];
    /*
     * A removed segment (docs/nginx.md): rescuer is the pid of the one worker
     * saving it (0: none; a CAS takes it); rescues counts the published
     * rescues. Whether a worker maps a removed one: its gauges above.
     */
    ngx_atomic_t                     rescuer;
    ngx_atomic_t                     rescues;
    /*
     * incremented by a rescuer before its save: a worker whose mark completes
     * after it (it reads a value other than the one of its attach) keeps
     * the mark and replays it into the rescued file once it attached it
     */
    ngx_atomic_t                     rescue_epoch;
    /* after a failed rescue: none before rescue_at (backoff 1 s to 60 s) */
    ngx_atomic_t                     rescue_at;
    ngx_atomic_t                     rescue_backoff;
    /* per variable with a per-request name: names it may still count */
    ngx_atomic_t                     names[NGX_HTTP_SHMFILTER_NAME_VARS];
} ngx_http_shmfilter_counters_t;


typedef struct {
    ngx_str_t                        name;      /* NUL-terminated */
    ngx_uint_t                       kind;      /* SHMF_KIND_*: declared, or
                                                   found by probing in
                                                   init_module; 0 unknown */
    ngx_flag_t                       declared;  /* by shmfilter_structure */
    ngx_flag_t                       create;
    uint64_t                         capacity;
    double                           error;

    /*
     * kind window: the declared options; retention and variant are replaced
     * in init_module by what the segment holds
     */
    shmf_window_options              wopt;
    /* variant=, retention=, bucket=, utc_offset= were given */
    ngx_flag_t                       wopt_set[4];

    /* where it was first named, for error messages */
    ngx_str_t                        conf_file;
    ngx_uint_t                       conf_line;

    /* per worker (set in init_process; the master's copies stay NULL) */
    void                            *handle;
    time_t                           retry_at;
    /* the last reopen after -SHMF_EDROPPED (at most one a second) */
    time_t                           reopened_at;
    int                              open_rc;   /* the last open's failure */
} ngx_http_shmfilter_struct_t;


typedef struct {
    ngx_uint_t                       op;
    /* into structs when the name is static */
    ngx_uint_t                       index;
    /* a per-request name (hll_add, count on an hll) */
    ngx_http_complex_value_t        *name_cv;
    /* the key: the parts joined by ':' (a window's item) */
    ngx_http_complex_value_t        *parts;
    ngx_uint_t                       nparts;
    /* a window: space=VALUE (the plan id), a decimal uint64 */
    ngx_http_complex_value_t        *space;
    /* a window: window=W buckets; 0: not given (init_module resolves it) */
    ngx_uint_t                       window;
    /* shmfilter_mark on a stamped window: cap=N marks per pair (1..15); 0: none */
    ngx_uint_t                       cap;
    ngx_str_t                        var_name;
    ngx_str_t                        conf_file;
    ngx_uint_t                       conf_line;
    /*
     * a per-request name: names=N it may create, its slot in the shared
     * zone's names[] (into vars), its literal prefix (before the first
     * variable: what init_module counts in the segment); per worker: no
     * create before create_at (a full directory or bound: backoff)
     */
    ngx_uint_t                       names_max;
    ngx_uint_t                       name_slot;
    ngx_str_t                        name_prefix;
    time_t                           create_at;
    time_t                           create_backoff;
    ngx_uint_t                       create_cause;
} ngx_http_shmfilter_var_t;


/* a per-worker cache of the handles of per-request named HLLs */
typedef struct {
    size_t                           len;
    u_char                           name[NGX_HTTP_SHMFILTER_NAME_MAX + 1];
    shmf_hll                        *h;
} ngx_http_shmfilter_hll_slot_t;


typedef struct {
    ngx_str_t                        segment;   /* NUL-terminated; empty: no
                                                   shmfilter_segment */
    ngx_str_t                        file;      /* NUL-terminated; empty:
                                                   POSIX shm */
    ngx_flag_t                       create;
    size_t                           size;
    uint32_t                         directory; /* 0: the library's default */
    ngx_int_t                        mode;      /* -1: default */
    ngx_int_t                        group;     /* -1: default */
    ngx_str_t                        conf_file;
    ngx_uint_t                       conf_line;
    ngx_flag_t                       fail_closed;
    /* the period of shmf_window_maintain in worker 0; 0: off */
    ngx_msec_t                       maintain;
    ngx_array_t                      structs;   /* of structures */
    ngx_array_t                      vars;      /* of variables' pointers */
    ngx_shm_zone_t                  *zone;

    /* the workers' uid a root master trusts as a segment's owner; -1 */
    int64_t                          trusted_owner;
    ngx_uint_t                       name_vars; /* of vars with a name_cv */

    /* per worker */
    shmf_segment                    *seg;
    time_t                           seg_retry_at;
    ngx_uint_t                       seg_rescues; /* zone's rescues at attach */
    ngx_atomic_uint_t                seg_epoch;   /* zone's rescue_epoch */
    ngx_flag_t                       seg_unlinked; /* this worker saw it */
    /* marks made on a mapping being rescued: records to replay */
    u_char                          *replay;
    size_t                           replay_len;
    size_t                           replay_cap;
    ngx_uint_t                       replay_lost;
    ngx_http_shmfilter_hll_slot_t   *hll_cache;
} ngx_http_shmfilter_main_conf_t;


/* one (structure, cause) of the log's rate limit (per worker) */
typedef struct {
    ngx_uint_t                       who;       /* structure index, or a
                                                   NGX_HTTP_SHMFILTER_WHO_* */
    int                              rc;        /* the cause: a shmf code */
    time_t                           since;     /* this period's start */
    ngx_uint_t                       more;      /* not logged since */
    u_char                           what[128]; /* for the count line */
} ngx_http_shmfilter_logrl_t;


/* this request's last failure, for $shmfilter_error */
typedef struct {
    ngx_uint_t                       cause;
} ngx_http_shmfilter_ctx_t;


typedef struct {
    ngx_http_complex_value_t        *answer;    /* shmfilter_answer TEXT */
} ngx_http_shmfilter_loc_conf_t;


/* the Prometheus text of shmfilter_status as it is written */
typedef struct {
    u_char                          *start;
    u_char                          *pos;
    u_char                          *end;
} ngx_http_shmfilter_text_t;


static ngx_uint_t ngx_http_shmfilter_kind_served(ngx_uint_t kind);
static ngx_flag_t ngx_http_shmfilter_op_fits(ngx_uint_t op, ngx_uint_t kind);
static u_char *ngx_http_shmfilter_kind_list(u_char *buf, size_t size,
    ngx_uint_t op, char *last_sep);
static ngx_http_shmfilter_worker_t *ngx_http_shmfilter_my_counters(
    ngx_http_shmfilter_main_conf_t *smcf);
static void ngx_http_shmfilter_tally(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_uint_t op, ngx_int_t answer, ngx_flag_t error);
static ngx_flag_t ngx_http_shmfilter_param(ngx_str_t *arg, char *name,
    ngx_str_t *value);
static ngx_int_t ngx_http_shmfilter_compile(ngx_conf_t *cf, ngx_str_t *value,
    ngx_http_complex_value_t *cv);
static ngx_http_shmfilter_struct_t *ngx_http_shmfilter_find_struct(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *name, ngx_uint_t *index);
static ngx_http_shmfilter_struct_t *ngx_http_shmfilter_add_struct(
    ngx_conf_t *cf, ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *name,
    ngx_uint_t *index);
static const char *ngx_http_shmfilter_file(
    ngx_http_shmfilter_main_conf_t *smcf);
static void ngx_http_shmfilter_close_handle(ngx_uint_t kind, void *h);
static int ngx_http_shmfilter_open_kind(shmf_segment *seg, ngx_uint_t kind,
    const char *name, void **out);
static int ngx_http_shmfilter_create_kind(shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **out);

static void *ngx_http_shmfilter_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_shmfilter_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_shmfilter_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_shmfilter_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_shmfilter_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static char *ngx_http_shmfilter_segment(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_shmfilter_segment_param(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *arg);
static char *ngx_http_shmfilter_structure(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_shmfilter_structure_param(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg);
static char *ngx_http_shmfilter_structure_check(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st);
static ngx_int_t ngx_http_shmfilter_window_param(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg);
static ngx_int_t ngx_http_shmfilter_window_shape(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg);
static ngx_int_t ngx_http_shmfilter_window_size(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg);
static ngx_int_t ngx_http_shmfilter_parse_signed_time(ngx_str_t *value,
    int64_t *out);
static char *ngx_http_shmfilter_maintain(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_shmfilter_variable(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_shmfilter_variable_name(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *name);
static ngx_int_t ngx_http_shmfilter_name_template(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *name);
static char *ngx_http_shmfilter_variable_args(ngx_conf_t *cf,
    ngx_http_shmfilter_var_t *sv);
static char *ngx_http_shmfilter_variable_window(ngx_conf_t *cf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *arg, ngx_str_t *window);
static char *ngx_http_shmfilter_variable_space(ngx_conf_t *cf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *arg, ngx_str_t *space);
static char *ngx_http_shmfilter_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_shmfilter_answer(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

static ngx_int_t ngx_http_shmfilter_init_module(ngx_cycle_t *cycle);
static int ngx_http_shmfilter_open(ngx_http_shmfilter_main_conf_t *smcf,
    shmf_segment **seg);
static ngx_int_t ngx_http_shmfilter_open_segment(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf,
    shmf_segment **seg, ngx_flag_t *absent);
static int ngx_http_shmfilter_create_segment(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf,
    shmf_segment **seg);
static void ngx_http_shmfilter_check_worker_access(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf);
static ngx_flag_t ngx_http_shmfilter_user_can_rw(ngx_core_conf_t *ccf,
    struct stat *sb);
static ngx_int_t ngx_http_shmfilter_check_structs(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_flag_t absent);
static ngx_int_t ngx_http_shmfilter_check_struct(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st);
static ngx_int_t ngx_http_shmfilter_open_undeclared(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **h, int *rc);
static int ngx_http_shmfilter_open_declared(shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **h);
static ngx_int_t ngx_http_shmfilter_window_matches(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_struct_t *st,
    void *h);
static const char *ngx_http_shmfilter_variant_name(ngx_uint_t variant);
static ngx_int_t ngx_http_shmfilter_check_vars(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf);
static ngx_int_t ngx_http_shmfilter_window_var(ngx_cycle_t *cycle,
    ngx_http_shmfilter_var_t *v, ngx_uint_t kind,
    ngx_http_shmfilter_struct_t *st);
static u_char *ngx_http_shmfilter_needs(u_char *buf, size_t size,
    ngx_uint_t op);

static ngx_int_t ngx_http_shmfilter_init_process(ngx_cycle_t *cycle);
static void ngx_http_shmfilter_exit_process(ngx_cycle_t *cycle);
static char *ngx_http_shmfilter_fail_name(
    ngx_http_shmfilter_main_conf_t *smcf);
static ngx_int_t ngx_http_shmfilter_attach_segment(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_log_t *log);
static void *ngx_http_shmfilter_handle(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_struct_t *st, ngx_log_t *log);
static void ngx_http_shmfilter_struct_failed(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_struct_t *st,
    int rc, ngx_log_t *log);
static void ngx_http_shmfilter_start_maintain(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf);
static void ngx_http_shmfilter_maintain_handler(ngx_event_t *ev);
static shmf_hll *ngx_http_shmfilter_dynamic_hll(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *name, ngx_log_t *log, int *rc, ngx_uint_t *cause,
    ngx_flag_t *temp, ngx_http_shmfilter_hll_slot_t **slot);
static ngx_http_shmfilter_hll_slot_t *ngx_http_shmfilter_hll_lookup(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *name, ngx_uint_t *free);

static ngx_int_t ngx_http_shmfilter_variable_get(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_shmfilter_request_key(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *key, uint64_t *space);
static ngx_int_t ngx_http_shmfilter_key(ngx_http_request_t *r,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *key);
static ngx_int_t ngx_http_shmfilter_space(ngx_http_request_t *r,
    ngx_http_shmfilter_var_t *sv, uint64_t *out);
static int ngx_http_shmfilter_call(ngx_http_shmfilter_var_t *sv,
    ngx_http_shmfilter_struct_t *st, void *h, ngx_str_t *key, uint64_t space,
    uint64_t *count);
static int ngx_http_shmfilter_apply(ngx_uint_t op, ngx_uint_t kind, void *h,
    ngx_str_t *key, uint64_t *count);
static int ngx_http_shmfilter_mark(ngx_uint_t kind, void *h, ngx_str_t *key);
static int ngx_http_shmfilter_size(ngx_uint_t kind, void *h, uint64_t *count);
static int ngx_http_shmfilter_apply_window(ngx_uint_t op, shmf_window *h,
    ngx_str_t *key, ngx_flag_t has_space, uint64_t space, ngx_uint_t w,
    uint64_t *count);
static ngx_int_t ngx_http_shmfilter_hll_variable(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, ngx_str_t *key);
static ngx_int_t ngx_http_shmfilter_value(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, int rc, uint64_t n);
static ngx_int_t ngx_http_shmfilter_fail(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, ngx_uint_t cause);
static int ngx_http_shmfilter_apply_uv(ngx_uint_t op, shmf_uv *h,
    ngx_str_t *key, ngx_flag_t has_space, uint64_t space, ngx_uint_t w,
    uint64_t *count);
static int ngx_http_shmfilter_seen_anyway(ngx_http_shmfilter_var_t *sv,
    ngx_http_shmfilter_struct_t *st, void *h, ngx_str_t *key, uint64_t space);
static void ngx_http_shmfilter_set(ngx_http_variable_value_t *v, char *s);
static ngx_int_t ngx_http_shmfilter_set_number(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uint64_t n);

static ngx_int_t ngx_http_shmfilter_answer_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_shmfilter_status_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_shmfilter_library_text(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *text);
static void ngx_http_shmfilter_status_structs(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_text_t *t,
    ngx_uint_t nworkers);
static void ngx_http_shmfilter_status_segment(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_text_t *t,
    ngx_uint_t nworkers);
static void ngx_http_shmfilter_status_counters(ngx_http_shmfilter_text_t *t,
    ngx_http_shmfilter_counters_t *ctr, ngx_uint_t nworkers);
static void ngx_http_shmfilter_family(ngx_http_shmfilter_text_t *t,
    char *name, char *type, char *help);
static void ngx_cdecl ngx_http_shmfilter_printf(ngx_http_shmfilter_text_t *t,
    const char *fmt, ...);
static ngx_int_t ngx_http_shmfilter_send_text(ngx_http_request_t *r,
    ngx_http_shmfilter_text_t *t);

static ngx_uint_t ngx_http_shmfilter_cause(int rc);
static void ngx_cdecl ngx_http_shmfilter_log(ngx_log_t *log, ngx_uint_t level,
    ngx_uint_t who, int rc, const char *fmt, ...);
static void ngx_http_shmfilter_log_flush(ngx_log_t *log, ngx_flag_t all);
static void ngx_http_shmfilter_failure(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_uint_t cause);
static ngx_int_t ngx_http_shmfilter_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_shmfilter_error_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static void ngx_http_shmfilter_set_gauges(
    ngx_http_shmfilter_main_conf_t *smcf, ngx_flag_t linked);
static ngx_flag_t ngx_http_shmfilter_state_unlinked(
    ngx_http_shmfilter_counters_t *ctr, ngx_flag_t attached);
static void ngx_http_shmfilter_detach(ngx_http_shmfilter_main_conf_t *smcf);
static u_char *ngx_http_shmfilter_path(ngx_http_shmfilter_main_conf_t *smcf,
    u_char *buf, size_t size);
static void ngx_http_shmfilter_start_check(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf);
static void ngx_http_shmfilter_check_handler(ngx_event_t *ev);
static void ngx_http_shmfilter_rescue(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_log_t *log);
static ngx_int_t ngx_http_shmfilter_wait_rescue(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf);
static ngx_flag_t ngx_http_shmfilter_name_ok(ngx_str_t *name);
static void ngx_http_shmfilter_keep_mark(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *key, uint64_t space,
    ngx_log_t *log);
static void ngx_http_shmfilter_switch(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_log_t *log);
static void ngx_http_shmfilter_count_names(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg);
static int ngx_http_shmfilter_create_name(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_var_t *sv, const char *name, shmf_hll **h,
    ngx_uint_t *cause);


/* the C kinds this module serves, in the order its messages list them */
static ngx_uint_t  ngx_http_shmfilter_kinds[] = {
    SHMF_KIND_BLOOM,
    SHMF_KIND_CUCKOO,
    SHMF_KIND_SET,
    SHMF_KIND_HLL,
    SHMF_KIND_WINDOW,
    SHMF_KIND_UV
};


/* indexed by operation: shmfilter_requests_total{op=...}, "shmfilter_" OP */
static char  *ngx_http_shmfilter_op_names[] = {
    "mark",
    "seen",
    "forget",
    "hll_add",
    "count",
    "uv_add"
};


/* indexed by answer: shmfilter_answers_total{answer=...}, and the value */
static char  *ngx_http_shmfilter_answer_names[] = {
    "new",
    "seen",
    "unseen",
    "forgotten",
    "absent",
    "failed",
    "empty_key",
    "bad_space",
    "allowed",
    "capped"
};


/* indexed by cause: shmfilter_failures_total{cause=...}, $shmfilter_error */
static char  *ngx_http_shmfilter_cause_names[] = {
    "",
    "no_space",
    "dropped",
    "corrupt",
    "full",
    "busy",
    "not_attached",
    "not_found",
    "permission",
    "bad_name",
    "names_full",
    "directory_full",
    "error"
};


static ngx_conf_enum_t  ngx_http_shmfilter_fail_modes[] = {
    { ngx_string("open"), 0 },
    { ngx_string("closed"), 1 },
    { ngx_null_string, 0 }
};


static ngx_event_t  ngx_http_shmfilter_maintain_ev;
static ngx_event_t  ngx_http_shmfilter_check_ev;

/* the log's rate limit, per worker */
static ngx_http_shmfilter_logrl_t
    ngx_http_shmfilter_logrl[NGX_HTTP_SHMFILTER_LOG_SLOTS];


static ngx_command_t  ngx_http_shmfilter_commands[] = {

    { ngx_string("shmfilter_segment"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_shmfilter_segment,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("shmfilter_structure"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_structure,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("shmfilter_mark"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_MARK,
      NULL },

    { ngx_string("shmfilter_seen"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_SEEN,
      NULL },

    { ngx_string("shmfilter_forget"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_FORGET,
      NULL },

    { ngx_string("shmfilter_hll_add"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_HLL_ADD,
      NULL },

    { ngx_string("shmfilter_count"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_COUNT,
      NULL },

    { ngx_string("shmfilter_uv_add"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_shmfilter_variable,
      NGX_HTTP_MAIN_CONF_OFFSET,
      NGX_HTTP_SHMFILTER_UV_ADD,
      NULL },

    { ngx_string("shmfilter_fail"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_shmfilter_main_conf_t, fail_closed),
      &ngx_http_shmfilter_fail_modes },

    { ngx_string("shmfilter_maintain"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_shmfilter_maintain,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("shmfilter_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_shmfilter_status,
      0,
      0,
      NULL },

    { ngx_string("shmfilter_answer"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_shmfilter_answer,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_shmfilter_module_ctx = {
    ngx_http_shmfilter_add_variables,      /* preconfiguration */
    NULL,                                  /* postconfiguration */

    ngx_http_shmfilter_create_main_conf,   /* create main configuration */
    ngx_http_shmfilter_init_main_conf,     /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_shmfilter_create_loc_conf,    /* create location configuration */
    ngx_http_shmfilter_merge_loc_conf      /* merge location configuration */
};


ngx_module_t  ngx_http_shmfilter_module = {
    NGX_MODULE_V1,
    &ngx_http_shmfilter_module_ctx,        /* module context */
    ngx_http_shmfilter_commands,           /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_http_shmfilter_init_module,        /* init module */
    ngx_http_shmfilter_init_process,       /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_shmfilter_exit_process,       /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/* helpers */

static ngx_uint_t
ngx_http_shmfilter_kind_served(ngx_uint_t kind)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_SHMFILTER_NKINDS; i++) {
        if (ngx_http_shmfilter_kinds[i] == kind) {
            return 1;
        }
    }

    return 0;
}


/* whether OP applies to a structure of KIND (SHMF_KIND_*) */
static ngx_flag_t
ngx_http_shmfilter_op_fits(ngx_uint_t op, ngx_uint_t kind)
{
    switch (op) {

    case NGX_HTTP_SHMFILTER_MARK:
    case NGX_HTTP_SHMFILTER_SEEN:
        return kind == SHMF_KIND_BLOOM || kind == SHMF_KIND_CUCKOO
               || kind == SHMF_KIND_SET || kind == SHMF_KIND_WINDOW;

    case NGX_HTTP_SHMFILTER_FORGET:
        return kind == SHMF_KIND_CUCKOO || kind == SHMF_KIND_SET
               || kind == SHMF_KIND_WINDOW;

    case NGX_HTTP_SHMFILTER_HLL_ADD:
        return kind == SHMF_KIND_HLL;

    case NGX_HTTP_SHMFILTER_UV_ADD:
        return kind == SHMF_KIND_UV;

    default: /* count, or NGX_HTTP_SHMFILTER_NOPS: any kind */
        return kind != 0;
    }
}


/*
 * The names of the served kinds OP applies to (NGX_HTTP_SHMFILTER_NOPS: all),
 * as the library spells them, joined by ", " and LAST_SEP before the last:
 * "bloom, cuckoo, set, hll or window". NUL-terminated in BUF.
 */
static u_char *
ngx_http_shmfilter_kind_list(u_char *buf, size_t size, ngx_uint_t op,
    char *last_sep)
{
    u_char     *p, *last;
    ngx_uint_t  i, n, total, kind;

    total = 0;

    for (i = 0; i < NGX_HTTP_SHMFILTER_NKINDS; i++) {
        total += ngx_http_shmfilter_op_fits(op, ngx_http_shmfilter_kinds[i]);
    }

    p = buf;
    last = buf + size - 1;
    n = 0;

    for (i = 0; i < NGX_HTTP_SHMFILTER_NKINDS; i++) {
        kind = ngx_http_shmfilter_kinds[i];

        if (!ngx_http_shmfilter_op_fits(op, kind)) {
            continue;
        }

        if (n > 0) {
            p = ngx_slprintf(p, last, "%s", (n + 1 == total) ? last_sep : ", ");
        }

        p = ngx_slprintf(p, last, "%s", shmf_kind_name(kind));
        n++;
    }

    *p = '\0';

    return buf;
}


static ngx_http_shmfilter_worker_t *
ngx_http_shmfilter_my_counters(ngx_http_shmfilter_main_conf_t *smcf)
{
    ngx_uint_t                      slot;
    ngx_http_shmfilter_counters_t  *c;

    if (smcf->zone == NULL || smcf->zone->data == NULL) {
        return NULL;
    }

    c = smcf->zone->data;

    slot = (ngx_worker < NGX_HTTP_SHMFILTER_MAX_WORKERS)
           ? ngx_worker : NGX_HTTP_SHMFILTER_MAX_WORKERS - 1;

    return &c->worker[slot];
}


/* counts one evaluation of OP: its ANSWER (-1: none) and whether it failed */
static void
ngx_http_shmfilter_tally(ngx_http_shmfilter_main_conf_t *smcf, ngx_uint_t op,
    ngx_int_t answer, ngx_flag_t error)
{
    ngx_http_shmfilter_worker_t  *w;

    w = ngx_http_shmfilter_my_counters(smcf);
    if (w == NULL) {
        return;
    }

    ngx_atomic_fetch_add(&w->requests[op], 1);

    if (answer >= 0) {
        ngx_atomic_fetch_add(&w->answers[answer], 1);
    }

    if (error) {
        ngx_atomic_fetch_add(&w->errors, 1);
    }
}


/* ARG is NAME (e.g. "size=") followed by a non-empty VALUE */
static ngx_flag_t
ngx_http_shmfilter_param(ngx_str_t *arg, char *name, ngx_str_t *value)
{
    size_t  len;

    len = ngx_strlen(name);

    if (arg->len <= len || ngx_strncmp(arg->data, name, len) != 0) {
        return 0;
    }

    value->len = arg->len - len;
    value->data = arg->data + len;

    return 1;
}


static ngx_int_t
ngx_http_shmfilter_compile(ngx_conf_t *cf, ngx_str_t *value,
    ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t  ccv;

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));

    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;

    return ngx_http_compile_complex_value(&ccv);
}


static ngx_http_shmfilter_struct_t *
ngx_http_shmfilter_find_struct(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_str_t *name, ngx_uint_t *index)
{
    ngx_uint_t                    i;
    ngx_http_shmfilter_struct_t  *st;

    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {

        if (st[i].name.len == name->len
            && ngx_strncmp(st[i].name.data, name->data, name->len) == 0)
        {
            if (index) {
                *index = i;
            }

            return &st[i];
        }
    }

    return NULL;
}


static ngx_http_shmfilter_struct_t *
ngx_http_shmfilter_add_struct(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *name, ngx_uint_t *index)
{
    ngx_http_shmfilter_struct_t  *st;

    st = ngx_http_shmfilter_find_struct(smcf, name, index);
    if (st != NULL) {
        return st;
    }

    if (name->len == 0 || name->len > NGX_HTTP_SHMFILTER_NAME_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "structure name \"%V\" must be 1 to 63 bytes",
                           name);
        return NULL;
    }

    if (index) {
        *index = smcf->structs.nelts;
    }

    st = ngx_array_push(&smcf->structs);
    if (st == NULL) {
        return NULL;
    }

    ngx_memzero(st, sizeof(ngx_http_shmfilter_struct_t));

    st->name = *name;
    st->conf_file = cf->conf_file->file.name;
    st->conf_line = cf->conf_file->line;
    st->error = 0.01;

    return st;
}


/* the file= of the segment; NULL: POSIX shm */
static const char *
ngx_http_shmfilter_file(ngx_http_shmfilter_main_conf_t *smcf)
{
    return smcf->file.len ? (const char *) smcf->file.data : NULL;
}


/* closes a structure handle of KIND (NULL is a no-op) */
static void
ngx_http_shmfilter_close_handle(ngx_uint_t kind, void *h)
{
    if (h == NULL) {
        return;
    }

    switch (kind) {

    case SHMF_KIND_BLOOM:
        shmf_bloom_close(h);
        break;

    case SHMF_KIND_CUCKOO:
        shmf_cuckoo_close(h);
        break;

    case SHMF_KIND_SET:
        shmf_set_close(h);
        break;

    case SHMF_KIND_HLL:
        shmf_hll_close(h);
        break;

    case SHMF_KIND_WINDOW:
        shmf_window_close(h);
        break;

    case SHMF_KIND_UV:
        shmf_uv_close(h);
        break;
    }
}


/* opens NAME as KIND: 0, or a negative shmf code */
static int
ngx_http_shmfilter_open_kind(shmf_segment *seg, ngx_uint_t kind,
    const char *name, void **out)
{
    *out = NULL;

    switch (kind) {

    case SHMF_KIND_BLOOM:
        return shmf_bloom_open(seg, name, (shmf_bloom **) out);

    case SHMF_KIND_CUCKOO:
        return shmf_cuckoo_open(seg, name, (shmf_cuckoo **) out);

    case SHMF_KIND_SET:
        return shmf_set_open(seg, name, (shmf_set **) out);

    case SHMF_KIND_HLL:
        return shmf_hll_open(seg, name, (shmf_hll **) out);

    case SHMF_KIND_WINDOW:
        return shmf_window_open(seg, name, (shmf_window **) out);

    case SHMF_KIND_UV:
        return shmf_uv_open(seg, name, (shmf_uv **) out);
    }

    return -SHMF_EINVAL;
}


/* creates ST as declared: 0, or a negative shmf code */
static int
ngx_http_shmfilter_create_kind(shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **out)
{
    const char          *name;
    shmf_uv_options      uo;
    shmf_set_options     so;
    shmf_bloom_options   bo;
    shmf_cuckoo_options  co;

    name = (const char *) st->name.data;
    *out = NULL;

    switch (st->kind) {

    case SHMF_KIND_BLOOM:
        shmf_bloom_options_init(&bo);
        bo.capacity = st->capacity;
        bo.error = st->error;
        return shmf_bloom_create(seg, name, &bo, (shmf_bloom **) out);

    case SHMF_KIND_CUCKOO:
        shmf_cuckoo_options_init(&co);
        co.capacity = st->capacity;
        co.error = st->error;
        return shmf_cuckoo_create(seg, name, &co, (shmf_cuckoo **) out);

    case SHMF_KIND_SET:
        shmf_set_options_init(&so);
        so.capacity = st->capacity;
        return shmf_set_create(seg, name, &so, (shmf_set **) out);

    case SHMF_KIND_HLL:
        return shmf_hll_open_or_create(seg, name, (shmf_hll **) out);

    case SHMF_KIND_WINDOW:
        return shmf_window_create(seg, name, &st->wopt,
                                  (shmf_window **) out);

    case SHMF_KIND_UV:
        /* a UV family takes the window's shape: retention=, bucket=, utc_offset= */
        shmf_uv_options_init(&uo);
        if (st->wopt_set[1]) {
            uo.retention = st->wopt.retention;
        }
        if (st->wopt_set[2]) {
            uo.bucket_seconds = st->wopt.bucket_seconds;
        }
        if (st->wopt_set[3]) {
            uo.utc_offset = st->wopt.utc_offset;
        }
        return shmf_uv_open_or_create(seg, name, &uo, (shmf_uv **) out);
    }

    return -SHMF_EINVAL;
}


/* configuration */

static void *
ngx_http_shmfilter_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_shmfilter_main_conf_t  *smcf;

    smcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_shmfilter_main_conf_t));
    if (smcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&smcf->structs, cf->pool, 4,
                       sizeof(ngx_http_shmfilter_struct_t))
        != NGX_OK)
    {
        return NULL;
    }

    if (ngx_array_init(&smcf->vars, cf->pool, 4,
                       sizeof(ngx_http_shmfilter_var_t *))
        != NGX_OK)
    {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     smcf->segment = { 0, NULL };
     *     smcf->file = { 0, NULL };
     *     smcf->create = 0;
     *     smcf->size = 0;
     *     smcf->zone = NULL;
     *     smcf->seg = NULL;
     *     smcf->hll_cache = NULL;
     */

    smcf->mode = -1;
    smcf->group = -1;
    smcf->trusted_owner = -1;
    smcf->fail_closed = NGX_CONF_UNSET;
    smcf->maintain = NGX_CONF_UNSET_MSEC;

    return smcf;
}


static char *
ngx_http_shmfilter_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_shmfilter_main_conf_t *smcf = conf;

    ngx_http_shmfilter_var_t  **v;

    ngx_conf_init_value(smcf->fail_closed, 0);
    ngx_conf_init_msec_value(smcf->maintain, 60000);

    if (smcf->vars.nelts > 0 && smcf->segment.len == 0) {
        v = smcf->vars.elts;

        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "shmfilter_%s in %V:%ui needs a segment: "
                      "add \"shmfilter_segment NAME [create];\" "
                      "to the http block",
                      ngx_http_shmfilter_op_names[v[0]->op],
                      &v[0]->conf_file, v[0]->conf_line);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static void *
ngx_http_shmfilter_create_loc_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_shmfilter_loc_conf_t));
}


static char *
ngx_http_shmfilter_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    /* shmfilter_answer belongs to its own location: it is not inherited */

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_shmfilter_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t                *shpool;
    ngx_http_shmfilter_counters_t  *c;

    if (data) {
        /* reload: the old cycle's zone of the same size: keep counting */
        shm_zone->data = data;
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        return NGX_OK;
    }

    c = ngx_slab_calloc(shpool, sizeof(ngx_http_shmfilter_counters_t));
    if (c == NULL) {
        return NGX_ERROR;
    }

    shpool->data = c;
    shm_zone->data = c;

    return NGX_OK;
}


static char *
ngx_http_shmfilter_segment(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_shmfilter_main_conf_t *smcf = conf;

    ngx_str_t  *value, name;
    ngx_uint_t  i;

    if (smcf->segment.len) {
        return "is duplicate (one segment per http block)";
    }

    value = cf->args->elts;

    if (value[1].len == 0 || value[1].len > 200) {
        return "needs a segment name of 1 to 200 bytes";
    }

    smcf->segment = value[1];
    smcf->conf_file = cf->conf_file->file.name;
    smcf->conf_line = cf->conf_file->line;

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_http_shmfilter_segment_param(cf, smcf, &value[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    ngx_str_set(&name, "shmfilter_counters");

    smcf->zone = ngx_shared_memory_add(cf, &name,
                                       8 * ngx_pagesize
                                       + sizeof(ngx_http_shmfilter_counters_t),
                                       &ngx_http_shmfilter_module);
    if (smcf->zone == NULL) {
        return NGX_CONF_ERROR;
    }

    smcf->zone->init = ngx_http_shmfilter_init_zone;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_shmfilter_segment_param(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *arg)
{
    char          *end;
    long           m;
    off_t          n;
    ngx_str_t      v;
    struct group  *g;

    if (arg->len == 6 && ngx_strncmp(arg->data, "create", 6) == 0) {
        smcf->create = 1;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "file=", &v)) {
        smcf->file = v;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "size=", &v)) {

        /* k, m and g suffixes (ngx_parse_size has no g) */
        n = ngx_parse_offset(&v);

        if (n == NGX_ERROR || n < 65536) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: a size of at least 64k, "
                               "e.g. size=256m or 3g", arg);
            return NGX_ERROR;
        }

        smcf->size = (size_t) n;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "directory=", &v)) {
        m = ngx_atoi(v.data, v.len);

        if (m < 1 || m > (1 << 22)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: named structures the segment "
                               "holds, 1 to 4194304, set when it is created "
                               "(default 4096)", arg);
            return NGX_ERROR;
        }

        smcf->directory = (uint32_t) m;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "mode=", &v)) {
        end = NULL;
        m = strtol((const char *) v.data, &end, 8);

        if (end == NULL || *end != '\0' || m < 0 || m > 0777) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: octal permission bits, "
                               "e.g. mode=0660", arg);
            return NGX_ERROR;
        }

        smcf->mode = m;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "group=", &v)) {
        g = getgrnam((const char *) v.data);

        if (g == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: no such group", arg);
            return NGX_ERROR;
        }

        smcf->group = g->gr_gid;
        return NGX_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "unknown parameter \"%V\" (expected create, "
                       "file=PATH, size=SIZE, directory=N, mode=OCTAL, "
                       "group=NAME)", arg);

    return NGX_ERROR;
}


static char *
ngx_http_shmfilter_structure(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_shmfilter_main_conf_t *smcf = conf;

    u_char                        list[128];
    ngx_str_t                    *value;
    ngx_uint_t                    i, kind;
    ngx_http_shmfilter_struct_t  *st;

    value = cf->args->elts;

    kind = shmf_kind_from_name((const char *) value[2].data, value[2].len);

    if (!ngx_http_shmfilter_kind_served(kind)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown structure kind \"%V\" (expected %s)",
                           &value[2],
                           ngx_http_shmfilter_kind_list(list, sizeof(list),
                                                  NGX_HTTP_SHMFILTER_NOPS,
                                                  " or "));
        return NGX_CONF_ERROR;
    }

    st = ngx_http_shmfilter_find_struct(smcf, &value[1], NULL);
    if (st != NULL && st->declared) {
        return "declares a structure twice";
    }

    st = ngx_http_shmfilter_add_struct(cf, smcf, &value[1], NULL);
    if (st == NULL) {
        return NGX_CONF_ERROR;
    }

    st->kind = kind;
    st->declared = 1;
    st->conf_file = cf->conf_file->file.name;
    st->conf_line = cf->conf_file->line;

    shmf_window_options_init(&st->wopt);

    for (i = 3; i < cf->args->nelts; i++) {
        if (ngx_http_shmfilter_structure_param(cf, st, &value[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    return ngx_http_shmfilter_structure_check(cf, st);
}


static ngx_int_t
ngx_http_shmfilter_structure_param(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg)
{
    char      *end;
    off_t      n;
    double     e;
    ngx_int_t  rc;
    ngx_str_t  v;

    if (arg->len == 6 && ngx_strncmp(arg->data, "create", 6) == 0) {
        st->create = 1;
        return NGX_OK;
    }

    if (st->kind == SHMF_KIND_WINDOW) {
        rc = ngx_http_shmfilter_window_param(cf, st, arg);
        if (rc != NGX_DECLINED) {
            return rc;
        }
    }

    if (st->kind == SHMF_KIND_UV) {
        if (ngx_http_shmfilter_param(arg, "variant=", &v)) {
            rc = NGX_DECLINED;
        } else {
            rc = ngx_http_shmfilter_window_shape(cf, st, arg);
        }
        if (rc != NGX_DECLINED) {
            return rc;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown parameter \"%V\" (a uv family takes "
                           "retention=N, bucket=TIME, utc_offset=TIME, "
                           "create)", arg);
        return NGX_ERROR;
    }

    if (ngx_http_shmfilter_param(arg, "capacity=", &v)) {
        n = ngx_atoof(v.data, v.len);

        if (st->kind == SHMF_KIND_WINDOW) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "%V: a window is sized per bucket: "
                               "use expected=N (distinct pairs a bucket "
                               "holds)", arg);
            return NGX_ERROR;
        }

        if (n <= 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: a positive integer", arg);
            return NGX_ERROR;
        }

        st->capacity = (uint64_t) n;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "error=", &v)) {
        end = NULL;
        e = strtod((const char *) v.data, &end);

        if (end == NULL || *end != '\0' || !(e > 0 && e < 1)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: a rate in (0, 1), "
                               "e.g. error=0.001", arg);
            return NGX_ERROR;
        }

        st->error = e;
        st->wopt.error = e;
        return NGX_OK;
    }

    if (st->kind == SHMF_KIND_WINDOW) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown parameter \"%V\" (a window takes "
                           "variant=bloom|cuckoo|stamped, expected=N, "
                           "error=RATE, "
                           "retention=N, bucket=TIME, utc_offset=TIME, "
                           "max_spaces=N, error_window=N, create)", arg);
        return NGX_ERROR;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "unknown parameter \"%V\" "
                       "(expected capacity=N, error=RATE, create)", arg);

    return NGX_ERROR;
}


/* what shmfilter_structure needs once all its parameters are read */
static char *
ngx_http_shmfilter_structure_check(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st)
{
    if (st->kind == SHMF_KIND_WINDOW
        && st->wopt.error_window > st->wopt.retention)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "window \"%V\": error_window=%uD is more than "
                           "retention=%uD", &st->name,
                           st->wopt.error_window, st->wopt.retention);
        return NGX_CONF_ERROR;
    }

    if (st->kind == SHMF_KIND_WINDOW
        && st->wopt.variant == SHMF_WINDOW_STAMPED && st->wopt.retention > 12)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "window \"%V\": variant=stamped (the default) keeps "
                           "at most 12 buckets (its lanes stamp the bucket in 4 "
                           "bits), retention=%uD: add variant=bloom or "
                           "variant=cuckoo for a longer window",
                           &st->name, st->wopt.retention);
        return NGX_CONF_ERROR;
    }

    if (st->create && st->kind == SHMF_KIND_WINDOW
        && st->wopt.expected_per_bucket == 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "window \"%V\": create needs expected=N "
                           "(distinct pairs one bucket must hold)",
                           &st->name);
        return NGX_CONF_ERROR;
    }

    if (st->create && st->kind != SHMF_KIND_HLL
        && st->kind != SHMF_KIND_WINDOW && st->kind != SHMF_KIND_UV
        && st->capacity == 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "structure \"%V\": create needs capacity=N",
                           &st->name);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * The parameters of "shmfilter_structure NAME window ...": NGX_OK,
 * NGX_ERROR (logged), or NGX_DECLINED: not a window parameter.
 */
static ngx_int_t
ngx_http_shmfilter_window_param(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg)
{
    ngx_int_t  rc;

    rc = ngx_http_shmfilter_window_shape(cf, st, arg);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    return ngx_http_shmfilter_window_size(cf, st, arg);
}


/*
 * The window's shape, which a window that exists keeps (init_module checks
 * the declared variant and retention against it): variant=, retention=,
 * bucket=, utc_offset=.
 */
static ngx_int_t
ngx_http_shmfilter_window_shape(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg)
{
    int        kind;
    int64_t    offset;
    ngx_int_t  x;
    ngx_str_t  v;

    if (ngx_http_shmfilter_param(arg, "variant=", &v)) {

        /* a window's variant is named after the kind of its buckets */
        kind = shmf_kind_from_name((const char *) v.data, v.len);

        if (kind == SHMF_KIND_BLOOM) {
            st->wopt.variant = SHMF_WINDOW_BLOOM;

        } else if (kind == SHMF_KIND_CUCKOO) {
            st->wopt.variant = SHMF_WINDOW_CUCKOO;

        } else if (v.len == 7 && ngx_strncmp(v.data, "stamped", 7) == 0) {
            /* every bucket in one table of stamped lanes: not a kind */
            st->wopt.variant = SHMF_WINDOW_STAMPED;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: variant=bloom (insert-only, "
                               "least memory), variant=cuckoo (deletable: "
                               "shmfilter_forget) or variant=stamped "
                               "(deletable, one table for every bucket, "
                               "frequency caps: shmfilter_mark ... cap=N)",
                               arg);
            return NGX_ERROR;
        }

        st->wopt_set[0] = 1;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "retention=", &v)) {
        x = ngx_atoi(v.data, v.len);

        if (x < 1 || x > 64) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: buckets kept, 1 to 64 "
                               "(default 7)", arg);
            return NGX_ERROR;
        }

        st->wopt.retention = (uint32_t) x;
        st->wopt_set[1] = 1;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "bucket=", &v)) {
        x = ngx_parse_time(&v, 1);

        if (x == NGX_ERROR || x < 1) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: a bucket length of at least 1s, "
                               "e.g. bucket=1d", arg);
            return NGX_ERROR;
        }

        st->wopt.bucket_seconds = (uint64_t) x;
        st->wopt_set[2] = 1;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "utc_offset=", &v)) {
        offset = 0;

        if (ngx_http_shmfilter_parse_signed_time(&v, &offset) != NGX_OK
            || offset < -86400 || offset > 86400)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: where buckets start, east of "
                               "UTC, within a day, e.g. utc_offset=8h or "
                               "utc_offset=-5h", arg);
            return NGX_ERROR;
        }

        st->wopt.utc_offset = offset;
        st->wopt_set[3] = 1;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/* the window's sizing: expected=, max_spaces=, error_window= */
static ngx_int_t
ngx_http_shmfilter_window_size(ngx_conf_t *cf,
    ngx_http_shmfilter_struct_t *st, ngx_str_t *arg)
{
    off_t      n;
    ngx_int_t  x;
    ngx_str_t  v;

    if (ngx_http_shmfilter_param(arg, "expected=", &v)) {
        n = ngx_atoof(v.data, v.len);

        if (n <= 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: distinct (space, item) pairs "
                               "one bucket must hold, a positive integer",
                               arg);
            return NGX_ERROR;
        }

        st->wopt.expected_per_bucket = (uint64_t) n;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "max_spaces=", &v)) {
        x = ngx_atoi(v.data, v.len);

        if (x < 1 || x > (1 << 20)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: spaces with their own counters, "
                               "1 to 1048576", arg);
            return NGX_ERROR;
        }

        st->wopt.max_spaces = (uint32_t) x;
        return NGX_OK;
    }

    if (ngx_http_shmfilter_param(arg, "error_window=", &v)) {
        x = ngx_atoi(v.data, v.len);

        if (x < 1 || x > 64) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: the window W the error rate is "
                               "for, 1 to 64", arg);
            return NGX_ERROR;
        }

        st->wopt.error_window = (uint32_t) x;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/* a signed nginx time ("8h", "-5h30m", "0", "28800s"): seconds into OUT */
static ngx_int_t
ngx_http_shmfilter_parse_signed_time(ngx_str_t *value, int64_t *out)
{
    ngx_int_t  sign, t;
    ngx_str_t  v;

    v = *value;
    sign = 1;

    if (v.len > 0 && (v.data[0] == '+' || v.data[0] == '-')) {
        sign = (v.data[0] == '-') ? -1 : 1;
        v.data++;
        v.len--;
    }

    t = v.len ? ngx_parse_time(&v, 1) : NGX_ERROR;
    if (t == NGX_ERROR) {
        return NGX_ERROR;
    }

    *out = sign * (int64_t) t;

    return NGX_OK;
}


static char *
ngx_http_shmfilter_maintain(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_shmfilter_main_conf_t *smcf = conf;

    ngx_str_t  *value;

    if (smcf->maintain != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) {
        smcf->maintain = 0;
        return NGX_CONF_OK;
    }

    smcf->maintain = ngx_parse_time(&value[1], 0);

    if (smcf->maintain == (ngx_msec_t) NGX_ERROR || smcf->maintain < 1000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\": a period of at least 1s, "
                           "or off", &value[1]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_shmfilter_variable(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_shmfilter_main_conf_t *smcf = conf;

    char                      *rv;
    ngx_str_t                 *value, name;
    ngx_http_variable_t       *var;
    ngx_http_shmfilter_var_t  *sv, **slot;

    value = cf->args->elts;

    if (value[1].len < 2 || value[1].data[0] != '$') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid variable name \"%V\" (expected $name)",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    sv = ngx_pcalloc(cf->pool, sizeof(ngx_http_shmfilter_var_t));
    if (sv == NULL) {
        return NGX_CONF_ERROR;
    }

    sv->op = cmd->offset;
    sv->var_name = value[1];
    sv->conf_file = cf->conf_file->file.name;
    sv->conf_line = cf->conf_file->line;

    if (ngx_http_shmfilter_variable_name(cf, smcf, sv, &value[2]) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_http_shmfilter_variable_args(cf, sv);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    name.len = value[1].len - 1;
    name.data = value[1].data + 1;

    /* a second definition: "the duplicate variable" */
    var = ngx_http_add_variable(cf, &name, 0);
    if (var == NULL) {
        return NGX_CONF_ERROR;
    }

    var->get_handler = ngx_http_shmfilter_variable_get;
    var->data = (uintptr_t) sv;

    slot = ngx_array_push(&smcf->vars);
    if (slot == NULL) {
        return NGX_CONF_ERROR;
    }

    *slot = sv;

    return NGX_CONF_OK;
}


/*
 * The structure name of a variable: a structure of the configuration, or a
 * per-request name (an HLL) compiled as a complex value.
 */
static ngx_int_t
ngx_http_shmfilter_variable_name(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *name)
{
    if (ngx_http_script_variables_count(name) == 0) {

        if (ngx_http_shmfilter_add_struct(cf, smcf, name, &sv->index)
            == NULL)
        {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (sv->op != NGX_HTTP_SHMFILTER_HLL_ADD
        && sv->op != NGX_HTTP_SHMFILTER_COUNT)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "structure name \"%V\" must not hold variables "
                           "(only shmfilter_hll_add and shmfilter_count take "
                           "per-request names)", name);
        return NGX_ERROR;
    }

    sv->name_cv = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (sv->name_cv == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_shmfilter_name_template(cf, smcf, sv, name) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_shmfilter_compile(cf, name, sv->name_cv);
}


/*
 * A name built from request data (docs/SECURITY.md, "nginx: request data"):
 * its literal prefix (before the first variable) must be of the safe set, and
 * it takes a slot of the shared zone's name counts (names=N, default 64).
 */
static ngx_int_t
ngx_http_shmfilter_name_template(ngx_conf_t *cf,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *name)
{
    u_char     *dollar;
    ngx_str_t   prefix;

    dollar = ngx_strlchr(name->data, name->data + name->len, '$');

    prefix.data = name->data;
    prefix.len = dollar ? (size_t) (dollar - name->data) : name->len;

    if (prefix.len > 0 && !ngx_http_shmfilter_name_ok(&prefix)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "structure name \"%V\": a name built from "
                           "variables is 1-63 bytes of A-Z a-z 0-9 . _ : - "
                           "(its literal part \"%V\" is not)", name, &prefix);
        return NGX_ERROR;
    }

    if (smcf->name_vars == NGX_HTTP_SHMFILTER_NAME_VARS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "at most %d variables with per-request structure "
                           "names in one http block",
                           NGX_HTTP_SHMFILTER_NAME_VARS);
        return NGX_ERROR;
    }

    sv->name_prefix = prefix;
    sv->name_slot = smcf->name_vars++;
    sv->names_max = NGX_HTTP_SHMFILTER_NAMES_DEFAULT;

    return NGX_OK;
}


/*
 * The arguments after a variable directive's structure name: space= and
 * window= anywhere, every other argument a key part.
 */
static char *
ngx_http_shmfilter_variable_args(ngx_conf_t *cf, ngx_http_shmfilter_var_t *sv)
{
    char                     *rv;
    ngx_int_t                 x;
    ngx_str_t                *value, v;
    ngx_uint_t                i, nparts;
    ngx_http_complex_value_t  parts[NGX_HTTP_SHMFILTER_MAX_PARTS];

    value = cf->args->elts;
    nparts = 0;

    for (i = 3; i < cf->args->nelts; i++) {

        if (ngx_http_shmfilter_param(&value[i], "space=", &v)) {
            rv = ngx_http_shmfilter_variable_space(cf, sv, &value[i], &v);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_http_shmfilter_param(&value[i], "window=", &v)) {
            rv = ngx_http_shmfilter_variable_window(cf, sv, &value[i], &v);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (ngx_http_shmfilter_param(&value[i], "cap=", &v)) {
            x = ngx_atoi(v.data, v.len);

            if (sv->op != NGX_HTTP_SHMFILTER_MARK) {
                return "takes no cap= (only shmfilter_mark caps marks)";
            }

            if (sv->cap != 0) {
                return "takes cap= once";
            }

            if (x < 1 || x > 15) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid %V: the marks a pair may have in "
                                   "the window, 1 to 15 (cap=3: at most 3 "
                                   "allowed in the last window=W buckets)",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            sv->cap = (ngx_uint_t) x;
            continue;
        }

        if (ngx_http_shmfilter_param(&value[i], "names=", &v)) {
            x = ngx_atoi(v.data, v.len);

            if (sv->name_cv == NULL) {
                return "takes names= only with a structure name that holds "
                       "variables";
            }

            if (x < 1 || x > NGX_HTTP_SHMFILTER_NAMES_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid %V: the structures this variable "
                                   "may create from request data, 1 to "
                                   "65536 (default 64)", &value[i]);
                return NGX_CONF_ERROR;
            }

            sv->names_max = (ngx_uint_t) x;
            continue;
        }

        if (sv->op == NGX_HTTP_SHMFILTER_COUNT) {
            return "takes a variable, a structure name and, for a window, "
                   "space= and window= (names=N with a per-request name)";
        }

        if (nparts == NGX_HTTP_SHMFILTER_MAX_PARTS) {
            return "takes at most 8 key parts";
        }

        if (ngx_http_shmfilter_compile(cf, &value[i], &parts[nparts])
            != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

        nparts++;
    }

    if (sv->op != NGX_HTTP_SHMFILTER_COUNT && nparts == 0) {
        return "takes a variable, a structure name and at least one key part";
    }

    if (sv->cap != 0 && sv->name_cv != NULL) {
        return "takes no cap= with a per-request (hll) name";
    }

    if (sv->op == NGX_HTTP_SHMFILTER_COUNT && sv->name_cv != NULL
        && (sv->space != NULL || sv->window != 0))
    {
        return "takes no space= or window= with a per-request (hll) name";
    }

    sv->nparts = nparts;

    if (nparts) {
        sv->parts = ngx_pcalloc(cf->pool,
                                sizeof(ngx_http_complex_value_t) * nparts);
        if (sv->parts == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_memcpy(sv->parts, parts,
                   sizeof(ngx_http_complex_value_t) * nparts);
    }

    return NGX_CONF_OK;
}


/* window=W of a variable: the last W buckets of a window */
static char *
ngx_http_shmfilter_variable_window(ngx_conf_t *cf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *arg, ngx_str_t *window)
{
    ngx_int_t  w;

    w = ngx_atoi(window->data, window->len);

    if (sv->op == NGX_HTTP_SHMFILTER_HLL_ADD) {
        return "takes no window= (only a window structure has buckets)";
    }

    if (sv->op == NGX_HTTP_SHMFILTER_UV_ADD) {
        return "takes no window= (an add goes to the current bucket)";
    }

    if (w < 1 || w > 64) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid %V: the last W buckets, 1 to the "
                           "window's retention", arg);
        return NGX_CONF_ERROR;
    }

    sv->window = (ngx_uint_t) w;

    return NGX_CONF_OK;
}


/* space=SPACE of a variable: a window's space, the plan id, from any value */
static char *
ngx_http_shmfilter_variable_space(ngx_conf_t *cf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *arg, ngx_str_t *space)
{
    u_char  *c;

    if (sv->space != NULL) {
        return "takes space= once";
    }

    if (sv->op == NGX_HTTP_SHMFILTER_HLL_ADD) {
        return "takes no space= (only a window has spaces)";
    }

    sv->space = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (sv->space == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_http_script_variables_count(space) == 0) {

        for (c = space->data; c < space->data + space->len; c++) {
            if (*c < '0' || *c > '9') {
                break;
            }
        }

        if (c != space->data + space->len || space->len > 20
            || (space->len == 20
                && ngx_strncmp(space->data, "18446744073709551615", 20) > 0))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: a space is a decimal uint64 "
                               "(the plan id) or a variable holding one, "
                               "e.g. space=$arg_plan", arg);
            return NGX_CONF_ERROR;
        }
    }

    if (ngx_http_shmfilter_compile(cf, space, sv->space) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_shmfilter_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_shmfilter_status_handler;

    return NGX_CONF_OK;
}


static char *
ngx_http_shmfilter_answer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_shmfilter_loc_conf_t *slcf = conf;

    ngx_str_t                 *value;
    ngx_http_core_loc_conf_t  *clcf;

    if (slcf->answer != NULL) {
        return "is duplicate";
    }

    slcf->answer = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (slcf->answer == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    if (ngx_http_shmfilter_compile(cf, &value[1], slcf->answer) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_shmfilter_answer_handler;

    return NGX_CONF_OK;
}


/* the master: check (and create) what the configuration names */

static ngx_int_t
ngx_http_shmfilter_init_module(ngx_cycle_t *cycle)
{
    ngx_int_t                        rc;
    ngx_flag_t                       absent;
    shmf_segment                    *seg;
    ngx_core_conf_t                 *ccf;
    ngx_http_shmfilter_main_conf_t  *smcf;

    if (ngx_process == NGX_PROCESS_SIGNALLER) {
        /* nginx -s: the master checks on reload */
        return NGX_OK;
    }

    smcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_shmfilter_module);
    if (smcf == NULL || smcf->segment.len == 0) {
        return NGX_OK;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    /*
     * A root master trusts the workers' user as a segment's owner: a rescue
     * (a worker's) re-creates a removed segment as that user.
     */
    if (geteuid() == 0 && ccf->user != (uid_t) NGX_CONF_UNSET_UINT
        && ccf->user != 0)
    {
        smcf->trusted_owner = ccf->user;
    }

    if (ngx_http_shmfilter_open_segment(cycle, smcf, ccf, &seg, &absent)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!absent) {
        ngx_http_shmfilter_check_worker_access(cycle, smcf, ccf);
    }

    rc = ngx_http_shmfilter_check_structs(cycle, smcf, seg, absent);

    if (rc == NGX_OK && seg != NULL && !ngx_test_config) {
        ngx_http_shmfilter_count_names(cycle, smcf, seg);
    }

    /* the master keeps nothing: workers attach themselves */
    shmf_segment_close(seg);

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_shmfilter_check_vars(cycle, smcf);
}


/* attaches the segment (trusting the workers' user as its owner: a rescue) */
static int
ngx_http_shmfilter_open(ngx_http_shmfilter_main_conf_t *smcf,
    shmf_segment **seg)
{
    shmf_open_options  o;

    shmf_open_options_init(&o);
    o.file = ngx_http_shmfilter_file(smcf);
    o.trusted_owner = smcf->trusted_owner;

    return shmf_segment_open_ex((const char *) smcf->segment.data, &o, seg);
}


/*
 * Opens the segment, or creates it when "create" asks for it. ABSENT: nginx -t
 * found no segment that "create" would create (nginx -t creates nothing).
 */
static ngx_int_t
ngx_http_shmfilter_open_segment(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf,
    shmf_segment **seg, ngx_flag_t *absent)
{
    int  rc;

    *seg = NULL;
    *absent = 0;

    rc = ngx_http_shmfilter_open(smcf, seg);

    if (rc == -SHMF_ENOTFOUND && !ngx_test_config) {
        /* removed under running workers: their rescue, or no reload */
        switch (ngx_http_shmfilter_wait_rescue(cycle, smcf)) {
        case NGX_OK:
            rc = ngx_http_shmfilter_open(smcf, seg);
            break;
        case NGX_ERROR:
            return NGX_ERROR;
        default:
            break;
        }
    }

    if (rc == -SHMF_ENOTFOUND && smcf->create) {

        if (ngx_test_config) {
            *absent = 1;
            return NGX_OK;
        }

        rc = ngx_http_shmfilter_create_segment(cycle, smcf, ccf, seg);
    }

    if (rc < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_segment \"%V\" in %V:%ui: %s: %s%s",
                      &smcf->segment, &smcf->conf_file, smcf->conf_line,
                      shmf_strerror(rc), shmf_last_error_message(),
                      (rc == -SHMF_ENOTFOUND)
                      ? " (or add the create parameter to shmfilter_segment)"
                      : "");
        return NGX_ERROR;
    }

    return NGX_OK;
}


static int
ngx_http_shmfilter_create_segment(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf,
    shmf_segment **seg)
{
    int                   rc;
    shmf_segment_options  o;

    shmf_segment_options_init(&o);

    if (smcf->size) {
        o.size = smcf->size;
    }

    if (smcf->directory) {
        o.directory_capacity = smcf->directory;
    }

    o.file = ngx_http_shmfilter_file(smcf);

    /*
     * Workers run as "user"; a master running as root gives the segment
     * to the workers' group, read-write for it (docs/nginx.md).
     */

    if (geteuid() == 0 && ccf->group != (gid_t) NGX_CONF_UNSET_UINT
        && ccf->user != 0)
    {
        o.group = ccf->group;
        o.mode = 0660;
    }

    if (smcf->group >= 0) {
        o.group = smcf->group;
    }

    if (smcf->mode >= 0) {
        o.mode = (uint32_t) smcf->mode;
    }

    rc = shmf_segment_open_or_create((const char *) smcf->segment.data, &o,
                                     seg);

    if (rc >= 0) {
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "shmfilter: segment \"%V\" ready (created if absent)",
                      &smcf->segment);
    }

    return rc;
}


/*
 * A root master whose workers run as "user": warn at start-up (not per
 * worker at run time) when that user cannot open the segment read-write.
 * The backing path is /dev/shm/NAME (glibc's shm_open) or the file= path.
 */
static void
ngx_http_shmfilter_check_worker_access(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_core_conf_t *ccf)
{
    u_char       path[512], mode[8];
    ngx_uint_t   m;
    struct stat  sb;

    if (geteuid() != 0 || ccf->user == (uid_t) NGX_CONF_UNSET_UINT
        || ccf->user == 0)
    {
        return;
    }

    if (smcf->file.len) {
        ngx_cpystrn(path, smcf->file.data, sizeof(path));

    } else {
        ngx_snprintf(path, sizeof(path) - 1, "/dev/shm/%V%Z", &smcf->segment);
    }

    if (stat((const char *) path, &sb) != 0) {
        return;
    }

    if (ngx_http_shmfilter_user_can_rw(ccf, &sb)) {
        return;
    }

    /* "%04o": ngx_sprintf() has no octal */
    m = sb.st_mode & 07777;
    ngx_sprintf(mode, "%ui%ui%ui%ui%Z",
                (m >> 9) & 7, (m >> 6) & 7, (m >> 3) & 7, m & 7);

    ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                  "shmfilter_segment \"%V\": %s (uid %d gid %d mode %s) "
                  "is not read-write for the workers' user (uid %d gid %d): "
                  "they will answer per shmfilter_fail; give it to their "
                  "group (chgrp, chmod 0660) or recreate it with the create "
                  "parameter (docs/nginx.md, Users)",
                  &smcf->segment, path, (int) sb.st_uid, (int) sb.st_gid,
                  mode, (int) ccf->user, (int) ccf->group);
}


/* whether the workers' user and group may read and write the file SB */
static ngx_flag_t
ngx_http_shmfilter_user_can_rw(ngx_core_conf_t *ccf, struct stat *sb)
{
    int             k, ngroups;
    gid_t           groups[64];
    ngx_flag_t      ok;
    struct passwd  *pw;

    if (sb->st_uid == ccf->user) {
        return (sb->st_mode & 0600) == 0600;
    }

    ok = 0;
    ngroups = 64;

    pw = getpwuid(ccf->user);

    if (pw == NULL
        || getgrouplist(pw->pw_name, ccf->group, groups, &ngroups) < 0)
    {
        ngroups = 0;
    }

    for (k = 0; k < ngroups && !ok; k++) {
        ok = groups[k] == sb->st_gid && (sb->st_mode & 0060) == 0060;
    }

    if (!ok && ngroups == 0) {
        ok = sb->st_gid == ccf->group && (sb->st_mode & 0060) == 0060;
    }

    if (!ok) {
        ok = (sb->st_mode & 0006) == 0006;
    }

    return ok;
}


static ngx_int_t
ngx_http_shmfilter_check_structs(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_flag_t absent)
{
    ngx_uint_t                    i;
    ngx_http_shmfilter_struct_t  *st;

    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {

        if (!absent) {
            if (ngx_http_shmfilter_check_struct(cycle, smcf, seg, &st[i])
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            continue;
        }

        if (!st[i].declared || !st[i].create) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "shmfilter: structure \"%V\" (%V:%ui) cannot "
                          "exist: segment \"%V\" does not exist yet; "
                          "declare it with \"shmfilter_structure %V KIND "
                          "capacity=N create;\"",
                          &st[i].name, &st[i].conf_file, st[i].conf_line,
                          &smcf->segment, &st[i].name);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* opens ST in SEG as declared (creating it if asked), or probes its kind */
static ngx_int_t
ngx_http_shmfilter_check_struct(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st)
{
    int            rc;
    void          *h;
    shmf_uv_stats  us;

    h = NULL;

    if (st->kind == 0) {
        /* not declared: whatever the segment holds */
        if (ngx_http_shmfilter_open_undeclared(cycle, smcf, seg, st, &h, &rc)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

    } else {
        rc = ngx_http_shmfilter_open_declared(seg, st, &h);
    }

    if (rc < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter: structure \"%V\" (%V:%ui) in segment "
                      "\"%V\": %s: %s%s",
                      &st->name, &st->conf_file, st->conf_line,
                      &smcf->segment, shmf_strerror(rc),
                      shmf_last_error_message(),
                      (rc == -SHMF_ENOTFOUND)
                      ? " (declare it with \"shmfilter_structure NAME KIND "
                        "capacity=N create;\" or create it with shmtool)"
                      : "");
        ngx_http_shmfilter_close_handle(st->kind, h);
        return NGX_ERROR;
    }

    if (st->kind == SHMF_KIND_UV && h != NULL) {
        /* the family's retention, for the checks of window= */
        ngx_memzero(&us, sizeof(shmf_uv_stats));
        if (shmf_uv_stats_get(h, &us) == 0 && us.retention != 0) {
            st->wopt.retention = us.retention;
        }
    }

    if (st->kind == SHMF_KIND_WINDOW && h != NULL
        && ngx_http_shmfilter_window_matches(cycle, smcf, st, h) != NGX_OK)
    {
        ngx_http_shmfilter_close_handle(st->kind, h);
        return NGX_ERROR;
    }

    ngx_http_shmfilter_close_handle(st->kind, h);

    return NGX_OK;
}


/*
 * A structure no shmfilter_structure declares: opened as the kind the
 * segment holds, which ST takes. RC: the open's shmf code; a miss says
 * "no structure ... in segment" (the library's message).
 */
static ngx_int_t
ngx_http_shmfilter_open_undeclared(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **h, int *rc)
{
    u_char               list[128];
    ngx_uint_t           kind;
    shmf_structure_info  info;

    *rc = shmf_segment_find(seg, (const char *) st->name.data, &info);

    if (*rc == 1 && !ngx_http_shmfilter_kind_served(info.kind)) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter: structure \"%V\" (%V:%ui) in segment "
                      "\"%V\" is a %s, a kind this module does not serve "
                      "(%s)",
                      &st->name, &st->conf_file, st->conf_line,
                      &smcf->segment, shmf_kind_name(info.kind),
                      ngx_http_shmfilter_kind_list(list, sizeof(list),
                                                   NGX_HTTP_SHMFILTER_NOPS,
                                                   ", "));
        return NGX_ERROR;
    }

    if (*rc < 0) {
        return NGX_OK;
    }

    kind = (*rc == 1) ? info.kind : SHMF_KIND_BLOOM;

    *rc = ngx_http_shmfilter_open_kind(seg, kind,
                                       (const char *) st->name.data, h);
    if (*rc >= 0) {
        st->kind = kind;
    }

    return NGX_OK;
}


/* opens a declared ST, creating it when "create" asks (not under nginx -t) */
static int
ngx_http_shmfilter_open_declared(shmf_segment *seg,
    ngx_http_shmfilter_struct_t *st, void **h)
{
    int          rc;
    const char  *name;

    name = (const char *) st->name.data;

    rc = ngx_http_shmfilter_open_kind(seg, st->kind, name, h);

    if (rc == -SHMF_ENOTFOUND && st->create && !ngx_test_config) {
        rc = ngx_http_shmfilter_create_kind(seg, st, h);

        if (rc == -SHMF_EEXISTS) {
            /* a racer made it */
            rc = ngx_http_shmfilter_open_kind(seg, st->kind, name, h);
        }

    } else if (rc == -SHMF_ENOTFOUND && st->create) {
        /* nginx -t: it would be created */
        rc = 0;
    }

    return rc;
}


/*
 * A window that exists: what the segment holds wins over the declaration (a
 * declared variant or retention that differs is an error), and the module
 * keeps the segment's retention and variant for the checks of the variables.
 */
static ngx_int_t
ngx_http_shmfilter_window_matches(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_struct_t *st,
    void *h)
{
    int                rc;
    u_char             declared[32], held[32];
    shmf_window_stats  ws;

    rc = shmf_window_stats_get(h, &ws);

    if (rc < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter: window \"%V\" (%V:%ui) in segment \"%V\": "
                      "%s: %s",
                      &st->name, &st->conf_file, st->conf_line,
                      &smcf->segment, shmf_strerror(rc),
                      shmf_last_error_message());
        return NGX_ERROR;
    }

    declared[0] = '\0';

    if (st->declared && st->wopt_set[0] && st->wopt.variant != ws.variant) {
        ngx_snprintf(declared, sizeof(declared), "variant=%s%Z",
                     ngx_http_shmfilter_variant_name(st->wopt.variant));
        ngx_snprintf(held, sizeof(held), "variant=%s%Z",
                     ngx_http_shmfilter_variant_name(ws.variant));

    } else if (st->declared && st->wopt_set[1]
               && st->wopt.retention != ws.retention)
    {
        ngx_snprintf(declared, sizeof(declared), "retention=%uD%Z",
                     st->wopt.retention);
        ngx_snprintf(held, sizeof(held), "retention=%uD%Z", ws.retention);
    }

    if (declared[0] != '\0') {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_structure \"%V\" in %V:%ui: declared %s, "
                      "the window in segment \"%V\" has %s: fix the "
                      "declaration, or drop the window (shmtool drop %V %V) "
                      "to recreate it",
                      &st->name, &st->conf_file, st->conf_line, declared,
                      &smcf->segment, held, &smcf->segment, &st->name);
        return NGX_ERROR;
    }

    st->wopt.variant = ws.variant;
    st->wopt.retention = ws.retention;

    return NGX_OK;
}


/* a window's variant is named after the kind of its buckets */
static const char *
ngx_http_shmfilter_variant_name(ngx_uint_t variant)
{
    if (variant == SHMF_WINDOW_STAMPED) {
        /* one table of stamped lanes for every bucket: not a kind */
        return "stamped";
    }

    return shmf_kind_name((variant != SHMF_WINDOW_BLOOM) ? SHMF_KIND_CUCKOO
                                                         : SHMF_KIND_BLOOM);
}


/* each variable against the kind of its structure */
static ngx_int_t
ngx_http_shmfilter_check_vars(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf)
{
    u_char                        needs[128];
    ngx_uint_t                    i, kind;
    ngx_http_shmfilter_var_t     *v, **vars;
    ngx_http_shmfilter_struct_t  *st, *structs;

    vars = smcf->vars.elts;
    structs = smcf->structs.elts;

    for (i = 0; i < smcf->vars.nelts; i++) {
        v = vars[i];

        if (v->name_cv != NULL) {
            /* a per-request name: an hll */
            st = NULL;
            kind = SHMF_KIND_HLL;

        } else {
            st = &structs[v->index];
            kind = st->kind;
        }

        if (ngx_http_shmfilter_window_var(cycle, v, kind, st) != NGX_OK) {
            return NGX_ERROR;
        }

        if (ngx_http_shmfilter_op_fits(v->op, kind)) {
            continue;
        }

        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: structure \"%V\" is a %s; "
                      "shmfilter_%s needs %s",
                      ngx_http_shmfilter_op_names[v->op], &v->var_name,
                      &v->conf_file, v->conf_line, &st->name,
                      shmf_kind_name(kind),
                      ngx_http_shmfilter_op_names[v->op],
                      ngx_http_shmfilter_needs(needs, sizeof(needs), v->op));
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * The window parameters of variable V on a structure of KIND (ST NULL: a
 * per-request hll name): space= only and always on a window, window= within
 * its retention, forget only on a deletable window. Resolves V->window when
 * it is not given.
 */
static ngx_int_t
ngx_http_shmfilter_window_var(ngx_cycle_t *cycle, ngx_http_shmfilter_var_t *v,
    ngx_uint_t kind, ngx_http_shmfilter_struct_t *st)
{
    char  *op;

    op = ngx_http_shmfilter_op_names[v->op];

    if (v->cap != 0
        && (kind != SHMF_KIND_WINDOW
            || st->wopt.variant != SHMF_WINDOW_STAMPED))
    {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: cap= counts marks only in "
                      "a window of variant=stamped; \"%V\" is a%s %s%s",
                      op, &v->var_name, &v->conf_file, v->conf_line,
                      st ? &st->name : &v->var_name,
                      (kind == SHMF_KIND_HLL) ? "n" : "",
                      (kind == SHMF_KIND_WINDOW)
                      ? "window of variant=" : "",
                      (kind == SHMF_KIND_WINDOW)
                      ? ngx_http_shmfilter_variant_name(st->wopt.variant)
                      : shmf_kind_name(kind));
        return NGX_ERROR;
    }

    if (kind == SHMF_KIND_UV) {
        /* a UV family: space= the plan (uv_add: always), window= the last W days */
        if (v->space == NULL && v->op == NGX_HTTP_SHMFILTER_UV_ADD) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "shmfilter_%s %V in %V:%ui: structure \"%V\" is a "
                          "uv family: add space=VALUE (the plan id, e.g. "
                          "space=$arg_plan); the key parts are the item",
                          op, &v->var_name, &v->conf_file, v->conf_line,
                          &st->name);
            return NGX_ERROR;
        }

        if (v->window > st->wopt.retention) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "shmfilter_%s %V in %V:%ui: window=%ui is more than "
                          "the retention of uv family \"%V\" (%uD buckets)",
                          op, &v->var_name, &v->conf_file, v->conf_line,
                          v->window, &st->name, st->wopt.retention);
            return NGX_ERROR;
        }

        if (v->window == 0 && v->op == NGX_HTTP_SHMFILTER_COUNT) {
            v->window = 1;
        }

        return NGX_OK;
    }

    if (kind != SHMF_KIND_WINDOW) {

        if (v->space != NULL || v->window != 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "shmfilter_%s %V in %V:%ui: space= and window= are "
                          "for a window structure; \"%V\" is a%s %s",
                          op, &v->var_name, &v->conf_file, v->conf_line,
                          st ? &st->name : &v->var_name,
                          (kind == SHMF_KIND_HLL) ? "n" : "",
                          shmf_kind_name(kind));
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (v->space == NULL && v->op != NGX_HTTP_SHMFILTER_COUNT) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: structure \"%V\" is a "
                      "window: add space=VALUE (the plan id, e.g. "
                      "space=$arg_plan); the key parts are the item",
                      op, &v->var_name, &v->conf_file, v->conf_line,
                      &st->name);
        return NGX_ERROR;
    }

    if (v->window > st->wopt.retention) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: window=%ui is more than "
                      "the retention of window \"%V\" (%uD buckets): a "
                      "window answers for at most its retention",
                      op, &v->var_name, &v->conf_file, v->conf_line,
                      v->window, &st->name, st->wopt.retention);
        return NGX_ERROR;
    }

    if (v->op == NGX_HTTP_SHMFILTER_FORGET && v->window != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: forget takes no window= "
                      "(it removes the pair from every bucket)",
                      op, &v->var_name, &v->conf_file, v->conf_line);
        return NGX_ERROR;
    }

    if (v->op == NGX_HTTP_SHMFILTER_FORGET
        && st->wopt.variant == SHMF_WINDOW_BLOOM)
    {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_%s %V in %V:%ui: window \"%V\" is of variant "
                      "bloom (insert-only); shmfilter_%s needs variant=cuckoo "
                      "or variant=stamped",
                      op, &v->var_name, &v->conf_file, v->conf_line,
                      &st->name, op);
        return NGX_ERROR;
    }

    if (v->window == 0) {
        v->window = (v->op == NGX_HTTP_SHMFILTER_COUNT)
                    ? 1 : st->wopt.retention;
    }

    return NGX_OK;
}


/* what OP needs, for the message of a variable on a kind it does not fit */
static u_char *
ngx_http_shmfilter_needs(u_char *buf, size_t size, ngx_uint_t op)
{
    u_char  *p;

    if (op == NGX_HTTP_SHMFILTER_FORGET) {
        ngx_snprintf(buf, size, "a cuckoo, a set or a window of "
                     "variant=cuckoo or stamped (a Bloom filter cannot "
                     "forget)%Z");
        return buf;
    }

    if (op == NGX_HTTP_SHMFILTER_HLL_ADD) {
        ngx_snprintf(buf, size, "an hll%Z");
        return buf;
    }

    if (op == NGX_HTTP_SHMFILTER_UV_ADD) {
        ngx_snprintf(buf, size, "a uv family%Z");
        return buf;
    }

    p = ngx_cpymem(buf, "a ", 2);

    ngx_http_shmfilter_kind_list(p, size - 2, op, " or ");

    return buf;
}


/* a worker: attach, reattach, detach */

static ngx_int_t
ngx_http_shmfilter_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                       i;
    ngx_http_shmfilter_struct_t     *st;
    ngx_http_shmfilter_main_conf_t  *smcf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    smcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_shmfilter_module);
    if (smcf == NULL || smcf->segment.len == 0) {
        return NGX_OK;
    }

    smcf->seg = NULL;
    smcf->seg_retry_at = 0;
    smcf->hll_cache = ngx_calloc(sizeof(ngx_http_shmfilter_hll_slot_t)
                                 * NGX_HTTP_SHMFILTER_HLL_CACHE, cycle->log);

    ngx_memzero(ngx_http_shmfilter_logrl, sizeof(ngx_http_shmfilter_logrl));

    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {
        st[i].handle = NULL;
        st[i].retry_at = 0;

        if (st[i].kind != 0) {
            (void) ngx_http_shmfilter_handle(smcf, &st[i], cycle->log);
        }
    }

    if (smcf->maintain > 0 && ngx_worker == 0) {
        ngx_http_shmfilter_start_maintain(cycle, smcf);
    }

    (void) ngx_http_shmfilter_attach_segment(smcf, cycle->log);
    ngx_http_shmfilter_set_gauges(smcf,
                                  smcf->seg != NULL
                                  && shmf_segment_linked(smcf->seg) == 1);
    ngx_http_shmfilter_start_check(cycle, smcf);

    /* a failure is logged and answered per shmfilter_fail: no dead worker */

    return NGX_OK;
}


static void
ngx_http_shmfilter_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_shmfilter_main_conf_t  *smcf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return;
    }

    smcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_shmfilter_module);
    if (smcf == NULL || smcf->segment.len == 0) {
        return;
    }

    /*
     * The last chance of a removed segment's state this worker maps: rescue
     * it, or (rescued by another) replay the marks kept since into it.
     */
    if (smcf->seg != NULL && shmf_segment_linked(smcf->seg) == 0) {
        u_char       path[512];
        struct stat  sb;

        if (stat((const char *) ngx_http_shmfilter_path(smcf, path,
                                                        sizeof(path)), &sb)
            != 0)
        {
            ngx_http_shmfilter_rescue(smcf, cycle->log);

        } else if (smcf->replay_len > 0) {
            ngx_http_shmfilter_switch(smcf, cycle->log);
        }
    }

    if (smcf->replay != NULL) {
        ngx_free(smcf->replay);
        smcf->replay = NULL;
    }

    ngx_http_shmfilter_log_flush(cycle->log, 1);

    ngx_http_shmfilter_detach(smcf);
    ngx_http_shmfilter_set_gauges(smcf, 0);

    if (smcf->hll_cache) {
        ngx_free(smcf->hll_cache);
        smcf->hll_cache = NULL;
    }
}


static char *
ngx_http_shmfilter_fail_name(ngx_http_shmfilter_main_conf_t *smcf)
{
    return smcf->fail_closed ? "closed" : "open";
}


static ngx_int_t
ngx_http_shmfilter_attach_segment(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_log_t *log)
{
    int                             rc;
    ngx_http_shmfilter_counters_t  *ctr;

    if (smcf->seg != NULL) {
        return NGX_OK;
    }

    if (ngx_time() < smcf->seg_retry_at) {
        return NGX_ERROR;
    }

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;
    smcf->seg_rescues = ctr ? (ngx_uint_t) ctr->rescues : 0;
    smcf->seg_epoch = ctr ? ctr->rescue_epoch : 0;

    rc = ngx_http_shmfilter_open(smcf, &smcf->seg);

    if (rc < 0) {
        smcf->seg = NULL;
        smcf->seg_retry_at = ngx_time() + 1;

        ngx_http_shmfilter_log(log, NGX_LOG_ALERT,
                               NGX_HTTP_SHMFILTER_WHO_SEGMENT, rc,
                               "shmfilter: worker cannot attach segment "
                               "\"%V\": %s: %s; answering per shmfilter_fail "
                               "%s, retrying every second "
                               "(shmfilter_worker_attached 0)",
                               &smcf->segment, shmf_strerror(rc),
                               shmf_last_error_message(),
                               ngx_http_shmfilter_fail_name(smcf));
        ngx_http_shmfilter_set_gauges(smcf, 0);

        return NGX_ERROR;
    }

    ngx_http_shmfilter_set_gauges(smcf, 1);

    return NGX_OK;
}


/* the worker's handle of ST, opened (again) when it has none */
static void *
ngx_http_shmfilter_handle(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_struct_t *st, ngx_log_t *log)
{
    int  rc;

    if (st->handle != NULL) {
        return st->handle;
    }

    if (ngx_http_shmfilter_attach_segment(smcf, log) != NGX_OK) {
        return NULL;
    }

    if (ngx_time() < st->retry_at) {
        return NULL;
    }

    rc = ngx_http_shmfilter_open_kind(smcf->seg, st->kind,
                                      (const char *) st->name.data,
                                      &st->handle);

    if (rc < 0) {
        st->handle = NULL;
        st->retry_at = ngx_time() + 1;
        st->open_rc = rc;

        ngx_http_shmfilter_log(log, NGX_LOG_ALERT,
                               st - (ngx_http_shmfilter_struct_t *)
                                    smcf->structs.elts, rc,
                               "shmfilter: cannot open %s \"%V\" in segment "
                               "\"%V\": %s: %s; answering per shmfilter_fail "
                               "%s, retrying every second",
                               shmf_kind_name(st->kind), &st->name,
                               &smcf->segment, shmf_strerror(rc),
                               shmf_last_error_message(),
                               ngx_http_shmfilter_fail_name(smcf));
        return NULL;
    }

    return st->handle;
}


/*
 * A data-plane call on ST failed with RC: log once, and let a dropped
 * structure be reopened (it may be recreated) a second later.
 */
static void
ngx_http_shmfilter_struct_failed(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_struct_t *st, int rc, ngx_log_t *log)
{
    time_t  now;

    ngx_http_shmfilter_log(log, NGX_LOG_ALERT,
                           st - (ngx_http_shmfilter_struct_t *)
                                smcf->structs.elts, rc,
                           "shmfilter: %s \"%V\" in segment \"%V\" failed: "
                           "%s: %s; answering per shmfilter_fail %s "
                           "(shmfilter_failures_total{cause=\"%s\"})",
                           shmf_kind_name(st->kind), &st->name,
                           &smcf->segment, shmf_strerror(rc),
                           shmf_last_error_message(),
                           ngx_http_shmfilter_fail_name(smcf),
                           ngx_http_shmfilter_cause_names[
                               ngx_http_shmfilter_cause(rc)]);

    if (rc == -SHMF_EDROPPED && st->handle != NULL) {
        /*
         * Reopened by name (an operator may have recreated it): at once the
         * first time, then at most once a second, so that a structure that
         * keeps answering "dropped" costs no reopen per request.
         */
        now = ngx_time();

        ngx_http_shmfilter_close_handle(st->kind, st->handle);
        st->handle = NULL;
        st->retry_at = (now - st->reopened_at < 1) ? now + 1 : 0;
        st->reopened_at = now;
        st->open_rc = rc;
    }
}


/*
 * Worker 0 runs shmf_window_maintain for every window every shmfilter_maintain
 * period: it rotates by the clock, frees expired buckets and prepares the next
 * bucket's table ahead, so that no request pays for a table allocation at
 * midnight (docs/window.md). The timer is cancelable: it never delays a
 * worker's graceful exit. A killed worker 0 is respawned by the master with
 * the same number, and its timer with it.
 */
static void
ngx_http_shmfilter_start_maintain(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf)
{
    ngx_uint_t                    i;
    ngx_flag_t                    windows;
    ngx_event_t                  *ev;
    ngx_http_shmfilter_struct_t  *st;

    st = smcf->structs.elts;
    windows = 0;

    for (i = 0; i < smcf->structs.nelts; i++) {
        windows |= (st[i].kind == SHMF_KIND_WINDOW);
    }

    if (!windows) {
        return;
    }

    ev = &ngx_http_shmfilter_maintain_ev;

    ngx_memzero(ev, sizeof(ngx_event_t));

    ev->handler = ngx_http_shmfilter_maintain_handler;
    ev->data = smcf;
    ev->log = cycle->log;
    ev->cancelable = 1;

    /* the first run soon after the start */
    ngx_add_timer(ev, 1000);
}


static void
ngx_http_shmfilter_maintain_handler(ngx_event_t *ev)
{
    int                              rc;
    void                            *h;
    ngx_uint_t                       i;
    ngx_http_shmfilter_struct_t     *st;
    ngx_http_shmfilter_main_conf_t  *smcf;

    smcf = ev->data;
    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {

        if (st[i].kind != SHMF_KIND_WINDOW) {
            continue;
        }

        h = ngx_http_shmfilter_handle(smcf, &st[i], ev->log);
        if (h == NULL) {
            continue;
        }

        rc = shmf_window_maintain(h);

        if (rc == -SHMF_EDROPPED) {
            h = ngx_http_shmfilter_handle(smcf, &st[i], ev->log);
            if (h != NULL) {
                rc = shmf_window_maintain(h);
            }
        }

        if (rc < 0) {
            ngx_http_shmfilter_struct_failed(smcf, &st[i], rc, ev->log);
        }
    }

    if (!ngx_exiting && !ngx_quit) {
        ngx_add_timer(ev, smcf->maintain);
    }
}


/*
 * A per-request named HLL, its handle cached per worker. TEMP set: the cache
 * had no room, close it after use. RC: the shmf code when it returns NULL,
 * CAUSE its NGX_HTTP_SHMFILTER_CAUSE_*. A name outside the safe set is
 * refused (bad_name); a new name is created only within the variable's
 * names=N and not while a full directory backs off (create_name).
 */
static shmf_hll *
ngx_http_shmfilter_dynamic_hll(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *name, ngx_log_t *log, int *rc,
    ngx_uint_t *cause, ngx_flag_t *temp, ngx_http_shmfilter_hll_slot_t **slot)
{
    u_char                          cname[NGX_HTTP_SHMFILTER_NAME_MAX + 1];
    shmf_hll                       *h;
    ngx_uint_t                      free;
    ngx_http_shmfilter_hll_slot_t  *s;

    *temp = 0;
    *slot = NULL;
    *rc = 0;
    *cause = NGX_HTTP_SHMFILTER_CAUSE_NONE;

    if (!ngx_http_shmfilter_name_ok(name)) {
        *rc = -SHMF_EINVAL;
        *cause = NGX_HTTP_SHMFILTER_CAUSE_BAD_NAME;
        return NULL;
    }

    s = ngx_http_shmfilter_hll_lookup(smcf, name, &free);
    if (s != NULL) {
        *slot = s;
        return s->h;
    }

    if (ngx_http_shmfilter_attach_segment(smcf, log) != NGX_OK) {
        *rc = -SHMF_ENOTFOUND;
        *cause = NGX_HTTP_SHMFILTER_CAUSE_NOT_ATTACHED;
        return NULL;
    }

    ngx_memcpy(cname, name->data, name->len);
    cname[name->len] = '\0';

    h = NULL;

    /* a lock-free lookup first: an existing name costs no create */
    *rc = shmf_hll_open(smcf->seg, (const char *) cname, &h);

    if (*rc == -SHMF_ENOTFOUND && sv->op == NGX_HTTP_SHMFILTER_HLL_ADD) {
        *rc = ngx_http_shmfilter_create_name(smcf, sv, (const char *) cname,
                                             &h, cause);
    }

    if (*rc < 0) {
        if (*cause == NGX_HTTP_SHMFILTER_CAUSE_NONE) {
            *cause = ngx_http_shmfilter_cause(*rc);
        }

        return NULL;
    }

    *rc = 0;

    if (free == NGX_HTTP_SHMFILTER_HLL_CACHE) {
        *temp = 1;
        return h;
    }

    s = &smcf->hll_cache[free];

    s->h = h;
    s->len = name->len;
    ngx_memcpy(s->name, name->data, name->len);

    *slot = s;

    return h;
}


/*
 * Creates the HLL NAME for variable SV: at most names=N of its names exist
 * (counted in the shared zone, started by init_module from the segment); a
 * full bound or directory, or a segment out of space, makes this worker's
 * creates of SV fail at once for a backoff (1 s, doubling to 60 s) instead
 * of taking the segment lock per request. 0 or a negative shmf code; CAUSE.
 */
static int
ngx_http_shmfilter_create_name(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_var_t *sv, const char *name, shmf_hll **h,
    ngx_uint_t *cause)
{
    int                             rc;
    time_t                          now;
    ngx_atomic_t                   *names;
    ngx_http_shmfilter_counters_t  *ctr;

    now = ngx_time();

    if (now < sv->create_at) {
        *cause = sv->create_cause;
        return -SHMF_EFULL;
    }

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;
    names = ctr ? &ctr->names[sv->name_slot] : NULL;

    if (names != NULL
        && ngx_atomic_fetch_add(names, 1) >= (ngx_atomic_uint_t) sv->names_max)
    {
        ngx_atomic_fetch_add(names, (ngx_atomic_int_t) -1);
        rc = -SHMF_EFULL;
        *cause = NGX_HTTP_SHMFILTER_CAUSE_NAMES_FULL;
        goto backoff;
    }

    rc = shmf_hll_create(smcf->seg, name, h);

    if (rc >= 0) {
        sv->create_backoff = 0;
        return 0;
    }

    if (names != NULL) {
        ngx_atomic_fetch_add(names, (ngx_atomic_int_t) -1);
    }

    if (rc == -SHMF_EEXISTS) {
        /* a racer made it */
        return shmf_hll_open(smcf->seg, name, h);
    }

    if (rc != -SHMF_EFULL && rc != -SHMF_ENOSPACE) {
        *cause = ngx_http_shmfilter_cause(rc);
        return rc;
    }

    *cause = (rc == -SHMF_EFULL) ? NGX_HTTP_SHMFILTER_CAUSE_DIRECTORY_FULL
                                 : NGX_HTTP_SHMFILTER_CAUSE_NO_SPACE;

backoff:

    sv->create_backoff = sv->create_backoff
                         ? ngx_min(2 * sv->create_backoff, 60) : 1;
    sv->create_at = now + sv->create_backoff;
    sv->create_cause = *cause;

    return rc;
}


/*
 * NAME's slot in the HLL cache (open addressing, a few probes), or NULL;
 * FREE: the first empty slot on the way, NGX_HTTP_SHMFILTER_HLL_CACHE if none.
 */
static ngx_http_shmfilter_hll_slot_t *
ngx_http_shmfilter_hll_lookup(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_str_t *name, ngx_uint_t *free)
{
    ngx_uint_t                      hash, i, n;
    ngx_http_shmfilter_hll_slot_t  *s;

    *free = NGX_HTTP_SHMFILTER_HLL_CACHE;

    if (smcf->hll_cache == NULL) {
        return NULL;
    }

    hash = ngx_hash_key(name->data, name->len);

    for (i = 0; i < NGX_HTTP_SHMFILTER_HLL_PROBES; i++) {
        n = (hash + i) % NGX_HTTP_SHMFILTER_HLL_CACHE;
        s = &smcf->hll_cache[n];

        if (s->h == NULL) {
            if (*free == NGX_HTTP_SHMFILTER_HLL_CACHE) {
                *free = n;
            }

            continue;
        }

        if (s->len == name->len
            && ngx_memcmp(s->name, name->data, name->len) == 0)
        {
            return s;
        }
    }

    return NULL;
}


/*
 * Loud, once: a failure is logged once per (structure, cause), then counted
 * and summed in one line a minute while it lasts (the log limiter); counted
 * per cause in the shared zone (shmfilter_failures_total) and named to the
 * request ($shmfilter_error). Each worker checks every second that its
 * segment's name still refers to the file it maps (a removed segment), and
 * one of them rescues a removed segment's state into a new file of that name
 * (save and restore), which every worker then attaches (docs/nginx.md).
 */

/* the cause of a failure with shmf code RC */
static ngx_uint_t
ngx_http_shmfilter_cause(int rc)
{
    switch (-rc) {

    case SHMF_ENOSPACE:
        return NGX_HTTP_SHMFILTER_CAUSE_NO_SPACE;

    case SHMF_EDROPPED:
        return NGX_HTTP_SHMFILTER_CAUSE_DROPPED;

    case SHMF_ECORRUPT:
    case SHMF_ETRUNCATED:
    case SHMF_ENOTSEGMENT:
    case SHMF_EVERSION:
    case SHMF_EABI:
    case SHMF_EBYTEORDER:
        return NGX_HTTP_SHMFILTER_CAUSE_CORRUPT;

    case SHMF_EFULL:
        return NGX_HTTP_SHMFILTER_CAUSE_FULL;

    case SHMF_EBUSY:
        return NGX_HTTP_SHMFILTER_CAUSE_BUSY;

    case SHMF_ENOTFOUND:
        return NGX_HTTP_SHMFILTER_CAUSE_NOT_FOUND;

    case SHMF_EPERM:
        return NGX_HTTP_SHMFILTER_CAUSE_PERMISSION;
    }

    return NGX_HTTP_SHMFILTER_CAUSE_OTHER;
}


/*
 * Logs the line FMT at LEVEL for the (WHO, RC) pair unless it was logged less
 * than a minute ago: then it is counted, and the count is logged once the
 * minute is over (ngx_http_shmfilter_log_flush, or the next occurrence).
 */
static void ngx_cdecl
ngx_http_shmfilter_log(ngx_log_t *log, ngx_uint_t level, ngx_uint_t who,
    int rc, const char *fmt, ...)
{
    u_char                      *p, msg[NGX_MAX_ERROR_STR];
    time_t                       now;
    va_list                      args;
    ngx_uint_t                   i;
    ngx_http_shmfilter_logrl_t  *e, *oldest;

    now = ngx_time();
    e = NULL;
    oldest = &ngx_http_shmfilter_logrl[0];

    for (i = 0; i < NGX_HTTP_SHMFILTER_LOG_SLOTS; i++) {
        if (ngx_http_shmfilter_logrl[i].since != 0
            && ngx_http_shmfilter_logrl[i].who == who
            && ngx_http_shmfilter_logrl[i].rc == rc)
        {
            e = &ngx_http_shmfilter_logrl[i];
            break;
        }

        if (ngx_http_shmfilter_logrl[i].since < oldest->since) {
            oldest = &ngx_http_shmfilter_logrl[i];
        }
    }

    if (e != NULL) {
        e->more++;

        if (now - e->since >= NGX_HTTP_SHMFILTER_LOG_PERIOD) {
            ngx_http_shmfilter_log_flush(log, 0);
        }

        return;
    }

    /* a new (structure, cause): a free slot or the oldest one's */
    if (oldest->since != 0 && oldest->more > 0) {
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "shmfilter: %ui more of \"%s\" (counts of this cause "
                      "end here: the limiter needed its slot)",
                      oldest->more, oldest->what);
    }

    va_start(args, fmt);
    p = ngx_vslprintf(msg, msg + sizeof(msg) - 1, fmt, args);
    va_end(args);
    *p = '\0';

    ngx_log_error(level, log, 0, "%s (logged once; repeats are counted in "
                  "one line a minute)", msg);

    oldest->who = who;
    oldest->rc = rc;
    oldest->since = now;
    oldest->more = 0;
    ngx_cpystrn(oldest->what, msg, sizeof(oldest->what));
}


/*
 * The count lines of the (structure, cause) pairs whose minute is over;
 * a pair that did not repeat in its minute is forgotten (its next occurrence
 * is logged whole again). ALL: flush every pending count (a worker's exit).
 */
static void
ngx_http_shmfilter_log_flush(ngx_log_t *log, ngx_flag_t all)
{
    time_t                       now;
    ngx_uint_t                   i;
    ngx_http_shmfilter_logrl_t  *e;

    now = ngx_time();

    for (i = 0; i < NGX_HTTP_SHMFILTER_LOG_SLOTS; i++) {
        e = &ngx_http_shmfilter_logrl[i];

        if (e->since == 0
            || (!all && now - e->since < NGX_HTTP_SHMFILTER_LOG_PERIOD))
        {
            continue;
        }

        if (e->more == 0) {
            e->since = 0;
            continue;
        }

        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "shmfilter: %ui more of \"%s\" in the last %T s",
                      e->more, e->what, now - e->since);

        e->more = 0;
        e->since = now;
    }
}


/*
 * A variable of request R could not answer: count CAUSE (the shared zone's
 * failures) and name it to the request ($shmfilter_error).
 */
static void
ngx_http_shmfilter_failure(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_uint_t cause)
{
    ngx_http_shmfilter_ctx_t     *ctx;
    ngx_http_shmfilter_worker_t  *w;

    w = ngx_http_shmfilter_my_counters(smcf);
    if (w != NULL) {
        ngx_atomic_fetch_add(&w->failures[cause], 1);
    }

    if (r == NULL) {
        return;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_shmfilter_module);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_shmfilter_ctx_t));
        if (ctx == NULL) {
            return;
        }

        ngx_http_set_ctx(r, ctx, ngx_http_shmfilter_module);
    }

    ctx->cause = cause;
}


static ngx_int_t
ngx_http_shmfilter_add_variables(ngx_conf_t *cf)
{
    ngx_str_t             name;
    ngx_http_variable_t  *var;

    ngx_str_set(&name, "shmfilter_error");

    var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_shmfilter_error_variable;

    return NGX_OK;
}


/* $shmfilter_error: the cause of this request's last failure, or empty */
static ngx_int_t
ngx_http_shmfilter_error_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_shmfilter_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_shmfilter_module);

    ngx_http_shmfilter_set(v, (ctx == NULL) ? ""
                           : ngx_http_shmfilter_cause_names[ctx->cause]);
    v->no_cacheable = 1;

    return NGX_OK;
}


/* this worker's attachment gauges in the shared zone */
static void
ngx_http_shmfilter_set_gauges(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_flag_t linked)
{
    ngx_http_shmfilter_worker_t  *w;

    w = ngx_http_shmfilter_my_counters(smcf);
    if (w == NULL || (ngx_exiting && w->pid != (ngx_atomic_uint_t) ngx_pid)) {
        /* an old worker leaves its slot to the new one of its number */
        return;
    }

    w->pid = (ngx_atomic_uint_t) ngx_pid;
    w->attached = (smcf->seg != NULL);
    w->linked = (smcf->seg != NULL && linked);
}


/*
 * Whether a live worker maps a segment whose name is gone (its state lives
 * on only there): from the workers' gauges in the shared zone. ATTACHED: any
 * live attached worker counts (the master, which finds the name absent: a
 * worker attached to it maps a removed one, noticed or not yet).
 */
static ngx_flag_t
ngx_http_shmfilter_state_unlinked(ngx_http_shmfilter_counters_t *ctr,
    ngx_flag_t attached)
{
    ngx_uint_t                    i;
    ngx_http_shmfilter_worker_t  *w;

    for (i = 0; i < NGX_HTTP_SHMFILTER_MAX_WORKERS; i++) {
        w = &ctr->worker[i];

        if (w->pid != 0 && w->attached && (attached || !w->linked)
            && (kill((pid_t) w->pid, 0) == 0 || ngx_errno == NGX_EPERM))
        {
            return 1;
        }
    }

    return 0;
}


/* closes every handle of this worker and its segment */
static void
ngx_http_shmfilter_detach(ngx_http_shmfilter_main_conf_t *smcf)
{
    ngx_uint_t                    i;
    ngx_http_shmfilter_struct_t  *st;

    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {
        ngx_http_shmfilter_close_handle(st[i].kind, st[i].handle);
        st[i].handle = NULL;
        st[i].retry_at = 0;
    }

    if (smcf->hll_cache) {
        for (i = 0; i < NGX_HTTP_SHMFILTER_HLL_CACHE; i++) {
            shmf_hll_close(smcf->hll_cache[i].h);
            smcf->hll_cache[i].h = NULL;
        }
    }

    shmf_segment_close(smcf->seg);
    smcf->seg = NULL;
    smcf->seg_retry_at = 0;
    smcf->seg_unlinked = 0;
}


/* the backing path of the segment: /dev/shm/NAME or file= (NUL-terminated) */
static u_char *
ngx_http_shmfilter_path(ngx_http_shmfilter_main_conf_t *smcf, u_char *buf,
    size_t size)
{
    if (smcf->file.len) {
        ngx_cpystrn(buf, smcf->file.data, size);

    } else {
        ngx_snprintf(buf, size - 1, "/dev/shm/%V%Z", &smcf->segment);
        buf[size - 1] = '\0';
    }

    return buf;
}


static void
ngx_http_shmfilter_start_check(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf)
{
    ngx_event_t  *ev;

    ev = &ngx_http_shmfilter_check_ev;

    ngx_memzero(ev, sizeof(ngx_event_t));

    ev->handler = ngx_http_shmfilter_check_handler;
    ev->data = smcf;
    ev->log = cycle->log;
    ev->cancelable = 1;

    ngx_add_timer(ev, NGX_HTTP_SHMFILTER_CHECK_MSEC);
}


/*
 * Every second in every worker: the log's counts; whether the segment's name
 * still refers to the file this worker maps. Removed: logged, counted in the
 * zone (shmfilter_segment_unlinked), and one worker rescues it; replaced (by
 * the rescue or by someone else): every worker attaches the new file.
 */
static void
ngx_http_shmfilter_check_handler(ngx_event_t *ev)
{
    int                              rc;
    u_char                           path[512];
    ngx_uint_t                       rescues;
    struct stat                      sb;
    ngx_http_shmfilter_counters_t   *ctr;
    ngx_http_shmfilter_main_conf_t  *smcf;

    smcf = ev->data;
    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    ngx_http_shmfilter_log_flush(ev->log, 0);

    if (smcf->seg == NULL) {
        if (smcf->replay_len > 0) {
            /* a switch whose attach failed: attach and replay */
            ngx_http_shmfilter_switch(smcf, ev->log);

        } else {
            (void) ngx_http_shmfilter_attach_segment(smcf, ev->log);
        }

        rc = 1;

    } else {
        rc = shmf_segment_linked(smcf->seg);
    }

    if (rc == 0) {
        ngx_http_shmfilter_path(smcf, path, sizeof(path));

        if (stat((const char *) path, &sb) == 0) {
            /* the name holds another file now: attach it */
            rescues = ctr ? (ngx_uint_t) ctr->rescues : 0;

            ngx_http_shmfilter_log(ev->log,
                        (rescues != smcf->seg_rescues) ? NGX_LOG_NOTICE
                                                       : NGX_LOG_ALERT,
                        NGX_HTTP_SHMFILTER_WHO_SEGMENT, 1,
                        "shmfilter: segment \"%V\": %s now holds another "
                        "file (%s); this worker attaches it",
                        &smcf->segment, path,
                        (rescues != smcf->seg_rescues)
                        ? "the rescue of the removed segment's state"
                        : "replaced by someone else: the old file's state "
                          "is not in it");

            ngx_http_shmfilter_switch(smcf, ev->log);
            rc = 1;

        } else {
            ngx_http_shmfilter_log(ev->log, NGX_LOG_ALERT,
                        NGX_HTTP_SHMFILTER_WHO_SEGMENT, 0,
                        "shmfilter: segment \"%V\": %s was removed under "
                        "the running workers; they keep answering from "
                        "their mapping, and one of them saves it to "
                        "re-create the name (shmfilter_segment_unlinked)",
                        &smcf->segment, path);

            /* keep marks from now on: a rescue by another process (a
               second nginx on the segment) does not move our epoch */
            smcf->seg_unlinked = 1;
            ngx_http_shmfilter_set_gauges(smcf, 0);
            ngx_http_shmfilter_rescue(smcf, ev->log);
        }
    }

    if (rc > 0) {
        ngx_http_shmfilter_set_gauges(smcf, 1);
    }

    if (!ngx_exiting && !ngx_quit) {
        ngx_add_timer(ev, NGX_HTTP_SHMFILTER_CHECK_MSEC);
    }
}


/*
 * The rescue of a removed segment: the one worker that takes the zone's
 * rescuer word (from 0, or from a dead rescuer) saves its mapping
 * (shmf_segment_save: consistent per structure while the others write) and
 * restores it as a new file of the segment's name (shmf_segment_restore: never
 * replacing one that appeared meanwhile). Marks made between the save and
 * each worker's switch to the new file (about a second) are not in it.
 */
static void
ngx_http_shmfilter_rescue(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_log_t *log)
{
    int                             rc;
    u_char                          path[512], save[600];
    ngx_atomic_uint_t               who;
    shmf_segment_options            o;
    ngx_http_shmfilter_counters_t  *ctr;

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    if (ctr == NULL || smcf->seg == NULL) {
        return;
    }

    if ((time_t) ctr->rescue_at > ngx_time() && !ngx_exiting) {
        /* the last one failed: a save costs the whole segment, back off */
        return;
    }

    who = ctr->rescuer;

    if (who != 0 && (pid_t) who != ngx_pid && kill((pid_t) who, 0) == 0) {
        /* a live worker is at it */
        return;
    }

    if (!ngx_atomic_cmp_set(&ctr->rescuer, who, (ngx_atomic_uint_t) ngx_pid)) {
        return;
    }

    ngx_http_shmfilter_path(smcf, path, sizeof(path));
    ngx_snprintf(save, sizeof(save), "%s.rescue-%P.save%Z", path, ngx_pid);

    /* from here on, every worker keeps its new marks for replay (a full
       barrier: a mark that reads the old epoch completed before the save) */
    ngx_atomic_fetch_add(&ctr->rescue_epoch, 1);

    rc = shmf_segment_save(smcf->seg, (const char *) save);

    if (rc == 0) {
        shmf_segment_options_init(&o);
        o.file = ngx_http_shmfilter_file(smcf);
        o.mode = (smcf->mode >= 0) ? (uint32_t) smcf->mode : 0660;
        o.group = smcf->group;

        rc = shmf_segment_restore((const char *) save,
                                  (const char *) smcf->segment.data, &o);
    }

    (void) unlink((const char *) save);

    if (rc == 0) {
        ngx_atomic_fetch_add(&ctr->rescues, 1);
        ctr->rescue_backoff = 0;
        ctr->rescue_at = 0;

        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "shmfilter: segment \"%V\": its state was saved from "
                      "this worker's mapping and restored as %s; the workers "
                      "attach it within a second", &smcf->segment, path);

    } else {
        ngx_http_shmfilter_log(log, NGX_LOG_ALERT,
                               NGX_HTTP_SHMFILTER_WHO_SEGMENT, rc,
                               "shmfilter: segment \"%V\": the rescue of the "
                               "removed %s failed: %s: %s; retrying after a "
                               "backoff (1 s doubling to 60 s; a reload "
                               "refuses to create an empty segment meanwhile)",
                               &smcf->segment, path, shmf_strerror(rc),
                               shmf_last_error_message());

        ctr->rescue_backoff = ctr->rescue_backoff
                              ? ngx_min(2 * ctr->rescue_backoff, 60) : 1;
        ctr->rescue_at = (ngx_atomic_uint_t) ngx_time() + ctr->rescue_backoff;
    }

    ctr->rescuer = 0;
}


/*
 * The master, init_module: the segment's name is absent. When live workers
 * still map the removed segment, wait (bounded) for their rescue to publish
 * it: NGX_OK (it did: open it), NGX_DECLINED (no worker holds one: create),
 * NGX_ERROR (logged: refuse to start from an empty segment).
 */
static ngx_int_t
ngx_http_shmfilter_wait_rescue(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf)
{
    u_char                          path[512];
    ngx_uint_t                      i;
    struct stat                     sb;
    ngx_http_shmfilter_counters_t  *ctr;

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    if (ctr == NULL || !ngx_http_shmfilter_state_unlinked(ctr, 1)) {
        return NGX_DECLINED;
    }

    ngx_http_shmfilter_path(smcf, path, sizeof(path));

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "shmfilter: segment \"%V\": %s is absent while running "
                  "workers map its state: waiting up to %d s for their "
                  "rescue", &smcf->segment, path,
                  NGX_HTTP_SHMFILTER_RESCUE_WAIT);

    for (i = 0; i < NGX_HTTP_SHMFILTER_RESCUE_WAIT * 20; i++) {
        if (stat((const char *) path, &sb) == 0) {
            return NGX_OK;
        }

        ngx_msleep(50);
    }

    ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                  "shmfilter_segment \"%V\" in %V:%ui: %s was removed while "
                  "the running workers still map its state, and their rescue "
                  "did not re-create it within %d s (see their alerts): "
                  "refusing to start from an empty segment (the old workers "
                  "keep serving); fix the cause and reload again",
                  &smcf->segment, &smcf->conf_file, smcf->conf_line, path,
                  NGX_HTTP_SHMFILTER_RESCUE_WAIT);

    return NGX_ERROR;
}


/* one mark kept for replay: its variable, space, key length, then the key */
typedef struct {
    ngx_http_shmfilter_var_t        *sv;
    uint64_t                         space;
    size_t                           len;
} ngx_http_shmfilter_kept_t;


/*
 * A mark answered "new" on this worker's mapping: when a rescue began since
 * this worker attached (the zone's rescue_epoch moved), the mark may not be
 * in the save: keep it to replay into the rescued file (switch). Bounded:
 * past NGX_HTTP_SHMFILTER_REPLAY_MAX bytes a mark is counted as lost.
 */
static void
ngx_http_shmfilter_keep_mark(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_var_t *sv, ngx_str_t *key, uint64_t space,
    ngx_log_t *log)
{
    u_char                         *p;
    size_t                          need, cap;
    ngx_http_shmfilter_kept_t       k;
    ngx_http_shmfilter_counters_t  *ctr;

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    if (ctr == NULL) {
        return;
    }

    /* after the mark's stores: a rescuer increments, then saves */
    ngx_memory_barrier();

    if (ctr->rescue_epoch == smcf->seg_epoch && !smcf->seg_unlinked) {
        return;
    }

    need = sizeof(ngx_http_shmfilter_kept_t) + ngx_align(key->len, 8);

    if (smcf->replay_len + need > smcf->replay_cap) {
        cap = ngx_max(smcf->replay_cap * 2, 65536);

        if (cap > NGX_HTTP_SHMFILTER_REPLAY_MAX) {
            smcf->replay_lost++;
            return;
        }

        p = ngx_alloc(cap, log);
        if (p == NULL) {
            smcf->replay_lost++;
            return;
        }

        if (smcf->replay != NULL) {
            ngx_memcpy(p, smcf->replay, smcf->replay_len);
            ngx_free(smcf->replay);
        }

        smcf->replay = p;
        smcf->replay_cap = cap;
    }

    k.sv = sv;
    k.space = space;
    k.len = key->len;

    p = smcf->replay + smcf->replay_len;
    ngx_memcpy(p, &k, sizeof(k));
    ngx_memcpy(p + sizeof(k), key->data, key->len);
    smcf->replay_len += need;
}


/*
 * The segment's name holds another file (a rescue, or a replacement): close
 * everything, attach it, and replay the marks kept since a rescue began.
 */
static void
ngx_http_shmfilter_switch(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_log_t *log)
{
    int                           rc;
    void                         *h;
    u_char                       *p, *end;
    uint64_t                      n;
    ngx_str_t                     key;
    ngx_uint_t                    done, failed, level;
    ngx_http_shmfilter_kept_t     k;
    ngx_http_shmfilter_struct_t  *st;

    ngx_http_shmfilter_detach(smcf);

    if (ngx_http_shmfilter_attach_segment(smcf, log) != NGX_OK) {
        /* kept: replayed by the next switch (the next check) */
        return;
    }

    done = 0;
    failed = 0;
    p = smcf->replay;
    end = p + smcf->replay_len;

    while (p != NULL && p < end) {
        ngx_memcpy(&k, p, sizeof(k));
        key.data = p + sizeof(k);
        key.len = k.len;
        p += sizeof(k) + ngx_align(k.len, 8);

        st = &((ngx_http_shmfilter_struct_t *) smcf->structs.elts)
                                                          [k.sv->index];
        h = ngx_http_shmfilter_handle(smcf, st, log);

        rc = (h == NULL) ? -SHMF_ENOTFOUND
                         : ngx_http_shmfilter_call(k.sv, st, h, &key, k.space,
                                                   &n);
        if (rc < 0) {
            failed++;

        } else {
            done++;
        }
    }

    level = (failed + smcf->replay_lost) ? NGX_LOG_ALERT : NGX_LOG_NOTICE;

    if (done + failed + smcf->replay_lost > 0) {
        ngx_log_error(level, log, 0,
                      "shmfilter: segment \"%V\": replayed %ui marks made "
                      "while it was being rescued into the new file (%ui "
                      "failed, %ui not kept: past %uz bytes)",
                      &smcf->segment, done, failed, smcf->replay_lost,
                      (size_t) NGX_HTTP_SHMFILTER_REPLAY_MAX);
    }

    smcf->replay_len = 0;
    smcf->replay_lost = 0;
}


/*
 * A name built from request data: 1 to 63 bytes of A-Z a-z 0-9 . _ : -
 * (docs/SECURITY.md, "nginx: request data").
 */
static ngx_flag_t
ngx_http_shmfilter_name_ok(ngx_str_t *name)
{
    u_char  *c;

    if (name->len == 0 || name->len > NGX_HTTP_SHMFILTER_NAME_MAX) {
        return 0;
    }

    for (c = name->data; c < name->data + name->len; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
              || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_'
              || *c == ':' || *c == '-'))
        {
            return 0;
        }
    }

    return 1;
}


/*
 * The master, init_module: each variable with a per-request name starts its
 * count of names from the segment's structures whose names begin with its
 * literal prefix (kept in the shared zone, read by every worker).
 */
static void
ngx_http_shmfilter_count_names(ngx_cycle_t *cycle,
    ngx_http_shmfilter_main_conf_t *smcf, shmf_segment *seg)
{
    size_t                          n, k, count;
    ngx_uint_t                      i, j;
    shmf_structure_info            *list;
    ngx_http_shmfilter_var_t      **vars;
    ngx_http_shmfilter_counters_t  *ctr;

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    if (ctr == NULL || smcf->name_vars == 0) {
        return;
    }

    list = NULL;
    n = 0;

    for (i = 0; i < 4; i++) {
        if (shmf_segment_list(seg, list, n, &count) >= 0) {
            n = count;
            break;
        }

        if (list) {
            ngx_free(list);
        }

        list = ngx_alloc((count + 16) * sizeof(shmf_structure_info),
                         cycle->log);
        if (list == NULL) {
            return;
        }

        n = count + 16;
        count = 0;
    }

    vars = smcf->vars.elts;

    for (j = 0; j < smcf->vars.nelts; j++) {
        if (vars[j]->name_cv == NULL) {
            continue;
        }

        count = 0;

        for (k = 0; list != NULL && k < n; k++) {
            if (ngx_strncmp(list[k].name, vars[j]->name_prefix.data,
                            vars[j]->name_prefix.len) == 0)
            {
                count++;
            }
        }

        ctr->names[vars[j]->name_slot] = (ngx_atomic_uint_t) count;
    }

    if (list) {
        ngx_free(list);
    }
}


/* the variables */

static ngx_int_t
ngx_http_shmfilter_variable_get(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_shmfilter_var_t *sv = (ngx_http_shmfilter_var_t *) data;

    int                              rc;
    void                            *h;
    uint64_t                         n, space;
    ngx_int_t                        rv;
    ngx_str_t                        key;
    ngx_http_shmfilter_struct_t     *st;
    ngx_http_shmfilter_main_conf_t  *smcf;

    smcf = ngx_http_get_module_main_conf(r, ngx_http_shmfilter_module);

    rv = ngx_http_shmfilter_request_key(r, smcf, sv, &key, &space);

    if (rv == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (rv == NGX_DECLINED) {
        /* a key part or the space is empty or bad: the variable is empty */
        v->not_found = 1;
        return NGX_OK;
    }

    if (sv->name_cv != NULL) {
        return ngx_http_shmfilter_hll_variable(r, smcf, sv, v, &key);
    }

    st = &((ngx_http_shmfilter_struct_t *) smcf->structs.elts)[sv->index];

    h = ngx_http_shmfilter_handle(smcf, st, r->connection->log);
    if (h == NULL) {
        return ngx_http_shmfilter_fail(r, smcf, sv, v,
                   (smcf->seg == NULL) ? NGX_HTTP_SHMFILTER_CAUSE_NOT_ATTACHED
                                       : ngx_http_shmfilter_cause(st->open_rc));
    }

    n = 0;
    rc = ngx_http_shmfilter_call(sv, st, h, &key, space, &n);

    if (rc == -SHMF_EDROPPED) {
        /* reopen by name at once (an operator may have recreated it), retry */
        ngx_http_shmfilter_struct_failed(smcf, st, rc, r->connection->log);

        h = ngx_http_shmfilter_handle(smcf, st, r->connection->log);
        if (h != NULL) {
            rc = ngx_http_shmfilter_call(sv, st, h, &key, space, &n);
        }

    } else if (rc == -SHMF_EBUSY) {
        /* transient (a window rotated many times during one call): once more */
        rc = ngx_http_shmfilter_call(sv, st, h, &key, space, &n);
    }

    /*
     * Any other failure (-SHMF_ENOSPACE: the segment has no room for a table;
     * -SHMF_EFULL; -SHMF_EFORKED; ...) keeps the handle: it is logged once and
     * answered per shmfilter_fail below.
     */

    if (rc < 0) {
        ngx_http_shmfilter_struct_failed(smcf, st, rc, r->connection->log);

        if (sv->op == NGX_HTTP_SHMFILTER_MARK && sv->cap == 0
            && st->handle != NULL
            && ngx_http_shmfilter_seen_anyway(sv, st, h, &key, space) == 1)
        {
            /* it could not mark, but what exists says seen: a true answer */
            ngx_http_shmfilter_failure(r, smcf,
                                       ngx_http_shmfilter_cause(rc));
            return ngx_http_shmfilter_value(r, smcf, sv, v, 0, 0);
        }

        return ngx_http_shmfilter_fail(r, smcf, sv, v,
                                       ngx_http_shmfilter_cause(rc));
    }

    if (sv->op == NGX_HTTP_SHMFILTER_MARK && rc == 1) {
        ngx_http_shmfilter_keep_mark(smcf, sv, &key, space, r->connection->log);
    }

    return ngx_http_shmfilter_value(r, smcf, sv, v, rc, n);
}


/*
 * A mark failed (no space for today's table, a full set): whether what
 * exists already holds the key (a window: in its last W buckets), so that
 * the worker keeps answering "seen" from it. 1, 0, or a negative shmf code.
 */
static int
ngx_http_shmfilter_seen_anyway(ngx_http_shmfilter_var_t *sv,
    ngx_http_shmfilter_struct_t *st, void *h, ngx_str_t *key, uint64_t space)
{
    uint64_t  n;

    if (st->kind == SHMF_KIND_WINDOW) {
        return ngx_http_shmfilter_apply_window(NGX_HTTP_SHMFILTER_SEEN, h, key,
                                               1, space, sv->window, &n);
    }

    return ngx_http_shmfilter_apply(NGX_HTTP_SHMFILTER_SEEN, st->kind, h, key,
                                    &n);
}


/*
 * The key and the space of this request: NGX_OK; NGX_DECLINED: a key part or
 * the space is empty, or the space is not a decimal uint64 (counted, the
 * variable is empty, nothing is marked); NGX_ERROR.
 */
static ngx_int_t
ngx_http_shmfilter_request_key(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *key, uint64_t *space)
{
    ngx_int_t  rc;

    ngx_str_null(key);
    *space = 0;

    if (sv->op != NGX_HTTP_SHMFILTER_COUNT) {

        if (ngx_http_shmfilter_key(r, sv, key) != NGX_OK) {
            return NGX_ERROR;
        }

        if (key->len == 0) {
            ngx_http_shmfilter_tally(smcf, sv->op,
                                     NGX_HTTP_SHMFILTER_ANS_EMPTY_KEY, 0);
            return NGX_DECLINED;
        }
    }

    if (sv->space == NULL) {
        return NGX_OK;
    }

    rc = ngx_http_shmfilter_space(r, sv, space);

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (rc != NGX_OK) {
        ngx_http_shmfilter_tally(smcf, sv->op,
                                 (rc == NGX_DECLINED)
                                 ? NGX_HTTP_SHMFILTER_ANS_EMPTY_KEY
                                 : NGX_HTTP_SHMFILTER_ANS_BAD_SPACE, 0);
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* the key of this request: the parts joined by ':'; empty when any part is */
static ngx_int_t
ngx_http_shmfilter_key(ngx_http_request_t *r, ngx_http_shmfilter_var_t *sv,
    ngx_str_t *key)
{
    u_char     *p;
    size_t      len;
    ngx_str_t   part[NGX_HTTP_SHMFILTER_MAX_PARTS];
    ngx_uint_t  i, n;

    n = ngx_min(sv->nparts, NGX_HTTP_SHMFILTER_MAX_PARTS);
    len = 0;

    for (i = 0; i < n; i++) {

        if (ngx_http_complex_value(r, &sv->parts[i], &part[i]) != NGX_OK) {
            return NGX_ERROR;
        }

        if (part[i].len == 0) {
            key->len = 0;
            return NGX_OK;
        }

        len += part[i].len + 1;
    }

    if (n == 1) {
        *key = part[0];
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    key->data = p;

    for (i = 0; i < n; i++) {
        if (i) {
            *p++ = ':';
        }

        p = ngx_cpymem(p, part[i].data, part[i].len);
    }

    key->len = p - key->data;

    return NGX_OK;
}


/*
 * The space= of this request as a uint64: NGX_OK; NGX_DECLINED: empty;
 * NGX_ABORT: not a decimal uint64; NGX_ERROR: no memory.
 */
static ngx_int_t
ngx_http_shmfilter_space(ngx_http_request_t *r, ngx_http_shmfilter_var_t *sv,
    uint64_t *out)
{
    size_t     i;
    uint64_t   x, d;
    ngx_str_t  s;

    if (ngx_http_complex_value(r, sv->space, &s) != NGX_OK) {
        return NGX_ERROR;
    }

    if (s.len == 0) {
        return NGX_DECLINED;
    }

    if (s.len > 20) {
        return NGX_ABORT;
    }

    x = 0;

    for (i = 0; i < s.len; i++) {

        if (s.data[i] < '0' || s.data[i] > '9') {
            return NGX_ABORT;
        }

        d = (uint64_t) (s.data[i] - '0');

        if (x > (UINT64_MAX - d) / 10) {
            /* past 2^64 - 1 */
            return NGX_ABORT;
        }

        x = x * 10 + d;
    }

    *out = x;

    return NGX_OK;
}


/* one data-plane call of variable SV on ST's handle H: 0/1 or a shmf code */
static int
ngx_http_shmfilter_call(ngx_http_shmfilter_var_t *sv,
    ngx_http_shmfilter_struct_t *st, void *h, ngx_str_t *key, uint64_t space,
    uint64_t *count)
{
    if (st->kind == SHMF_KIND_WINDOW && sv->cap != 0) {
        /* cap=N: 1 allowed (counted), 0 capped (nothing stored) */
        *count = 0;
        return shmf_window_mark_if_under(h, space, key->data, key->len,
                                         (uint32_t) sv->cap,
                                         (uint32_t) sv->window);
    }

    if (st->kind == SHMF_KIND_WINDOW) {
        return ngx_http_shmfilter_apply_window(sv->op, h, key,
                                               sv->space != NULL, space,
                                               sv->window, count);
    }

    if (st->kind == SHMF_KIND_UV) {
        return ngx_http_shmfilter_apply_uv(sv->op, h, key, sv->space != NULL,
                                           space, sv->window, count);
    }

    return ngx_http_shmfilter_apply(sv->op, st->kind, h, key, count);
}


/*
 * One UV family call: uv_add of KEY (the device) to SPACE's sketch of the
 * current bucket (1: it changed, 0: not); count: the distinct items of SPACE
 * over the last W buckets (HAS_SPACE 0: of every space). 0/1 or a negative
 * shmf code.
 */
static int
ngx_http_shmfilter_apply_uv(ngx_uint_t op, shmf_uv *h, ngx_str_t *key,
    ngx_flag_t has_space, uint64_t space, ngx_uint_t w, uint64_t *count)
{
    *count = 0;

    if (op == NGX_HTTP_SHMFILTER_UV_ADD) {
        return shmf_uv_add(h, space, key->data, key->len);
    }

    if (op != NGX_HTTP_SHMFILTER_COUNT) {
        return -SHMF_EINVAL;
    }

    if (has_space) {
        return shmf_uv_count(h, space, (uint32_t) w, count);
    }

    return shmf_uv_count_all(h, (uint32_t) w, count);
}


/* one call of OP on handle H of KIND: 0/1 or a negative shmf code */
static int
ngx_http_shmfilter_apply(ngx_uint_t op, ngx_uint_t kind, void *h,
    ngx_str_t *key, uint64_t *count)
{
    *count = 0;

    switch (op) {

    case NGX_HTTP_SHMFILTER_MARK:
        return ngx_http_shmfilter_mark(kind, h, key);

    case NGX_HTTP_SHMFILTER_SEEN:
        if (kind == SHMF_KIND_BLOOM) {
            return shmf_bloom_contains(h, key->data, key->len);
        }

        if (kind == SHMF_KIND_CUCKOO) {
            return shmf_cuckoo_contains(h, key->data, key->len);
        }

        return shmf_set_contains(h, key->data, key->len);

    case NGX_HTTP_SHMFILTER_FORGET:
        if (kind == SHMF_KIND_CUCKOO) {
            return shmf_cuckoo_erase(h, key->data, key->len);
        }

        return shmf_set_erase(h, key->data, key->len);

    case NGX_HTTP_SHMFILTER_HLL_ADD:
        return shmf_hll_add(h, key->data, key->len);

    case NGX_HTTP_SHMFILTER_COUNT:
        return ngx_http_shmfilter_size(kind, h, count);
    }

    return -SHMF_EINVAL;
}


/*
 * Mark if unseen: 1 when this call marked KEY. Bloom: a lock-free add, 1 when
 * it set a bit. Set: insert_unique answers a present key lock-free. Cuckoo:
 * the lock-free contains answers the common "seen" first; only an absent key
 * takes the stripe lock, and insert_unique decides among racers.
 */
static int
ngx_http_shmfilter_mark(ngx_uint_t kind, void *h, ngx_str_t *key)
{
    int  rc;

    if (kind == SHMF_KIND_BLOOM) {
        return shmf_bloom_add(h, key->data, key->len);
    }

    if (kind == SHMF_KIND_CUCKOO) {
        rc = shmf_cuckoo_contains(h, key->data, key->len);

        if (rc != 0) {
            /* 1: seen; or a negative shmf code */
            return (rc == 1) ? 0 : rc;
        }

        return shmf_cuckoo_insert_unique(h, key->data, key->len);
    }

    return shmf_set_insert_unique(h, key->data, key->len);
}


/*
 * shmfilter_count of a structure: the hll distinct estimate, the set or
 * cuckoo size, the bloom inserted estimate.
 */
static int
ngx_http_shmfilter_size(ngx_uint_t kind, void *h, uint64_t *count)
{
    int               rc;
    uint64_t          n;
    shmf_bloom_stats  s;

    n = 0;
    rc = -SHMF_EINVAL;

    switch (kind) {

    case SHMF_KIND_HLL:
        rc = shmf_hll_count(h, &n);
        break;

    case SHMF_KIND_SET:
        rc = shmf_set_size(h, &n);
        break;

    case SHMF_KIND_CUCKOO:
        rc = shmf_cuckoo_size(h, &n);
        break;

    case SHMF_KIND_BLOOM:
        rc = shmf_bloom_stats_get(h, &s);
        n = (rc < 0) ? 0 : (uint64_t) (s.inserted_estimate + 0.5);
        break;
    }

    *count = n;

    return rc;
}


/*
 * One window call: mark_if_unseen / seen / forget of (SPACE, KEY) over the
 * last W buckets; count: the "new" answers of SPACE over the last W buckets
 * (HAS_SPACE 0: the current bucket's distinct pairs of all spaces). 0/1 or a
 * negative shmf code.
 */
static int
ngx_http_shmfilter_apply_window(ngx_uint_t op, shmf_window *h,
    ngx_str_t *key, ngx_flag_t has_space, uint64_t space, ngx_uint_t w,
    uint64_t *count)
{
    int                rc;
    uint32_t           age;
    uint64_t           n, one;
    shmf_window_stats  ws;

    rc = -SHMF_EINVAL;
    n = 0;

    switch (op) {

    case NGX_HTTP_SHMFILTER_MARK:
        rc = shmf_window_mark_if_unseen(h, space, key->data, key->len,
                                        (uint32_t) w);
        break;

    case NGX_HTTP_SHMFILTER_SEEN:
        rc = shmf_window_seen(h, space, key->data, key->len, (uint32_t) w);
        break;

    case NGX_HTTP_SHMFILTER_FORGET:
        rc = shmf_window_forget(h, space, key->data, key->len);
        break;

    case NGX_HTTP_SHMFILTER_COUNT:
        if (!has_space) {
            rc = shmf_window_stats_get(h, &ws);
            n = (rc < 0) ? 0 : ws.today_distinct;
            break;
        }

        for (age = 0, rc = 0; age < w && rc >= 0; age++) {
            rc = shmf_window_new_count(h, space, age, &one);
            n += (rc < 0) ? 0 : one;
        }

        break;
    }

    *count = n;

    return rc;
}


/* shmfilter_hll_add and shmfilter_count of a per-request HLL name */
static ngx_int_t
ngx_http_shmfilter_hll_variable(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, ngx_str_t *key)
{
    int                             rc;
    uint64_t                        n;
    shmf_hll                       *h;
    ngx_str_t                       name;
    ngx_flag_t                      temp;
    ngx_uint_t                      cause;
    ngx_http_shmfilter_hll_slot_t  *slot;

    if (ngx_http_complex_value(r, sv->name_cv, &name) != NGX_OK) {
        return NGX_ERROR;
    }

    h = ngx_http_shmfilter_dynamic_hll(smcf, sv, &name, r->connection->log,
                                       &rc, &cause, &temp, &slot);

    if (h == NULL) {

        if (sv->op == NGX_HTTP_SHMFILTER_COUNT && rc == -SHMF_ENOTFOUND
            && smcf->seg != NULL)
        {
            /* nothing counted yet */
            ngx_http_shmfilter_tally(smcf, sv->op, -1, 0);
            ngx_http_shmfilter_set(v, "0");
            return NGX_OK;
        }

        goto failed;
    }

    n = 0;

    if (sv->op == NGX_HTTP_SHMFILTER_HLL_ADD) {
        rc = shmf_hll_add(h, key->data, key->len);

    } else {
        rc = shmf_hll_count(h, &n);
    }

    if (rc < 0 && slot != NULL) {
        /* dropped: forget the cached handle */
        shmf_hll_close(slot->h);
        slot->h = NULL;
        temp = 0;
    }

    if (temp) {
        shmf_hll_close(h);
    }

    if (rc < 0) {
        cause = ngx_http_shmfilter_cause(rc);
        goto failed;
    }

    return ngx_http_shmfilter_value(r, smcf, sv, v, rc, n);

failed:

    if (cause == NGX_HTTP_SHMFILTER_CAUSE_BAD_NAME) {
        ngx_http_shmfilter_log(r->connection->log, NGX_LOG_ERR,
                               NGX_HTTP_SHMFILTER_WHO_NAMES + sv->name_slot,
                               (int) cause,
                               "shmfilter: shmfilter_%s %V (%V:%ui): a name "
                               "from the request is not 1-63 bytes of "
                               "A-Z a-z 0-9 . _ : - (refused: bad_name)",
                               ngx_http_shmfilter_op_names[sv->op],
                               &sv->var_name, &sv->conf_file, sv->conf_line);

    } else {
        ngx_http_shmfilter_log(r->connection->log, NGX_LOG_ALERT,
                               NGX_HTTP_SHMFILTER_WHO_NAMES + sv->name_slot,
                               (int) cause,
                               "shmfilter: shmfilter_%s %V (%V:%ui): hll "
                               "\"%V\" in segment \"%V\": %s (%s)%s",
                               ngx_http_shmfilter_op_names[sv->op],
                               &sv->var_name, &sv->conf_file, sv->conf_line,
                               &name, &smcf->segment,
                               ngx_http_shmfilter_cause_names[cause],
                               (cause == NGX_HTTP_SHMFILTER_CAUSE_NAMES_FULL)
                               ? "names=N of this variable reached: new "
                                 "names are refused, existing ones answer"
                               : shmf_last_error_message(),
                               (cause == NGX_HTTP_SHMFILTER_CAUSE_NAMES_FULL
                                || cause
                                   == NGX_HTTP_SHMFILTER_CAUSE_DIRECTORY_FULL
                                || cause == NGX_HTTP_SHMFILTER_CAUSE_NO_SPACE)
                               ? "; new names are retried after a backoff "
                                 "(1 s doubling to 60 s)" : "");
    }

    return ngx_http_shmfilter_fail(r, smcf, sv, v, cause);
}


/* the value of variable SV whose call answered RC (0/1) and N (count) */
static ngx_int_t
ngx_http_shmfilter_value(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, int rc, uint64_t n)
{
    ngx_int_t  answer;

    switch (sv->op) {

    case NGX_HTTP_SHMFILTER_MARK:
        if (sv->cap != 0) {
            answer = (rc == 1) ? NGX_HTTP_SHMFILTER_ANS_ALLOWED
                               : NGX_HTTP_SHMFILTER_ANS_CAPPED;
            break;
        }

        answer = (rc == 1) ? NGX_HTTP_SHMFILTER_ANS_NEW
                           : NGX_HTTP_SHMFILTER_ANS_SEEN;
        break;

    case NGX_HTTP_SHMFILTER_SEEN:
        answer = (rc == 1) ? NGX_HTTP_SHMFILTER_ANS_SEEN
                           : NGX_HTTP_SHMFILTER_ANS_UNSEEN;
        break;

    case NGX_HTTP_SHMFILTER_FORGET:
        answer = (rc == 1) ? NGX_HTTP_SHMFILTER_ANS_FORGOTTEN
                           : NGX_HTTP_SHMFILTER_ANS_ABSENT;
        break;

    case NGX_HTTP_SHMFILTER_HLL_ADD:
    case NGX_HTTP_SHMFILTER_UV_ADD:
        ngx_http_shmfilter_tally(smcf, sv->op, -1, 0);
        ngx_http_shmfilter_set(v, (rc == 1) ? "1" : "0");
        return NGX_OK;

    default: /* NGX_HTTP_SHMFILTER_COUNT */
        ngx_http_shmfilter_tally(smcf, sv->op, -1, 0);
        return ngx_http_shmfilter_set_number(r, v, n);
    }

    ngx_http_shmfilter_tally(smcf, sv->op, answer, 0);
    ngx_http_shmfilter_set(v, ngx_http_shmfilter_answer_names[answer]);

    return NGX_OK;
}


/* the answer when the structure cannot answer (shmfilter_fail), for CAUSE */
static ngx_int_t
ngx_http_shmfilter_fail(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_var_t *sv,
    ngx_http_variable_value_t *v, ngx_uint_t cause)
{
    ngx_http_shmfilter_tally(smcf, sv->op, NGX_HTTP_SHMFILTER_ANS_FAILED, 1);
    ngx_http_shmfilter_failure(r, smcf, cause);

    switch (sv->op) {

    case NGX_HTTP_SHMFILTER_MARK:
        if (sv->cap != 0) {
            ngx_http_shmfilter_set(v, smcf->fail_closed ? "capped"
                                                        : "allowed");
            break;
        }

        ngx_http_shmfilter_set(v, smcf->fail_closed ? "seen" : "new");
        break;

    case NGX_HTTP_SHMFILTER_SEEN:
        ngx_http_shmfilter_set(v, smcf->fail_closed ? "seen" : "unseen");
        break;

    case NGX_HTTP_SHMFILTER_FORGET:
        ngx_http_shmfilter_set(v, "error");
        break;

    case NGX_HTTP_SHMFILTER_HLL_ADD:
    case NGX_HTTP_SHMFILTER_UV_ADD:
        ngx_http_shmfilter_set(v, "0");
        break;

    case NGX_HTTP_SHMFILTER_COUNT:
        ngx_http_shmfilter_set(v, "");
        v->not_found = 1;
        break;
    }

    return NGX_OK;
}


static void
ngx_http_shmfilter_set(ngx_http_variable_value_t *v, char *s)
{
    v->data = (u_char *) s;
    v->len = ngx_strlen(s);
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}


static ngx_int_t
ngx_http_shmfilter_set_number(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uint64_t n)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v->len = ngx_sprintf(p, "%uL", (unsigned long long) n) - p;
    v->data = p;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


/* the content handlers: shmfilter_answer, shmfilter_status */

static ngx_int_t
ngx_http_shmfilter_answer_handler(ngx_http_request_t *r)
{
    ngx_int_t                       rc;
    ngx_str_t                       type;
    ngx_http_complex_value_t        cv;
    ngx_http_shmfilter_loc_conf_t  *slcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD|NGX_HTTP_POST))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    slcf = ngx_http_get_module_loc_conf(r, ngx_http_shmfilter_module);

    ngx_str_set(&type, "text/plain");
    cv = *slcf->answer;

    return ngx_http_send_response(r, NGX_HTTP_OK, &type, &cv);
}


/*
 * shmfilter_status: Prometheus text exposition 0.0.4. The module's own
 * families (segment attached, structure up, the per-worker request, answer
 * and error counters) around the library's text of the whole segment
 * (shmf_segment_prometheus_text: every structure's bytes, fill, FP,
 * over-capacity and the kind's counters, names as in docs/metrics.md).
 */
static ngx_int_t
ngx_http_shmfilter_status_handler(ngx_http_request_t *r)
{
    size_t                           cap;
    ngx_int_t                        rc;
    ngx_str_t                        lib;
    ngx_uint_t                       nworkers;
    ngx_core_conf_t                 *ccf;
    ngx_http_shmfilter_text_t        t;
    ngx_http_shmfilter_main_conf_t  *smcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    smcf = ngx_http_get_module_main_conf(r, ngx_http_shmfilter_module);

    if (smcf->segment.len == 0) {
        return NGX_HTTP_NOT_FOUND;
    }

    if (ngx_http_shmfilter_library_text(r, smcf, &lib) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(ngx_cycle->conf_ctx,
                                           ngx_core_module);

    nworkers = (ccf->worker_processes > 0)
               ? (ngx_uint_t) ccf->worker_processes : 1;
    nworkers = ngx_min(nworkers, NGX_HTTP_SHMFILTER_MAX_WORKERS);

    cap = 8192 + smcf->structs.nelts * 512 + nworkers * 4096
          + smcf->name_vars * 512 + lib.len;

    t.start = ngx_pnalloc(r->pool, cap);
    if (t.start == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    t.pos = t.start;
    t.end = t.start + cap;

    ngx_http_shmfilter_status_structs(r, smcf, &t, nworkers);

    if (lib.len > 0 && (size_t) (t.end - t.pos) > lib.len) {
        t.pos = ngx_cpymem(t.pos, lib.data, lib.len);
    }

    if (smcf->zone != NULL && smcf->zone->data != NULL) {
        ngx_http_shmfilter_status_counters(&t, smcf->zone->data, nworkers);
    }

    return ngx_http_shmfilter_send_text(r, &t);
}


/*
 * The library's text into TEXT (empty when the worker is not attached or the
 * library cannot answer): ask its size, then fill (a structure created in
 * between makes it longer: ask again, a few times).
 */
static ngx_int_t
ngx_http_shmfilter_library_text(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_str_t *text)
{
    int         rc;
    char       *buf;
    size_t      cap, need;
    ngx_uint_t  tries;

    ngx_str_null(text);

    if (ngx_http_shmfilter_attach_segment(smcf, r->connection->log)
        != NGX_OK)
    {
        return NGX_OK;
    }

    buf = NULL;
    cap = 0;
    need = 0;

    for (tries = 0; tries < 4; tries++) {
        rc = shmf_segment_prometheus_text(smcf->seg, buf, cap, &need);

        if (rc == 0) {
            text->data = (u_char *) buf;
            text->len = need - 1;
            return NGX_OK;
        }

        if (rc != -SHMF_EFULL) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "shmfilter_status: segment \"%V\": %s: %s "
                          "(answering without the structures' numbers)",
                          &smcf->segment, shmf_strerror(rc),
                          shmf_last_error_message());
            return NGX_OK;
        }

        cap = need + 4096;

        buf = ngx_pnalloc(r->pool, cap);
        if (buf == NULL) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * The segment's attachment over all workers (the shared zone's gauges):
 * attached (every worker), per worker, unlinked, rescues; the name counts of
 * the variables with per-request names.
 */
static void
ngx_http_shmfilter_status_segment(ngx_http_shmfilter_main_conf_t *smcf,
    ngx_http_shmfilter_text_t *t, ngx_uint_t nworkers)
{
    ngx_uint_t                      w, all, i;
    ngx_http_shmfilter_var_t      **vars;
    ngx_http_shmfilter_counters_t  *ctr;

    ctr = (smcf->zone != NULL) ? smcf->zone->data : NULL;

    all = (smcf->seg != NULL);

    for (w = 0; ctr != NULL && w < nworkers; w++) {
        all = all && ctr->worker[w].attached;
    }

    ngx_http_shmfilter_family(t, "shmfilter_segment_attached", "gauge",
                              "1 when every worker is attached to the "
                              "segment (shmfilter_worker_attached: each).");
    ngx_http_shmfilter_printf(t, "shmfilter_segment_attached{segment=\"%V\"} "
                              "%ui\n", &smcf->segment, all);

    if (ctr == NULL) {
        return;
    }

    ngx_http_shmfilter_family(t, "shmfilter_worker_attached", "gauge",
                              "1 when worker N is attached to the segment "
                              "(checked every second).");

    for (w = 0; w < nworkers; w++) {
        ngx_http_shmfilter_printf(t, "shmfilter_worker_attached{segment="
                                  "\"%V\",worker=\"%ui\"} %uA\n",
                                  &smcf->segment, w,
                                  (ngx_atomic_uint_t)
                                  ctr->worker[w].attached);
    }

    ngx_http_shmfilter_family(t, "shmfilter_segment_unlinked", "gauge",
                              "1 when running workers map a segment whose "
                              "file was removed: its state lives only in "
                              "them until a rescue re-creates the name.");
    ngx_http_shmfilter_printf(t, "shmfilter_segment_unlinked{segment=\"%V\"} "
                              "%d\n", &smcf->segment,
                              (int) ngx_http_shmfilter_state_unlinked(ctr,
                                                                      0));

    ngx_http_shmfilter_family(t, "shmfilter_segment_rescues_total", "counter",
                              "Removed segments whose state a worker saved "
                              "and restored under the name.");
    ngx_http_shmfilter_printf(t, "shmfilter_segment_rescues_total{segment="
                              "\"%V\"} %uA\n", &smcf->segment,
                              (ngx_atomic_uint_t) ctr->rescues);

    if (smcf->name_vars == 0) {
        return;
    }

    ngx_http_shmfilter_family(t, "shmfilter_request_names", "gauge",
                              "Structures a variable with a per-request name "
                              "has (names of its literal prefix), against "
                              "its names=N (limit).");

    vars = smcf->vars.elts;

    for (i = 0; i < smcf->vars.nelts; i++) {
        if (vars[i]->name_cv == NULL) {
            continue;
        }

        ngx_http_shmfilter_printf(t, "shmfilter_request_names{segment=\"%V\","
                                  "variable=\"%V\",bound=\"count\"} %uA\n"
                                  "shmfilter_request_names{segment=\"%V\","
                                  "variable=\"%V\",bound=\"limit\"} %ui\n",
                                  &smcf->segment, &vars[i]->var_name,
                                  (ngx_atomic_uint_t)
                                  ctr->names[vars[i]->name_slot],
                                  &smcf->segment, &vars[i]->var_name,
                                  vars[i]->names_max);
    }
}


/* the segment's gauges and shmfilter_structure_up */
static void
ngx_http_shmfilter_status_structs(ngx_http_request_t *r,
    ngx_http_shmfilter_main_conf_t *smcf, ngx_http_shmfilter_text_t *t,
    ngx_uint_t nworkers)
{
    ngx_int_t                     up;
    ngx_uint_t                    i;
    ngx_http_shmfilter_struct_t  *st;

    ngx_http_shmfilter_status_segment(smcf, t, nworkers);

    ngx_http_shmfilter_family(t, "shmfilter_structure_up", "gauge",
                              "1 when the answering worker has the "
                              "configured structure open.");

    st = smcf->structs.elts;

    for (i = 0; i < smcf->structs.nelts; i++) {
        up = st[i].kind != 0
             && ngx_http_shmfilter_handle(smcf, &st[i], r->connection->log)
                != NULL;

        ngx_http_shmfilter_printf(t, "shmfilter_structure_up{segment=\"%V\","
                                  "name=\"%V\",kind=\"%s\"} %d\n",
                                  &smcf->segment, &st[i].name,
                                  shmf_kind_name(st[i].kind), (int) up);
    }
}


/* the per-worker counters of the shared zone */
static void
ngx_http_shmfilter_status_counters(ngx_http_shmfilter_text_t *t,
    ngx_http_shmfilter_counters_t *ctr, ngx_uint_t nworkers)
{
    ngx_uint_t                    w, k;
    ngx_http_shmfilter_worker_t  *c;

    ngx_http_shmfilter_family(t, "shmfilter_requests_total", "counter",
                              "Evaluations of shmfilter variables, per "
                              "worker and operation.");

    for (w = 0; w < nworkers; w++) {
        c = &ctr->worker[w];

        for (k = 0; k < NGX_HTTP_SHMFILTER_NOPS; k++) {
            ngx_http_shmfilter_printf(t, "shmfilter_requests_total"
                                      "{worker=\"%ui\",op=\"%s\"} %uA\n",
                                      w, ngx_http_shmfilter_op_names[k],
                                      (ngx_atomic_uint_t) c->requests[k]);
        }
    }

    ngx_http_shmfilter_family(t, "shmfilter_answers_total", "counter",
                              "Answers given, per worker and answer.");

    for (w = 0; w < nworkers; w++) {
        c = &ctr->worker[w];

        for (k = 0; k < NGX_HTTP_SHMFILTER_NANSWERS; k++) {
            ngx_http_shmfilter_printf(t, "shmfilter_answers_total"
                                      "{worker=\"%ui\",answer=\"%s\"} %uA\n",
                                      w, ngx_http_shmfilter_answer_names[k],
                                      (ngx_atomic_uint_t) c->answers[k]);
        }
    }

    ngx_http_shmfilter_family(t, "shmfilter_errors_total", "counter",
                              "Evaluations answered per shmfilter_fail "
                              "because the structure could not answer.");

    for (w = 0; w < nworkers; w++) {
        ngx_http_shmfilter_printf(t, "shmfilter_errors_total{worker=\"%ui\"} "
                                  "%uA\n", w,
                                  (ngx_atomic_uint_t) ctr->worker[w].errors);
    }

    ngx_http_shmfilter_family(t, "shmfilter_failures_total", "counter",
                              "Evaluations that could not do what they were "
                              "asked, per worker and cause "
                              "($shmfilter_error).");

    for (w = 0; w < nworkers; w++) {
        for (k = 1; k < NGX_HTTP_SHMFILTER_NCAUSES; k++) {
            ngx_http_shmfilter_printf(t, "shmfilter_failures_total"
                                      "{worker=\"%ui\",cause=\"%s\"} %uA\n",
                                      w, ngx_http_shmfilter_cause_names[k],
                                      (ngx_atomic_uint_t)
                                      ctr->worker[w].failures[k]);
        }
    }
}


static void
ngx_http_shmfilter_family(ngx_http_shmfilter_text_t *t, char *name,
    char *type, char *help)
{
    ngx_http_shmfilter_printf(t, "# HELP %s %s\n# TYPE %s %s\n",
                              name, help, name, type);
}


static void ngx_cdecl
ngx_http_shmfilter_printf(ngx_http_shmfilter_text_t *t, const char *fmt, ...)
{
    va_list  args;

    va_start(args, fmt);
    t->pos = ngx_vslprintf(t->pos, t->end, fmt, args);
    va_end(args);
}


static ngx_int_t
ngx_http_shmfilter_send_text(ngx_http_request_t *r,
    ngx_http_shmfilter_text_t *t)
{
    ngx_int_t    rc;
    ngx_buf_t   *b;
    ngx_chain_t  out;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = t->pos - t->start;

    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = t->start;
    b->last = t->pos;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
