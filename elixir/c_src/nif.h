/*
 * nif.h - private to the NIF's sources (the .c files beside it): what crosses
 * between them. The includes every file needs, the thread-local model,
 * libcallbox's entries (looked up by lib.c), the resources' structs, the
 * atoms, and, under the file that defines them, the few functions and
 * counters another file uses. Everything else is static in its file.
 * The NIF is built with -fvisibility=hidden: nothing here is exported
 * (only nif_init, ERL_NIF_INIT's).
 */
#ifndef CALLBOX_NIF_H
#define CALLBOX_NIF_H

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

/* The NIF's thread-local variables use the initial-exec model: a few
 * words of the static TLS that glibc keeps spare for libraries loaded
 * later, read with one instruction instead of a __tls_get_addr call per
 * access (libcallbox's Go runtime does the same). */
#if defined(__GNUC__) || defined(__clang__)
#define TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TLS_IE
#endif

/* ---- the library's entries, looked up with dlsym (lib.c) ---- */

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
#define DECLARE(name) extern __typeof__(name) *p_##name;
ENTRIES(DECLARE)
#undef DECLARE

/* ---- lib.c: libcallbox, its kinds and dtypes ---- */

extern int lib_ready;
int lib_load(void);
ERL_NIF_TERM not_loaded(ErlNifEnv *env);
const char *lib_kind(int kind, int *code);

#define REQUIRE_LIB(env) \
  do {                   \
    if (!lib_ready) return not_loaded(env); \
  } while (0)

/* A dtype of the library's (callbox_dtypes), with its terms. */
typedef struct {
  ERL_NIF_TERM atom; /* :f32 */
  ERL_NIF_TERM kind; /* Nx's type {kind, bits}: :f of {:f, 32} */
  int bits;          /* 32 of {:f, 32} */
  callbox_dtype dl;
  uint32_t bytes;
  int32_t xla;
  const char *name;
} dtype_entry;
const dtype_entry *dtype_by_atom(ERL_NIF_TERM atom);
const dtype_entry *dtype_by_type(ErlNifEnv *env, ERL_NIF_TERM type);
const dtype_entry *dtype_by_dl(callbox_dtype dl);

/* ---- terms.c: atoms, errors, strings, dtypes and shapes, tensor lists ---- */

extern ERL_NIF_TERM a_ok, a_error, a_nil, a_true, a_false, a_continue;
void terms_load(ErlNifEnv *env);

ERL_NIF_TERM bin_of(ErlNifEnv *env, const char *s);
ERL_NIF_TERM error_term(ErlNifEnv *env, callbox_error *e);
ERL_NIF_TERM local_error(ErlNifEnv *env, int kind, const char *callback, const char *msg);

/* A NUL-terminated copy of a binary (or an iolist/charlist-free binary
 * only): buf when it fits, else enif_alloc'd (*owned set). */
typedef struct {
  char *s;
  int owned;
  char buf[256];
} cstr;
int get_cstr(ErlNifEnv *env, ERL_NIF_TERM t, cstr *out);
void free_cstr(cstr *c);
int get_chain(ErlNifEnv *env, ERL_NIF_TERM t, cstr *c, int *has);

ERL_NIF_TERM type_tuple(ErlNifEnv *env, const dtype_entry *d);
ERL_NIF_TERM shape_tuple(ErlNifEnv *env, int32_t ndim, const int64_t *shape);

#define STACK_TENSORS 8

typedef struct {
  size_t n;
  callbox_tensor *t;
  int64_t *shapes; /* n * CALLBOX_MAX_RANK */
  callbox_tensor t_stack[STACK_TENSORS];
  int64_t shapes_stack[STACK_TENSORS * CALLBOX_MAX_RANK];
} tensor_list;
int tensors_alloc(tensor_list *l, size_t n);
void tensors_free(tensor_list *l);
int get_tensors(ErlNifEnv *env, ERL_NIF_TERM list, int with_data, tensor_list *l, char *msg, size_t msg_cap);

/* Writes a whole CPU tensor: every field, so tensors_alloc zeroes
 * nothing (a memset call for a tensor or two costs more than the stores). */
static inline void tensor_set(callbox_tensor *t, void *data, int32_t ndim, callbox_dtype dtype, int64_t *shape) {
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
static inline void tensors_init(tensor_list *l) {
  l->n = 0;
  l->t = NULL;
  l->shapes = NULL;
}

/* ---- hosts.c: the host resource, the closer thread ---- */

#define CACHE_SLOTS 8 /* a host's derived-type cache (types_cache.c) */
typedef struct cache_entry cache_entry;

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
int hosts_load(ErlNifEnv *env);
int get_host(ErlNifEnv *env, ERL_NIF_TERM t, host_res **out);
int closer_start(void);
void closer_counts(uint64_t *pending, uint64_t *done);

/* ---- cancel.c: cancel tokens, guards ---- */

typedef struct {
  callbox_cancel_token token;
} token_res;
typedef struct guard_res guard_res;
extern uint64_t guards_fired;
extern int guards_enabled;

int cancel_load(ErlNifEnv *env);
int get_token(ErlNifEnv *env, ERL_NIF_TERM t, token_res **out);
guard_res *guard_for(ErlNifEnv *env, ERL_NIF_TERM arg, token_res *tok);
callbox_cancel_token guard_enter(guard_res *g);
void guard_leave(guard_res *g);
guard_res *guard_async_enter(ErlNifEnv *env, ERL_NIF_TERM arg, token_res *tok, callbox_cancel_token *token);
void guard_async_leave(guard_res *g);

/* ---- types_cache.c: a host's derived result types ---- */

int derive(ErlNifEnv *env, host_res *r, const char *callback, tensor_list *in, callbox_type *stack, size_t cap,
           callbox_type **types_out, size_t *n_out, uint64_t *caller_stack, int *dirty, ERL_NIF_TERM *err);
void cache_mark(host_res *r, const char *callback, const tensor_list *in, int slow);

/* ---- results.c: result memory, the slice clock ---- */

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
extern uint64_t arenas_live;

int results_load(ErlNifEnv *env);
unsigned char *result_alloc(ErlNifEnv *env, size_t size, result_buf *o);
ERL_NIF_TERM result_term(ErlNifEnv *env, result_buf *o);
void result_discard(result_buf *o);
uint64_t slice_now(int *tsc);
uint64_t slice_since(uint64_t start, int tsc);
int slice_clock_tsc(void);

/* The monotonic clock, in ns. */
static inline double mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- call.c: calls on the caller's scheduler and call_many ---- */

extern __thread TLS_IE ErlNifEnv *thread_call_env;
extern uint64_t stack_handoffs;
int call_args(ErlNifEnv *env, const ERL_NIF_TERM argv[], host_res **r, token_res **tok, cstr *chain, int *has_chain,
              cstr *cb);

/* ---- async.c: calls on a thread of the library's ---- */

extern uint64_t async_started, async_finished, async_polled, async_spin_ns;

/* ---- the NIFs, by file (callbox_nif.c's funcs[] names them) ---- */

#define NIF(name) ERL_NIF_TERM name(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
/* lib.c */
NIF(nif_init_lib);
NIF(nif_version);
NIF(nif_dtypes);
NIF(nif_set_log_process);

/* hosts.c */
NIF(nif_open);
NIF(nif_open_config);
NIF(nif_close);
NIF(nif_callbacks);
NIF(nif_callback);
NIF(nif_set_default_host);

/* cancel.c */
NIF(nif_new_guard);
NIF(nif_cancel_token);
NIF(nif_cancel);

/* types_cache.c */
NIF(nif_output_types);

/* call.c */
NIF(nif_call);
NIF(nif_call_many);
NIF(nif_call_stats);

/* async.c */
NIF(nif_call_async);

/* chain.c */
NIF(nif_tap);
NIF(nif_barrier);
NIF(nif_chain_reset);

/* diag.c */
NIF(nif_bench_capi);
NIF(nif_bench_handoff);
NIF(nif_async_stats);
NIF(nif_set_async_spin);
NIF(nif_closer_stats);
NIF(nif_set_guards);
#undef NIF

#endif
