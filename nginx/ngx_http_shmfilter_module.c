/* nginx/ngx_http_shmfilter_module.c: shmfilter inside nginx (docs/nginx.md).
 *
 * A dynamic HTTP module over the public C API (include/shmfilter/shmfilter.h)
 * and nothing else. The structures of one shmfilter segment become nginx
 * variables evaluated per request from other variables, so ordinary config
 * (if, map, return, add_header, log_format) does the policy:
 *
 *   shmfilter_segment  NAME [file=PATH] [create] [size=SIZE] [mode=OCTAL] [group=NAME];
 *   shmfilter_structure NAME KIND [capacity=N] [error=RATE] [create];   KIND: bloom cuckoo set hll
 *   shmfilter_structure NAME window [variant=bloom|cuckoo] [expected=N] [error=RATE] [retention=N]
 *                       [bucket=TIME] [utc_offset=TIME] [max_spaces=N] [error_window=N] [create];
 *   shmfilter_mark     $var NAME KEY... [space=V window=W];  "new" (this request marked KEY) or "seen";
 *                                       a window: mark-if-unseen of (space, KEY) over the last W buckets
 *   shmfilter_seen     $var NAME KEY... [space=V window=W];  read-only: "seen" or "unseen"
 *   shmfilter_forget   $var NAME KEY... [space=V];  "forgotten" or "absent" (cuckoo, set, cuckoo window)
 *   shmfilter_hll_add  $var NAME KEY...;  "1" a register grew, "0" not; NAME may hold
 *                                       variables (uv:$arg_plan), created on first use
 *   shmfilter_count    $var NAME [space=V window=W];  distinct count (hll), size (set, cuckoo),
 *                                       inserted estimate (bloom); window: "new" answers of space V
 *                                       in the last W buckets (default 1), no space: today's pairs
 *   shmfilter_fail     open | closed;   the answer when the structure cannot answer
 *   shmfilter_maintain TIME | off;      worker 0 runs shmf_window_maintain this often (60s)
 *   shmfilter_status;                   (location) Prometheus text
 *   shmfilter_answer TEXT;              (location) 200 text/plain TEXT (variables
 *                                       allowed), in the content phase: unlike
 *                                       `return` it runs after allow/deny/auth
 *
 * KEY...: up to 8 parts (each may hold variables) joined by ':' into the key;
 * when any part is empty in a request the variable is empty and nothing is
 * marked (a request without a device marks nothing).
 * Processes: the master opens the segment in init_module only to check the
 * configuration (and to create what `create` asks for), then closes it before
 * it forks; every worker attaches in init_process and never uses anything of
 * the master's. A variable is evaluated at most once per request (nginx caches
 * it in the request), so `if ($fc = new)` and `add_header X-FC $fc` see the
 * same answer of one mark. Per-worker counters live in an nginx shared zone
 * ("shmfilter_counters"), kept across reloads, read by the status handler.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <shmfilter/shmfilter.h>

/* ---- kinds, operations, counters ------------------------------------------ */
enum { K_UNKNOWN = 0, K_BLOOM, K_CUCKOO, K_SET, K_HLL, K_WINDOW, K_LAST = K_WINDOW };
static const char *const kind_names[] = {"unknown", "bloom", "cuckoo", "set", "hll", "window"};

enum { OP_MARK = 0, OP_SEEN, OP_FORGET, OP_HLL_ADD, OP_COUNT, OP_N };
static const char *const op_names[] = {"mark", "seen", "forget", "hll_add", "count"};
static const char *const op_directives[] = {"shmfilter_mark", "shmfilter_seen", "shmfilter_forget",
                                            "shmfilter_hll_add", "shmfilter_count"};

/* Answers counted per worker (shmfilter_answers_total{answer=...}). */
enum { A_NEW = 0, A_SEEN, A_UNSEEN, A_FORGOTTEN, A_ABSENT, A_FAILED, A_EMPTY_KEY, A_BAD_SPACE, A_N };
static const char *const answer_names[] = {"new",    "seen",      "unseen",   "forgotten",
                                           "absent", "failed",    "empty_key", "bad_space"};

#define SHMF_NGX_MAX_WORKERS 64
/* One worker's counters; written only by that worker (ngx_worker indexes the
 * slot), read by whichever worker answers the status request: atomic adds. */
typedef struct {
    ngx_atomic_t requests[OP_N];
    ngx_atomic_t answers[A_N];
    ngx_atomic_t errors;
    ngx_atomic_t pad[16 - OP_N - A_N - 1 > 0 ? 16 - OP_N - A_N - 1 : 1];
} shmf_ngx_worker_counters_t;

typedef struct {
    shmf_ngx_worker_counters_t worker[SHMF_NGX_MAX_WORKERS];
} shmf_ngx_counters_t;

/* ---- configuration -------------------------------------------------------- */
typedef struct {
    ngx_str_t name;      /* NUL-terminated */
    ngx_uint_t kind;     /* K_*: declared, or found by probing in init_module */
    ngx_flag_t declared; /* by shmfilter_structure */
    ngx_flag_t create;
    uint64_t capacity;
    double error;
    /* kind window: declared options (shmf_window_options); retention and variant
     * are replaced in init_module by what the segment holds */
    shmf_window_options wopt;
    ngx_flag_t wopt_set[4]; /* variant=, retention=, bucket=, utc_offset= were given */
    ngx_str_t conf_file; /* where it was first named, for error messages */
    ngx_uint_t conf_line;
    /* per worker (set in init_process; the master's copies stay NULL) */
    void *handle;
    time_t retry_at;
    ngx_flag_t logged;
} shmf_ngx_struct_t;

typedef struct {
    ngx_uint_t op;
    ngx_uint_t index;                  /* into structs when name is static */
    ngx_http_complex_value_t *name_cv; /* dynamic name (hll_add, count on hll) */
    ngx_http_complex_value_t *parts; /* the key: parts joined by ':' (a window's item) */
    ngx_uint_t nparts;
    ngx_http_complex_value_t *space; /* window: space=VALUE (the plan id), a decimal uint64 */
    ngx_uint_t window;               /* window: window=W buckets; 0 = not given (init_module resolves it) */
    ngx_str_t var_name;
    ngx_str_t conf_file;
    ngx_uint_t conf_line;
} shmf_ngx_var_t;

/* A per-worker cache of dynamically named HLLs (uv:$arg_plan). */
#define SHMF_NGX_HLL_CACHE 1024
typedef struct {
    size_t len;
    u_char name[64];
    shmf_hll *h;
} shmf_ngx_hll_slot_t;

typedef struct {
    ngx_str_t segment; /* NUL-terminated; empty: no shmfilter_segment */
    ngx_str_t file;    /* NUL-terminated; empty: POSIX shm */
    ngx_flag_t create;
    size_t size;
    ngx_int_t mode;  /* -1: default */
    ngx_int_t group; /* -1: default */
    ngx_str_t conf_file;
    ngx_uint_t conf_line;
    ngx_flag_t fail_closed;
    ngx_msec_t maintain;  /* shmfilter_maintain: period of shmf_window_maintain in worker 0; 0 = off */
    ngx_array_t structs; /* shmf_ngx_struct_t */
    ngx_array_t vars;    /* shmf_ngx_var_t * */
    ngx_shm_zone_t *zone;
    /* per worker */
    shmf_segment *seg;
    time_t seg_retry_at;
    ngx_flag_t seg_logged;
    shmf_ngx_hll_slot_t *hll_cache;
    ngx_flag_t hll_logged;
} shmf_ngx_main_conf_t;

static void *shmf_ngx_create_main_conf(ngx_conf_t *cf);
static char *shmf_ngx_init_main_conf(ngx_conf_t *cf, void *conf);
static char *shmf_ngx_segment(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *shmf_ngx_structure(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *shmf_ngx_variable(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *shmf_ngx_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *shmf_ngx_answer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *shmf_ngx_maintain_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static void *shmf_ngx_create_loc_conf(ngx_conf_t *cf);
static char *shmf_ngx_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);

typedef struct {
    ngx_http_complex_value_t *answer; /* shmfilter_answer TEXT */
} shmf_ngx_loc_conf_t;
static ngx_int_t shmf_ngx_init_module(ngx_cycle_t *cycle);
static ngx_int_t shmf_ngx_init_process(ngx_cycle_t *cycle);
static void shmf_ngx_exit_process(ngx_cycle_t *cycle);

static ngx_conf_enum_t shmf_ngx_fail_modes[] = {
    {ngx_string("open"), 0},
    {ngx_string("closed"), 1},
    {ngx_null_string, 0},
};

static ngx_command_t shmf_ngx_commands[] = {
    {ngx_string("shmfilter_segment"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, shmf_ngx_segment,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("shmfilter_structure"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_structure,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("shmfilter_mark"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_variable,
     NGX_HTTP_MAIN_CONF_OFFSET, OP_MARK, NULL},
    {ngx_string("shmfilter_seen"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_variable,
     NGX_HTTP_MAIN_CONF_OFFSET, OP_SEEN, NULL},
    {ngx_string("shmfilter_forget"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_variable,
     NGX_HTTP_MAIN_CONF_OFFSET, OP_FORGET, NULL},
    {ngx_string("shmfilter_hll_add"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_variable,
     NGX_HTTP_MAIN_CONF_OFFSET, OP_HLL_ADD, NULL},
    {ngx_string("shmfilter_count"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE, shmf_ngx_variable,
     NGX_HTTP_MAIN_CONF_OFFSET, OP_COUNT, NULL},
    {ngx_string("shmfilter_fail"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_enum_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(shmf_ngx_main_conf_t, fail_closed), &shmf_ngx_fail_modes},
    {ngx_string("shmfilter_maintain"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, shmf_ngx_maintain_directive,
     NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("shmfilter_status"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS, shmf_ngx_status, 0, 0, NULL},
    {ngx_string("shmfilter_answer"), NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1, shmf_ngx_answer, NGX_HTTP_LOC_CONF_OFFSET, 0,
     NULL},
    ngx_null_command};

static ngx_http_module_t shmf_ngx_module_ctx = {
    NULL,                      /* preconfiguration */
    NULL,                      /* postconfiguration */
    shmf_ngx_create_main_conf, /* create main configuration */
    shmf_ngx_init_main_conf,   /* init main configuration */
    NULL, NULL,                /* server */
    shmf_ngx_create_loc_conf,  /* create location configuration */
    shmf_ngx_merge_loc_conf    /* merge location configuration */
};

ngx_module_t ngx_http_shmfilter_module = {
    NGX_MODULE_V1,
    &shmf_ngx_module_ctx,   /* module context */
    shmf_ngx_commands,      /* module directives */
    NGX_HTTP_MODULE,        /* module type */
    NULL,                   /* init master */
    shmf_ngx_init_module,   /* init module */
    shmf_ngx_init_process,  /* init process */
    NULL,                   /* init thread */
    NULL,                   /* exit thread */
    shmf_ngx_exit_process,  /* exit process */
    NULL,                   /* exit master */
    NGX_MODULE_V1_PADDING};

/* ---- helpers --------------------------------------------------------------- */
static shmf_ngx_worker_counters_t *shmf_ngx_my_counters(shmf_ngx_main_conf_t *mcf) {
    shmf_ngx_counters_t *c;
    if (mcf->zone == NULL || mcf->zone->data == NULL) return NULL;
    c = mcf->zone->data;
    return &c->worker[ngx_worker < SHMF_NGX_MAX_WORKERS ? ngx_worker : SHMF_NGX_MAX_WORKERS - 1];
}

static void shmf_ngx_count(shmf_ngx_main_conf_t *mcf, ngx_uint_t op, ngx_int_t answer, ngx_flag_t error) {
    shmf_ngx_worker_counters_t *w = shmf_ngx_my_counters(mcf);
    if (w == NULL) return;
    ngx_atomic_fetch_add(&w->requests[op], 1);
    if (answer >= 0) ngx_atomic_fetch_add(&w->answers[answer], 1);
    if (error) ngx_atomic_fetch_add(&w->errors, 1);
}

static ngx_int_t shmf_ngx_parse_kind(ngx_str_t *s) {
    ngx_uint_t k;
    for (k = K_BLOOM; k <= K_LAST; k++) {
        if (s->len == ngx_strlen(kind_names[k]) && ngx_strncmp(s->data, kind_names[k], s->len) == 0) return k;
    }
    return -1;
}

static shmf_ngx_struct_t *shmf_ngx_find_struct(shmf_ngx_main_conf_t *mcf, ngx_str_t *name, ngx_uint_t *index) {
    ngx_uint_t i;
    shmf_ngx_struct_t *st = mcf->structs.elts;
    for (i = 0; i < mcf->structs.nelts; i++) {
        if (st[i].name.len == name->len && ngx_strncmp(st[i].name.data, name->data, name->len) == 0) {
            if (index) *index = i;
            return &st[i];
        }
    }
    return NULL;
}

static shmf_ngx_struct_t *shmf_ngx_add_struct(ngx_conf_t *cf, shmf_ngx_main_conf_t *mcf, ngx_str_t *name,
                                              ngx_uint_t *index) {
    shmf_ngx_struct_t *st = shmf_ngx_find_struct(mcf, name, index);
    if (st != NULL) return st;
    if (name->len == 0 || name->len > 63) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "structure name \"%V\" must be 1 to 63 bytes", name);
        return NULL;
    }
    if (index) *index = mcf->structs.nelts;
    st = ngx_array_push(&mcf->structs);
    if (st == NULL) return NULL;
    ngx_memzero(st, sizeof(*st));
    st->name = *name;
    st->conf_file = cf->conf_file->file.name;
    st->conf_line = cf->conf_file->line;
    st->error = 0.01;
    return st;
}

/* Closes a structure handle of kind K (NULL is a no-op). */
static void shmf_ngx_close_handle(ngx_uint_t kind, void *h) {
    if (h == NULL) return;
    switch (kind) {
    case K_BLOOM: shmf_bloom_close(h); break;
    case K_CUCKOO: shmf_cuckoo_close(h); break;
    case K_SET: shmf_set_close(h); break;
    case K_HLL: shmf_hll_close(h); break;
    case K_WINDOW: shmf_window_close(h); break;
    }
}

/* Opens NAME as KIND; 0 or a negative shmf code. */
static int shmf_ngx_open_kind(shmf_segment *seg, ngx_uint_t kind, const char *name, void **out) {
    *out = NULL;
    switch (kind) {
    case K_BLOOM: return shmf_bloom_open(seg, name, (shmf_bloom **)out);
    case K_CUCKOO: return shmf_cuckoo_open(seg, name, (shmf_cuckoo **)out);
    case K_SET: return shmf_set_open(seg, name, (shmf_set **)out);
    case K_HLL: return shmf_hll_open(seg, name, (shmf_hll **)out);
    case K_WINDOW: return shmf_window_open(seg, name, (shmf_window **)out);
    }
    return -SHMF_EINVAL;
}

static int shmf_ngx_create_kind(shmf_segment *seg, shmf_ngx_struct_t *st, void **out) {
    const char *name = (const char *)st->name.data;
    *out = NULL;
    switch (st->kind) {
    case K_BLOOM: {
        shmf_bloom_options o;
        shmf_bloom_options_init(&o);
        o.capacity = st->capacity;
        o.error = st->error;
        return shmf_bloom_create(seg, name, &o, (shmf_bloom **)out);
    }
    case K_CUCKOO: {
        shmf_cuckoo_options o;
        shmf_cuckoo_options_init(&o);
        o.capacity = st->capacity;
        o.error = st->error;
        return shmf_cuckoo_create(seg, name, &o, (shmf_cuckoo **)out);
    }
    case K_SET: {
        shmf_set_options o;
        shmf_set_options_init(&o);
        o.capacity = st->capacity;
        return shmf_set_create(seg, name, &o, (shmf_set **)out);
    }
    case K_HLL: return shmf_hll_open_or_create(seg, name, (shmf_hll **)out);
    case K_WINDOW: return shmf_window_create(seg, name, &st->wopt, (shmf_window **)out);
    }
    return -SHMF_EINVAL;
}

/* The module's kind of a C API kind (SHMF_KIND_*); K_UNKNOWN for kinds it does not serve. */
static ngx_uint_t shmf_ngx_kind_of(uint32_t c_kind) {
    switch (c_kind) {
    case SHMF_KIND_BLOOM: return K_BLOOM;
    case SHMF_KIND_CUCKOO: return K_CUCKOO;
    case SHMF_KIND_SET: return K_SET;
    case SHMF_KIND_HLL: return K_HLL;
    case SHMF_KIND_WINDOW: return K_WINDOW;
    }
    return K_UNKNOWN;
}

/* ---- configuration directives ---------------------------------------------- */
static void *shmf_ngx_create_main_conf(ngx_conf_t *cf) {
    shmf_ngx_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL) return NULL;
    if (ngx_array_init(&mcf->structs, cf->pool, 4, sizeof(shmf_ngx_struct_t)) != NGX_OK) return NULL;
    if (ngx_array_init(&mcf->vars, cf->pool, 4, sizeof(shmf_ngx_var_t *)) != NGX_OK) return NULL;
    mcf->create = 0;
    mcf->mode = -1;
    mcf->group = -1;
    mcf->fail_closed = NGX_CONF_UNSET;
    mcf->maintain = NGX_CONF_UNSET_MSEC;
    return mcf;
}

static char *shmf_ngx_init_main_conf(ngx_conf_t *cf, void *conf) {
    shmf_ngx_main_conf_t *mcf = conf;
    ngx_conf_init_value(mcf->fail_closed, 0);
    ngx_conf_init_msec_value(mcf->maintain, 60000);
    if (mcf->vars.nelts > 0 && mcf->segment.len == 0) {
        shmf_ngx_var_t **v = mcf->vars.elts;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "%s in %V:%ui needs a segment: add \"shmfilter_segment NAME [create];\" to the http block",
                      op_directives[v[0]->op], &v[0]->conf_file, v[0]->conf_line);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static ngx_int_t shmf_ngx_zone_init(ngx_shm_zone_t *zone, void *data) {
    ngx_slab_pool_t *sp;
    shmf_ngx_counters_t *c;
    if (data != NULL) { /* reload: the old cycle's zone of the same size: keep counting */
        zone->data = data;
        return NGX_OK;
    }
    sp = (ngx_slab_pool_t *)zone->shm.addr;
    if (zone->shm.exists) {
        zone->data = sp->data;
        return NGX_OK;
    }
    c = ngx_slab_calloc(sp, sizeof(*c));
    if (c == NULL) return NGX_ERROR;
    sp->data = c;
    zone->data = c;
    return NGX_OK;
}

static char *shmf_ngx_segment(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    shmf_ngx_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_str_t zname = ngx_string("shmfilter_counters");
    ngx_uint_t i;
    (void)cmd;

    if (mcf->segment.len) return "is duplicate (one segment per http block)";
    if (value[1].len == 0 || value[1].len > 200) return "needs a segment name of 1 to 200 bytes";
    mcf->segment = value[1];
    mcf->conf_file = cf->conf_file->file.name;
    mcf->conf_line = cf->conf_file->line;
    for (i = 2; i < cf->args->nelts; i++) {
        ngx_str_t *a = &value[i];
        if (a->len == 6 && ngx_strncmp(a->data, "create", 6) == 0) {
            mcf->create = 1;
        } else if (a->len > 5 && ngx_strncmp(a->data, "file=", 5) == 0) {
            mcf->file.data = a->data + 5;
            mcf->file.len = a->len - 5;
        } else if (a->len > 5 && ngx_strncmp(a->data, "size=", 5) == 0) {
            ngx_str_t s = {a->len - 5, a->data + 5};
            off_t n = ngx_parse_offset(&s); /* k, m and g suffixes (ngx_parse_size has no g) */
            if (n == NGX_ERROR || n < 65536) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: a size of at least 64k, e.g. size=256m or 3g",
                                   a);
                return NGX_CONF_ERROR;
            }
            mcf->size = (size_t)n;
        } else if (a->len > 5 && ngx_strncmp(a->data, "mode=", 5) == 0) {
            char *end = NULL;
            long m = strtol((const char *)a->data + 5, &end, 8);
            if (end == NULL || *end != '\0' || m < 0 || m > 0777) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: octal permission bits, e.g. mode=0660", a);
                return NGX_CONF_ERROR;
            }
            mcf->mode = m;
        } else if (a->len > 6 && ngx_strncmp(a->data, "group=", 6) == 0) {
            struct group *g = getgrnam((const char *)a->data + 6);
            if (g == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: no such group", a);
                return NGX_CONF_ERROR;
            }
            mcf->group = g->gr_gid;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown parameter \"%V\" (expected create, file=PATH, size=SIZE, mode=OCTAL, "
                               "group=NAME)",
                               a);
            return NGX_CONF_ERROR;
        }
    }
    mcf->zone = ngx_shared_memory_add(cf, &zname, 8 * ngx_pagesize + sizeof(shmf_ngx_counters_t),
                                      &ngx_http_shmfilter_module);
    if (mcf->zone == NULL) return NGX_CONF_ERROR;
    mcf->zone->init = shmf_ngx_zone_init;
    return NGX_CONF_OK;
}

/* A signed nginx time ("8h", "-5h30m", "0", "28800s"): seconds into *OUT. */
static ngx_int_t shmf_ngx_parse_signed_time(u_char *p, size_t len, int64_t *out) {
    ngx_int_t sign = 1, t;
    ngx_str_t v;
    if (len > 0 && (*p == '+' || *p == '-')) {
        sign = *p == '-' ? -1 : 1;
        p++;
        len--;
    }
    v.data = p;
    v.len = len;
    t = len ? ngx_parse_time(&v, 1) : NGX_ERROR;
    if (t == NGX_ERROR) return NGX_ERROR;
    *out = sign * (int64_t)t;
    return NGX_OK;
}

#define SHMF_NGX_PARAM(a, lit) ((a)->len > sizeof(lit) - 1 && ngx_strncmp((a)->data, lit, sizeof(lit) - 1) == 0)

/* The window parameters of shmfilter_structure NAME window ...; NGX_DECLINED: not one of them. */
static ngx_int_t shmf_ngx_window_param(ngx_conf_t *cf, shmf_ngx_struct_t *st, ngx_str_t *a) {
    shmf_window_options *o = &st->wopt;
    u_char *v;
    size_t n;
    if (SHMF_NGX_PARAM(a, "variant=")) {
        v = a->data + 8;
        n = a->len - 8;
        if (n == 5 && ngx_strncmp(v, "bloom", 5) == 0) {
            o->variant = SHMF_WINDOW_BLOOM;
        } else if (n == 6 && ngx_strncmp(v, "cuckoo", 6) == 0) {
            o->variant = SHMF_WINDOW_CUCKOO;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: variant=bloom (insert-only, least memory) or variant=cuckoo (deletable: "
                               "shmfilter_forget)",
                               a);
            return NGX_ERROR;
        }
        st->wopt_set[0] = 1;
    } else if (SHMF_NGX_PARAM(a, "expected=")) {
        off_t x = ngx_atoof(a->data + 9, a->len - 9);
        if (x <= 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: distinct (space, item) pairs one bucket must hold, a positive integer", a);
            return NGX_ERROR;
        }
        o->expected_per_bucket = (uint64_t)x;
    } else if (SHMF_NGX_PARAM(a, "retention=")) {
        ngx_int_t x = ngx_atoi(a->data + 10, a->len - 10);
        if (x < 1 || x > 64) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: buckets kept, 1 to 64 (default 7)", a);
            return NGX_ERROR;
        }
        o->retention = (uint32_t)x;
        st->wopt_set[1] = 1;
    } else if (SHMF_NGX_PARAM(a, "bucket=")) {
        ngx_str_t t = {a->len - 7, a->data + 7};
        ngx_int_t x = ngx_parse_time(&t, 1);
        if (x == NGX_ERROR || x < 1) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: a bucket length of at least 1s, e.g. bucket=1d", a);
            return NGX_ERROR;
        }
        o->bucket_seconds = (uint64_t)x;
        st->wopt_set[2] = 1;
    } else if (SHMF_NGX_PARAM(a, "utc_offset=")) {
        int64_t x = 0;
        if (shmf_ngx_parse_signed_time(a->data + 11, a->len - 11, &x) != NGX_OK || x < -86400 || x > 86400) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid %V: where buckets start, east of UTC, within a day, e.g. utc_offset=8h or "
                               "utc_offset=-5h",
                               a);
            return NGX_ERROR;
        }
        o->utc_offset = x;
        st->wopt_set[3] = 1;
    } else if (SHMF_NGX_PARAM(a, "max_spaces=")) {
        ngx_int_t x = ngx_atoi(a->data + 11, a->len - 11);
        if (x < 1 || x > (1 << 20)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: spaces with their own counters, 1 to 1048576", a);
            return NGX_ERROR;
        }
        o->max_spaces = (uint32_t)x;
    } else if (SHMF_NGX_PARAM(a, "error_window=")) {
        ngx_int_t x = ngx_atoi(a->data + 13, a->len - 13);
        if (x < 1 || x > 64) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: the window W the error rate is for, 1 to 64", a);
            return NGX_ERROR;
        }
        o->error_window = (uint32_t)x;
    } else {
        return NGX_DECLINED;
    }
    return NGX_OK;
}

static char *shmf_ngx_structure(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    shmf_ngx_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    shmf_ngx_struct_t *st;
    ngx_int_t kind, rc;
    ngx_uint_t i;
    (void)cmd;

    kind = shmf_ngx_parse_kind(&value[2]);
    if (kind < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown structure kind \"%V\" (expected bloom, cuckoo, set, hll or window)", &value[2]);
        return NGX_CONF_ERROR;
    }
    st = shmf_ngx_find_struct(mcf, &value[1], NULL);
    if (st != NULL && st->declared) return "declares a structure twice";
    st = shmf_ngx_add_struct(cf, mcf, &value[1], NULL);
    if (st == NULL) return NGX_CONF_ERROR;
    st->kind = (ngx_uint_t)kind;
    st->declared = 1;
    st->conf_file = cf->conf_file->file.name;
    st->conf_line = cf->conf_file->line;
    shmf_window_options_init(&st->wopt);
    for (i = 3; i < cf->args->nelts; i++) {
        ngx_str_t *a = &value[i];
        if (a->len == 6 && ngx_strncmp(a->data, "create", 6) == 0) {
            st->create = 1;
        } else if (st->kind == K_WINDOW && (rc = shmf_ngx_window_param(cf, st, a)) != NGX_DECLINED) {
            if (rc != NGX_OK) return NGX_CONF_ERROR;
        } else if (a->len > 9 && ngx_strncmp(a->data, "capacity=", 9) == 0) {
            off_t n = ngx_atoof(a->data + 9, a->len - 9);
            if (st->kind == K_WINDOW) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "%V: a window is sized per bucket: use expected=N (distinct pairs a bucket holds)",
                                   a);
                return NGX_CONF_ERROR;
            }
            if (n <= 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: a positive integer", a);
                return NGX_CONF_ERROR;
            }
            st->capacity = (uint64_t)n;
        } else if (a->len > 6 && ngx_strncmp(a->data, "error=", 6) == 0) {
            char *end = NULL;
            double e = strtod((const char *)a->data + 6, &end);
            if (end == NULL || *end != '\0' || !(e > 0 && e < 1)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V: a rate in (0, 1), e.g. error=0.001", a);
                return NGX_CONF_ERROR;
            }
            st->error = e;
            st->wopt.error = e;
        } else if (st->kind == K_WINDOW) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown parameter \"%V\" (a window takes variant=bloom|cuckoo, expected=N, "
                               "error=RATE, retention=N, bucket=TIME, utc_offset=TIME, max_spaces=N, "
                               "error_window=N, create)",
                               a);
            return NGX_CONF_ERROR;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown parameter \"%V\" (expected capacity=N, error=RATE, create)", a);
            return NGX_CONF_ERROR;
        }
    }
    if (st->kind == K_WINDOW && st->wopt.error_window > st->wopt.retention) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "window \"%V\": error_window=%uD is more than retention=%uD",
                           &value[1], st->wopt.error_window, st->wopt.retention);
        return NGX_CONF_ERROR;
    }
    if (st->create && st->kind == K_WINDOW && st->wopt.expected_per_bucket == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "window \"%V\": create needs expected=N (distinct pairs one bucket must hold)", &value[1]);
        return NGX_CONF_ERROR;
    }
    if (st->create && st->kind != K_HLL && st->kind != K_WINDOW && st->capacity == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "structure \"%V\": create needs capacity=N", &value[1]);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static char *shmf_ngx_maintain_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    shmf_ngx_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    (void)cmd;
    if (mcf->maintain != NGX_CONF_UNSET_MSEC) return "is duplicate";
    if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) {
        mcf->maintain = 0;
        return NGX_CONF_OK;
    }
    mcf->maintain = ngx_parse_time(&value[1], 0);
    if (mcf->maintain == (ngx_msec_t)NGX_ERROR || mcf->maintain < 1000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"%V\": a period of at least 1s, or off", &value[1]);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static ngx_int_t shmf_ngx_variable_get(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data);

static char *shmf_ngx_variable(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    shmf_ngx_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_str_t vname;
    shmf_ngx_var_t *sv, **slot;
    ngx_http_variable_t *var;
    ngx_http_compile_complex_value_t ccv;
    ngx_uint_t op = cmd->offset;

    if (value[1].len < 2 || value[1].data[0] != '$') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid variable name \"%V\" (expected $name)", &value[1]);
        return NGX_CONF_ERROR;
    }
    sv = ngx_pcalloc(cf->pool, sizeof(*sv));
    if (sv == NULL) return NGX_CONF_ERROR;
    sv->op = op;
    sv->var_name = value[1];
    sv->conf_file = cf->conf_file->file.name;
    sv->conf_line = cf->conf_file->line;

    if (ngx_http_script_variables_count(&value[2]) > 0) {
        if (op != OP_HLL_ADD && op != OP_COUNT) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "structure name \"%V\" must not hold variables (only shmfilter_hll_add and "
                               "shmfilter_count take per-request names)",
                               &value[2]);
            return NGX_CONF_ERROR;
        }
        sv->name_cv = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
        if (sv->name_cv == NULL) return NGX_CONF_ERROR;
        ngx_memzero(&ccv, sizeof(ccv));
        ccv.cf = cf;
        ccv.value = &value[2];
        ccv.complex_value = sv->name_cv;
        if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
    } else if (shmf_ngx_add_struct(cf, mcf, &value[2], &sv->index) == NULL) {
        return NGX_CONF_ERROR;
    }
    {
        ngx_uint_t i, nparts = 0;
        ngx_http_complex_value_t parts[8];
        for (i = 3; i < cf->args->nelts; i++) {
            ngx_str_t *a = &value[i];
            if (SHMF_NGX_PARAM(a, "space=")) { /* a window's space: the plan id, from any variable */
                ngx_str_t sp = {a->len - 6, a->data + 6};
                if (sv->space != NULL) return "takes space= once";
                if (op == OP_HLL_ADD) return "takes no space= (only a window has spaces)";
                sv->space = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
                if (sv->space == NULL) return NGX_CONF_ERROR;
                if (ngx_http_script_variables_count(&sp) == 0) {
                    u_char *c;
                    for (c = sp.data; c < sp.data + sp.len; c++)
                        if (*c < '0' || *c > '9') break;
                    if (c != sp.data + sp.len || sp.len > 20 ||
                        (sp.len == 20 && ngx_strncmp(sp.data, "18446744073709551615", 20) > 0)) {
                        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                           "invalid %V: a space is a decimal uint64 (the plan id) or a variable "
                                           "holding one, e.g. space=$arg_plan",
                                           a);
                        return NGX_CONF_ERROR;
                    }
                }
                ngx_memzero(&ccv, sizeof(ccv));
                ccv.cf = cf;
                ccv.value = &sp;
                ccv.complex_value = sv->space;
                if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
                continue;
            }
            if (SHMF_NGX_PARAM(a, "window=")) { /* the last W buckets */
                ngx_int_t w = ngx_atoi(a->data + 7, a->len - 7);
                if (op == OP_HLL_ADD) return "takes no window= (only a window structure has buckets)";
                if (w < 1 || w > 64) {
                    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                       "invalid %V: the last W buckets, 1 to the window's retention", a);
                    return NGX_CONF_ERROR;
                }
                sv->window = (ngx_uint_t)w;
                continue;
            }
            if (op == OP_COUNT) return "takes a variable, a structure name and, for a window, space= and window=";
            if (nparts == 8) return "takes at most 8 key parts";
            ngx_memzero(&ccv, sizeof(ccv));
            ccv.cf = cf;
            ccv.value = a;
            ccv.complex_value = &parts[nparts];
            if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
            nparts++;
        }
        if (op != OP_COUNT && nparts == 0) return "takes a variable, a structure name and at least one key part";
        if (op == OP_COUNT && sv->name_cv != NULL && (sv->space != NULL || sv->window != 0))
            return "takes no space= or window= with a per-request (hll) name";
        sv->nparts = nparts;
        if (nparts) {
            sv->parts = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t) * nparts);
            if (sv->parts == NULL) return NGX_CONF_ERROR;
            ngx_memcpy(sv->parts, parts, sizeof(ngx_http_complex_value_t) * nparts);
        }
    }
    vname.len = value[1].len - 1;
    vname.data = value[1].data + 1;
    var = ngx_http_add_variable(cf, &vname, 0); /* a second definition: "the duplicate variable" */
    if (var == NULL) return NGX_CONF_ERROR;
    var->get_handler = shmf_ngx_variable_get;
    var->data = (uintptr_t)sv;
    slot = ngx_array_push(&mcf->vars);
    if (slot == NULL) return NGX_CONF_ERROR;
    *slot = sv;
    return NGX_CONF_OK;
}

static ngx_int_t shmf_ngx_status_handler(ngx_http_request_t *r);

static char *shmf_ngx_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    (void)cmd;
    (void)conf;
    clcf->handler = shmf_ngx_status_handler;
    return NGX_CONF_OK;
}

static void *shmf_ngx_create_loc_conf(ngx_conf_t *cf) { return ngx_pcalloc(cf->pool, sizeof(shmf_ngx_loc_conf_t)); }

static char *shmf_ngx_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    (void)cf;
    (void)parent;
    (void)child; /* shmfilter_answer belongs to its own location: not inherited */
    return NGX_CONF_OK;
}

static ngx_int_t shmf_ngx_answer_handler(ngx_http_request_t *r) {
    shmf_ngx_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_shmfilter_module);
    ngx_http_complex_value_t cv;
    ngx_str_t ct = ngx_string("text/plain");
    ngx_int_t rc;
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD | NGX_HTTP_POST))) return NGX_HTTP_NOT_ALLOWED;
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) return rc;
    cv = *lcf->answer;
    return ngx_http_send_response(r, NGX_HTTP_OK, &ct, &cv);
}

static char *shmf_ngx_answer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    shmf_ngx_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_compile_complex_value_t ccv;
    ngx_http_core_loc_conf_t *clcf;
    (void)cmd;
    if (lcf->answer != NULL) return "is duplicate";
    lcf->answer = ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (lcf->answer == NULL) return NGX_CONF_ERROR;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = lcf->answer;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = shmf_ngx_answer_handler;
    return NGX_CONF_OK;
}

/* ---- master: check (and create) what the configuration names ------------------ */
static ngx_flag_t shmf_ngx_op_fits(ngx_uint_t op, ngx_uint_t kind) {
    switch (op) {
    case OP_MARK:
    case OP_SEEN: return kind == K_BLOOM || kind == K_CUCKOO || kind == K_SET || kind == K_WINDOW;
    case OP_FORGET: return kind == K_CUCKOO || kind == K_SET || kind == K_WINDOW;
    case OP_HLL_ADD: return kind == K_HLL;
    case OP_COUNT: return kind != K_UNKNOWN;
    }
    return 0;
}

/* A root master whose workers run as `user`: warn at start-up (not per worker
 * at run time) when that user cannot open the segment read-write. The
 * backing path is /dev/shm/NAME (glibc's shm_open) or the file= path. */
static void shmf_ngx_check_worker_access(ngx_cycle_t *cycle, shmf_ngx_main_conf_t *mcf, ngx_core_conf_t *ccf) {
    char path[512];
    struct stat sb;
    struct passwd *pw;
    gid_t groups[64];
    int ngroups = 64, k, ok = 0;
    if (geteuid() != 0 || ccf->user == (uid_t)NGX_CONF_UNSET_UINT || ccf->user == 0) return;
    if (mcf->file.len) {
        ngx_cpystrn((u_char *)path, mcf->file.data, sizeof(path));
    } else {
        ngx_snprintf((u_char *)path, sizeof(path) - 1, "/dev/shm/%V%Z", &mcf->segment);
    }
    if (stat(path, &sb) != 0) return;
    if (sb.st_uid == ccf->user) {
        ok = (sb.st_mode & 0600) == 0600;
    } else {
        pw = getpwuid(ccf->user);
        if (pw == NULL || getgrouplist(pw->pw_name, ccf->group, groups, &ngroups) < 0) ngroups = 0;
        for (k = 0; k < ngroups && !ok; k++) ok = groups[k] == sb.st_gid && (sb.st_mode & 0060) == 0060;
        if (!ok && ngroups == 0) ok = sb.st_gid == ccf->group && (sb.st_mode & 0060) == 0060;
        if (!ok) ok = (sb.st_mode & 0006) == 0006;
    }
    if (!ok) {
        char mode[8];
        snprintf(mode, sizeof(mode), "%04o", (unsigned)(sb.st_mode & 07777)); /* ngx_log_error has no %o */
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "shmfilter_segment \"%V\": %s (uid %d gid %d mode %s) is not read-write for the workers' "
                      "user (uid %d gid %d): they will answer per shmfilter_fail; give it to their group (chgrp, "
                      "chmod 0660) or recreate it with the create parameter (docs/nginx.md, Users)",
                      &mcf->segment, path, (int)sb.st_uid, (int)sb.st_gid, mode, (int)ccf->user, (int)ccf->group);
    }
}

/* A window that exists: what the segment holds wins over the declaration (a
 * declared variant or retention that differs is an error), and the module keeps
 * the segment's retention and variant for the checks of the variables. */
static ngx_int_t shmf_ngx_window_matches(ngx_cycle_t *cycle, shmf_ngx_main_conf_t *mcf, shmf_ngx_struct_t *st,
                                         void *h) {
    shmf_window_stats ws;
    int rc = shmf_window_stats_get(h, &ws);
    char declared[32], held[32];
    declared[0] = '\0';
    if (rc < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "shmfilter: window \"%V\" (%V:%ui) in segment \"%V\": %s: %s",
                      &st->name, &st->conf_file, st->conf_line, &mcf->segment, shmf_strerror(rc),
                      shmf_last_error_message());
        return NGX_ERROR;
    }
    if (st->declared && st->wopt_set[0] && st->wopt.variant != ws.variant) {
        snprintf(declared, sizeof(declared), "variant=%s", st->wopt.variant ? "cuckoo" : "bloom");
        snprintf(held, sizeof(held), "variant=%s", ws.variant ? "cuckoo" : "bloom");
    } else if (st->declared && st->wopt_set[1] && st->wopt.retention != ws.retention) {
        snprintf(declared, sizeof(declared), "retention=%u", (unsigned)st->wopt.retention);
        snprintf(held, sizeof(held), "retention=%u", (unsigned)ws.retention);
    }
    if (declared[0] != '\0') {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_structure \"%V\" in %V:%ui: declared %s, the window in segment \"%V\" has %s: fix "
                      "the declaration, or drop the window (shmtool drop %V %V) to recreate it",
                      &st->name, &st->conf_file, st->conf_line, declared, &mcf->segment, held, &mcf->segment,
                      &st->name);
        return NGX_ERROR;
    }
    st->wopt.variant = ws.variant;
    st->wopt.retention = ws.retention;
    return NGX_OK;
}

/* The window parameters of variable V on a structure of KIND (ST NULL: a per-request
 * hll name): space= only and always on a window, window= within its retention,
 * forget only on a deletable window. Resolves V->window when not given. */
static ngx_int_t shmf_ngx_window_var(ngx_cycle_t *cycle, shmf_ngx_var_t *v, ngx_uint_t kind, shmf_ngx_struct_t *st) {
    const char *dir = op_directives[v->op];
    if (kind != K_WINDOW) {
        if (v->space != NULL || v->window != 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "%s %V in %V:%ui: space= and window= are for a window structure; \"%V\" is a%s %s", dir,
                          &v->var_name, &v->conf_file, v->conf_line, st ? &st->name : &v->var_name,
                          kind == K_HLL ? "n" : "", kind_names[kind]);
            return NGX_ERROR;
        }
        return NGX_OK;
    }
    if (v->space == NULL && v->op != OP_COUNT) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s %V in %V:%ui: structure \"%V\" is a window: add space=VALUE (the plan id, e.g. "
                      "space=$arg_plan); the key parts are the item",
                      dir, &v->var_name, &v->conf_file, v->conf_line, &st->name);
        return NGX_ERROR;
    }
    if (v->window > st->wopt.retention) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s %V in %V:%ui: window=%ui is more than the retention of window \"%V\" (%uD buckets): a "
                      "window answers for at most its retention",
                      dir, &v->var_name, &v->conf_file, v->conf_line, v->window, &st->name, st->wopt.retention);
        return NGX_ERROR;
    }
    if (v->op == OP_FORGET && v->window != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s %V in %V:%ui: forget takes no window= (it removes the pair from every bucket)", dir,
                      &v->var_name, &v->conf_file, v->conf_line);
        return NGX_ERROR;
    }
    if (v->op == OP_FORGET && st->wopt.variant != SHMF_WINDOW_CUCKOO) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s %V in %V:%ui: window \"%V\" is of variant bloom (insert-only); %s needs variant=cuckoo",
                      dir, &v->var_name, &v->conf_file, v->conf_line, &st->name, dir);
        return NGX_ERROR;
    }
    if (v->window == 0) v->window = v->op == OP_COUNT ? 1 : st->wopt.retention;
    return NGX_OK;
}

static ngx_int_t shmf_ngx_init_module(ngx_cycle_t *cycle) {
    shmf_ngx_main_conf_t *mcf;
    shmf_segment *seg = NULL;
    shmf_ngx_struct_t *st;
    shmf_ngx_var_t **vars;
    ngx_core_conf_t *ccf;
    ngx_uint_t i;
    ngx_flag_t absent = 0;
    int rc;

    if (ngx_process == NGX_PROCESS_SIGNALLER) return NGX_OK; /* nginx -s: the master checks on reload */
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_shmfilter_module);
    if (mcf == NULL || mcf->segment.len == 0) return NGX_OK;
    ccf = (ngx_core_conf_t *)ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    rc = shmf_segment_open((const char *)mcf->segment.data, mcf->file.len ? (const char *)mcf->file.data : NULL,
                           &seg);
    if (rc == -SHMF_ENOTFOUND && mcf->create) {
        if (ngx_test_config) {
            absent = 1; /* nginx -t creates nothing */
        } else {
            shmf_segment_options o;
            shmf_segment_options_init(&o);
            if (mcf->size) o.size = mcf->size;
            if (mcf->file.len) o.file = (const char *)mcf->file.data;
            /* Workers run as `user`; a master running as root gives the segment
             * to the workers' group, read-write for it (docs/nginx.md). */
            if (geteuid() == 0 && ccf->group != (gid_t)NGX_CONF_UNSET_UINT && ccf->user != 0) {
                o.group = ccf->group;
                o.mode = 0660;
            }
            if (mcf->group >= 0) o.group = mcf->group;
            if (mcf->mode >= 0) o.mode = (uint32_t)mcf->mode;
            rc = shmf_segment_open_or_create((const char *)mcf->segment.data, &o, &seg);
            if (rc >= 0)
                ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0, "shmfilter: segment \"%V\" ready (created if absent)",
                              &mcf->segment);
        }
    }
    if (rc < 0 && !absent) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "shmfilter_segment \"%V\" in %V:%ui: %s: %s%s", &mcf->segment, &mcf->conf_file, mcf->conf_line,
                      shmf_strerror(rc), shmf_last_error_message(),
                      rc == -SHMF_ENOTFOUND ? " (or add the create parameter to shmfilter_segment)" : "");
        return NGX_ERROR;
    }

    if (!absent) shmf_ngx_check_worker_access(cycle, mcf, ccf);

    st = mcf->structs.elts;
    for (i = 0; i < mcf->structs.nelts; i++) {
        const char *name = (const char *)st[i].name.data;
        void *h = NULL;
        if (absent) {
            if (!st[i].declared || !st[i].create) {
                ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                              "shmfilter: structure \"%V\" (%V:%ui) cannot exist: segment \"%V\" does not exist yet; "
                              "declare it with \"shmfilter_structure %V KIND capacity=N create;\"",
                              &st[i].name, &st[i].conf_file, st[i].conf_line, &mcf->segment, &st[i].name);
                return NGX_ERROR;
            }
            continue;
        }
        if (st[i].kind == K_UNKNOWN) { /* not declared: whatever the segment holds */
            shmf_structure_info info;
            rc = shmf_segment_find(seg, name, &info);
            if (rc == 1 && shmf_ngx_kind_of(info.kind) == K_UNKNOWN) {
                ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                              "shmfilter: structure \"%V\" (%V:%ui) in segment \"%V\" is a %s, a kind this module "
                              "does not serve (bloom, cuckoo, set, hll, window)",
                              &st[i].name, &st[i].conf_file, st[i].conf_line, &mcf->segment,
                              shmf_kind_name(info.kind));
                shmf_segment_close(seg);
                return NGX_ERROR;
            }
            /* open it as its kind: a miss says "no structure ... in segment" (the library's message) */
            if (rc >= 0) rc = shmf_ngx_open_kind(seg, rc == 1 ? shmf_ngx_kind_of(info.kind) : K_BLOOM, name, &h);
            if (rc >= 0) st[i].kind = shmf_ngx_kind_of(info.kind);
        } else {
            rc = shmf_ngx_open_kind(seg, st[i].kind, name, &h);
            if (rc == -SHMF_ENOTFOUND && st[i].create && !ngx_test_config) {
                rc = shmf_ngx_create_kind(seg, &st[i], &h);
                if (rc == -SHMF_EEXISTS) rc = shmf_ngx_open_kind(seg, st[i].kind, name, &h); /* a racer made it */
            } else if (rc == -SHMF_ENOTFOUND && st[i].create) {
                rc = 0; /* nginx -t: would be created */
            }
        }
        if (rc < 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "shmfilter: structure \"%V\" (%V:%ui) in segment \"%V\": %s: %s%s",
                          &st[i].name, &st[i].conf_file, st[i].conf_line, &mcf->segment, shmf_strerror(rc),
                          shmf_last_error_message(),
                          rc == -SHMF_ENOTFOUND ? " (declare it with \"shmfilter_structure NAME KIND capacity=N "
                                                  "create;\" or create it with shmtool)"
                                                : "");
            shmf_ngx_close_handle(st[i].kind, h);
            shmf_segment_close(seg);
            return NGX_ERROR;
        }
        if (st[i].kind == K_WINDOW && h != NULL && shmf_ngx_window_matches(cycle, mcf, &st[i], h) != NGX_OK) {
            shmf_ngx_close_handle(st[i].kind, h);
            shmf_segment_close(seg);
            return NGX_ERROR;
        }
        shmf_ngx_close_handle(st[i].kind, h);
    }
    shmf_segment_close(seg); /* the master keeps nothing: workers attach themselves */

    vars = mcf->vars.elts;
    for (i = 0; i < mcf->vars.nelts; i++) {
        shmf_ngx_var_t *v = vars[i];
        ngx_uint_t kind = v->name_cv ? K_HLL : st[v->index].kind;
        if (shmf_ngx_window_var(cycle, v, kind, v->name_cv ? NULL : &st[v->index]) != NGX_OK) return NGX_ERROR;
        if (!shmf_ngx_op_fits(v->op, kind)) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "%s %V in %V:%ui: structure \"%V\" is a %s; %s needs %s", op_directives[v->op], &v->var_name,
                          &v->conf_file, v->conf_line, &st[v->index].name, kind_names[kind], op_directives[v->op],
                          v->op == OP_FORGET ? "a cuckoo, a set or a window of variant=cuckoo (a Bloom filter "
                                               "cannot forget)"
                          : v->op == OP_HLL_ADD ? "an hll"
                                                : "a bloom, cuckoo, set or window");
            return NGX_ERROR;
        }
    }
    return NGX_OK;
}

/* ---- worker: attach, reattach, detach ---------------------------------------- */
static const char *shmf_ngx_fail_name(shmf_ngx_main_conf_t *mcf) { return mcf->fail_closed ? "closed" : "open"; }

static ngx_int_t shmf_ngx_attach_segment(shmf_ngx_main_conf_t *mcf, ngx_log_t *log) {
    int rc;
    if (mcf->seg != NULL) return NGX_OK;
    if (ngx_time() < mcf->seg_retry_at) return NGX_ERROR;
    rc = shmf_segment_open((const char *)mcf->segment.data, mcf->file.len ? (const char *)mcf->file.data : NULL,
                           &mcf->seg);
    if (rc < 0) {
        mcf->seg = NULL;
        mcf->seg_retry_at = ngx_time() + 1;
        if (!mcf->seg_logged) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "shmfilter: worker cannot attach segment \"%V\": %s: %s; answering per shmfilter_fail %s, "
                          "retrying every second (logged once per worker)",
                          &mcf->segment, shmf_strerror(rc), shmf_last_error_message(), shmf_ngx_fail_name(mcf));
            mcf->seg_logged = 1;
        }
        return NGX_ERROR;
    }
    if (mcf->seg_logged) ngx_log_error(NGX_LOG_NOTICE, log, 0, "shmfilter: segment \"%V\" attached", &mcf->segment);
    mcf->seg_logged = 0;
    return NGX_OK;
}

static void *shmf_ngx_handle(shmf_ngx_main_conf_t *mcf, shmf_ngx_struct_t *st, ngx_log_t *log) {
    int rc;
    if (st->handle != NULL) return st->handle;
    if (shmf_ngx_attach_segment(mcf, log) != NGX_OK) return NULL;
    if (ngx_time() < st->retry_at) return NULL;
    rc = shmf_ngx_open_kind(mcf->seg, st->kind, (const char *)st->name.data, &st->handle);
    if (rc < 0) {
        st->handle = NULL;
        st->retry_at = ngx_time() + 1;
        if (!st->logged) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "shmfilter: cannot open %s \"%V\" in segment \"%V\": %s: %s; answering per shmfilter_fail %s, "
                          "retrying every second (logged once per worker)",
                          kind_names[st->kind], &st->name, &mcf->segment, shmf_strerror(rc), shmf_last_error_message(),
                          shmf_ngx_fail_name(mcf));
            st->logged = 1;
        }
        return NULL;
    }
    if (st->logged) ngx_log_error(NGX_LOG_NOTICE, log, 0, "shmfilter: %s \"%V\" open again", kind_names[st->kind], &st->name);
    st->logged = 0;
    return st->handle;
}

/* A data-plane call on ST failed with RC: log once, and let a dropped
 * structure be reopened (it may be recreated) a second later. */
static void shmf_ngx_struct_failed(shmf_ngx_main_conf_t *mcf, shmf_ngx_struct_t *st, int rc, ngx_log_t *log) {
    if (!st->logged) {
        ngx_log_error(NGX_LOG_ALERT, log, 0,
                      "shmfilter: %s \"%V\" in segment \"%V\" failed: %s: %s; answering per shmfilter_fail %s "
                      "(logged once per worker)",
                      kind_names[st->kind], &st->name, &mcf->segment, shmf_strerror(rc), shmf_last_error_message(),
                      shmf_ngx_fail_name(mcf));
        st->logged = 1;
    }
    if (rc == -SHMF_EDROPPED) { /* the caller reopens by name at once */
        shmf_ngx_close_handle(st->kind, st->handle);
        st->handle = NULL;
        st->retry_at = 0;
    }
}

/* Worker 0 runs shmf_window_maintain for every window every shmfilter_maintain
 * period: it rotates by the clock, frees expired buckets and prepares the next
 * bucket's table ahead, so that no request pays for a table allocation at
 * midnight (docs/window.md). The timer is cancelable: it never delays a worker's
 * graceful exit. A killed worker 0 is respawned by the master with the same
 * number, and its timer with it. */
static ngx_event_t shmf_ngx_maintain_ev;

static void shmf_ngx_maintain_handler(ngx_event_t *ev) {
    shmf_ngx_main_conf_t *mcf = ev->data;
    shmf_ngx_struct_t *st = mcf->structs.elts;
    ngx_uint_t i;
    int rc;
    for (i = 0; i < mcf->structs.nelts; i++) {
        void *h;
        if (st[i].kind != K_WINDOW) continue;
        h = shmf_ngx_handle(mcf, &st[i], ev->log);
        if (h == NULL) continue;
        rc = shmf_window_maintain(h);
        if (rc == -SHMF_EDROPPED) rc = (h = shmf_ngx_handle(mcf, &st[i], ev->log)) ? shmf_window_maintain(h) : rc;
        if (rc < 0) shmf_ngx_struct_failed(mcf, &st[i], rc, ev->log);
    }
    if (!ngx_exiting && !ngx_quit) ngx_add_timer(ev, mcf->maintain);
}

static ngx_int_t shmf_ngx_init_process(ngx_cycle_t *cycle) {
    shmf_ngx_main_conf_t *mcf;
    shmf_ngx_struct_t *st;
    ngx_uint_t i;
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) return NGX_OK;
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_shmfilter_module);
    if (mcf == NULL || mcf->segment.len == 0) return NGX_OK;
    mcf->seg = NULL;
    mcf->seg_retry_at = 0;
    mcf->hll_cache = ngx_calloc(sizeof(shmf_ngx_hll_slot_t) * SHMF_NGX_HLL_CACHE, cycle->log);
    st = mcf->structs.elts;
    for (i = 0; i < mcf->structs.nelts; i++) {
        st[i].handle = NULL;
        st[i].retry_at = 0;
        if (st[i].kind != K_UNKNOWN) (void)shmf_ngx_handle(mcf, &st[i], cycle->log);
    }
    if (mcf->maintain > 0 && ngx_worker == 0) {
        ngx_flag_t windows = 0;
        for (i = 0; i < mcf->structs.nelts; i++) windows |= st[i].kind == K_WINDOW;
        if (windows) {
            ngx_memzero(&shmf_ngx_maintain_ev, sizeof(shmf_ngx_maintain_ev));
            shmf_ngx_maintain_ev.handler = shmf_ngx_maintain_handler;
            shmf_ngx_maintain_ev.data = mcf;
            shmf_ngx_maintain_ev.log = cycle->log;
            shmf_ngx_maintain_ev.cancelable = 1;
            ngx_add_timer(&shmf_ngx_maintain_ev, 1000); /* first run soon after start */
        }
    }
    return NGX_OK; /* a failure is logged and answered per shmfilter_fail, never a dead worker */
}

static void shmf_ngx_exit_process(ngx_cycle_t *cycle) {
    shmf_ngx_main_conf_t *mcf;
    shmf_ngx_struct_t *st;
    ngx_uint_t i;
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) return;
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_shmfilter_module);
    if (mcf == NULL || mcf->segment.len == 0) return;
    st = mcf->structs.elts;
    for (i = 0; i < mcf->structs.nelts; i++) {
        shmf_ngx_close_handle(st[i].kind, st[i].handle);
        st[i].handle = NULL;
    }
    if (mcf->hll_cache) {
        for (i = 0; i < SHMF_NGX_HLL_CACHE; i++) shmf_hll_close(mcf->hll_cache[i].h);
        ngx_free(mcf->hll_cache);
        mcf->hll_cache = NULL;
    }
    shmf_segment_close(mcf->seg);
    mcf->seg = NULL;
}

/* A dynamically named HLL (cached per worker). *TEMP set: close after use. */
static shmf_hll *shmf_ngx_dynamic_hll(shmf_ngx_main_conf_t *mcf, ngx_str_t *name, ngx_flag_t create, ngx_log_t *log,
                                      int *rc_out, ngx_flag_t *temp, shmf_ngx_hll_slot_t **slot_out) {
    u_char cname[64];
    ngx_uint_t hash, i, free_slot = SHMF_NGX_HLL_CACHE;
    shmf_hll *h = NULL;
    int rc;
    *temp = 0;
    *slot_out = NULL;
    *rc_out = 0;
    if (name->len == 0 || name->len > 63) {
        *rc_out = -SHMF_ENAMETOOLONG;
        return NULL;
    }
    hash = ngx_hash_key(name->data, name->len);
    if (mcf->hll_cache) {
        for (i = 0; i < 16; i++) {
            shmf_ngx_hll_slot_t *s = &mcf->hll_cache[(hash + i) % SHMF_NGX_HLL_CACHE];
            if (s->h == NULL) {
                if (free_slot == SHMF_NGX_HLL_CACHE) free_slot = (hash + i) % SHMF_NGX_HLL_CACHE;
                continue;
            }
            if (s->len == name->len && ngx_memcmp(s->name, name->data, name->len) == 0) {
                *slot_out = s;
                return s->h;
            }
        }
    }
    if (shmf_ngx_attach_segment(mcf, log) != NGX_OK) {
        *rc_out = -SHMF_ENOTFOUND;
        return NULL;
    }
    ngx_memcpy(cname, name->data, name->len);
    cname[name->len] = '\0';
    rc = create ? shmf_hll_open_or_create(mcf->seg, (const char *)cname, &h)
                : shmf_hll_open(mcf->seg, (const char *)cname, &h);
    if (rc < 0) {
        *rc_out = rc;
        return NULL;
    }
    if (free_slot == SHMF_NGX_HLL_CACHE) {
        *temp = 1;
        return h;
    }
    mcf->hll_cache[free_slot].h = h;
    mcf->hll_cache[free_slot].len = name->len;
    ngx_memcpy(mcf->hll_cache[free_slot].name, name->data, name->len);
    *slot_out = &mcf->hll_cache[free_slot];
    return h;
}

/* ---- the variables ---------------------------------------------------------- */
static void shmf_ngx_set(ngx_http_variable_value_t *v, const char *s) {
    v->data = (u_char *)s;
    v->len = ngx_strlen(s);
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}

static ngx_int_t shmf_ngx_set_number(ngx_http_request_t *r, ngx_http_variable_value_t *v, uint64_t n) {
    u_char *p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) return NGX_ERROR;
    v->len = ngx_sprintf(p, "%uL", (unsigned long long)n) - p;
    v->data = p;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

/* The answer when the structure cannot answer (shmfilter_fail). */
static ngx_int_t shmf_ngx_fail(ngx_http_request_t *r, shmf_ngx_main_conf_t *mcf, shmf_ngx_var_t *sv,
                               ngx_http_variable_value_t *v) {
    shmf_ngx_count(mcf, sv->op, A_FAILED, 1);
    switch (sv->op) {
    case OP_MARK: shmf_ngx_set(v, mcf->fail_closed ? "seen" : "new"); break;
    case OP_SEEN: shmf_ngx_set(v, mcf->fail_closed ? "seen" : "unseen"); break;
    case OP_FORGET: shmf_ngx_set(v, "error"); break;
    case OP_HLL_ADD: shmf_ngx_set(v, "0"); break;
    case OP_COUNT: shmf_ngx_set(v, ""); v->not_found = 1; break;
    }
    (void)r;
    return NGX_OK;
}

static ngx_int_t shmf_ngx_hll_variable(ngx_http_request_t *r, shmf_ngx_main_conf_t *mcf, shmf_ngx_var_t *sv,
                                       ngx_http_variable_value_t *v, ngx_str_t *key) {
    ngx_str_t name;
    ngx_flag_t temp;
    shmf_ngx_hll_slot_t *slot;
    shmf_hll *h;
    int rc;
    uint64_t n = 0;
    if (ngx_http_complex_value(r, sv->name_cv, &name) != NGX_OK) return NGX_ERROR;
    h = shmf_ngx_dynamic_hll(mcf, &name, sv->op == OP_HLL_ADD, r->connection->log, &rc, &temp, &slot);
    if (h == NULL) {
        if (sv->op == OP_COUNT && rc == -SHMF_ENOTFOUND && mcf->seg != NULL) { /* nothing counted yet */
            shmf_ngx_count(mcf, sv->op, -1, 0);
            shmf_ngx_set(v, "0");
            return NGX_OK;
        }
        goto failed;
    }
    rc = sv->op == OP_HLL_ADD ? shmf_hll_add(h, key->data, key->len) : shmf_hll_count(h, &n);
    if (rc < 0 && slot != NULL) { /* dropped: forget the cached handle */
        shmf_hll_close(slot->h);
        slot->h = NULL;
        temp = 0;
    }
    if (temp) shmf_hll_close(h);
    if (rc < 0) goto failed;
    shmf_ngx_count(mcf, sv->op, -1, 0);
    if (sv->op == OP_HLL_ADD) {
        shmf_ngx_set(v, rc == 1 ? "1" : "0");
        return NGX_OK;
    }
    return shmf_ngx_set_number(r, v, n);

failed:
    if (!mcf->hll_logged) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "shmfilter: %s %V: hll \"%V\" in segment \"%V\": %s: %s (logged once per worker)",
                      op_directives[sv->op], &sv->var_name, &name, &mcf->segment, shmf_strerror(rc),
                      shmf_last_error_message());
        mcf->hll_logged = 1;
    }
    return shmf_ngx_fail(r, mcf, sv, v);
}

/* One window call: mark_if_unseen / seen / forget of (SPACE, KEY) over the last W
 * buckets; count: kNew answers of SPACE over the last W buckets (HAS_SPACE 0: the
 * current bucket's distinct pairs of all spaces). 0/1 or a negative shmf code. */
static int shmf_ngx_apply_window(ngx_uint_t op, shmf_window *h, ngx_str_t *key, ngx_flag_t has_space, uint64_t space,
                                 ngx_uint_t w, uint64_t *count) {
    int rc = -SHMF_EINVAL;
    uint32_t age;
    uint64_t n = 0, one;
    shmf_window_stats ws;
    switch (op) {
    case OP_MARK: rc = shmf_window_mark_if_unseen(h, space, key->data, key->len, (uint32_t)w); break;
    case OP_SEEN: rc = shmf_window_seen(h, space, key->data, key->len, (uint32_t)w); break;
    case OP_FORGET: rc = shmf_window_forget(h, space, key->data, key->len); break;
    case OP_COUNT:
        if (!has_space) {
            rc = shmf_window_stats_get(h, &ws);
            n = rc < 0 ? 0 : ws.today_distinct;
            break;
        }
        for (age = 0, rc = 0; age < w && rc >= 0; age++) {
            rc = shmf_window_new_count(h, space, age, &one);
            n += rc < 0 ? 0 : one;
        }
        break;
    }
    *count = n;
    return rc;
}

/* One data-plane call of OP on handle H of KIND; 0/1 or a negative shmf code. */
static int shmf_ngx_apply(ngx_uint_t op, ngx_uint_t kind, void *h, ngx_str_t *k, uint64_t *count) {
    int rc = -SHMF_EINVAL;
    uint64_t n = 0;
    ngx_str_t key = *k;
    switch (op) {
    case OP_MARK:
        /* Bloom: lock-free add, 1 when it set a bit. Set: insert_unique answers
         * a present key lock-free. Cuckoo: the lock-free contains answers the
         * common "seen" first; only an absent key takes the stripe lock, and
         * insert_unique decides among racers. */
        if (kind == K_BLOOM) {
            rc = shmf_bloom_add(h, key.data, key.len);
        } else if (kind == K_CUCKOO) {
            rc = shmf_cuckoo_contains(h, key.data, key.len);
            rc = rc == 1 ? 0 : rc < 0 ? rc : shmf_cuckoo_insert_unique(h, key.data, key.len);
        } else {
            rc = shmf_set_insert_unique(h, key.data, key.len);
        }
        break;
    case OP_SEEN:
        rc = kind == K_BLOOM    ? shmf_bloom_contains(h, key.data, key.len)
             : kind == K_CUCKOO ? shmf_cuckoo_contains(h, key.data, key.len)
                                    : shmf_set_contains(h, key.data, key.len);
        break;
    case OP_FORGET:
        rc = kind == K_CUCKOO ? shmf_cuckoo_erase(h, key.data, key.len) : shmf_set_erase(h, key.data, key.len);
        break;
    case OP_HLL_ADD: rc = shmf_hll_add(h, key.data, key.len); break;
    case OP_COUNT:
        switch (kind) {
        case K_HLL: rc = shmf_hll_count(h, &n); break;
        case K_SET: rc = shmf_set_size(h, &n); break;
        case K_CUCKOO: rc = shmf_cuckoo_size(h, &n); break;
        case K_BLOOM: {
            shmf_bloom_stats s;
            rc = shmf_bloom_stats_get(h, &s);
            n = rc < 0 ? 0 : (uint64_t)(s.inserted_estimate + 0.5);
            break;
        }
        }
        break;
    }
    *count = n;
    return rc;
}

/* The key of this request: the parts joined by ':'; empty when any part is. */
static int shmf_ngx_key(ngx_http_request_t *r, shmf_ngx_var_t *sv, ngx_str_t *key) {
    ngx_str_t part[8];
    ngx_uint_t i, n = sv->nparts < 8 ? sv->nparts : 8;
    size_t len = 0;
    u_char *p;
    for (i = 0; i < n; i++) {
        if (ngx_http_complex_value(r, &sv->parts[i], &part[i]) != NGX_OK) return NGX_ERROR;
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
    if (p == NULL) return NGX_ERROR;
    key->data = p;
    for (i = 0; i < n; i++) {
        if (i) *p++ = ':';
        p = ngx_cpymem(p, part[i].data, part[i].len);
    }
    key->len = p - key->data;
    return NGX_OK;
}

/* The space= of this request as a uint64: NGX_OK; NGX_DECLINED empty; NGX_ABORT not a
 * decimal uint64; NGX_ERROR no memory. */
static ngx_int_t shmf_ngx_space(ngx_http_request_t *r, shmf_ngx_var_t *sv, uint64_t *out) {
    ngx_str_t s;
    size_t i;
    uint64_t x = 0;
    if (ngx_http_complex_value(r, sv->space, &s) != NGX_OK) return NGX_ERROR;
    if (s.len == 0) return NGX_DECLINED;
    if (s.len > 20) return NGX_ABORT;
    for (i = 0; i < s.len; i++) {
        uint64_t d;
        if (s.data[i] < '0' || s.data[i] > '9') return NGX_ABORT;
        d = (uint64_t)(s.data[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return NGX_ABORT; /* past 2^64 - 1 */
        x = x * 10 + d;
    }
    *out = x;
    return NGX_OK;
}

static ngx_int_t shmf_ngx_variable_get(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data) {
    shmf_ngx_var_t *sv = (shmf_ngx_var_t *)data;
    shmf_ngx_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_shmfilter_module);
    shmf_ngx_struct_t *st;
    ngx_str_t key = ngx_null_string;
    void *h;
    int rc = 0;
    uint64_t n = 0, space = 0;

    if (sv->op != OP_COUNT) {
        rc = shmf_ngx_key(r, sv, &key);
        if (rc != NGX_OK) return NGX_ERROR;
        if (key.len == 0) { /* a key part is empty in this request: the variable is empty */
            shmf_ngx_count(mcf, sv->op, A_EMPTY_KEY, 0);
            v->not_found = 1;
            return NGX_OK;
        }
    }
    if (sv->space != NULL) {
        ngx_int_t sr = shmf_ngx_space(r, sv, &space);
        if (sr == NGX_ERROR) return NGX_ERROR;
        if (sr != NGX_OK) { /* empty, or not a decimal uint64: the variable is empty, nothing marked */
            shmf_ngx_count(mcf, sv->op, sr == NGX_DECLINED ? A_EMPTY_KEY : A_BAD_SPACE, 0);
            v->not_found = 1;
            return NGX_OK;
        }
    }
    if (sv->name_cv != NULL) return shmf_ngx_hll_variable(r, mcf, sv, v, &key);

    st = &((shmf_ngx_struct_t *)mcf->structs.elts)[sv->index];
    h = shmf_ngx_handle(mcf, st, r->connection->log);
    if (h == NULL) return shmf_ngx_fail(r, mcf, sv, v);

#define SHMF_NGX_APPLY()                                                                                \
    (st->kind == K_WINDOW ? shmf_ngx_apply_window(sv->op, h, &key, sv->space != NULL, space, sv->window, &n) \
                          : shmf_ngx_apply(sv->op, st->kind, h, &key, &n))
    rc = SHMF_NGX_APPLY();
    if (rc == -SHMF_EDROPPED) { /* reopen by name at once (an operator may have recreated it), retry once */
        shmf_ngx_struct_failed(mcf, st, rc, r->connection->log);
        h = shmf_ngx_handle(mcf, st, r->connection->log);
        if (h != NULL) rc = SHMF_NGX_APPLY();
    }
#undef SHMF_NGX_APPLY
    if (rc < 0) {
        shmf_ngx_struct_failed(mcf, st, rc, r->connection->log);
        return shmf_ngx_fail(r, mcf, sv, v);
    }
    switch (sv->op) {
    case OP_MARK:
        shmf_ngx_count(mcf, sv->op, rc == 1 ? A_NEW : A_SEEN, 0);
        shmf_ngx_set(v, rc == 1 ? "new" : "seen");
        return NGX_OK;
    case OP_SEEN:
        shmf_ngx_count(mcf, sv->op, rc == 1 ? A_SEEN : A_UNSEEN, 0);
        shmf_ngx_set(v, rc == 1 ? "seen" : "unseen");
        return NGX_OK;
    case OP_FORGET:
        shmf_ngx_count(mcf, sv->op, rc == 1 ? A_FORGOTTEN : A_ABSENT, 0);
        shmf_ngx_set(v, rc == 1 ? "forgotten" : "absent");
        return NGX_OK;
    case OP_HLL_ADD:
        shmf_ngx_count(mcf, sv->op, -1, 0);
        shmf_ngx_set(v, rc == 1 ? "1" : "0");
        return NGX_OK;
    }
    shmf_ngx_count(mcf, sv->op, -1, 0);
    return shmf_ngx_set_number(r, v, n);
}

/* ---- shmfilter_status: Prometheus text exposition 0.0.4 ------------------------- */
typedef struct {
    u_char *start, *pos, *end;
} shmf_ngx_text_t;

static void shmf_ngx_printf(shmf_ngx_text_t *t, const char *fmt, ...) {
    va_list ap;
    int n;
    size_t room = (size_t)(t->end - t->pos);
    va_start(ap, fmt);
    n = vsnprintf((char *)t->pos, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    t->pos += (size_t)n < room ? (size_t)n : room ? room - 1 : 0;
}

static void shmf_ngx_family(shmf_ngx_text_t *t, const char *name, const char *type, const char *help) {
    shmf_ngx_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* shmfilter_status: the module's own families (segment attached, structure up, the
 * per-worker request/answer/error counters) around the library's Prometheus text of
 * the whole segment (shmf_segment_prometheus_text: every structure's bytes, fill, FP,
 * over-capacity and the kind's counters, names as in docs/metrics.md). */
static ngx_int_t shmf_ngx_status_handler(ngx_http_request_t *r) {
    shmf_ngx_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_shmfilter_module);
    ngx_core_conf_t *ccf = (ngx_core_conf_t *)ngx_get_conf(ngx_cycle->conf_ctx, ngx_core_module);
    shmf_ngx_struct_t *st = mcf->structs.elts;
    shmf_ngx_counters_t *ctr = mcf->zone ? mcf->zone->data : NULL;
    ngx_uint_t i, w, nworkers, k, tries;
    shmf_ngx_text_t t;
    ngx_buf_t *b;
    ngx_chain_t out;
    size_t cap, lib_cap = 0, lib_len = 0, need = 0;
    char *lib = NULL;
    ngx_int_t rc;
    int lrc;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) return NGX_HTTP_NOT_ALLOWED;
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) return rc;
    if (mcf->segment.len == 0) return NGX_HTTP_NOT_FOUND;

    /* The library's text: ask its size, then fill (a structure created in between
     * makes it longer: ask again, a few times). */
    if (shmf_ngx_attach_segment(mcf, r->connection->log) == NGX_OK) {
        for (tries = 0; tries < 4; tries++) {
            lrc = shmf_segment_prometheus_text(mcf->seg, lib, lib_cap, &need);
            if (lrc == 0) {
                lib_len = need - 1;
                break;
            }
            if (lrc != -SHMF_EFULL) {
                ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                              "shmfilter_status: segment \"%V\": %s: %s (answering without the structures' numbers)",
                              &mcf->segment, shmf_strerror(lrc), shmf_last_error_message());
                break;
            }
            lib_cap = need + 4096;
            lib = ngx_pnalloc(r->pool, lib_cap);
            if (lib == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    nworkers = ccf->worker_processes > 0 ? (ngx_uint_t)ccf->worker_processes : 1;
    if (nworkers > SHMF_NGX_MAX_WORKERS) nworkers = SHMF_NGX_MAX_WORKERS;
    cap = 4096 + mcf->structs.nelts * 512 + nworkers * 2048 + lib_len;
    t.start = ngx_pnalloc(r->pool, cap);
    if (t.start == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    t.pos = t.start;
    t.end = t.start + cap;

    shmf_ngx_family(&t, "shmfilter_segment_attached", "gauge", "1 when the answering worker is attached to the segment.");
    shmf_ngx_printf(&t, "shmfilter_segment_attached{segment=\"%.*s\"} %d\n", (int)mcf->segment.len,
                    (const char *)mcf->segment.data, mcf->seg != NULL);
    shmf_ngx_family(&t, "shmfilter_structure_up", "gauge",
                    "1 when the answering worker has the configured structure open.");
    for (i = 0; i < mcf->structs.nelts; i++)
        shmf_ngx_printf(&t, "shmfilter_structure_up{segment=\"%.*s\",name=\"%.*s\",kind=\"%s\"} %d\n",
                        (int)mcf->segment.len, (const char *)mcf->segment.data, (int)st[i].name.len,
                        (const char *)st[i].name.data, kind_names[st[i].kind],
                        st[i].kind != K_UNKNOWN && shmf_ngx_handle(mcf, &st[i], r->connection->log) != NULL);
    if (lib_len > 0 && (size_t)(t.end - t.pos) > lib_len) t.pos = ngx_cpymem(t.pos, lib, lib_len);
    if (ctr != NULL) {
        shmf_ngx_family(&t, "shmfilter_requests_total", "counter",
                        "Evaluations of shmfilter variables, per worker and operation.");
        for (w = 0; w < nworkers; w++)
            for (k = 0; k < OP_N; k++)
                shmf_ngx_printf(&t, "shmfilter_requests_total{worker=\"%u\",op=\"%s\"} %lu\n", (unsigned)w, op_names[k],
                                (unsigned long)ctr->worker[w].requests[k]);
        shmf_ngx_family(&t, "shmfilter_answers_total", "counter", "Answers given, per worker and answer.");
        for (w = 0; w < nworkers; w++)
            for (k = 0; k < A_N; k++)
                shmf_ngx_printf(&t, "shmfilter_answers_total{worker=\"%u\",answer=\"%s\"} %lu\n", (unsigned)w,
                                answer_names[k], (unsigned long)ctr->worker[w].answers[k]);
        shmf_ngx_family(&t, "shmfilter_errors_total", "counter",
                        "Evaluations answered per shmfilter_fail because the structure could not answer.");
        for (w = 0; w < nworkers; w++)
            shmf_ngx_printf(&t, "shmfilter_errors_total{worker=\"%u\"} %lu\n", (unsigned)w,
                            (unsigned long)ctr->worker[w].errors);
    }

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = t.pos - t.start;
    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;
    b = ngx_calloc_buf(r->pool);
    if (b == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    b->pos = t.start;
    b->last = t.pos;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}
