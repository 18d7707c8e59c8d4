/*
 * call.c - calls the NIF runs itself: call/7 (an unordered call inline on
 * the caller's normal scheduler, within a slice) and call_many/6 (on a
 * dirty scheduler, under the process's guard), both through one_call,
 * with call_stats/0, the counters of the routes calls took.
 */
#include "nif.h"

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

/* Calls call_many handed to a library thread for its stack. */
uint64_t stack_handoffs;

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

/* The environment of the NIF call running on this thread, if any: the
 * caller_env enif_send wants from a scheduler thread (lib.c's guest log
 * forwarding; one_call sets it around the library call). */
__thread TLS_IE ErlNifEnv *thread_call_env;

/* Counters of the routes calls took (call_stats/0). */
static uint64_t stat_inline, stat_gave_up, stat_dirty, stat_inline_max_ns, stat_gave_up_max_ns, stat_gave_up_last_ns;

static void stat_max(uint64_t *max, uint64_t v) {
  uint64_t m = __atomic_load_n(max, __ATOMIC_RELAXED);
  while (v > m && !__atomic_compare_exchange_n(max, &m, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
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
      if (g) j.token = guard_enter(g);
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
      guard_leave(g);
    }
    if (j.err) {
      *result = error_term(env, j.err);
      goto done;
    }
    if (budget_ns && (j.expired || dirty < 0)) {
      cache_mark(r, cb, &in, j.expired);
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
int call_args(ErlNifEnv *env, const ERL_NIF_TERM argv[], host_res **r, token_res **tok, cstr *chain, int *has_chain,
              cstr *cb) {
  *tok = NULL;
  if (!get_host(env, argv[0], r)) return 0;
  if (!enif_is_identical(argv[4], a_nil) && !get_token(env, argv[4], tok)) return 0;
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
ERL_NIF_TERM nif_call(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

/* call_many(host, chain | nil, callback, [[{binary, dtype, shape}]], token | nil, guard | nil)
 *   -> {:ok, [[{binary, dtype, shape}]]} | {:error, index, e}: the calls in
 * order on one dirty scheduler trip, stopping at the first failure. */
ERL_NIF_TERM nif_call_many(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_call_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
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
                          enif_make_atom(env, slice_clock_tsc() ? "tsc" : "monotonic"),
                          enif_make_uint64(env, __atomic_load_n(&arenas_live, __ATOMIC_RELAXED))};
  ERL_NIF_TERM map;
  enif_make_map_from_arrays(env, keys, vals, 9, &map);
  return map;
}
