/*
 * callbox_nif.c - the NIF of the Elixir binding: Callbox.Native over
 * libcallbox's C API (ffi/include/callbox.h, version 1.5 or a later 1.x).
 *
 * libcallbox is not linked: Callbox.Native finds it (CALLBOX_LIB, the priv
 * directory, the repository's build/) and this file dlopens it and looks up
 * every entry, so the NIF loads (and says what is missing) without it.
 *
 * A guest may run up to its timeout, and no scheduler, normal or dirty,
 * may be held while it does: call/7 (Callbox.call) runs an unordered call
 * on the caller's normal scheduler within a slice (callbox_call_within)
 * and, when the call outruns it, says :continue; Callbox.call then hands
 * the call (again from the start) to call_async/8, which gives it to
 * callbox_request_async from the normal scheduler so that the guest runs
 * on a libcallbox worker thread while the caller waits in receive (see
 * call_async below). Chain calls and inline_us: 0 go there at once.
 * call_many/6 runs its calls on a dirty CPU scheduler; what only waits
 * (close, barrier, a chain's reset) on a dirty I/O one; the rest, short,
 * on a dirty CPU one.
 * Input binaries are passed to the library as they are (their data
 * pointers are the callbox_tensor data; libcallbox copies them into the
 * sandbox once); outputs are binaries allocated at the size
 * callbox_output_types derives, written in place by the call.
 *
 * A calling process is monitored (one resource monitor per process, made
 * on its first call): if it dies during a call, the monitor fires the
 * call's cancel token and the guest stops within milliseconds.
 *
 * A host is a resource. Its destructor never closes the host itself
 * (callbox_close waits for the host's taps, and a destructor may run on a
 * normal scheduler): it queues the handle for one closer thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <erl_nif.h>

#include "callbox.h"

/* ---- the library's entries, looked up with dlsym ---- */

#define ENTRIES(X)                \
  X(callbox_version)              \
  X(callbox_version_number)       \
  X(callbox_error_free)           \
  X(callbox_dtypes)               \
  X(callbox_kinds)                \
  X(callbox_open)                 \
  X(callbox_open_config)          \
  X(callbox_close)                \
  X(callbox_callback_count)       \
  X(callbox_callback_at)          \
  X(callbox_callback_find)        \
  X(callbox_callback_limits)      \
  X(callbox_output_types)         \
  X(callbox_call)                 \
  X(callbox_tap)                  \
  X(callbox_barrier)              \
  X(callbox_chain_call)           \
  X(callbox_chain_tap)            \
  X(callbox_chain_barrier)        \
  X(callbox_chain_reset)          \
  X(callbox_call_cancelable)      \
  X(callbox_call_within)          \
  X(callbox_request_async)        \
  X(callbox_call_async)           \
  X(callbox_cancel_token_new)     \
  X(callbox_cancel_token_fire)    \
  X(callbox_cancel_token_free)    \
  X(callbox_set_log_callback)     \
  X(callbox_set_default_host)

#define DECLARE(name) static __typeof__(name) *p_##name;
ENTRIES(DECLARE)

static int lib_ready;
static char lib_problem[4608] = "libcallbox is not loaded (Callbox.Native.init/1 was not called)";

/* ---- the kind table: callbox_kinds, read once ---- */

#define MAX_KINDS 64
static callbox_kind_info kinds[MAX_KINDS];
static size_t nkinds;

/* ---- the dtype table: callbox_dtypes, read once ---- */

#define MAX_DTYPES 64
typedef struct {
  ERL_NIF_TERM atom; /* :f32 */
  ERL_NIF_TERM kind; /* Nx's type {kind, bits}: :f of {:f, 32} */
  int bits;          /* 32 of {:f, 32} */
  callbox_dtype dl;
  uint32_t bytes;
  int32_t xla;
  const char *name;
} dtype_entry;
static dtype_entry dtypes[MAX_DTYPES];
static size_t num_dtypes;

/* ---- atoms ---- */

static ERL_NIF_TERM a_ok, a_error, a_nil, a_true, a_false, a_continue;

/* The NIF's thread-local variables use the initial-exec model: a few
 * words of the static TLS that glibc keeps spare for libraries loaded
 * later, read with one instruction instead of a __tls_get_addr call per
 * access (libcallbox's Go runtime does the same). */
#if defined(__GNUC__) || defined(__clang__)
#define TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TLS_IE
#endif

/* ---- resources ---- */

/* A host's cache of derived result types: callbox_callback_find and
 * callbox_output_types cost about 1 us together per call, as much as a
 * small call itself; a host's callbacks never change, so the types of a
 * (callback, input types and shapes) pair are derived once. A few slots
 * per host, each allocated when first used, replaced round-robin. */
#define CACHE_SLOTS 8
#define CACHE_NAME 128
#define CACHE_KEY 64
#define CACHE_OUTS 4
typedef struct {
  char name[CACHE_NAME];
  size_t key_len;
  int64_t key[CACHE_KEY];
  size_t n;
  uint64_t caller_stack; /* callbox_limits.caller_stack */
  /* Calls of this entry's key still to send straight to a library
   * thread, and how many inline attempts in a row outran their slice
   * (cache_mark). */
  unsigned dirty_left, strikes;
  callbox_type types[CACHE_OUTS];
} cache_entry;

typedef struct {
  callbox_host handle;
  int closed; /* set by close/1 (under closer_mu) */
  ErlNifMutex *mu; /* guards the cache's writers */
  /* The cache's sequence count (a seqlock): odd while a writer, holding
   * mu, changes it. Readers of the common case (an entry with nothing to
   * count down) take no lock: they copy, then check the count did not
   * move (cache_peek); an uncontended mutex cost more than the lookup. */
  unsigned seq;
  cache_entry *cache[CACHE_SLOTS];
  unsigned next_slot;
} host_res;

typedef struct {
  callbox_cancel_token token;
} token_res;

static ErlNifResourceType *host_type, *token_type, *guard_type;

/* A process's guard: a monitor on the process, made once (new_guard/0, on
 * its first call; Callbox keeps it in the process dictionary), that fires
 * the cancel token of the process's call in flight, if any, when the
 * process dies, so a killed caller's guest stops within milliseconds
 * instead of running to its timeout on a dirty scheduler nobody waits
 * for. (A monitor per call costs more than the call: the monitor and
 * demonitor signals make the process take another scheduling round.) */
typedef struct {
  callbox_cancel_token token;
  int active; /* under guard_mu */
  int fired;
  /* The process's own token for its asynchronous calls (call_async/6),
   * made on its first one, and how many are in flight (under guard_mu). */
  callbox_cancel_token async_token;
  int async_active;
} guard_res;

static ErlNifMutex *guard_mu;

static uint64_t guards_fired;
static int guards_enabled = 1; /* set_guards/1: for measuring what a guard costs */

/* The closer thread: hosts collected without close/1 are closed here. */
static ErlNifMutex *closer_mu;
static ErlNifCond *closer_cv;
static callbox_host *close_queue;
static size_t close_len, close_cap, closing;
static uint64_t closed_by_gc;

static void *closer_main(void *arg) {
  (void)arg;
  enif_mutex_lock(closer_mu);
  for (;;) {
    while (close_len == 0) enif_cond_wait(closer_cv, closer_mu);
    callbox_host h = close_queue[--close_len];
    closing++;
    enif_mutex_unlock(closer_mu);
    callbox_error *e = p_callbox_close(h);
    if (e) p_callbox_error_free(e);
    enif_mutex_lock(closer_mu);
    closing--;
    closed_by_gc++;
  }
  return NULL;
}


/* ---- big stacks ----
 *
 * wasmtime runs a guest on the calling thread's native stack (up to its
 * max_wasm_stack, 512 KiB by default, plus its own frames), and a BEAM
 * dirty CPU scheduler thread has 320 KB by default. The NIF decides
 * nothing about it: the library opens and reloads hosts (compiling) on
 * threads of its own, and on Linux with glibc or on x86-64 runs a guest
 * whose thread is short of room on a stack of its own, so a callback's
 * caller_stack (C API 1.5, callbox_callback_limits) is 0 there. Elsewhere
 * (musl off x86-64) caller_stack is not 0, and a call_many call of such a
 * callback goes to a thread of the library's (callbox_call_async) while
 * the dirty scheduler thread waits for it; the library refuses a call on
 * a thread it knows to be short (StackOverflow), rather than fault. */

static __thread TLS_IE callbox_cancel_token thread_token; /* this thread's token for guards */

/* Calls call_many handed to a library thread for its stack. */
static uint64_t stack_handoffs;

static void host_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  host_res *r = obj;
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (r->cache[i]) enif_free(r->cache[i]);
  if (r->mu) enif_mutex_destroy(r->mu);
  if (r->handle == 0 || !lib_ready) return;
  enif_mutex_lock(closer_mu);
  if (!r->closed) {
    if (close_len == close_cap) {
      size_t cap = close_cap ? close_cap * 2 : 64;
      callbox_host *q = enif_realloc(close_queue, cap * sizeof *q);
      if (q == NULL) { /* out of memory: leak the host rather than block here */
        enif_mutex_unlock(closer_mu);
        return;
      }
      close_queue = q;
      close_cap = cap;
    }
    close_queue[close_len++] = r->handle;
    r->closed = 1;
    enif_cond_signal(closer_cv);
  }
  enif_mutex_unlock(closer_mu);
}


static void guard_down(ErlNifEnv *env, void *obj, ErlNifPid *pid, ErlNifMonitor *mon) {
  (void)env;
  (void)pid;
  (void)mon;
  guard_res *g = obj;
  enif_mutex_lock(guard_mu);
  if (g->active && !g->fired) {
    callbox_error *e = p_callbox_cancel_token_fire(g->token);
    if (e) p_callbox_error_free(e);
    g->fired = 1;
    __atomic_add_fetch(&guards_fired, 1, __ATOMIC_RELAXED);
  }
  if (g->async_active && !g->fired) {
    callbox_error *e = p_callbox_cancel_token_fire(g->async_token);
    if (e) p_callbox_error_free(e);
    g->fired = 1;
    __atomic_add_fetch(&guards_fired, 1, __ATOMIC_RELAXED);
  }
  enif_mutex_unlock(guard_mu);
}

static void guard_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  guard_res *g = obj;
  if (g->async_token && lib_ready) {
    callbox_error *e = p_callbox_cancel_token_free(g->async_token);
    if (e) p_callbox_error_free(e);
  }
}

static void token_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  token_res *t = obj;
  if (t->token && lib_ready) {
    callbox_error *e = p_callbox_cancel_token_free(t->token);
    if (e) p_callbox_error_free(e);
  }
}

/* ---- helpers ---- */

static ERL_NIF_TERM bin_of(ErlNifEnv *env, const char *s) {
  ERL_NIF_TERM t;
  size_t n = s ? strlen(s) : 0;
  unsigned char *p = enif_make_new_binary(env, n, &t);
  if (n) memcpy(p, s, n);
  return t;
}

/* An error tuple: {:error, {kind, code, guest_status, seq, kind_name,
 * callback, chain, message, guest_message, text, failed_callback,
 * failed_seq, failed_message}} (Callbox.Error.from_native/1). */
static ERL_NIF_TERM error_term(ErlNifEnv *env, callbox_error *e) {
  int has_failed = e->struct_size >= offsetof(callbox_error, failed_message) + sizeof(e->failed_message);
  ERL_NIF_TERM fields[13] = {
      enif_make_int(env, e->kind),
      enif_make_int(env, e->code),
      enif_make_int(env, e->guest_status),
      enif_make_uint64(env, e->seq),
      bin_of(env, e->kind_name),
      bin_of(env, e->callback),
      bin_of(env, e->chain),
      bin_of(env, e->message),
      bin_of(env, e->guest_message),
      bin_of(env, e->text),
      bin_of(env, has_failed ? e->failed_callback : ""),
      enif_make_uint64(env, has_failed ? e->failed_seq : 0),
      bin_of(env, has_failed ? e->failed_message : ""),
  };
  p_callbox_error_free(e);
  return enif_make_tuple2(env, a_error, enif_make_tuple_from_array(env, fields, 13));
}

/* An error made here (kind INVALID_ARGUMENT or FAILED_PRECONDITION), in
 * the library's shape. */
static ERL_NIF_TERM local_error(ErlNifEnv *env, int kind, const char *callback, const char *msg) {
  /* The kind's code and name are the library's (callbox_kinds). Without a
   * library there is none to ask, and the only error then is that it is
   * not loaded: FailedPrecondition, code FAILED_PRECONDITION (9), the one
   * kind this binding names itself. */
  const char *kind_name = "FailedPrecondition";
  int code = 9;
  for (size_t i = 0; i < nkinds; i++) {
    if (kinds[i].kind == kind) {
      kind_name = kinds[i].name;
      code = kinds[i].code;
    }
  }
  char text[1024];
  if (callback && *callback)
    snprintf(text, sizeof text, "%s: callback \"%s\": %s", kind_name, callback, msg);
  else
    snprintf(text, sizeof text, "%s: %s", kind_name, msg);
  ERL_NIF_TERM fields[13] = {
      enif_make_int(env, kind), enif_make_int(env, code), enif_make_int(env, 0), enif_make_uint64(env, 0),
      bin_of(env, kind_name),   bin_of(env, callback),    bin_of(env, ""),      bin_of(env, msg),
      bin_of(env, ""),          bin_of(env, text),        bin_of(env, ""),      enif_make_uint64(env, 0),
      bin_of(env, ""),
  };
  return enif_make_tuple2(env, a_error, enif_make_tuple_from_array(env, fields, 13));
}

static ERL_NIF_TERM not_loaded(ErlNifEnv *env) {
  return local_error(env, CALLBOX_KIND_FAILED_PRECONDITION, "", lib_problem);
}

#define REQUIRE_LIB(env) \
  do {                   \
    if (!lib_ready) return not_loaded(env); \
  } while (0)

/* A NUL-terminated copy of a binary (or an iolist/charlist-free binary
 * only): buf when it fits, else enif_alloc'd (*owned set). */
typedef struct {
  char *s;
  int owned;
  char buf[256];
} cstr;

static int get_cstr(ErlNifEnv *env, ERL_NIF_TERM t, cstr *out) {
  ErlNifBinary b;
  out->owned = 0;
  if (!enif_inspect_binary(env, t, &b)) return 0;
  if (memchr(b.data, 0, b.size) != NULL) return 0;
  if (b.size < sizeof out->buf) {
    out->s = out->buf;
  } else {
    out->s = enif_alloc(b.size + 1);
    if (!out->s) return 0;
    out->owned = 1;
  }
  memcpy(out->s, b.data, b.size);
  out->s[b.size] = 0;
  return 1;
}

static void free_cstr(cstr *c) {
  if (c->owned) enif_free(c->s);
  c->owned = 0;
}

static const dtype_entry *dtype_by_atom(ERL_NIF_TERM atom) {
  for (size_t i = 0; i < num_dtypes; i++)
    if (enif_is_identical(dtypes[i].atom, atom)) return &dtypes[i];
  return NULL;
}

static const dtype_entry *dtype_by_type(ErlNifEnv *env, ERL_NIF_TERM type) {
  const ERL_NIF_TERM *el;
  int arity, bits;
  if (!enif_get_tuple(env, type, &arity, &el) || arity != 2 || !enif_get_int(env, el[1], &bits)) return NULL;
  for (size_t i = 0; i < num_dtypes; i++)
    if (dtypes[i].bits == bits && enif_is_identical(dtypes[i].kind, el[0])) return &dtypes[i];
  return NULL;
}

/* A dtype's type tuple, as Nx writes it: {:f, 32}. */
static ERL_NIF_TERM type_tuple(ErlNifEnv *env, const dtype_entry *d) {
  return enif_make_tuple2(env, d->kind, enif_make_int(env, d->bits));
}

static const dtype_entry *dtype_by_dl(callbox_dtype dl) {
  for (size_t i = 0; i < num_dtypes; i++)
    if (dtypes[i].dl.code == dl.code && dtypes[i].dl.bits == dl.bits) return &dtypes[i];
  return NULL;
}

static ERL_NIF_TERM shape_tuple(ErlNifEnv *env, int32_t ndim, const int64_t *shape) {
  ERL_NIF_TERM dims[CALLBOX_MAX_RANK];
  for (int32_t i = 0; i < ndim; i++) dims[i] = enif_make_int64(env, shape[i]);
  return enif_make_tuple_from_array(env, dims, (unsigned)ndim);
}

/* ---- tensors ---- */

#define STACK_TENSORS 8

typedef struct {
  size_t n;
  callbox_tensor *t;
  int64_t *shapes; /* n * CALLBOX_MAX_RANK */
  callbox_tensor t_stack[STACK_TENSORS];
  int64_t shapes_stack[STACK_TENSORS * CALLBOX_MAX_RANK];
} tensor_list;

static int tensors_alloc(tensor_list *l, size_t n) {
  l->n = n;
  if (n <= STACK_TENSORS) {
    l->t = l->t_stack;
    l->shapes = l->shapes_stack;
  } else {
    l->t = enif_alloc(n * sizeof *l->t);
    l->shapes = enif_alloc(n * CALLBOX_MAX_RANK * sizeof *l->shapes);
    if (!l->t || !l->shapes) {
      if (l->t) enif_free(l->t);
      if (l->shapes) enif_free(l->shapes);
      l->t = NULL;
      l->shapes = NULL;
      return 0;
    }
  }
  return 1; /* every tensor is written whole (tensor_set) before use */
}

/* Writes a whole CPU tensor: every field, so tensors_alloc zeroes
 * nothing (a memset call for a tensor or two costs more than the stores). */
static void tensor_set(callbox_tensor *t, void *data, int32_t ndim, callbox_dtype dtype, int64_t *shape) {
  *t = (callbox_tensor){.data = data,
                        .device = {.device_type = CALLBOX_DEVICE_CPU, .device_id = 0},
                        .ndim = ndim,
                        .dtype = dtype,
                        .shape = ndim ? shape : NULL,
                        .strides = NULL,
                        .byte_offset = 0};
}

/* An empty list, without zeroing its stack arrays (4 KiB a call for the
 * two lists of a call, measurable beside a 1 us call). */
static void tensors_init(tensor_list *l) {
  l->n = 0;
  l->t = NULL;
  l->shapes = NULL;
}

static void tensors_free(tensor_list *l) {
  if (l->t && l->t != l->t_stack) {
    enif_free(l->t);
    enif_free(l->shapes);
  }
  l->t = NULL;
}

/* Reads a list of {binary, dtype, shape_tuple} (with_data) or of
 * {dtype, shape_tuple} into l, a dtype an atom (:f32) or a type tuple
 * ({:f, 32}: Callbox.call/4 passes its structs' fields as they are; the
 * BEAM reads a struct's fields far faster than enif_get_map_value, about
 * 50 ns for the four). On a bad element writes why into msg and returns
 * 0 (badarg: -1). */
static int get_tensors(ErlNifEnv *env, ERL_NIF_TERM list, int with_data, tensor_list *l, char *msg, size_t msg_cap) {
  unsigned len;
  if (!enif_get_list_length(env, list, &len)) return -1;
  if (!tensors_alloc(l, len)) {
    snprintf(msg, msg_cap, "out of memory for %u tensors", len);
    return 0;
  }
  ERL_NIF_TERM head, tail = list;
  for (unsigned i = 0; i < len; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    const ERL_NIF_TERM *el;
    int arity;
    if (!enif_get_tuple(env, head, &arity, &el) || arity != (with_data ? 3 : 2)) return -1;
    ERL_NIF_TERM dt = el[with_data ? 1 : 0];
    const dtype_entry *d = enif_is_atom(env, dt) ? dtype_by_atom(dt) : dtype_by_type(env, dt);
    if (d == NULL && !enif_is_atom(env, dt)) {
      snprintf(msg, msg_cap, "input %u: its type is not one of libcallbox's dtypes", i);
      return 0;
    }
    ERL_NIF_TERM sh = el[with_data ? 2 : 1];
    if (d == NULL) {
      char name[64] = "?";
      enif_get_atom(env, dt, name, sizeof name, ERL_NIF_LATIN1);
      snprintf(msg, msg_cap, "input %u: dtype %s is not one of libcallbox's", i, name);
      return 0;
    }
    const ERL_NIF_TERM *dims;
    int ndim;
    if (!enif_get_tuple(env, sh, &ndim, &dims)) return -1;
    if (ndim > CALLBOX_MAX_RANK) {
      snprintf(msg, msg_cap, "input %u: rank %d is above the most callbox takes (%d)", i, ndim, CALLBOX_MAX_RANK);
      return 0;
    }
    int64_t *shape = &l->shapes[(size_t)i * CALLBOX_MAX_RANK];
    uint64_t elems = 1;
    int overflow = 0;
    for (int k = 0; k < ndim; k++) {
      ErlNifSInt64 v;
      if (!enif_get_int64(env, dims[k], &v)) return -1;
      if (v < 0) {
        snprintf(msg, msg_cap, "input %u: dimension %d is negative (%lld)", i, k, (long long)v);
        return 0;
      }
      shape[k] = v;
      if (v != 0 && elems > UINT64_MAX / (uint64_t)v) overflow = 1;
      elems *= (uint64_t)v;
    }
    void *data = NULL;
    if (with_data) {
      ErlNifBinary b;
      if (!enif_inspect_binary(env, el[0], &b)) return -1;
      if (overflow || elems > UINT64_MAX / d->bytes || elems * d->bytes != b.size) {
        snprintf(msg, msg_cap, "input %u: a %s tensor of %llu elements is %llu bytes, its binary %zu", i, d->name,
                 (unsigned long long)elems, (unsigned long long)(elems * d->bytes), b.size);
        return 0;
      }
      data = b.size ? b.data : NULL;
    }
    tensor_set(&l->t[i], data, ndim, d->dl, shape);
  }
  return 1;
}

/* ---- NIFs ---- */

static ERL_NIF_TERM nif_init_lib(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  if (lib_ready) return a_ok;
  ErlNifBinary path;
  const ERL_NIF_TERM *why;
  int arity;
  if (enif_get_tuple(env, argv[0], &arity, &why) && arity == 2 && enif_is_identical(why[0], a_error) &&
      enif_inspect_binary(env, why[1], &path)) {
    /* Callbox.Native found no library: remember why, for every call. */
    size_t n = path.size < sizeof lib_problem - 1 ? path.size : sizeof lib_problem - 1;
    memcpy(lib_problem, path.data, n);
    lib_problem[n] = 0;
    return argv[0];
  }
  if (!enif_inspect_binary(env, argv[0], &path) || path.size >= 4096) return enif_make_badarg(env);
  char p[4096];
  memcpy(p, path.data, path.size);
  p[path.size] = 0;
  void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(lib_problem, sizeof lib_problem, "cannot load libcallbox: %s", dlerror());
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  }
#define LOOKUP(name)                                                                             \
  if ((p_##name = (__typeof__(name) *)dlsym(h, #name)) == NULL) {                                \
    snprintf(lib_problem, sizeof lib_problem, "%s has no %s: not libcallbox 1.4 (rebuild it: make lib)", p, #name); \
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));                             \
  }
  ENTRIES(LOOKUP)
  uint32_t v = p_callbox_version_number();
  if (v / 10000 != CALLBOX_VERSION_MAJOR || v % 10000 < CALLBOX_VERSION_MINOR * 100) {
    snprintf(lib_problem, sizeof lib_problem, "%s is libcallbox %s, not %d.%d or a later %d.x (rebuild it: make lib)",
             p, p_callbox_version(), CALLBOX_VERSION_MAJOR, CALLBOX_VERSION_MINOR, CALLBOX_VERSION_MAJOR);
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  }
  nkinds = p_callbox_kinds(kinds, MAX_KINDS);
  if (nkinds > MAX_KINDS) nkinds = MAX_KINDS;
  callbox_dtype_info infos[MAX_DTYPES];
  size_t n = p_callbox_dtypes(infos, MAX_DTYPES);
  if (n == 0) {
    snprintf(lib_problem, sizeof lib_problem, "libcallbox at %s reports no dtypes (a process forked after loading it?)", p);
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  }
  if (n > MAX_DTYPES) n = MAX_DTYPES;
  for (size_t i = 0; i < n; i++) {
    dtypes[i].atom = enif_make_atom(env, infos[i].name);
    dtypes[i].dl = infos[i].dlpack;
    dtypes[i].bytes = infos[i].bytes;
    dtypes[i].xla = infos[i].xla;
    dtypes[i].name = infos[i].name; /* static storage */
    /* Nx's type, as Callbox.Tensor names it: pred -> {:pred, 8},
     * bf16 -> {:bf, 16}, f32 -> {:f, 32}. */
    const char *nm = infos[i].name;
    char kind[8] = {0};
    size_t k = 0;
    while (nm[k] && (nm[k] < '0' || nm[k] > '9') && k < sizeof kind - 1) {
      kind[k] = nm[k];
      k++;
    }
    dtypes[i].kind = enif_make_atom(env, kind);
    dtypes[i].bits = nm[k] ? atoi(nm + k) : (int)infos[i].bytes * 8;
  }
  num_dtypes = n;
  pthread_t closer;
  if (pthread_create(&closer, NULL, closer_main, NULL) != 0 || pthread_detach(closer) != 0) {
    snprintf(lib_problem, sizeof lib_problem, "cannot start the host closer thread");
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  }
  lib_ready = 1;
  return a_ok;
}

static ERL_NIF_TERM nif_version(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  if (!lib_ready) return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  return enif_make_tuple2(env, a_ok, bin_of(env, p_callbox_version()));
}

/* [{name_atom, bytes, dlpack_code, bits, xla}] */
static ERL_NIF_TERM nif_dtypes(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  REQUIRE_LIB(env);
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (size_t i = num_dtypes; i-- > 0;) {
    ERL_NIF_TERM e = enif_make_tuple5(env, dtypes[i].atom, enif_make_uint(env, dtypes[i].bytes),
                                      enif_make_uint(env, dtypes[i].dl.code), enif_make_uint(env, dtypes[i].dl.bits),
                                      enif_make_int(env, dtypes[i].xla));
    list = enif_make_list_cell(env, e, list);
  }
  return enif_make_tuple2(env, a_ok, list);
}

static ERL_NIF_TERM host_term(ErlNifEnv *env, callbox_host h) {
  host_res *r = enif_alloc_resource(host_type, sizeof *r);
  memset(r, 0, sizeof *r);
  r->handle = h;
  r->mu = enif_mutex_create("callbox_host");
  ERL_NIF_TERM t = enif_make_resource(env, r);
  enif_release_resource(r);
  return enif_make_tuple2(env, a_ok, t);
}

typedef struct {
  const char *path_or_text, *format, *base_dir; /* format NULL: a path */
  callbox_host h;
  callbox_error *err;
} open_job;

static void run_open(void *p) {
  open_job *j = p;
  j->err = j->format ? p_callbox_open_config(j->path_or_text, j->format, j->base_dir, &j->h)
                     : p_callbox_open(j->path_or_text, &j->h);
}

/* open(path) */
static ERL_NIF_TERM nif_open(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  cstr path;
  if (!get_cstr(env, argv[0], &path)) return enif_make_badarg(env);
  open_job j = {path.s, NULL, NULL, 0, NULL};
  run_open(&j); /* the library compiles on a thread of its own */
  callbox_host h = j.h;
  callbox_error *e = j.err;
  free_cstr(&path);
  if (e) return error_term(env, e);
  return host_term(env, h);
}

/* open_config(text, format, base_dir | nil) */
static ERL_NIF_TERM nif_open_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  cstr text, format, base;
  int has_base = !enif_is_identical(argv[2], a_nil);
  if (!get_cstr(env, argv[0], &text)) return enif_make_badarg(env);
  if (!get_cstr(env, argv[1], &format)) {
    free_cstr(&text);
    return enif_make_badarg(env);
  }
  if (has_base && !get_cstr(env, argv[2], &base)) {
    free_cstr(&text);
    free_cstr(&format);
    return enif_make_badarg(env);
  }
  open_job j = {text.s, format.s, has_base ? base.s : NULL, 0, NULL};
  run_open(&j); /* the library compiles on a thread of its own */
  callbox_host h = j.h;
  callbox_error *e = j.err;
  free_cstr(&text);
  free_cstr(&format);
  if (has_base) free_cstr(&base);
  if (e) return error_term(env, e);
  return host_term(env, h);
}

static int get_host(ErlNifEnv *env, ERL_NIF_TERM t, host_res **out) {
  return enif_get_resource(env, t, host_type, (void **)out);
}

/* close(host) */
static ERL_NIF_TERM nif_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  if (!get_host(env, argv[0], &r)) return enif_make_badarg(env);
  enif_mutex_lock(closer_mu);
  r->closed = 1;
  enif_mutex_unlock(closer_mu);
  callbox_error *e = p_callbox_close(r->handle);
  if (e) return error_term(env, e);
  return a_ok;
}

/* {name, id, signature, engine, batching, nin, nout, limits}, limits a
 * map of callbox_limits' fields (timeout_ns, max_memory, fuel, max_stack,
 * max_output, caller_stack, max_wait_ns, max_cpu_ns), or nil when they could not be
 * read. */
static ERL_NIF_TERM info_term(ErlNifEnv *env, callbox_host h, const callbox_callback_info *in) {
  callbox_limits l = {.struct_size = sizeof l};
  ERL_NIF_TERM limits = a_nil;
  callbox_error *e = p_callbox_callback_limits(h, in->name, &l);
  if (e == NULL) {
    ERL_NIF_TERM keys[8] = {enif_make_atom(env, "timeout_ns"), enif_make_atom(env, "max_memory"),
                            enif_make_atom(env, "fuel"),       enif_make_atom(env, "max_stack"),
                            enif_make_atom(env, "max_output"), enif_make_atom(env, "caller_stack"),
                            enif_make_atom(env, "max_wait_ns"), enif_make_atom(env, "max_cpu_ns")};
    /* An older library fills less (struct_size says how much): a field
     * past that stays 0 (none). */
    uint64_t max_wait = l.struct_size >= offsetof(callbox_limits, max_wait_ns) + 8 ? l.max_wait_ns : 0;
    uint64_t max_cpu = l.struct_size >= offsetof(callbox_limits, max_cpu_ns) + 8 ? l.max_cpu_ns : 0;
    ERL_NIF_TERM vals[8] = {enif_make_uint64(env, l.timeout_ns), enif_make_uint64(env, l.max_memory),
                            enif_make_uint64(env, l.fuel),       enif_make_uint64(env, l.max_stack),
                            enif_make_uint64(env, l.max_output), enif_make_uint64(env, l.caller_stack),
                            enif_make_uint64(env, max_wait),     enif_make_uint64(env, max_cpu)};
    if (!enif_make_map_from_arrays(env, keys, vals, 8, &limits)) limits = a_nil;
  } else {
    p_callbox_error_free(e);
  }
  ERL_NIF_TERM f[8] = {bin_of(env, in->name),     bin_of(env, in->id),
                       bin_of(env, in->signature), bin_of(env, in->engine),
                       bin_of(env, in->batching),  enif_make_int(env, in->num_inputs),
                       enif_make_int(env, in->num_outputs), limits};
  return enif_make_tuple_from_array(env, f, 8);
}

/* callbacks(host) -> {:ok, [{name, id, signature, engine, batching, nin, nout, limits}]} */
static ERL_NIF_TERM nif_callbacks(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  if (!get_host(env, argv[0], &r)) return enif_make_badarg(env);
  size_t n = 0;
  callbox_error *e = p_callbox_callback_count(r->handle, &n);
  if (e) return error_term(env, e);
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (size_t i = n; i-- > 0;) {
    callbox_callback_info info;
    if ((e = p_callbox_callback_at(r->handle, i, &info)) != NULL) return error_term(env, e);
    list = enif_make_list_cell(env, info_term(env, r->handle, &info), list);
  }
  return enif_make_tuple2(env, a_ok, list);
}

/* callback(host, name_or_id) -> {:ok, info} */
static ERL_NIF_TERM nif_callback(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr name;
  if (!get_host(env, argv[0], &r) || !get_cstr(env, argv[1], &name)) return enif_make_badarg(env);
  callbox_callback_info info;
  callbox_error *e = p_callbox_callback_find(r->handle, name.s, &info);
  free_cstr(&name);
  if (e) return error_term(env, e);
  return enif_make_tuple2(env, a_ok, info_term(env, r->handle, &info));
}

/* The number of results of callback, and their types for inputs: 1, or 0
 * with *err set. types is caller storage for up to cap types, or NULL:
 * then *types_out is enif_alloc'd. */
/* The cache key of inputs: per input (code << 8 | bits), ndim, dims.
 * 0 when it does not fit. */
static size_t cache_key(const tensor_list *in, int64_t *key) {
  size_t k = 0;
  for (size_t i = 0; i < in->n; i++) {
    const callbox_tensor *t = &in->t[i];
    if (k + 2 + (size_t)t->ndim > CACHE_KEY) return 0;
    key[k++] = ((int64_t)t->dtype.code << 8) | t->dtype.bits;
    key[k++] = t->ndim;
    for (int32_t d = 0; d < t->ndim; d++) key[k++] = t->shape[d];
  }
  if (in->n == 0) {
    key[0] = -1; /* no inputs */
    return 1;
  }
  return k;
}

/* A writer's change to the cache, inside mu: the sequence count odd. */
static void cache_write_begin(host_res *r) {
  __atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void cache_write_end(host_res *r) { __atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE); }

/* The entry of (callback, key) in r's cache, or NULL. Under mu, or inside
 * a seqlock read (whose result counts only if the sequence did not move:
 * every read here is bounded, whatever a writer is doing). */
static cache_entry *cache_find(host_res *r, const char *callback, const int64_t *key, size_t key_len, size_t cap) {
  for (int i = 0; i < CACHE_SLOTS; i++) {
    cache_entry *c = __atomic_load_n(&r->cache[i], __ATOMIC_ACQUIRE);
    if (c && c->key_len == key_len && c->n <= cap && strncmp(c->name, callback, CACHE_NAME) == 0 &&
        memcmp(c->key, key, key_len * sizeof *key) == 0)
      return c;
  }
  return NULL;
}

/* cache_get without the lock: 1 (a hit whose calls may run inline with
 * no count to change), 0 (a miss), -1 (anything else, or a writer was
 * busy: ask cache_get). */
static int cache_peek(host_res *r, const char *callback, const int64_t *key, size_t key_len, callbox_type *types,
                      size_t cap, size_t *n, uint64_t *caller_stack) {
  unsigned seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
  if (seq & 1) return -1;
  int status = 0;
  cache_entry *c = cache_find(r, callback, key, key_len, cap);
  if (c) {
    size_t k = c->n;
    if (k > cap || c->dirty_left > 0 || c->strikes > 0) {
      status = -1;
    } else {
      memcpy(types, c->types, k * sizeof *types);
      *n = k;
      *caller_stack = c->caller_stack;
      status = 1;
    }
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&r->seq, __ATOMIC_RELAXED) == seq ? status : -1;
}

static int cache_get(host_res *r, const char *callback, const int64_t *key, size_t key_len, callbox_type *types,
                     size_t cap, size_t *n, uint64_t *caller_stack, int *dirty) {
  int hit = 0;
  if (!r->mu) return 0;
  int peek = cache_peek(r, callback, key, key_len, types, cap, n, caller_stack);
  if (peek >= 0) return peek;
  enif_mutex_lock(r->mu);
  cache_entry *c = cache_find(r, callback, key, key_len, cap);
  if (c) {
    memcpy(types, c->types, c->n * sizeof *types);
    *n = c->n;
    *caller_stack = c->caller_stack;
    if (dirty && c->dirty_left > 0) {
      cache_write_begin(r);
      c->dirty_left--;
      cache_write_end(r);
      *dirty = 1;
    } else if (dirty && c->strikes > 0) {
      *dirty = -1; /* to try inline, with strikes to clear if it fits */
    }
    hit = 1;
  }
  enif_mutex_unlock(r->mu);
  return hit;
}

static void cache_put(host_res *r, const char *callback, const int64_t *key, size_t key_len, const callbox_type *types,
                      size_t n, uint64_t caller_stack) {
  if (!r->mu || n > CACHE_OUTS || strlen(callback) >= CACHE_NAME) return;
  enif_mutex_lock(r->mu);
  unsigned slot = r->next_slot++ % CACHE_SLOTS;
  cache_entry *c = r->cache[slot], *fresh = NULL;
  if (c == NULL) c = fresh = enif_alloc(sizeof *c);
  if (c) {
    cache_write_begin(r);
    strcpy(c->name, callback);
    c->key_len = key_len;
    memcpy(c->key, key, key_len * sizeof *key);
    memcpy(c->types, types, n * sizeof *types);
    c->n = n;
    c->caller_stack = caller_stack;
    c->dirty_left = c->strikes = 0;
    if (fresh) __atomic_store_n(&r->cache[slot], fresh, __ATOMIC_RELEASE);
    cache_write_end(r);
  }
  enif_mutex_unlock(r->mu);
}

/* After a call of key outran its inline slice (slow set) or fit in it
 * after earlier ones had not: the k-th attempt in a row that outran it
 * sends the next 2^k calls, at most INLINE_BACKOFF, straight to a library
 * thread; one that fits clears the count. So a callback that is slow
 * at those types spends a slice once per 1024 calls, and one slow only
 * once (its first call instantiating the module, say) returns to the
 * inline route two calls later. */
#define INLINE_BACKOFF 1024
static void cache_mark(host_res *r, const char *callback, const int64_t *key, size_t key_len, int slow) {
  if (!r->mu || key_len == 0) return;
  enif_mutex_lock(r->mu);
  cache_entry *c = cache_find(r, callback, key, key_len, CACHE_OUTS);
  if (c) {
    cache_write_begin(r);
    if (slow) {
      if (c->strikes < 10) c->strikes++;
      c->dirty_left = 1u << c->strikes;
      if (c->dirty_left > INLINE_BACKOFF) c->dirty_left = INLINE_BACKOFF;
    } else {
      c->strikes = 0;
    }
    cache_write_end(r);
  }
  enif_mutex_unlock(r->mu);
}

/* The result types of callback at in's types, and (caller_stack,
 * optional) the native stack a thread calling it must have
 * (callbox_callback_limits: 0 when any thread will do), from the cache or
 * derived and cached. dirty (optional): 1 when the (callback, types) pair
 * is one whose calls go straight to a library thread for now, -1 when it
 * may run inline after attempts that outran their slice (cache_mark). */
static int derive(ErlNifEnv *env, host_res *r, const char *callback, tensor_list *in, callbox_type *stack, size_t cap,
                  callbox_type **types_out, size_t *n_out, uint64_t *caller_stack, int *dirty, ERL_NIF_TERM *err) {
  int64_t key[CACHE_KEY];
  size_t key_len = in->t ? cache_key(in, key) : 0;
  uint64_t need = 0;
  if (key_len && cache_get(r, callback, key, key_len, stack, cap < CACHE_OUTS ? cap : CACHE_OUTS, n_out, &need, dirty)) {
    *types_out = stack;
    if (caller_stack) *caller_stack = need;
    return 1;
  }
  callbox_callback_info info;
  callbox_limits limits = {.struct_size = sizeof limits};
  callbox_error *e = p_callbox_callback_find(r->handle, callback, &info);
  if (e == NULL) e = p_callbox_callback_limits(r->handle, callback, &limits);
  if (e) {
    *err = error_term(env, e);
    return 0;
  }
  size_t n = info.num_outputs < 0 ? 0 : (size_t)info.num_outputs;
  callbox_type *types = stack;
  if (n > cap) {
    types = enif_alloc(n * sizeof *types);
    if (!types) {
      *err = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, callback, "out of memory for the result types");
      return 0;
    }
  }
  e = p_callbox_output_types(r->handle, callback, in->t, in->n, types, n);
  if (e) {
    if (types != stack) enif_free(types);
    *err = error_term(env, e);
    return 0;
  }
  *types_out = types;
  *n_out = n;
  if (caller_stack) *caller_stack = limits.caller_stack;
  if (key_len) cache_put(r, callback, key, key_len, types, n, limits.caller_stack);
  return 1;
}

/* output_types(host, callback, [{dtype, shape}]) -> {:ok, [{dtype, shape}]} */
static ERL_NIF_TERM nif_output_types(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr cb;
  if (!get_host(env, argv[0], &r) || !get_cstr(env, argv[1], &cb)) return enif_make_badarg(env);
  tensor_list in;
  tensors_init(&in);
  char msg[512];
  ERL_NIF_TERM result;
  int got = get_tensors(env, argv[2], 0, &in, msg, sizeof msg);
  if (got < 0) {
    result = enif_make_badarg(env);
  } else if (got == 0) {
    result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, msg);
  } else {
    callbox_type stack[STACK_TENSORS], *types;
    size_t n;
    if (derive(env, r, cb.s, &in, stack, STACK_TENSORS, &types, &n, NULL, NULL, &result)) {
      ERL_NIF_TERM list = enif_make_list(env, 0);
      for (size_t i = n; i-- > 0;) {
        const dtype_entry *d = dtype_by_dl(types[i].dtype);
        ERL_NIF_TERM dt = d ? d->atom : a_nil;
        list = enif_make_list_cell(env, enif_make_tuple2(env, dt, shape_tuple(env, types[i].ndim, types[i].shape)), list);
      }
      if (types != stack) enif_free(types);
      result = enif_make_tuple2(env, a_ok, list);
    }
  }
  tensors_free(&in);
  free_cstr(&cb);
  return result;
}

static int get_chain(ErlNifEnv *env, ERL_NIF_TERM t, cstr *c, int *has) {
  *has = !enif_is_identical(t, a_nil);
  if (!*has) return 1;
  return get_cstr(env, t, c);
}

/* One library call of one_call's: within budget_ns when it is not 0
 * (callbox_call_within, setting expired), else until it is over. */
typedef struct {
  callbox_host host;
  callbox_cancel_token token;
  const char *chain, *callback;
  tensor_list *in, *out;
  size_t n;
  uint64_t budget_ns;
  int32_t expired;
  callbox_error *err;
} call_job;

static void run_call(void *p) {
  call_job *j = p;
  if (j->budget_ns)
    j->err = p_callbox_call_within(j->host, j->token, j->callback, j->in->t, j->in->n, j->out->t, j->n, j->budget_ns,
                                   &j->expired);
  else if (j->token)
    j->err = p_callbox_call_cancelable(j->host, j->token, j->chain, j->callback, j->in->t, j->in->n, j->out->t, j->n);
  else if (j->chain)
    j->err = p_callbox_chain_call(j->host, j->chain, j->callback, j->in->t, j->in->n, j->out->t, j->n);
  else
    j->err = p_callbox_call(j->host, j->callback, j->in->t, j->in->n, j->out->t, j->n);
}

/* A call_many call waiting, on its dirty scheduler thread, for the library
 * thread that runs it. */
typedef struct {
  ErlNifMutex *mu;
  ErlNifCond *cv;
  int done;
  callbox_error *err;
} lib_wait;

static void lib_wait_done(void *user, callbox_error *err) {
  lib_wait *w = user;
  enif_mutex_lock(w->mu);
  w->err = err;
  w->done = 1;
  enif_cond_signal(w->cv);
  enif_mutex_unlock(w->mu);
}

/* Runs j's call (no budget: a call_many call) on a thread of the
 * library's, whose stack the library sizes, this thread waiting. Where
 * no wait can be set up it runs here, and the library refuses it if this
 * thread is short of stack. */
static void run_call_on_library(call_job *j) {
  lib_wait w = {enif_mutex_create("callbox_lib_wait"), enif_cond_create("callbox_lib_wait"), 0, NULL};
  if (w.mu == NULL || w.cv == NULL) {
    run_call(j);
  } else {
    callbox_error *e = p_callbox_call_async(j->host, j->token, j->chain, j->callback, j->in->t, j->in->n, j->out->t, j->n,
                                            lib_wait_done, &w);
    if (e != NULL) {
      j->err = e;
    } else {
      __atomic_add_fetch(&stack_handoffs, 1, __ATOMIC_RELAXED);
      enif_mutex_lock(w.mu);
      while (!w.done) enif_cond_wait(w.cv, w.mu);
      enif_mutex_unlock(w.mu);
      j->err = w.err;
    }
  }
  if (w.cv) enif_cond_destroy(w.cv);
  if (w.mu) enif_mutex_destroy(w.mu);
}

/* The guard a call runs under: the process's guard resource (argument
 * guard, or nil), when the caller passed no token of its own and the
 * thread has a token; NULL otherwise. */
static guard_res *guard_for(ErlNifEnv *env, ERL_NIF_TERM arg, token_res *tok) {
  guard_res *g;
  if (tok != NULL || !__atomic_load_n(&guards_enabled, __ATOMIC_RELAXED)) return NULL;
  if (!enif_get_resource(env, arg, guard_type, (void **)&g)) return NULL;
  if (thread_token == 0) {
    callbox_error *e = p_callbox_cancel_token_new(&thread_token);
    if (e) {
      p_callbox_error_free(e);
      thread_token = 0;
      return NULL;
    }
  }
  return g;
}

/* new_guard() -> guard (monitoring the caller) */
static ERL_NIF_TERM nif_new_guard(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  ErlNifPid self;
  ErlNifMonitor mon;
  if (!enif_self(env, &self)) return enif_make_badarg(env);
  guard_res *g = enif_alloc_resource(guard_type, sizeof *g);
  if (g == NULL) return a_nil;
  g->token = 0;
  g->active = 0;
  g->fired = 0;
  g->async_token = 0;
  g->async_active = 0;
  ERL_NIF_TERM t = enif_make_resource(env, g);
  if (enif_monitor_process(env, g, &self, &mon) != 0) t = a_nil;
  enif_release_resource(g);
  return t;
}


static __thread TLS_IE ErlNifEnv *thread_call_env;

/* Counters of the routes calls took (call_stats/0). */
static uint64_t async_started; /* calls handed to a library thread (call_async/8) */
static uint64_t stat_inline, stat_gave_up, stat_dirty, stat_inline_max_ns, stat_gave_up_max_ns, stat_gave_up_last_ns;

static void stat_max(uint64_t *max, uint64_t v) {
  uint64_t m = __atomic_load_n(max, __ATOMIC_RELAXED);
  while (v > m && !__atomic_compare_exchange_n(max, &m, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* ---- results: where a call's outputs are written ----
 *
 * A result binary from enif_alloc_binary, with its release when the
 * garbage collector frees it, cost about 130 ns on the development VM
 * (the ERTS binary allocator; malloc and free, 10 ns): as much as the
 * rest of the NIF's work on a 1 KiB call together. So a result of up to
 * ARENA_MAX_OUT bytes is written into a slice of its thread's arena
 * instead: a resource of ARENA_SIZE bytes, allocated once for many
 * results, cut in order, each slice made a binary term after the call
 * with enif_make_resource_binary (a reference the term holds: the arena
 * is freed when the last result in it is garbage). The cost is
 * retention: a result kept alive keeps its whole arena (up to
 * ARENA_SIZE / 65, some 500 times its size), as a sub-binary keeps its
 * parent; :binary.copy/1 keeps only its bytes. A result of up to
 * HEAP_BIN_MAX bytes is a heap binary (enif_make_new_binary, whose bytes
 * stay writable until the NIF returns; on the process heap, nothing
 * retained), and a larger one than ARENA_MAX_OUT a binary of its own. A
 * failed call leaves a heap result garbage and its arena slice unused. */
#define ARENA_SIZE (32 * 1024)
#define ARENA_MAX_OUT (4 * 1024)
#define HEAP_BIN_MAX 64

static ErlNifResourceType *arena_type;
static uint64_t arenas_live; /* call_stats/0: arenas made and not yet freed */
static __thread TLS_IE unsigned char *thread_arena; /* the resource; the thread holds a reference */
static __thread TLS_IE size_t thread_arena_used;

static void arena_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  (void)obj;
  __atomic_sub_fetch(&arenas_live, 1, __ATOMIC_RELAXED);
}

/* One result's memory: a heap binary (its term made), a slice of an
 * arena (which the result holds a reference on until its term is made,
 * the arena's bytes unchanged after that, as enif_make_resource_binary
 * asks), or a binary of its own. */
typedef struct {
  enum { RESULT_TERM, RESULT_ARENA, RESULT_OWN } kind;
  ERL_NIF_TERM term;
  ErlNifBinary bin;
  unsigned char *arena, *data;
  size_t size;
} result_buf;

/* Memory of size bytes for a result; NULL when none could be had. */
static unsigned char *result_alloc(ErlNifEnv *env, size_t size, result_buf *o) {
  o->kind = RESULT_TERM;
  if (size <= HEAP_BIN_MAX) return enif_make_new_binary(env, size, &o->term);
  if (size <= ARENA_MAX_OUT) {
    size_t need = (size + 63) & ~(size_t)63; /* slices on cache lines */
    if (thread_arena == NULL || thread_arena_used + need > ARENA_SIZE) {
      unsigned char *fresh = enif_alloc_resource(arena_type, ARENA_SIZE);
      if (fresh != NULL) {
        __atomic_add_fetch(&arenas_live, 1, __ATOMIC_RELAXED);
        if (thread_arena) enif_release_resource(thread_arena);
        thread_arena = fresh;
        thread_arena_used = 0;
      }
    }
    if (thread_arena != NULL && thread_arena_used + need <= ARENA_SIZE) {
      o->kind = RESULT_ARENA;
      o->arena = thread_arena;
      o->data = thread_arena + thread_arena_used;
      o->size = size;
      thread_arena_used += need;
      enif_keep_resource(o->arena);
      return o->data;
    }
  }
  if (!enif_alloc_binary(size, &o->bin)) return NULL;
  o->kind = RESULT_OWN;
  return o->bin.data;
}

/* The term of a result, its bytes final (after its call). */
static ERL_NIF_TERM result_term(ErlNifEnv *env, result_buf *o) {
  if (o->kind == RESULT_ARENA) {
    o->term = enif_make_resource_binary(env, o->arena, o->data, o->size);
    enif_release_resource(o->arena);
  } else if (o->kind == RESULT_OWN) {
    o->term = enif_make_binary(env, &o->bin);
  }
  o->kind = RESULT_TERM;
  return o->term;
}

/* Drops a result whose call failed. */
static void result_discard(result_buf *o) {
  if (o->kind == RESULT_ARENA) enif_release_resource(o->arena);
  if (o->kind == RESULT_OWN) enif_release_binary(&o->bin);
  o->kind = RESULT_TERM;
}

static double mono_ns(void);

/* The slice clock: what an inline call's time is measured with (for
 * enif_consume_timeslice and call_stats/0), two reads a call. A vDSO
 * clock_gettime costs about 30 ns on the development VM, the TSC about
 * 11; so on x86-64 with an invariant TSC (CPUID 0x80000007 EDX bit 8) the
 * clock reads the TSC, and its ticks are turned into ns at a rate taken
 * from the monotonic clock over the first 10 ms or more after the NIF
 * loaded (until then, and elsewhere, the monotonic clock). A skewed
 * reading only misstates a share of a timeslice or a statistic: a call's
 * budget is the library's, on its own clock. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define SLICE_TSC 1
#else
#define SLICE_TSC 0
#endif
static int slice_tsc;              /* the TSC is invariant: may be used */
static uint64_t slice_tsc0;        /* a TSC reading at load, */
static double slice_ns0;           /* and the monotonic clock's then */
static double slice_ns_per_tick;   /* 0 until measured */

static void slice_clock_init(void) {
#if SLICE_TSC
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000007 && __get_cpuid(0x80000007, &a, &b, &c, &d) &&
      (d & (1u << 8))) {
    slice_ns0 = mono_ns();
    slice_tsc0 = __rdtsc();
    slice_tsc = 1;
  }
#endif
}

/* A reading of the slice clock: TSC ticks (*tsc set) or monotonic ns. */
static uint64_t slice_now(int *tsc) {
#if SLICE_TSC
  double rate;
  __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  if (slice_tsc && rate > 0) {
    *tsc = 1;
    return __rdtsc();
  }
#endif
  *tsc = 0;
  return (uint64_t)mono_ns();
}

/* The ns since start, a reading of slice_now; measures the TSC's rate
 * once it may. */
static uint64_t slice_since(uint64_t start, int tsc) {
#if SLICE_TSC
  if (tsc) {
    uint64_t now = __rdtsc();
    double rate;
    __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
    return now > start ? (uint64_t)((double)(now - start) * rate) : 0;
  }
#endif
  double now = mono_ns();
#if SLICE_TSC
  if (slice_tsc && now - slice_ns0 > 1e7) {
    uint64_t ticks = __rdtsc() - slice_tsc0;
    double rate = (now - slice_ns0) / (double)ticks;
    if (ticks > 0) __atomic_store(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  }
#endif
  return now > (double)start ? (uint64_t)(now - (double)start) : 0;
}

/* One call: 1 with *result the list of outputs [{binary, dtype, shape}],
 * 0 with *result an error tuple, -1 for a malformed term (badarg), 2 when
 * the call is to run (again) elsewhere (call/7 answers :continue, and
 * it goes to a library thread). budget_ns 0 runs the call here, whatever
 * it takes (call_many's, on a dirty scheduler, under guard g);
 * else the call runs here within budget_ns (callbox_call_within) when it
 * may: not when the callback's caller_stack is not 0 (musl off x86-64),
 * nor for a while after calls of the same callback and input types
 * outran their budget (cache_mark); otherwise, or when it outran it, 2.
 * A call_many call whose callback's caller_stack is not 0 runs on a
 * thread of the library's (run_call_on_library).
 * typed: the outputs' dtypes as type tuples ({:f, 32}: Callbox.call/4
 * makes %Callbox.Tensor{}s of them, which the BEAM builds far faster than
 * enif_make_map_from_arrays, about 50 ns a struct), else as atoms. */
static int one_call(ErlNifEnv *env, host_res *r, token_res *tok, guard_res *g, const char *chain, const char *cb,
                    ERL_NIF_TERM inputs, uint64_t budget_ns, int typed, ERL_NIF_TERM *result) {
  tensor_list in, out;
  tensors_init(&in);
  tensors_init(&out);
  char msg[512];
  int status = 0;
  callbox_type stack[STACK_TENSORS], *types = NULL;
  result_buf bufs_stack[STACK_TENSORS], *bufs = bufs_stack;
  size_t n = 0, allocated = 0;
  uint64_t caller_stack = 0;
  int dirty = 0;
  int got = get_tensors(env, inputs, 1, &in, msg, sizeof msg);
  if (got < 0) {
    status = -1;
    goto done;
  }
  if (got == 0) {
    *result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb, msg);
    goto done;
  }
  if (!derive(env, r, cb, &in, stack, STACK_TENSORS, &types, &n, &caller_stack, budget_ns ? &dirty : NULL, result))
    goto done;
  int own_stack = caller_stack == 0; /* else the library runs it where the stack is */
  if (budget_ns && (dirty > 0 || !own_stack)) {
    status = 2;
    goto done;
  }
  if (n > STACK_TENSORS && (bufs = enif_alloc(n * sizeof *bufs)) == NULL) {
    bufs = bufs_stack;
    *result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb, "out of memory for the results");
    goto done;
  }
  if (!tensors_alloc(&out, n)) {
    *result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb, "out of memory for the results");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    const dtype_entry *d = dtype_by_dl(types[i].dtype);
    uint64_t size = d ? d->bytes : 0;
    for (int32_t k = 0; k < types[i].ndim; k++) size *= (uint64_t)types[i].shape[k];
    unsigned char *data = d == NULL ? NULL : result_alloc(env, (size_t)size, &bufs[i]);
    if (data == NULL) {
      snprintf(msg, sizeof msg, "cannot allocate result %zu (%llu bytes)", i, (unsigned long long)size);
      *result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb, msg);
      goto done;
    }
    allocated++;
    tensor_set(&out.t[i], size ? data : NULL, types[i].ndim, types[i].dtype, types[i].shape);
  }
  {
    /* Inline (budget_ns): no chain (nif_call sends chain calls dirty) and
     * no guard (the caller cannot die during a NIF on its own scheduler). */
    call_job j = {r->handle, tok ? tok->token : 0, chain, cb, &in, &out, n, budget_ns, 0, NULL};
    uint64_t t0 = 0;
    int t0_tsc = 0;
    if (budget_ns) {
      t0 = slice_now(&t0_tsc);
    } else {
      __atomic_add_fetch(&stat_dirty, 1, __ATOMIC_RELAXED);
      if (g) {
        j.token = thread_token;
        enif_mutex_lock(guard_mu);
        g->token = thread_token;
        g->active = 1;
        enif_mutex_unlock(guard_mu);
      }
    }
    thread_call_env = env;
    if (own_stack)
      run_call(&j);
    else
      run_call_on_library(&j);
    thread_call_env = NULL;
    if (budget_ns) {
      uint64_t took = slice_since(t0, t0_tsc);
      /* A timeslice is about 1 ms: report the share this call used. */
      int pct = (int)(took / 10000);
      enif_consume_timeslice(env, pct < 1 ? 1 : pct > 100 ? 100 : pct);
      stat_max(j.expired ? &stat_gave_up_max_ns : &stat_inline_max_ns, took);
      if (j.expired) __atomic_store_n(&stat_gave_up_last_ns, took, __ATOMIC_RELAXED);
    } else if (g) {
      enif_mutex_lock(guard_mu);
      g->active = 0;
      enif_mutex_unlock(guard_mu);
    }
    if (j.err) {
      *result = error_term(env, j.err);
      goto done;
    }
    if (budget_ns && (j.expired || dirty < 0)) {
      int64_t key[CACHE_KEY];
      cache_mark(r, cb, key, cache_key(&in, key), j.expired);
    }
    if (j.expired) {
      __atomic_add_fetch(&stat_gave_up, 1, __ATOMIC_RELAXED);
      status = 2;
      goto done;
    }
    if (budget_ns) __atomic_add_fetch(&stat_inline, 1, __ATOMIC_RELAXED);
  }
  {
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t i = n; i-- > 0;) {
      ERL_NIF_TERM bin = result_term(env, &bufs[i]);
      const dtype_entry *d = dtype_by_dl(types[i].dtype);
      ERL_NIF_TERM shape = shape_tuple(env, types[i].ndim, types[i].shape);
      list = enif_make_list_cell(env, enif_make_tuple3(env, bin, typed ? type_tuple(env, d) : d->atom, shape), list);
    }
    allocated = 0; /* owned by the terms now */
    *result = list;
    status = 1;
  }
done:
  for (size_t i = 0; i < allocated; i++) result_discard(&bufs[i]);
  if (bufs != bufs_stack) enif_free(bufs);
  if (types && types != stack) enif_free(types);
  tensors_free(&out);
  tensors_free(&in);
  return status;
}

/* The arguments common to call/7, call_async/8 and call_many/6. */
static int call_args(ErlNifEnv *env, const ERL_NIF_TERM argv[], host_res **r, token_res **tok, cstr *chain, int *has_chain,
                     cstr *cb) {
  *tok = NULL;
  if (!get_host(env, argv[0], r)) return 0;
  if (!enif_is_identical(argv[4], a_nil) && !enif_get_resource(env, argv[4], token_type, (void **)tok)) return 0;
  if (!get_chain(env, argv[1], chain, has_chain)) return 0;
  if (!get_cstr(env, argv[2], cb)) {
    if (*has_chain) free_cstr(chain);
    return 0;
  }
  return 1;
}

/* call(host, nil, callback, [{binary, dtype, shape}], token | nil, guard | nil, inline_ns)
 *   -> {:ok, [{binary, {kind, bits}, shape}]} | {:error, e} | :continue
 * inputs: {binary, dtype, shape} tuples, dtype an atom or a type tuple.
 * On the caller's normal scheduler: an unordered call runs here within
 * inline_ns (one_call). One that outran its slice (the abandoned attempt
 * wrote nothing), one that may not run here (its callback needs more
 * native stack than this thread has, or calls of it at these types
 * outran their slices a moment ago), a chain call and inline_ns 0 give
 * :continue: Callbox.call/4 then runs the call on a thread of the
 * library's (call_async/8), so that no scheduler, normal or dirty, is
 * held while a guest runs. */
static ERL_NIF_TERM nif_call(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  ErlNifUInt64 inline_ns;
  if (!enif_get_uint64(env, argv[6], &inline_ns)) return enif_make_badarg(env);
  if (inline_ns == 0 || !enif_is_identical(argv[1], a_nil)) return a_continue;
  host_res *r;
  token_res *tok;
  cstr chain, cb;
  int has_chain;
  if (!call_args(env, argv, &r, &tok, &chain, &has_chain, &cb)) return enif_make_badarg(env);
  ERL_NIF_TERM result;
  int status = one_call(env, r, tok, NULL, NULL, cb.s, argv[3], inline_ns, 1, &result);
  free_cstr(&cb);
  if (has_chain) free_cstr(&chain);
  switch (status) {
  case 1:
    return enif_make_tuple2(env, a_ok, result);
  case 0:
    return result;
  case 2:
    return a_continue;
  default:
    return enif_make_badarg(env);
  }
}

/* call_stats() -> %{inline: n, gave_up: n, threaded: n, dirty: n,
 * inline_max_ns: ns, gave_up_max_ns: ns, gave_up_last_ns: ns, slice_clock:
 * :tsc | :monotonic, arenas_live: n}: how calls ran since the NIF loaded
 * (calls finished on a normal scheduler; inline attempts that outran
 * their slice; calls handed to a library thread, call_async/8; call_many's
 * calls, run on a dirty scheduler), the longest inline attempt that finished,
 * the longest one given up (its slice and the engine's interrupt
 * latency: what a runaway holds a normal scheduler) and the latest one,
 * the clock those are read from (the slice clock), and how many result
 * arenas are alive (each thread's current one, and those results still
 * hold). */
static ERL_NIF_TERM nif_call_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  double rate;
  __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  ERL_NIF_TERM keys[9] = {enif_make_atom(env, "inline"),         enif_make_atom(env, "gave_up"),
                          enif_make_atom(env, "threaded"),
                          enif_make_atom(env, "dirty"),          enif_make_atom(env, "inline_max_ns"),
                          enif_make_atom(env, "gave_up_max_ns"), enif_make_atom(env, "gave_up_last_ns"),
                          enif_make_atom(env, "slice_clock"),    enif_make_atom(env, "arenas_live")};
  ERL_NIF_TERM vals[9] = {enif_make_uint64(env, __atomic_load_n(&stat_inline, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&stat_gave_up, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&async_started, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&stat_dirty, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&stat_inline_max_ns, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&stat_gave_up_max_ns, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&stat_gave_up_last_ns, __ATOMIC_RELAXED)),
                          enif_make_atom(env, slice_tsc && rate > 0 ? "tsc" : "monotonic"),
                          enif_make_uint64(env, __atomic_load_n(&arenas_live, __ATOMIC_RELAXED))};
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys, vals, 9, &map);
  return map;
}

/* ---- asynchronous calls: callbox_call_async from a normal scheduler ----
 *
 * call_async/8 does on the calling (normal) scheduler what takes no guest
 * time: read the inputs, derive the result types (cached), allocate the
 * result binaries, and hand the call to callbox_call_async, which returns
 * at once; the guest runs on a goroutine of the library's. When it is
 * over, async_done (on that goroutine's thread) sends the caller
 * {ref, {:ok, outputs} | {:error, e}}. What the call needs until then is
 * the job's: the input terms copied into a process-independent env (a
 * refc binary is shared, not copied, so its bytes stay where the tensors
 * point even if the caller dies), the result binaries, and references on
 * the host resource (its destructor must not close the host under the
 * call) and on the caller's guard (whose monitor fires the guard's token
 * when the caller dies, stopping the guest within milliseconds). */
typedef struct {
  ErlNifEnv *env; /* process-independent: the inputs, the ref, then the message */
  ErlNifPid pid;
  ERL_NIF_TERM ref;
  host_res *host;
  guard_res *guard;
  int state; /* ASYNC_*, atomic: who replies */
  callbox_error *err;
  size_t n;
  callbox_type *types; /* n, after the job */
  ErlNifBinary *bins;  /* n, after the types */
} async_job;

/* Who replies. The NIF polls the job for async_spin_ns (a call that short
 * then costs no message and no wake-up of the caller's scheduler) while
 * the state is WAITING; done sets DONE if the NIF is still polling (and
 * the NIF replies), else the NIF has set SEND and done sends a message. */
#define ASYNC_WAITING 0
#define ASYNC_SEND 1
#define ASYNC_DONE 2
static uint64_t async_spin_ns = 20000;

static uint64_t async_finished, async_polled; /* async_stats/0, with async_started */

/* The call's reply term in env: {:ok, outputs} or {:error, e}; the result
 * binaries are the terms' (or released) afterwards. */
static ERL_NIF_TERM async_reply(ErlNifEnv *env, async_job *j) {
  if (j->err) {
    for (size_t i = 0; i < j->n; i++) enif_release_binary(&j->bins[i]);
    ERL_NIF_TERM e = error_term(env, j->err);
    j->err = NULL;
    return e;
  }
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (size_t i = j->n; i-- > 0;) {
    ERL_NIF_TERM bin = enif_make_binary(env, &j->bins[i]);
    list = enif_make_list_cell(env,
                               enif_make_tuple3(env, bin, dtype_by_dl(j->types[i].dtype)->atom,
                                                shape_tuple(env, j->types[i].ndim, j->types[i].shape)),
                               list);
  }
  return enif_make_tuple2(env, a_ok, list);
}

/* The caller's guard no longer covers the job's call: before the reply
 * goes, so that a caller exiting right after it does not fire the guard. */
static void async_unguard(async_job *j) {
  if (j->guard) {
    enif_mutex_lock(guard_mu);
    j->guard->async_active--;
    enif_mutex_unlock(guard_mu);
  }
}

/* Frees a finished job and drops its references. */
static void async_release(async_job *j) {
  enif_free_env(j->env);
  if (j->guard) enif_release_resource(j->guard);
  enif_release_resource(j->host);
  enif_free(j);
  __atomic_add_fetch(&async_finished, 1, __ATOMIC_RELAXED);
}

static void async_done(void *user, callbox_error *err) {
  async_job *j = user;
  j->err = err;
  int expected = ASYNC_WAITING;
  if (__atomic_compare_exchange_n(&j->state, &expected, ASYNC_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return; /* the NIF is still polling: it replies */
  ErlNifEnv *env = j->env;
  async_unguard(j);
  /* A dead caller: the send fails and the env's terms are freed with it. */
  enif_send(NULL, &j->pid, env, enif_make_tuple2(env, j->ref, async_reply(env, j)));
  async_release(j);
}

static double mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Polls j until its call is done or async_spin_ns pass: 1 with the reply
 * in *result (j freed), or 0 (the reply will come as a message). */
static int async_poll(ErlNifEnv *env, async_job *j, ERL_NIF_TERM *result) {
  uint64_t spin = __atomic_load_n(&async_spin_ns, __ATOMIC_RELAXED);
  double until = mono_ns() + (double)spin;
  for (unsigned i = 1; __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == ASYNC_WAITING; i++) {
    if (i < 128) { /* a short pure spin, then yield between looks (the worker may share this core) */
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    if (mono_ns() > until) {
      int expected = ASYNC_WAITING;
      if (__atomic_compare_exchange_n(&j->state, &expected, ASYNC_SEND, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
      break; /* done won the race */
    }
    sched_yield();
  }
  async_unguard(j);
  *result = async_reply(env, j);
  async_release(j);
  __atomic_add_fetch(&async_polled, 1, __ATOMIC_RELAXED);
  return 1;
}

/* call_async(host, chain | nil, callback, [{binary, dtype, shape}], token | nil, guard | nil, ref, budget_ns)
 *   -> {:ok, outputs} | {:error, e} (the call was refused, or was over within async_spin_ns)
 *    | :ok (then {ref, {:ok, outputs} | {:error, e}} is sent to the caller)
 * budget_ns: 0, or the caller's limit on the call (callbox_request's
 * budget_ns: the library stops the call, waiting for an instance
 * included, with its own Timeout error). */
static ERL_NIF_TERM nif_call_async(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  token_res *tok;
  cstr chain, cb;
  int has_chain;
  ErlNifUInt64 budget_ns;
  if (!enif_is_ref(env, argv[6]) || !enif_get_uint64(env, argv[7], &budget_ns)) return enif_make_badarg(env);
  if (!call_args(env, argv, &r, &tok, &chain, &has_chain, &cb)) return enif_make_badarg(env);
  ErlNifEnv *jenv = enif_alloc_env();
  tensor_list in, out;
  tensors_init(&in);
  tensors_init(&out);
  callbox_type stack[STACK_TENSORS], *types = NULL;
  async_job *j = NULL;
  size_t n = 0, allocated = 0;
  char msg[512];
  ERL_NIF_TERM result = 0;
  int bad = 0;
  if (jenv == NULL) {
    result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, "out of memory for the call");
    goto done;
  }
  /* The inputs, read from their copies in the job's env: they live as long as it. */
  int got = get_tensors(jenv, enif_make_copy(jenv, argv[3]), 1, &in, msg, sizeof msg);
  if (got < 0) {
    bad = 1;
    goto done;
  }
  if (got == 0) {
    result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, msg);
    goto done;
  }
  if (!derive(env, r, cb.s, &in, stack, STACK_TENSORS, &types, &n, NULL, NULL, &result)) goto done;
  j = enif_alloc(sizeof *j + n * (sizeof(callbox_type) + sizeof(ErlNifBinary)));
  if (j == NULL || !tensors_alloc(&out, n)) {
    result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, "out of memory for the results");
    goto done;
  }
  j->types = (callbox_type *)(j + 1);
  j->bins = (ErlNifBinary *)(j->types + n);
  memcpy(j->types, types, n * sizeof *types);
  for (size_t i = 0; i < n; i++) {
    const dtype_entry *d = dtype_by_dl(types[i].dtype);
    uint64_t size = d ? d->bytes : 0;
    for (int32_t k = 0; k < types[i].ndim; k++) size *= (uint64_t)types[i].shape[k];
    if (d == NULL || !enif_alloc_binary(size, &j->bins[i])) {
      snprintf(msg, sizeof msg, "cannot allocate result %zu (%llu bytes)", i, (unsigned long long)size);
      result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, msg);
      goto done;
    }
    allocated++;
    tensor_set(&out.t[i], size ? j->bins[i].data : NULL, types[i].ndim, types[i].dtype, j->types[i].shape);
  }
  j->env = jenv;
  j->n = n;
  j->host = r;
  j->guard = NULL;
  j->state = ASYNC_WAITING;
  j->err = NULL;
  j->ref = enif_make_copy(jenv, argv[6]);
  if (!enif_self(env, &j->pid)) {
    bad = 1;
    goto done;
  }
  callbox_cancel_token token = tok ? tok->token : 0;
  guard_res *g = NULL;
  if (tok == NULL && __atomic_load_n(&guards_enabled, __ATOMIC_RELAXED) &&
      enif_get_resource(env, argv[5], guard_type, (void **)&g)) {
    enif_mutex_lock(guard_mu);
    if (g->async_token == 0) {
      callbox_error *e = p_callbox_cancel_token_new(&g->async_token);
      if (e) {
        p_callbox_error_free(e);
        g->async_token = 0;
      }
    }
    if (g->async_token) {
      g->async_active++;
      token = g->async_token;
      j->guard = g;
    }
    enif_mutex_unlock(guard_mu);
  }
  enif_keep_resource(r);
  if (j->guard) enif_keep_resource(j->guard);
  callbox_request req = {
      .size = sizeof req,
      .callback = cb.s,
      .chain = has_chain ? chain.s : NULL,
      .cancel = token,
      .inputs = in.t,
      .num_inputs = in.n,
      .outputs = out.t,
      .num_outputs = n,
      .budget_ns = budget_ns,
  };
  callbox_error *e = p_callbox_request_async(r->handle, &req, async_done, j);
  if (e) { /* refused: done will not be called */
    if (j->guard) {
      enif_mutex_lock(guard_mu);
      j->guard->async_active--;
      enif_mutex_unlock(guard_mu);
      enif_release_resource(j->guard);
    }
    enif_release_resource(r);
    result = error_term(env, e);
    goto done;
  }
  /* Counted once the library took the call (and entered the host, so
   * that a close now waits for it); its end may be counted first. */
  __atomic_add_fetch(&async_started, 1, __ATOMIC_RELAXED);
  {
    async_job *mine = j;
    j = NULL; /* async_done's or async_poll's now */
    jenv = NULL;
    allocated = 0;
    if (!async_poll(env, mine, &result)) result = a_ok;
  }
done:
  if (j) {
    for (size_t i = 0; i < allocated; i++) enif_release_binary(&j->bins[i]);
    enif_free(j);
  }
  if (jenv) enif_free_env(jenv);
  if (types && types != stack) enif_free(types);
  tensors_free(&out);
  tensors_free(&in);
  free_cstr(&cb);
  if (has_chain) free_cstr(&chain);
  return bad ? enif_make_badarg(env) : result;
}

/* call_many(host, chain | nil, callback, [[{binary, dtype, shape}]], token | nil, guard | nil)
 *   -> {:ok, [[{binary, dtype, shape}]]} | {:error, index, e}: the calls in
 * order on one dirty scheduler trip, stopping at the first failure. */
static ERL_NIF_TERM nif_call_many(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  token_res *tok;
  cstr chain, cb;
  int has_chain;
  unsigned len;
  if (!enif_get_list_length(env, argv[3], &len)) return enif_make_badarg(env);
  if (!call_args(env, argv, &r, &tok, &chain, &has_chain, &cb)) return enif_make_badarg(env);
  ERL_NIF_TERM *outs = enif_alloc((len ? len : 1) * sizeof *outs);
  ERL_NIF_TERM head, tail = argv[3], result = 0;
  int failed = -1, bad = 0;
  guard_res *g = guard_for(env, argv[5], tok);
  for (unsigned i = 0; outs && i < len; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    if (i > 0 && !enif_is_current_process_alive(env)) { /* killed: nobody wants the rest */
      bad = 1;
      break;
    }
    int status = one_call(env, r, tok, g, has_chain ? chain.s : NULL, cb.s, head, 0, 0, &outs[i]);
    if (status < 0) {
      bad = 1;
      break;
    }
    if (status == 0) {
      failed = (int)i;
      const ERL_NIF_TERM *err;
      int arity;
      enif_get_tuple(env, outs[i], &arity, &err); /* {:error, fields} */
      result = enif_make_tuple3(env, a_error, enif_make_uint(env, i), err[1]);
      break;
    }
  }
  if (outs && !bad && failed < 0) result = enif_make_tuple2(env, a_ok, enif_make_list_from_array(env, outs, len));
  if (outs) enif_free(outs);
  free_cstr(&cb);
  if (has_chain) free_cstr(&chain);
  if (bad || !outs) return enif_make_badarg(env);
  return result;
}

/* tap(host, chain | nil, callback, [{binary, dtype, shape}]) -> :ok | {:error, e} */
static ERL_NIF_TERM nif_tap(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr chain, cb;
  int has_chain;
  if (!get_host(env, argv[0], &r)) return enif_make_badarg(env);
  if (!get_chain(env, argv[1], &chain, &has_chain)) return enif_make_badarg(env);
  if (!get_cstr(env, argv[2], &cb)) {
    if (has_chain) free_cstr(&chain);
    return enif_make_badarg(env);
  }
  tensor_list in;
  tensors_init(&in);
  char msg[512];
  ERL_NIF_TERM result;
  int got = get_tensors(env, argv[3], 1, &in, msg, sizeof msg);
  if (got < 0) {
    result = enif_make_badarg(env);
  } else if (got == 0) {
    result = local_error(env, CALLBOX_KIND_INVALID_ARGUMENT, cb.s, msg);
  } else {
    callbox_error *e = has_chain ? p_callbox_chain_tap(r->handle, chain.s, cb.s, in.t, in.n)
                                 : p_callbox_tap(r->handle, cb.s, in.t, in.n);
    result = e ? error_term(env, e) : a_ok;
  }
  tensors_free(&in);
  free_cstr(&cb);
  if (has_chain) free_cstr(&chain);
  return result;
}

/* barrier(host, chain | nil) */
static ERL_NIF_TERM nif_barrier(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr chain;
  int has_chain;
  if (!get_host(env, argv[0], &r) || !get_chain(env, argv[1], &chain, &has_chain)) return enif_make_badarg(env);
  callbox_error *e = has_chain ? p_callbox_chain_barrier(r->handle, chain.s) : p_callbox_barrier(r->handle);
  if (has_chain) free_cstr(&chain);
  return e ? error_term(env, e) : a_ok;
}

/* chain_reset(host, chain) */
static ERL_NIF_TERM nif_chain_reset(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr chain;
  if (!get_host(env, argv[0], &r) || !get_cstr(env, argv[1], &chain)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_chain_reset(r->handle, chain.s);
  free_cstr(&chain);
  return e ? error_term(env, e) : a_ok;
}

/* set_default_host(host | nil) */
static ERL_NIF_TERM nif_set_default_host(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r = NULL;
  if (!enif_is_identical(argv[0], a_nil) && !get_host(env, argv[0], &r)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_set_default_host(r ? r->handle : 0);
  return e ? error_term(env, e) : a_ok;
}

/* cancel_token() -> {:ok, token} */
static ERL_NIF_TERM nif_cancel_token(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  REQUIRE_LIB(env);
  callbox_cancel_token tok = 0;
  callbox_error *e = p_callbox_cancel_token_new(&tok);
  if (e) return error_term(env, e);
  token_res *t = enif_alloc_resource(token_type, sizeof *t);
  t->token = tok;
  ERL_NIF_TERM term = enif_make_resource(env, t);
  enif_release_resource(t);
  return enif_make_tuple2(env, a_ok, term);
}

/* cancel(token) */
static ERL_NIF_TERM nif_cancel(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  token_res *t;
  if (!enif_get_resource(env, argv[0], token_type, (void **)&t)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_cancel_token_fire(t->token);
  return e ? error_term(env, e) : a_ok;
}

/* bench_capi(host, callback, [{binary, dtype, shape}], iterations) -> {:ok, ns_per_call} | {:error, e}:
 * the C API's own loop (callbox_call, one after another, on this dirty
 * scheduler, or for a wasmtime callback on a plain thread of its own,
 * with the system's default stack, as a C program's main thread has)
 * inside this VM, so that the benchmark
 * (bench/call_bench.exs) compares a call through the NIF with the same
 * call from C in the same process, round by round. Not for use. */
typedef struct {
  callbox_host host;
  const char *cb;
  tensor_list *in, *out;
  size_t n;
  long iters;
  double ns;
  callbox_error *err;
} bench_job;

typedef struct {
  void (*fn)(void *);
  void *arg;
} thread_job;

static void *thread_main(void *p) {
  thread_job *t = p;
  t->fn(t->arg);
  return NULL;
}

/* Runs fn(arg) on a new thread with the system's default stack, this
 * thread waiting (here if none can start). */
static void run_on_thread(void (*fn)(void *), void *arg) {
  thread_job t = {fn, arg};
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, &t) != 0) {
    fn(arg);
    return;
  }
  pthread_join(th, NULL);
}

static void run_bench(void *p) {
  bench_job *b = p;
  double t0 = mono_ns();
  for (long i = 0; i < b->iters && b->err == NULL; i++)
    b->err = p_callbox_call(b->host, b->cb, b->in->t, b->in->n, b->out->t, b->n);
  b->ns = (mono_ns() - t0) / (double)b->iters;
}

static ERL_NIF_TERM nif_bench_capi(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr cb;
  long iters;
  if (!get_host(env, argv[0], &r) || !enif_get_long(env, argv[3], &iters) || iters <= 0 || !get_cstr(env, argv[1], &cb))
    return enif_make_badarg(env);
  tensor_list in, out;
  tensors_init(&in);
  tensors_init(&out);
  callbox_type stack[STACK_TENSORS], *types = NULL;
  void *bufs[STACK_TENSORS] = {0};
  size_t n = 0;
  char msg[512];
  ERL_NIF_TERM result;
  callbox_callback_info info;
  callbox_error *e = p_callbox_callback_find(r->handle, cb.s, &info);
  int wasmtime = e == NULL && info.engine && strcmp(info.engine, "wasmtime") == 0;
  if (e) p_callbox_error_free(e);
  int got = get_tensors(env, argv[2], 1, &in, msg, sizeof msg);
  if (got <= 0) {
    result = enif_make_badarg(env);
  } else if (derive(env, r, cb.s, &in, stack, STACK_TENSORS, &types, &n, NULL, NULL, &result)) {
    if (n > STACK_TENSORS || !tensors_alloc(&out, n)) {
      result = enif_make_badarg(env);
    } else {
      for (size_t i = 0; i < n; i++) {
        const dtype_entry *d = dtype_by_dl(types[i].dtype);
        uint64_t size = d ? d->bytes : 1;
        for (int32_t k = 0; k < types[i].ndim; k++) size *= (uint64_t)types[i].shape[k];
        bufs[i] = enif_alloc(size ? size : 1);
        tensor_set(&out.t[i], size ? bufs[i] : NULL, types[i].ndim, types[i].dtype, types[i].shape);
      }
      bench_job b = {r->handle, cb.s, &in, &out, n, iters, 0, NULL};
      if (wasmtime)
        run_on_thread(run_bench, &b); /* a plain thread, as a C program's */
      else
        run_bench(&b);
      result = b.err ? error_term(env, b.err) : enif_make_tuple2(env, a_ok, enif_make_double(env, b.ns));
      for (size_t i = 0; i < n; i++) enif_free(bufs[i]);
    }
    if (types && types != stack) enif_free(types);
  }
  tensors_free(&out);
  tensors_free(&in);
  free_cstr(&cb);
  return result;
}

/* bench_handoff(iterations) -> ns per round trip: two threads of this
 * process handing a number back and forth, each spinning as the async
 * route's pollers do. The floor of any route that
 * runs a call on another thread, on this machine at this moment; the
 * benchmark prints it beside the calls. Not for use. */
static int handoff_req, handoff_resp;
static long handoff_iters;

static void handoff_wait(int *flag, int want) {
  for (unsigned i = 1; __atomic_load_n(flag, __ATOMIC_ACQUIRE) != want; i++) {
    if (i < 128) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
}

static void *handoff_peer(void *arg) {
  (void)arg;
  for (int i = 1; i <= (int)handoff_iters; i++) {
    handoff_wait(&handoff_req, i);
    __atomic_store_n(&handoff_resp, i, __ATOMIC_RELEASE);
  }
  return NULL;
}

static ERL_NIF_TERM nif_bench_handoff(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  long iters;
  if (!enif_get_long(env, argv[0], &iters) || iters <= 0 || iters > 10000000) return enif_make_badarg(env);
  handoff_req = handoff_resp = 0;
  handoff_iters = iters;
  pthread_t t;
  if (pthread_create(&t, NULL, handoff_peer, NULL) != 0) return enif_make_badarg(env);
  double t0 = mono_ns();
  for (int i = 1; i <= (int)iters; i++) {
    __atomic_store_n(&handoff_req, i, __ATOMIC_RELEASE);
    handoff_wait(&handoff_resp, i);
  }
  double ns = (mono_ns() - t0) / (double)iters;
  pthread_join(t, NULL);
  return enif_make_double(env, ns);
}

/* async_stats() -> {started, finished, polled}: calls the library took
 * onto its threads (each in its host's calls in flight: a close waits for
 * it), those over (replied to; a call's end may be counted a moment
 * before its start), and those the NIF replied to itself (over within
 * the poll). A refused call counts in neither. */
static ERL_NIF_TERM nif_async_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  return enif_make_tuple3(env, enif_make_uint64(env, __atomic_load_n(&async_started, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&async_finished, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&async_polled, __ATOMIC_RELAXED)));
}

/* set_async_spin(ns): how long call_async polls for the call's end before
 * it returns and lets the reply come as a message (default 20 us; 0: never
 * poll). */
static ERL_NIF_TERM nif_set_async_spin(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 ns;
  if (!enif_get_uint64(env, argv[0], &ns) || ns > 1000000) return enif_make_badarg(env);
  __atomic_store_n(&async_spin_ns, ns, __ATOMIC_RELAXED);
  return a_ok;
}

/* closer_stats() -> {queued_or_closing, closed_by_gc, stack_handoffs, guards_fired} */
static ERL_NIF_TERM nif_closer_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  uint64_t pending = 0, done = 0;
  if (lib_ready) {
    enif_mutex_lock(closer_mu);
    pending = close_len + closing;
    done = closed_by_gc;
    enif_mutex_unlock(closer_mu);
  }
  ERL_NIF_TERM f[4] = {enif_make_uint64(env, pending), enif_make_uint64(env, done),
                       enif_make_uint64(env, __atomic_load_n(&stack_handoffs, __ATOMIC_RELAXED)),
                       enif_make_uint64(env, __atomic_load_n(&guards_fired, __ATOMIC_RELAXED))};
  return enif_make_tuple_from_array(env, f, 4);
}

/* set_guards(true | false): whether calls use their process's guard (default
 * true; false only to measure what the guard costs). */
static ERL_NIF_TERM nif_set_guards(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)env;
  (void)argc;
  __atomic_store_n(&guards_enabled, enif_is_identical(argv[0], a_true) ? 1 : 0, __ATOMIC_RELAXED);
  return a_ok;
}

/* ---- guest logs to an Elixir process ---- */

static ErlNifMutex *log_mu;
static ErlNifPid log_pid;
static int log_set;

/* thread_call_env (declared above one_call) is the environment of the
 * NIF call running on this thread, if any: the caller_env enif_send wants
 * from a scheduler thread (one_call sets it around the library call; it
 * is NULL on the pool's own threads, as enif_send wants there). */

static void on_log(void *user, int32_t level, const char *callback, const char *message) {
  (void)user;
  enif_mutex_lock(log_mu);
  int set = log_set;
  ErlNifPid pid = log_pid;
  enif_mutex_unlock(log_mu);
  if (!set) return;
  ErlNifEnv *env = enif_alloc_env();
  ERL_NIF_TERM msg = enif_make_tuple4(env, enif_make_atom(env, "callbox_log"), enif_make_int(env, level),
                                      bin_of(env, callback), bin_of(env, message));
  enif_send(thread_call_env, &pid, env, msg);
  enif_free_env(env);
}

/* set_log_process(pid | nil, min_level) */
static ERL_NIF_TERM nif_set_log_process(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  ErlNifPid pid;
  int level;
  int clear = enif_is_identical(argv[0], a_nil);
  if ((!clear && !enif_get_local_pid(env, argv[0], &pid)) || !enif_get_int(env, argv[1], &level))
    return enif_make_badarg(env);
  enif_mutex_lock(log_mu);
  log_set = !clear;
  if (!clear) log_pid = pid;
  enif_mutex_unlock(log_mu);
  callbox_error *e = p_callbox_set_log_callback(clear ? NULL : on_log, NULL, level);
  return e ? error_term(env, e) : a_ok;
}

/* ---- loading ---- */

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
  (void)priv;
  (void)info;
  a_ok = enif_make_atom(env, "ok");
  a_error = enif_make_atom(env, "error");
  a_nil = enif_make_atom(env, "nil");
  a_true = enif_make_atom(env, "true");
  a_false = enif_make_atom(env, "false");
  a_continue = enif_make_atom(env, "continue");
  host_type = enif_open_resource_type(env, NULL, "callbox_host", host_dtor, ERL_NIF_RT_CREATE, NULL);
  token_type = enif_open_resource_type(env, NULL, "callbox_cancel_token", token_dtor, ERL_NIF_RT_CREATE, NULL);
  ErlNifResourceTypeInit guard_init = {.dtor = guard_dtor, .stop = NULL, .down = guard_down};
  guard_type = enif_open_resource_type_x(env, "callbox_call_guard", &guard_init, ERL_NIF_RT_CREATE, NULL);
  arena_type = enif_open_resource_type(env, NULL, "callbox_result_arena", arena_dtor, ERL_NIF_RT_CREATE, NULL);
  closer_mu = enif_mutex_create("callbox_closer");
  closer_cv = enif_cond_create("callbox_closer");
  log_mu = enif_mutex_create("callbox_log");
  guard_mu = enif_mutex_create("callbox_guard");
  slice_clock_init();
  return host_type && token_type && guard_type && arena_type && closer_mu && closer_cv && log_mu && guard_mu ? 0 : 1;
}

/* The library holds the Go runtime, which cannot be unloaded: this NIF
 * library refuses upgrades (it is loaded once per VM). */
static int upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info) {
  (void)env;
  (void)priv;
  (void)old_priv;
  (void)info;
  return 1;
}

#define DIRTY ERL_NIF_DIRTY_JOB_CPU_BOUND
/* NIFs that mostly wait (a barrier on taps, a chain reset, a close that
 * waits for calls in flight) run on dirty I/O schedulers: a dirty CPU
 * scheduler held while waiting is one a call cannot have. */
#define DIRTY_WAIT ERL_NIF_DIRTY_JOB_IO_BOUND
static ErlNifFunc funcs[] = {
    {"init", 1, nif_init_lib, DIRTY},
    {"version", 0, nif_version, 0},
    {"dtypes", 0, nif_dtypes, 0},
    {"open", 1, nif_open, DIRTY},
    {"open_config", 3, nif_open_config, DIRTY},
    {"close", 1, nif_close, DIRTY_WAIT},
    {"callbacks", 1, nif_callbacks, DIRTY},
    {"callback", 2, nif_callback, DIRTY},
    {"output_types", 3, nif_output_types, DIRTY},
    {"call", 7, nif_call, 0},
    {"call_stats", 0, nif_call_stats, 0},
    {"call_many", 6, nif_call_many, DIRTY},
    {"call_async", 8, nif_call_async, 0},
    {"new_guard", 0, nif_new_guard, 0},
    {"tap", 4, nif_tap, DIRTY},
    {"barrier", 2, nif_barrier, DIRTY_WAIT},
    {"chain_reset", 2, nif_chain_reset, DIRTY_WAIT},
    {"set_default_host", 1, nif_set_default_host, DIRTY},
    {"cancel_token", 0, nif_cancel_token, DIRTY},
    {"cancel", 1, nif_cancel, DIRTY},
    {"closer_stats", 0, nif_closer_stats, 0},
    {"async_stats", 0, nif_async_stats, 0},
    {"set_async_spin", 1, nif_set_async_spin, 0},
    {"bench_capi", 4, nif_bench_capi, DIRTY},
    {"bench_handoff", 1, nif_bench_handoff, DIRTY},
    {"set_guards", 1, nif_set_guards, 0},
    {"set_log_process", 2, nif_set_log_process, DIRTY},
};

ERL_NIF_INIT(Elixir.Callbox.Native, funcs, load, NULL, upgrade, NULL)
