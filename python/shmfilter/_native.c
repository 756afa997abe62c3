/* python/shmfilter/_native.c: shmfilter's compiled binding (the CPython C API over the
 * C API of include/shmfilter/shmfilter.h). docs/python.md, "The compiled binding".
 *
 * One type, shmfilter._native.Handle, holds a C handle of any kind; the Python
 * classes (Bloom, Window, ...) derive from it and bind its data-plane methods
 * under their public names. The control plane (open, create, stats, lists)
 * stays in Python (ctypes over the same loaded library: one library instance,
 * so a handle pointer means the same in both).
 *
 * Hot path of Window.mark_if_unseen(plan, device): METH_FASTCALL, no argument
 * tuple; a str device passes its cached UTF-8 bytes (no copy for ASCII); a fork
 * check is one comparison against a counter bumped by pthread_atfork.
 *
 * Keys: int (a uint64: the C API's _u64 calls), str (UTF-8), bytes, or any
 * C-contiguous buffer of bytes. The empty key ("" or b"") is refused with
 * InvalidArgumentError everywhere (nginx treats an empty key as no key).
 * Batched calls take a buffer of uint64 (numpy uint64 array, array('Q'),
 * memoryview) without copying it, or a sequence of ints / str / bytes; results
 * go into OUT (a writable uint8 buffer, no copy) or come back as a list.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shmfilter/shmfilter.h"

/* ---- errors: the Python classes, registered by shmfilter/__init__.py ---- */
static PyObject *g_error_classes; /* dict: code -> class */
static PyObject *g_error_base;    /* shmfilter.Error */
static PyObject *g_invalid;       /* shmfilter.InvalidArgumentError */

/* Bumped in every child after fork(): a handle made under another generation
 * belongs to the parent. One load and compare per call (getpid() would be a
 * system call on every call). */
static volatile unsigned long g_fork_generation;
static void on_fork_child(void) { g_fork_generation++; }

static PyObject *raise_code(int code, const char *message, const char *call) {
  PyObject *cls = NULL;
  if (g_error_classes) {
    PyObject *key = PyLong_FromLong(code);
    if (!key) return NULL;
    cls = PyDict_GetItemWithError(g_error_classes, key); /* borrowed */
    Py_DECREF(key);
    if (!cls && PyErr_Occurred()) return NULL;
  }
  if (!cls) cls = g_error_base;
  if (!cls) {
    PyErr_Format(PyExc_RuntimeError, "%s: %s (shmfilter error %d)", call, message, code);
    return NULL;
  }
  PyObject *msg = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
  if (!msg) return NULL;
  PyObject *exc = PyObject_CallFunction(cls, "iNs", code, msg, call);
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

/* rc < 0 from the C API: raises the class of -rc with the library's message. */
static PyObject *raise_rc(int rc, const char *call) {
  const char *msg = shmf_last_error_message();
  if (!msg || !*msg) msg = shmf_strerror(rc);
  return raise_code(-rc, msg, call);
}

static PyObject *raise_invalid(const char *call, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  PyOS_vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return raise_code(SHMF_EINVAL, buf, call);
}

/* ---- the handle type ------------------------------------------------------ */
typedef struct {
  PyObject_HEAD
  void *h;                   /* the C handle; NULL once closed */
  PyObject *owner;           /* the Segment: kept alive while the handle is */
  unsigned long generation;  /* g_fork_generation when opened */
  uint32_t kind;             /* SHMF_KIND_* */
  uint32_t retention;        /* windows: read once, on the first w=None */
  uint32_t busy;             /* batches running without the GIL (close() waits for them) */
  uint32_t close_pending;    /* close() came while busy: the last batch closes */
} Handle;

static const char *kind_name(uint32_t kind) {
  switch (kind) {
    case SHMF_KIND_BLOOM: return "bloom";
    case SHMF_KIND_CUCKOO: return "cuckoo";
    case SHMF_KIND_ROARING: return "roaring";
    case SHMF_KIND_HLL: return "hll";
    case SHMF_KIND_SET: return "set";
    case SHMF_KIND_WINDOW: return "window";
    case SHMF_KIND_UV: return "uv";
  }
  return "handle";
}

static int close_handle(uint32_t kind, void *h) {
  switch (kind) {
    case SHMF_KIND_BLOOM: return shmf_bloom_close((shmf_bloom *)h);
    case SHMF_KIND_CUCKOO: return shmf_cuckoo_close((shmf_cuckoo *)h);
    case SHMF_KIND_ROARING: return shmf_roaring_close((shmf_roaring *)h);
    case SHMF_KIND_HLL: return shmf_hll_close((shmf_hll *)h);
    case SHMF_KIND_SET: return shmf_set_close((shmf_set *)h);
    case SHMF_KIND_WINDOW: return shmf_window_close((shmf_window *)h);
    case SHMF_KIND_UV: return shmf_uv_close((shmf_uv *)h);
  }
  return 0;
}

/* The live handle of SELF, or NULL with InvalidArgumentError (closed) or
 * ForkedHandleError (opened before a fork) set. */
static inline void *live(Handle *self, const char *call) {
  if (self->h == NULL || self->close_pending) {
    raise_invalid(call, "this %s handle is closed", kind_name(self->kind));
    return NULL;
  }
  if (self->generation != g_fork_generation) {
    char buf[256];
    PyOS_snprintf(buf, sizeof buf,
                  "this %s handle was opened in another process, before a fork: open the segment and the "
                  "structure again in this process",
                  kind_name(self->kind));
    raise_code(SHMF_EFORKED, buf, call);
    return NULL;
  }
  return self->h;
}

static int Handle_init(Handle *self, PyObject *args, PyObject *kwds) {
  unsigned long long ptr;
  unsigned int kind;
  PyObject *owner;
  static char *kwlist[] = {"ptr", "owner", "kind", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "KOI", kwlist, &ptr, &owner, &kind)) return -1;
  if (self->h != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "handle already initialised");
    return -1;
  }
  self->h = (void *)(uintptr_t)ptr;
  self->kind = kind;
  self->generation = g_fork_generation;
  Py_INCREF(owner);
  Py_XSETREF(self->owner, owner);
  return 0;
}

static void Handle_dealloc(Handle *self) {
  if (self->h && self->generation == g_fork_generation) close_handle(self->kind, self->h);
  self->h = NULL;
  Py_CLEAR(self->owner);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Handle_close(Handle *self, PyObject *Py_UNUSED(ignored)) {
  if (self->busy) { /* a batch of another thread runs on it without the GIL: it closes after */
    self->close_pending = 1;
    Py_RETURN_NONE;
  }
  if (self->h && self->generation == g_fork_generation) close_handle(self->kind, self->h);
  self->h = NULL;
  Py_RETURN_NONE;
}

/* Around a C call made without the GIL: close() meanwhile is deferred to the end. */
static inline void batch_begin(Handle *self) { self->busy++; }
static inline void batch_end(Handle *self) {
  if (--self->busy == 0 && self->close_pending) {
    self->close_pending = 0;
    if (self->h && self->generation == g_fork_generation) close_handle(self->kind, self->h);
    self->h = NULL;
  }
}

static PyObject *Handle_busy(Handle *self, PyObject *Py_UNUSED(ignored)) {
  return PyLong_FromUnsignedLong(self->busy);
}

static PyObject *Handle_ptr(Handle *self, PyObject *Py_UNUSED(ignored)) {
  void *h = live(self, kind_name(self->kind));
  if (!h) return NULL;
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)h);
}

/* ---- argument conversion -------------------------------------------------- */
/* A key: is_u64 and u64, or data and len (valid while the key object lives; the
 * view, when view.obj is set, released by the caller: key_release). */
typedef struct {
  int is_u64;
  uint64_t u64;
  const char *data;
  Py_ssize_t len;
  Py_buffer view;
} Key;

static inline void key_release(Key *k) {
  if (k->view.obj) PyBuffer_Release(&k->view);
}

static int to_u64(PyObject *o, uint64_t *out, const char *what, const char *call) {
  if (!PyLong_Check(o) || PyBool_Check(o)) {
    raise_invalid(call, "%s of type %s: an int in [0, 2**64)", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyObject *r = PyObject_Repr(o);
    raise_invalid(call, "%s %s is outside [0, 2**64) (a uint64)", what, r ? PyUnicode_AsUTF8(r) : "?");
    Py_XDECREF(r);
    return -1;
  }
  *out = v;
  return 0;
}

static inline int to_key(PyObject *o, Key *k, const char *call) {
  k->view.obj = NULL;
  if (PyUnicode_Check(o)) {
    k->is_u64 = 0;
    k->data = PyUnicode_AsUTF8AndSize(o, &k->len);
    if (!k->data) {
      PyErr_Clear();
      raise_invalid(call, "key is not valid UTF-8 text (a lone surrogate): pass bytes");
      return -1;
    }
  } else if (PyBytes_Check(o)) {
    k->is_u64 = 0;
    k->data = PyBytes_AS_STRING(o);
    k->len = PyBytes_GET_SIZE(o);
  } else if (PyLong_Check(o) && !PyBool_Check(o)) {
    k->is_u64 = 1;
    return to_u64(o, &k->u64, "int key", call);
  } else if (PyByteArray_Check(o) || PyMemoryView_Check(o)) { /* as the ctypes binding: no other buffers */
    if (PyObject_GetBuffer(o, &k->view, PyBUF_SIMPLE) < 0) {
      PyErr_Clear();
      raise_invalid(call, "key of type %s: a C-contiguous buffer of bytes is needed", Py_TYPE(o)->tp_name);
      return -1;
    }
    k->is_u64 = 0;
    k->data = (const char *)k->view.buf;
    k->len = k->view.len;
  } else if (PyIndex_Check(o) && !PyBool_Check(o)) { /* an integer type of another library (numpy.uint64): its int */
    PyObject *i = PyNumber_Index(o);
    if (!i) return -1;
    k->is_u64 = 1;
    int rc = to_u64(i, &k->u64, "int key", call);
    Py_DECREF(i);
    return rc;
  } else {
    raise_invalid(call, "key of type %s: use bytes, str or int", Py_TYPE(o)->tp_name);
    return -1;
  }
  if (k->len == 0) {
    key_release(k);
    raise_invalid(call, "an empty key: empty keys are refused everywhere (nginx treats an empty key as no "
                        "key); pass at least one byte");
    return -1;
  }
  return 0;
}

/* ---- single-key operations ------------------------------------------------ */
enum { OP_ADD, OP_CONTAINS, OP_INSERT_UNIQUE, OP_ERASE };

static int keyed_call(uint32_t kind, int op, void *h, const Key *k) {
#define KEYED(fn) (k->is_u64 ? fn##_u64(h, k->u64) : fn(h, k->data, (size_t)k->len))
  switch (kind) {
    case SHMF_KIND_BLOOM:
      if (op == OP_ADD) return KEYED(shmf_bloom_add);
      if (op == OP_CONTAINS) return KEYED(shmf_bloom_contains);
      break;
    case SHMF_KIND_CUCKOO:
      if (op == OP_ADD) return KEYED(shmf_cuckoo_add);
      if (op == OP_CONTAINS) return KEYED(shmf_cuckoo_contains);
      if (op == OP_INSERT_UNIQUE) return KEYED(shmf_cuckoo_insert_unique);
      if (op == OP_ERASE) return KEYED(shmf_cuckoo_erase);
      break;
    case SHMF_KIND_SET:
      if (op == OP_CONTAINS) return KEYED(shmf_set_contains);
      if (op == OP_INSERT_UNIQUE) return KEYED(shmf_set_insert_unique);
      if (op == OP_ERASE) return KEYED(shmf_set_erase);
      break;
    case SHMF_KIND_HLL:
      if (op == OP_ADD) return KEYED(shmf_hll_add);
      break;
  }
#undef KEYED
  return -SHMF_EINVAL - 1000; /* not an operation of this kind */
}

static const char *const op_calls[7 + 2][4] = {
    [SHMF_KIND_BLOOM] = {"bloom.add", "bloom.contains", "bloom.insert_unique", "bloom.erase"},
    [SHMF_KIND_CUCKOO] = {"cuckoo.add", "cuckoo.contains", "cuckoo.insert_unique", "cuckoo.erase"},
    [SHMF_KIND_SET] = {"set.add", "set.contains", "set.insert_unique", "set.erase"},
    [SHMF_KIND_HLL] = {"hll.add", "hll.contains", "hll.insert_unique", "hll.erase"},
};

static PyObject *keyed(Handle *self, PyObject *const *args, Py_ssize_t nargs, int op) {
  const char *call = self->kind < 9 && op_calls[self->kind][op] ? op_calls[self->kind][op] : "handle";
  if (nargs != 1) return raise_invalid(call, "takes exactly one key (%zd given)", nargs);
  void *h = live(self, call);
  if (!h) return NULL;
  Key k;
  if (to_key(args[0], &k, call) < 0) return NULL;
  int rc = keyed_call(self->kind, op, h, &k);
  key_release(&k);
  if (rc == -SHMF_EINVAL - 1000) return raise_invalid(call, "not an operation of a %s", kind_name(self->kind));
  if (rc < 0) return raise_rc(rc, call);
  if (self->kind == SHMF_KIND_CUCKOO && op == OP_ADD) Py_RETURN_NONE;
  return PyBool_FromLong(rc == 1);
}

static PyObject *Handle_add(Handle *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *Handle_contains(Handle *self, PyObject *const *args, Py_ssize_t nargs) {
  return keyed(self, args, nargs, OP_CONTAINS);
}
static PyObject *Handle_insert_unique(Handle *self, PyObject *const *args, Py_ssize_t nargs) {
  return keyed(self, args, nargs, OP_INSERT_UNIQUE);
}
static PyObject *Handle_erase(Handle *self, PyObject *const *args, Py_ssize_t nargs) {
  return keyed(self, args, nargs, OP_ERASE);
}

/* ---- window ---------------------------------------------------------------- */
static int window_w(Handle *self, shmf_window *h, PyObject *o, uint32_t *w, const char *call) {
  if (o == NULL || o == Py_None) {
    if (self->retention == 0) {
      shmf_window_stats st;
      int rc = shmf_window_stats_get(h, &st);
      if (rc < 0) {
        raise_rc(rc, call);
        return -1;
      }
      self->retention = st.retention;
    }
    *w = self->retention;
    return 0;
  }
  uint64_t v;
  if (to_u64(o, &v, "w (buckets)", call) < 0) return -1;
  if (v > UINT32_MAX) {
    raise_invalid(call, "w (buckets) %llu is outside [0, 2**32) (a uint32)", (unsigned long long)v);
    return -1;
  }
  *w = (uint32_t)v;
  return 0;
}

/* (space, item[, w]) with w also by keyword. */
static int pair_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int takes_w, PyObject **space,
                     PyObject **item, PyObject **w, const char *call) {
  *w = NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs + nkw < 2 || nargs > (takes_w ? 3 : 2)) {
    raise_invalid(call, takes_w ? "takes (space, item, w=None)" : "takes (space, item)");
    return -1;
  }
  PyObject *slots[3] = {nargs > 0 ? args[0] : NULL, nargs > 1 ? args[1] : NULL, nargs > 2 ? args[2] : NULL};
  static const char *names[3] = {"space", "item", "w"};
  for (Py_ssize_t i = 0; i < nkw; i++) {
    const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
    int j = -1;
    for (int s = 0; s < (takes_w ? 3 : 2); s++)
      if (kw && strcmp(kw, names[s]) == 0) j = s;
    if (j < 0 || slots[j] != NULL) {
      raise_invalid(call, "unexpected or repeated keyword argument %s", kw ? kw : "?");
      return -1;
    }
    slots[j] = args[nargs + i];
  }
  if (!slots[0] || !slots[1]) {
    raise_invalid(call, "takes (space, item%s)", takes_w ? ", w=None" : "");
    return -1;
  }
  *space = slots[0];
  *item = slots[1];
  *w = slots[2];
  return 0;
}

enum { W_MARK, W_SEEN, W_MARK_IF_UNSEEN, W_FORGET };
static const char *const w_calls[] = {"window.mark", "window.seen", "window.mark_if_unseen", "window.forget"};

static inline PyObject *window_op(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                  int op) {
  const char *call = w_calls[op];
  PyObject *so, *io, *wo;
  int takes_w = op == W_SEEN || op == W_MARK_IF_UNSEEN;
  if (nargs >= 2 && nargs <= 2 + takes_w && kwnames == NULL) {
    so = args[0];
    io = args[1];
    wo = nargs == 3 ? args[2] : NULL;
  } else if (pair_args(args, nargs, kwnames, takes_w, &so, &io, &wo, call) < 0) {
    return NULL;
  }
  if (self->kind != SHMF_KIND_WINDOW) return raise_invalid(call, "not an operation of a %s", kind_name(self->kind));
  shmf_window *h = (shmf_window *)live(self, call);
  if (!h) return NULL;
  uint64_t space;
  if (to_u64(so, &space, "space (the plan id)", call) < 0) return NULL;
  uint32_t w = 0;
  if (takes_w && window_w(self, h, wo, &w, call) < 0) return NULL;
  Key k;
  if (to_key(io, &k, call) < 0) return NULL;
  int rc;
  if (k.is_u64) {
    switch (op) {
      case W_MARK: rc = shmf_window_mark_u64(h, space, k.u64); break;
      case W_SEEN: rc = shmf_window_seen_u64(h, space, k.u64, w); break;
      case W_MARK_IF_UNSEEN: rc = shmf_window_mark_if_unseen_u64(h, space, k.u64, w); break;
      default: rc = shmf_window_forget_u64(h, space, k.u64); break;
    }
  } else {
    switch (op) {
      case W_MARK: rc = shmf_window_mark(h, space, k.data, (size_t)k.len); break;
      case W_SEEN: rc = shmf_window_seen(h, space, k.data, (size_t)k.len, w); break;
      case W_MARK_IF_UNSEEN: rc = shmf_window_mark_if_unseen(h, space, k.data, (size_t)k.len, w); break;
      default: rc = shmf_window_forget(h, space, k.data, (size_t)k.len); break;
    }
  }
  key_release(&k);
  if (rc < 0) return raise_rc(rc, call);
  return PyBool_FromLong(rc == 1);
}

static PyObject *Handle_mark(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
  return window_op(self, args, nargs, kw, W_MARK);
}
static PyObject *Handle_seen(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
  return window_op(self, args, nargs, kw, W_SEEN);
}
static PyObject *Handle_mark_if_unseen(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
  return window_op(self, args, nargs, kw, W_MARK_IF_UNSEEN);
}
static PyObject *Handle_forget(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
  return window_op(self, args, nargs, kw, W_FORGET);
}

/* mark_if_under(space, item, cap, w=None): the stamped variant's frequency cap. True allowed
 * (counted), False capped; the C API checks CAP and W (each its own message). */
static PyObject *Handle_mark_if_under(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  const char *call = "window.mark_if_under";
  static const char *names[4] = {"space", "item", "cap", "w"};
  PyObject *slots[4] = {NULL, NULL, NULL, NULL};
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs > 4) return raise_invalid(call, "takes (space, item, cap, w=None)");
  for (Py_ssize_t i = 0; i < nargs; i++) slots[i] = args[i];
  for (Py_ssize_t i = 0; i < nkw; i++) {
    const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
    int j = -1;
    for (int s = 0; s < 4; s++)
      if (kw && strcmp(kw, names[s]) == 0) j = s;
    if (j < 0 || slots[j] != NULL) return raise_invalid(call, "unexpected or repeated keyword argument %s", kw ? kw : "?");
    slots[j] = args[nargs + i];
  }
  if (!slots[0] || !slots[1] || !slots[2]) return raise_invalid(call, "takes (space, item, cap, w=None)");
  if (self->kind != SHMF_KIND_WINDOW) return raise_invalid(call, "not an operation of a %s", kind_name(self->kind));
  shmf_window *h = (shmf_window *)live(self, call);
  if (!h) return NULL;
  uint64_t space, cap;
  if (to_u64(slots[0], &space, "space (the plan id)", call) < 0) return NULL;
  if (to_u64(slots[2], &cap, "cap (marks)", call) < 0) return NULL;
  if (cap > UINT32_MAX) return raise_invalid(call, "cap (marks) %llu is outside [0, 2**32) (a uint32)", (unsigned long long)cap);
  uint32_t w = 0;
  if (window_w(self, h, slots[3], &w, call) < 0) return NULL;
  Key k;
  if (to_key(slots[1], &k, call) < 0) return NULL;
  int rc = k.is_u64 ? shmf_window_mark_if_under_u64(h, space, k.u64, (uint32_t)cap, w)
                    : shmf_window_mark_if_under(h, space, k.data, (size_t)k.len, (uint32_t)cap, w);
  key_release(&k);
  if (rc < 0) return raise_rc(rc, call);
  return PyBool_FromLong(rc == 1);
}

/* add(key) for Bloom/Cuckoo/Hll; add(space, item) for a UV family. */
static PyObject *Handle_add(Handle *self, PyObject *const *args, Py_ssize_t nargs) {
  if (self->kind != SHMF_KIND_UV) return keyed(self, args, nargs, OP_ADD);
  const char *call = "uv.add";
  if (nargs != 2) return raise_invalid(call, "takes (space, item)");
  shmf_uv *h = (shmf_uv *)live(self, call);
  if (!h) return NULL;
  uint64_t space;
  if (to_u64(args[0], &space, "space (the plan id)", call) < 0) return NULL;
  Key k;
  if (to_key(args[1], &k, call) < 0) return NULL;
  int rc = k.is_u64 ? shmf_uv_add_u64(h, space, k.u64) : shmf_uv_add(h, space, k.data, (size_t)k.len);
  key_release(&k);
  if (rc < 0) return raise_rc(rc, call);
  return PyBool_FromLong(rc == 1);
}

/* ---- batches ---------------------------------------------------------------- */
/* A batch of uint64 values: a buffer of 8-byte unsigned items (no copy), or a
 * sequence of ints (copied into OWNED), or a single int (BROADCAST: N copies). */
typedef struct {
  const uint64_t *v;
  Py_ssize_t n;
  uint64_t *owned;
  Py_buffer view;
} U64s;

static void u64s_release(U64s *a) {
  if (a->view.obj) PyBuffer_Release(&a->view);
  PyMem_Free(a->owned);
  a->owned = NULL;
}

static int is_u64_format(const char *f) {
  if (!f) return 0;
  if (*f == '@' || *f == '=' || *f == '<') f++;
  if (f[1] != '\0') return 0;
  return (*f == 'Q' || *f == 'L' || *f == 'K' || *f == 'q' || *f == 'l');
}

/* 1: got a buffer; 0: not a buffer of uint64 (falls back to a sequence); -1 error. */
static int u64s_from(PyObject *o, U64s *a, Py_ssize_t broadcast_n, const char *what, const char *call) {
  memset(a, 0, sizeof *a);
  if (PyLong_Check(o) && broadcast_n >= 0) {
    uint64_t v;
    if (to_u64(o, &v, what, call) < 0) return -1;
    a->owned = PyMem_Malloc(sizeof(uint64_t) * (size_t)(broadcast_n > 0 ? broadcast_n : 1));
    if (!a->owned) {
      PyErr_NoMemory();
      return -1;
    }
    for (Py_ssize_t i = 0; i < broadcast_n; i++) a->owned[i] = v;
    a->v = a->owned;
    a->n = broadcast_n;
    return 0;
  }
  if (PyBytes_Check(o) || PyByteArray_Check(o) || PyUnicode_Check(o)) {
    raise_invalid(call, "%s of type %s: a buffer of uint64 or a sequence of ints", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  if (PyObject_CheckBuffer(o)) {
    if (PyObject_GetBuffer(o, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Clear();
      raise_invalid(call, "%s: a C-contiguous buffer is needed (numpy: np.ascontiguousarray(a, np.uint64))", what);
      return -1;
    }
    if (a->view.itemsize != 8 || !is_u64_format(a->view.format)) {
      const char *f = a->view.format ? a->view.format : "B";
      PyBuffer_Release(&a->view);
      raise_invalid(call, "%s: a buffer of uint64 is needed (format 'Q'), not format '%s' (numpy: astype(np.uint64))",
                    what, f);
      return -1;
    }
    if (a->view.format[strlen(a->view.format) - 1] == 'q' || a->view.format[strlen(a->view.format) - 1] == 'l') {
      /* int64: accepted only when no value is negative */
      const int64_t *s = (const int64_t *)a->view.buf;
      for (Py_ssize_t i = 0; i < a->view.len / 8; i++)
        if (s[i] < 0) {
          long long bad = (long long)s[i];
          PyBuffer_Release(&a->view);
          raise_invalid(call, "%s[%zd] = %lld is outside [0, 2**64) (a uint64)", what, i, bad);
          return -1;
        }
    }
    a->v = (const uint64_t *)a->view.buf;
    a->n = a->view.len / 8;
    return 1;
  }
  PyObject *seq = PySequence_Fast(o, "");
  if (!seq) {
    PyErr_Clear();
    raise_invalid(call, "%s of type %s: a buffer of uint64 or a sequence of ints", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  a->owned = PyMem_Malloc(sizeof(uint64_t) * (size_t)(n > 0 ? n : 1));
  if (!a->owned) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; i++) {
    if (to_u64(items[i], &a->owned[i], what, call) < 0) {
      Py_DECREF(seq);
      u64s_release(a);
      return -1;
    }
  }
  Py_DECREF(seq);
  a->v = a->owned;
  a->n = n;
  return 0;
}

/* OUT: None (a list comes back) or a writable C-contiguous buffer of N bytes. */
typedef struct {
  uint8_t *p;
  uint8_t *owned;
  Py_buffer view;
} Out;

static int out_from(PyObject *o, Py_ssize_t n, Out *out, const char *call) {
  memset(out, 0, sizeof *out);
  if (o == NULL || o == Py_None) {
    out->owned = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (!out->owned) {
      PyErr_NoMemory();
      return -1;
    }
    out->p = out->owned;
    return 0;
  }
  if (PyObject_GetBuffer(o, &out->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();
    raise_invalid(call, "out of type %s: a writable C-contiguous buffer of %zd bytes (bytearray, numpy uint8/bool)",
                  Py_TYPE(o)->tp_name, n);
    return -1;
  }
  if (out->view.len != n || (out->view.itemsize != 1)) {
    Py_ssize_t len = out->view.len;
    PyBuffer_Release(&out->view);
    raise_invalid(call, "out holds %zd bytes: it must hold exactly one byte per key (%zd)", len, n);
    return -1;
  }
  out->p = (uint8_t *)out->view.buf;
  return 0;
}

/* The answer: with OUT given, how many are 1; else a list of bools. Releases OUT. */
static PyObject *out_result(Out *out, Py_ssize_t n, int given) {
  PyObject *r;
  if (given) {
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < n; i++) c += out->p[i] != 0;
    r = PyLong_FromSsize_t(c);
  } else {
    r = PyList_New(n);
    if (r)
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = out->p[i] ? Py_True : Py_False;
        Py_INCREF(b);
        PyList_SET_ITEM(r, i, b);
      }
  }
  if (out->view.obj) PyBuffer_Release(&out->view);
  PyMem_Free(out->owned);
  return r;
}

/* keyword parsing for (a[, b][, w][, out]) batches */
static int batch_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int npos, int takes_w,
                      PyObject **pos, PyObject **w, PyObject **out, const char *call) {
  static const char *const names2[] = {"spaces", "items"};
  *w = NULL;
  *out = NULL;
  pos[0] = pos[1] = NULL;
  if (nargs > npos + 1) {
    raise_invalid(call, "too many positional arguments");
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) {
    if (i < npos) pos[i] = args[i];
    else if (takes_w) *w = args[i];
    else *out = args[i];
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
    PyObject *v = args[nargs + i];
    if (kw && strcmp(kw, "out") == 0 && !*out) *out = v;
    else if (kw && takes_w && strcmp(kw, "w") == 0 && !*w) *w = v;
    else if (kw && npos == 2 && strcmp(kw, names2[0]) == 0 && !pos[0]) pos[0] = v;
    else if (kw && npos == 2 && strcmp(kw, names2[1]) == 0 && !pos[1]) pos[1] = v;
    else if (kw && npos == 1 && strcmp(kw, "keys") == 0 && !pos[0]) pos[0] = v;
    else {
      raise_invalid(call, "unexpected or repeated keyword argument %s", kw ? kw : "?");
      return -1;
    }
  }
  for (int i = 0; i < npos; i++)
    if (!pos[i]) {
      raise_invalid(call, "missing argument %s", npos == 2 ? names2[i] : "keys");
      return -1;
    }
  return 0;
}

/* A window batch's str/bytes items (the byte-item C calls): every item a str or bytes-like
 * key (to_key: never empty); an int among them is refused (the int 7 and the text "7" are
 * different items). */
typedef struct {
  Key *ks;
  const void **ptrs;
  size_t *lens;
  Py_ssize_t n, nks;
  PyObject *seq;
} ByteItems;

static void byte_items_release(ByteItems *b) {
  for (Py_ssize_t i = 0; i < b->nks; i++) key_release(&b->ks[i]);
  PyMem_Free(b->ks);
  PyMem_Free(b->ptrs);
  PyMem_Free(b->lens);
  Py_XDECREF(b->seq);
  memset(b, 0, sizeof *b);
}

static inline int is_bytes_like(PyObject *o) {
  return PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyMemoryView_Check(o);
}

/* 1: O is a sequence holding str/bytes items, converted into B; 0: uint64 items (B->seq,
 * when set, is O's items as a list: an iterator O has been consumed into it); -1: error. */
static int byte_items_from(PyObject *o, ByteItems *b, const char *call) {
  memset(b, 0, sizeof *b);
  if (PyBytes_Check(o) || PyByteArray_Check(o) || PyUnicode_Check(o) || PyLong_Check(o) || PyObject_CheckBuffer(o))
    return 0; /* a buffer (or a wrong type): u64s_from's */
  b->seq = PySequence_Fast(o, "");
  if (!b->seq) {
    PyErr_Clear();
    return 0;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(b->seq);
  PyObject **it = PySequence_Fast_ITEMS(b->seq);
  int any = 0;
  for (Py_ssize_t i = 0; i < n && !any; i++) any = is_bytes_like(it[i]);
  if (!any) return 0;
  b->n = n;
  b->ks = PyMem_Calloc((size_t)n, sizeof(Key));
  b->ptrs = PyMem_Malloc(sizeof(void *) * (size_t)n);
  b->lens = PyMem_Malloc(sizeof(size_t) * (size_t)n);
  if (!b->ks || !b->ptrs || !b->lens) {
    byte_items_release(b);
    PyErr_NoMemory();
    return -1;
  }
  for (; b->nks < n; b->nks++) {
    PyObject *v = it[b->nks];
    if (!is_bytes_like(v) && PyIndex_Check(v) && !PyBool_Check(v)) {
      PyObject *r = PyObject_Repr(v);
      raise_invalid(call, "items[%zd] = %s is an int among str/bytes items: a batch's items are all uint64 ints "
                          "or all str/bytes (the int 7 and the text '7' are different items)",
                    b->nks, r ? PyUnicode_AsUTF8(r) : "?");
      Py_XDECREF(r);
      byte_items_release(b);
      return -1;
    }
    if (to_key(v, &b->ks[b->nks], call) < 0) {
      byte_items_release(b);
      return -1;
    }
    b->ptrs[b->nks] = b->ks[b->nks].data;
    b->lens[b->nks] = (size_t)b->ks[b->nks].len;
  }
  return 1;
}

static PyObject *window_many_bytes(Handle *self, shmf_window *h, PyObject *spaces_o, ByteItems *bi, uint32_t w,
                                   PyObject *oo, int mark, const char *call);

static PyObject *window_many(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int mark) {
  const char *call = mark ? "window.mark_if_unseen_many" : "window.seen_many";
  PyObject *pos[2], *wo, *oo;
  if (batch_args(args, nargs, kwnames, 2, 1, pos, &wo, &oo, call) < 0) return NULL;
  if (self->kind != SHMF_KIND_WINDOW) return raise_invalid(call, "not an operation of a %s", kind_name(self->kind));
  shmf_window *h = (shmf_window *)live(self, call);
  if (!h) return NULL;
  uint32_t w;
  if (window_w(self, h, wo, &w, call) < 0) return NULL;
  ByteItems bi;
  int by = byte_items_from(pos[1], &bi, call);
  if (by < 0) return NULL;
  if (by == 1) return window_many_bytes(self, h, pos[0], &bi, w, oo, mark, call);
  U64s items, spaces;
  by = u64s_from(bi.seq ? bi.seq : pos[1], &items, -1, "items", call); /* a sequence's values are copied */
  byte_items_release(&bi);
  if (by < 0) return NULL;
  if (u64s_from(pos[0], &spaces, items.n, "spaces", call) < 0) {
    u64s_release(&items);
    return NULL;
  }
  PyObject *r = NULL;
  Out out;
  if (spaces.n != items.n) {
    raise_invalid(call, "%zd spaces and %zd items: pass one space per item (or one int for all)", spaces.n, items.n);
  } else if (out_from(oo, items.n, &out, call) == 0) {
    int rc = 0;
    if (items.n > 0) {
      batch_begin(self);
      Py_BEGIN_ALLOW_THREADS
      rc = mark ? shmf_window_mark_if_unseen_many_u64(h, spaces.v, items.v, (size_t)items.n, w, out.p)
                : shmf_window_seen_many_u64(h, spaces.v, items.v, (size_t)items.n, w, out.p);
      Py_END_ALLOW_THREADS
      batch_end(self);
    }
    if (rc < 0) {
      Out tmp = out;
      raise_rc(rc, call);
      if (tmp.view.obj) PyBuffer_Release(&tmp.view);
      PyMem_Free(tmp.owned);
    } else {
      r = out_result(&out, items.n, oo != NULL && oo != Py_None);
    }
  }
  u64s_release(&items);
  u64s_release(&spaces);
  return r;
}

/* The byte-item batch (BI from byte_items_from, released here). */
static PyObject *window_many_bytes(Handle *self, shmf_window *h, PyObject *spaces_o, ByteItems *bi, uint32_t w,
                                   PyObject *oo, int mark, const char *call) {
  U64s spaces;
  if (u64s_from(spaces_o, &spaces, bi->n, "spaces", call) < 0) {
    byte_items_release(bi);
    return NULL;
  }
  PyObject *r = NULL;
  Out out;
  if (spaces.n != bi->n) {
    raise_invalid(call, "%zd spaces and %zd items: pass one space per item (or one int for all)", spaces.n, bi->n);
  } else if (out_from(oo, bi->n, &out, call) == 0) {
    int rc = 0;
    if (bi->n > 0) {
      batch_begin(self);
      Py_BEGIN_ALLOW_THREADS
      rc = mark ? shmf_window_mark_if_unseen_many(h, spaces.v, bi->ptrs, bi->lens, (size_t)bi->n, w, out.p)
                : shmf_window_seen_many(h, spaces.v, bi->ptrs, bi->lens, (size_t)bi->n, w, out.p);
      Py_END_ALLOW_THREADS
      batch_end(self);
    }
    if (rc < 0) {
      Out tmp = out;
      raise_rc(rc, call);
      if (tmp.view.obj) PyBuffer_Release(&tmp.view);
      PyMem_Free(tmp.owned);
    } else {
      r = out_result(&out, bi->n, oo != NULL && oo != Py_None);
    }
  }
  u64s_release(&spaces);
  byte_items_release(bi);
  return r;
}

static PyObject *Handle_seen_many(Handle *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
  return window_many(self, a, n, kw, 0);
}
static PyObject *Handle_mark_if_unseen_many(Handle *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
  return window_many(self, a, n, kw, 1);
}

/* contains_many / add_many of Bloom, Cuckoo, ExactSet (and Hll.add_many). A
 * buffer or sequence of ints takes the _many_u64 call; a sequence of str/bytes
 * the byte-key call; a mixed sequence one call per key. */
static PyObject *keyed_many(Handle *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int add) {
  const char *call = add ? (self->kind == SHMF_KIND_HLL ? "hll.add_many" : "bloom.add_many")
                         : (self->kind == SHMF_KIND_CUCKOO ? "cuckoo.contains_many"
                                                           : self->kind == SHMF_KIND_SET ? "set.contains_many"
                                                                                          : "bloom.contains_many");
  PyObject *pos[2], *wo, *oo;
  if (batch_args(args, nargs, kwnames, 1, 0, pos, &wo, &oo, call) < 0) return NULL;
  int ok_kind = add ? (self->kind == SHMF_KIND_BLOOM || self->kind == SHMF_KIND_HLL)
                    : (self->kind == SHMF_KIND_BLOOM || self->kind == SHMF_KIND_CUCKOO || self->kind == SHMF_KIND_SET);
  if (!ok_kind) return raise_invalid(call, "not an operation of a %s", kind_name(self->kind));
  void *h = live(self, call);
  if (!h) return NULL;
  PyObject *keys = pos[0];
  U64s a;
  memset(&a, 0, sizeof a);
  const void **ptrs = NULL;
  size_t *lens = NULL;
  Key *ks = NULL;
  Py_ssize_t nks = 0;
  PyObject *seq = NULL;
  int u64 = 1;
  if (PyBytes_Check(keys) || PyByteArray_Check(keys) || PyUnicode_Check(keys))
    return raise_invalid(call, "keys of type %s: a buffer of uint64 or a sequence of keys", Py_TYPE(keys)->tp_name);
  if (!PyObject_CheckBuffer(keys)) {
    seq = PySequence_Fast(keys, "");
    if (!seq) {
      PyErr_Clear();
      return raise_invalid(call, "keys of type %s: a buffer of uint64 or a sequence of keys", Py_TYPE(keys)->tp_name);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **it = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n && u64; i++) u64 = PyLong_Check(it[i]) && !PyBool_Check(it[i]);
    if (n == 0 || add) u64 = 1; /* add_many takes uint64 keys only */
  }
  PyObject *r = NULL;
  Out out;
  memset(&out, 0, sizeof out);
  Py_ssize_t n = 0;
  int rc = 0;
  if (u64) {
    if (u64s_from(seq ? seq : keys, &a, -1, "keys", call) < 0) goto done;
    n = a.n;
    if (out_from(oo, n, &out, call) < 0) goto done;
    if (n > 0) {
      batch_begin(self);
      Py_BEGIN_ALLOW_THREADS
      switch (self->kind) {
        case SHMF_KIND_BLOOM:
          rc = add ? shmf_bloom_add_many_u64(h, a.v, (size_t)n, out.p) : shmf_bloom_contains_many_u64(h, a.v, (size_t)n, out.p);
          break;
        case SHMF_KIND_CUCKOO: rc = shmf_cuckoo_contains_many_u64(h, a.v, (size_t)n, out.p); break;
        case SHMF_KIND_SET: rc = shmf_set_contains_many_u64(h, a.v, (size_t)n, out.p); break;
        case SHMF_KIND_HLL: rc = shmf_hll_add_many_u64(h, a.v, (size_t)n); break;
      }
      Py_END_ALLOW_THREADS
      batch_end(self);
    }
    if (rc >= 0 && self->kind == SHMF_KIND_HLL) {
      /* Hll.add_many: True when some register grew (the C call's count > 0) */
      if (out.view.obj) PyBuffer_Release(&out.view);
      PyMem_Free(out.owned);
      memset(&out, 0, sizeof out);
      r = PyBool_FromLong(rc > 0);
      goto done;
    }
  } else {
    n = PySequence_Fast_GET_SIZE(seq);
    PyObject **it = PySequence_Fast_ITEMS(seq);
    ks = PyMem_Calloc((size_t)n, sizeof(Key));
    ptrs = PyMem_Malloc(sizeof(void *) * (size_t)n);
    lens = PyMem_Malloc(sizeof(size_t) * (size_t)n);
    if (!ks || !ptrs || !lens) {
      PyErr_NoMemory();
      goto done;
    }
    int mixed = 0;
    for (; nks < n; nks++) {
      if (to_key(it[nks], &ks[nks], call) < 0) goto done;
      mixed |= ks[nks].is_u64;
      ptrs[nks] = ks[nks].data;
      lens[nks] = (size_t)ks[nks].len;
    }
    if (out_from(oo, n, &out, call) < 0) goto done;
    if (add || mixed) {
      for (Py_ssize_t i = 0; i < n && rc >= 0; i++) {
        rc = keyed_call(self->kind, add ? OP_ADD : OP_CONTAINS, h, &ks[i]);
        if (rc >= 0) out.p[i] = rc == 1;
      }
    } else {
      switch (self->kind) {
        case SHMF_KIND_BLOOM: rc = shmf_bloom_contains_many(h, ptrs, lens, (size_t)n, out.p); break;
        case SHMF_KIND_CUCKOO: rc = shmf_cuckoo_contains_many(h, ptrs, lens, (size_t)n, out.p); break;
        case SHMF_KIND_SET: rc = shmf_set_contains_many(h, ptrs, lens, (size_t)n, out.p); break;
      }
    }
  }
  if (rc < 0) {
    raise_rc(rc, call);
    if (out.view.obj) PyBuffer_Release(&out.view);
    PyMem_Free(out.owned);
  } else {
    r = out_result(&out, n, oo != NULL && oo != Py_None);
  }
done:
  for (Py_ssize_t i = 0; i < nks; i++) key_release(&ks[i]);
  PyMem_Free(ks);
  PyMem_Free(ptrs);
  PyMem_Free(lens);
  u64s_release(&a);
  Py_XDECREF(seq);
  return r;
}

static PyObject *Handle_contains_many(Handle *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
  return keyed_many(self, a, n, kw, 0);
}
static PyObject *Handle_add_many(Handle *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
  return keyed_many(self, a, n, kw, 1);
}

#define FAST (METH_FASTCALL)
#define FASTKW (METH_FASTCALL | METH_KEYWORDS)
#define SIG(name, args) "_" name "($self, " args ")\n--\n\n" /* the C name: __text_signature__ */
static PyMethodDef Handle_methods[] = {
    {"close", (PyCFunction)Handle_close, METH_NOARGS,
     "close($self, /)\n--\n\nProcess-local: frees this handle (the structure stays). During a batch of another "
     "thread, the batch's end frees it."},
    {"_p", (PyCFunction)Handle_ptr, METH_NOARGS, "The C handle as an int (the control plane's ctypes calls)."},
    {"_busy", (PyCFunction)Handle_busy, METH_NOARGS, "Batches running on this handle without the GIL (tests)."},
    {"_add", (PyCFunction)(void (*)(void))Handle_add, FAST,
     SIG("add", "key, /") "Bloom: True if the key was new (a bit was set). Cuckoo: stores a copy (FullError when "
                          "full), returns None. Hll: True if a register grew. UvFamily: add(space, item), True when "
                          "the sketch changed. KEY: bytes, str (UTF-8) or int (a uint64); never empty."},
    {"_contains", (PyCFunction)(void (*)(void))Handle_contains, FAST,
     SIG("contains", "key, /") "Lock-free: True if the key is (Bloom, Cuckoo: may be) present."},
    {"_insert_unique", (PyCFunction)(void (*)(void))Handle_insert_unique, FAST,
     SIG("insert_unique", "key, /") "True stored now, False already present; of racing callers exactly one gets "
                                    "True (ExactSet)."},
    {"_erase", (PyCFunction)(void (*)(void))Handle_erase, FAST,
     SIG("erase", "key, /") "Removes the key (Cuckoo: one copy): True removed, False absent."},
    {"_mark", (PyCFunction)(void (*)(void))Handle_mark, FASTKW,
     SIG("mark", "space, item") "Adds the pair to the current bucket: True new there, False already in it."},
    {"_seen", (PyCFunction)(void (*)(void))Handle_seen, FASTKW,
     SIG("seen", "space, item, w=None") "Lock-free: is the pair in the last w buckets (None: the retention)?"},
    {"_mark_if_unseen", (PyCFunction)(void (*)(void))Handle_mark_if_unseen, FASTKW,
     SIG("mark_if_unseen", "space, item, w=None")
     "True (new: marked now) if the pair is in none of the last w buckets (None: the retention), else False. "
     "SPACE: a uint64 (the plan); ITEM: bytes, str or int, never empty. Cuckoo variant: exactly one of racing "
     "callers gets True (except across a rotation, counted in stats()['rotation_races'])."},
    {"_mark_if_under", (PyCFunction)(void (*)(void))Handle_mark_if_under, FASTKW,
     SIG("mark_if_under", "space, item, cap, w=None")
     "Frequency cap (stamped variant): True (allowed: counted, the pair marked) while the pair has fewer than CAP "
     "(1..15) such marks in the last w buckets (None: the retention), a sliding window; False (capped: nothing "
     "stored). Racing callers never together get more than CAP True answers. Bloom and cuckoo variants: "
     "InvalidArgumentError."},
    {"_forget", (PyCFunction)(void (*)(void))Handle_forget, FASTKW,
     SIG("forget", "space, item") "Cuckoo variant: removes the pair from every bucket (True removed, False absent). "
                                  "Bloom variant: InvalidArgumentError."},
    {"_seen_many", (PyCFunction)(void (*)(void))Handle_seen_many, FASTKW,
     SIG("seen_many", "spaces, items, w=None, *, out=None")
     "Lock-free, prefetched: per (space, item) pair, seen in the last w buckets. SPACES, ITEMS: buffers "
     "of uint64 (read in place) or sequences of ints; SPACES may be one int; ITEMS may also be a sequence of "
     "str/bytes items (all str/bytes, none empty). A list of bools, or with OUT (a writable buffer of len(items) "
     "bytes) written there and counted."},
    {"_mark_if_unseen_many", (PyCFunction)(void (*)(void))Handle_mark_if_unseen_many, FASTKW,
     SIG("mark_if_unseen_many", "spaces, items, w=None, *, out=None")
     "Per (space, item) pair: True new (marked now), False seen; arguments and answers as seen_many "
     "(with OUT: the number of new pairs)."},
    {"_contains_many", (PyCFunction)(void (*)(void))Handle_contains_many, FASTKW,
     SIG("contains_many", "keys, out=None")
     "Per key, contains(): KEYS a buffer of uint64 (read in place) or a sequence of keys. A list of bools, or with "
     "OUT (a writable buffer of len(keys) bytes) written there and counted."},
    {"_add_many", (PyCFunction)(void (*)(void))Handle_add_many, FASTKW,
     SIG("add_many", "keys, out=None")
     "Bloom: adds uint64 keys (a buffer of uint64, read in place, or a sequence of ints): per key True when new, "
     "a list or, with OUT, written there and counted. Hll: True if some register grew."},
    {NULL, NULL, 0, NULL}};
#undef SIG

static PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmfilter._native.Handle",
    .tp_basicsize = sizeof(Handle),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A C handle of one structure (the base of Bloom, Cuckoo, ExactSet, Hll, RoaringSet, Window, "
              "UvFamily in the compiled binding).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Handle_init,
    .tp_dealloc = (destructor)Handle_dealloc,
    .tp_methods = Handle_methods,
};

/* ---- module --------------------------------------------------------------- */
static PyObject *mod_set_errors(PyObject *Py_UNUSED(m), PyObject *args) {
  PyObject *classes, *base, *invalid;
  if (!PyArg_ParseTuple(args, "O!OO", &PyDict_Type, &classes, &base, &invalid)) return NULL;
  Py_INCREF(classes);
  Py_INCREF(base);
  Py_INCREF(invalid);
  Py_XSETREF(g_error_classes, classes);
  Py_XSETREF(g_error_base, base);
  Py_XSETREF(g_invalid, invalid);
  Py_RETURN_NONE;
}

static PyObject *mod_library_path(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a)) {
  Dl_info info;
  /* any data symbol of the library would do; a function's address through a union
   * (ISO C has no function-to-object pointer conversion) */
  union {
    const char *(*fn)(void);
    void *p;
  } sym = {.fn = shmf_version};
  if (dladdr(sym.p, &info) == 0 || info.dli_fname == NULL) {
    PyErr_SetString(PyExc_OSError, "dladdr could not name the loaded libshmfilter");
    return NULL;
  }
  return PyUnicode_DecodeFSDefault(info.dli_fname);
}

static PyMethodDef module_methods[] = {
    {"_set_errors", mod_set_errors, METH_VARARGS, "Registers the Error classes (code -> class, Error, InvalidArgumentError)."},
    {"library_path", mod_library_path, METH_NOARGS, "The path of the libshmfilter this module is linked against."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "shmfilter._native",
                                       "shmfilter's compiled binding (CPython C API): docs/python.md.", -1,
                                       module_methods, NULL, NULL, NULL, NULL};

/* The header's constants and struct sizes, as the compiler read them: the
 * package takes its constants from here and checks its ctypes layouts. */
static int add_constants(PyObject *m) {
#define C(name) \
  if (PyModule_AddIntConstant(m, #name, name) < 0) return -1;
  C(SHMF_OK) C(SHMF_EINVAL) C(SHMF_ENAMETOOLONG) C(SHMF_ENOTFOUND) C(SHMF_EEXISTS) C(SHMF_EWRONGKIND)
  C(SHMF_ENOTSEGMENT) C(SHMF_EBYTEORDER) C(SHMF_EVERSION) C(SHMF_EABI) C(SHMF_ETRUNCATED) C(SHMF_ECORRUPT)
  C(SHMF_ENOSPACE) C(SHMF_EFULL) C(SHMF_EDROPPED) C(SHMF_EIO) C(SHMF_EPERM) C(SHMF_EBUSY) C(SHMF_EBADINPUT)
  C(SHMF_EREADONLY) C(SHMF_EFORKED) C(SHMF_ENOMEM) C(SHMF_EINTERNAL)
  C(SHMF_KIND_BLOOM) C(SHMF_KIND_CUCKOO) C(SHMF_KIND_ROARING) C(SHMF_KIND_HLL) C(SHMF_KIND_SET)
  C(SHMF_KIND_BLOB) C(SHMF_KIND_WINDOW) C(SHMF_KIND_UV) C(SHMF_WINDOW_BLOOM) C(SHMF_WINDOW_CUCKOO)
  C(SHMF_WINDOW_STAMPED)
  C(SHMF_HLL_REDIS_DENSE_BYTES) C(SHMF_UV_REDIS_BYTES)
  C(SHMF_VERSION_MAJOR) C(SHMF_VERSION_MINOR) C(SHMF_VERSION_PATCH)
#undef C
  PyObject *sizes = Py_BuildValue(
      "{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n}",
      "shmf_segment_options", (Py_ssize_t)sizeof(shmf_segment_options),
      "shmf_open_options", (Py_ssize_t)sizeof(shmf_open_options),
      "shmf_bloom_options", (Py_ssize_t)sizeof(shmf_bloom_options),
      "shmf_bloom_stats", (Py_ssize_t)sizeof(shmf_bloom_stats),
      "shmf_cuckoo_options", (Py_ssize_t)sizeof(shmf_cuckoo_options),
      "shmf_cuckoo_stats", (Py_ssize_t)sizeof(shmf_cuckoo_stats),
      "shmf_roaring_options", (Py_ssize_t)sizeof(shmf_roaring_options),
      "shmf_roaring_stats", (Py_ssize_t)sizeof(shmf_roaring_stats),
      "shmf_hll_stats", (Py_ssize_t)sizeof(shmf_hll_stats),
      "shmf_set_options", (Py_ssize_t)sizeof(shmf_set_options),
      "shmf_set_stats", (Py_ssize_t)sizeof(shmf_set_stats),
      "shmf_structure_info", (Py_ssize_t)sizeof(shmf_structure_info),
      "shmf_metrics_options", (Py_ssize_t)sizeof(shmf_metrics_options),
      "shmf_window_options", (Py_ssize_t)sizeof(shmf_window_options),
      "shmf_window_stats", (Py_ssize_t)sizeof(shmf_window_stats),
      "shmf_uv_options", (Py_ssize_t)sizeof(shmf_uv_options),
      "shmf_uv_stats", (Py_ssize_t)sizeof(shmf_uv_stats),
      "Handle", (Py_ssize_t)sizeof(Handle));
  if (!sizes || PyModule_AddObject(m, "STRUCT_SIZES", sizes) < 0) {
    Py_XDECREF(sizes);
    return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__native(void) {
  static int atfork_done;
  if (!atfork_done) {
    if (pthread_atfork(NULL, NULL, on_fork_child) != 0) {
      PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
      return NULL;
    }
    atfork_done = 1;
  }
  if (PyType_Ready(&HandleType) < 0) return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m) return NULL;
  Py_INCREF(&HandleType);
  if (PyModule_AddObject(m, "Handle", (PyObject *)&HandleType) < 0 || add_constants(m) < 0) {
    Py_DECREF(&HandleType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
