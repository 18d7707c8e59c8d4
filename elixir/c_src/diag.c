/*
 * diag.c - NIFs not for use: the benchmark's (bench_capi/4,
 * bench_handoff/1), the counters tests read (async_stats/0,
 * closer_stats/0) and the knobs they turn (set_async_spin/1,
 * set_guards/1).
 */
#include "nif.h"

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

ERL_NIF_TERM nif_bench_capi(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

ERL_NIF_TERM nif_bench_handoff(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_async_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  return enif_make_tuple3(env, enif_make_uint64(env, __atomic_load_n(&async_started, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&async_finished, __ATOMIC_RELAXED)),
                          enif_make_uint64(env, __atomic_load_n(&async_polled, __ATOMIC_RELAXED)));
}

/* set_async_spin(ns): how long call_async polls for the call's end before
 * it returns and lets the reply come as a message (default 20 us; 0: never
 * poll). */
ERL_NIF_TERM nif_set_async_spin(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  ErlNifUInt64 ns;
  if (!enif_get_uint64(env, argv[0], &ns) || ns > 1000000) return enif_make_badarg(env);
  __atomic_store_n(&async_spin_ns, ns, __ATOMIC_RELAXED);
  return a_ok;
}

/* closer_stats() -> {queued_or_closing, closed_by_gc, stack_handoffs, guards_fired} */
ERL_NIF_TERM nif_closer_stats(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  uint64_t pending = 0, done = 0;
  if (lib_ready) closer_counts(&pending, &done);
  ERL_NIF_TERM f[4] = {enif_make_uint64(env, pending), enif_make_uint64(env, done),
                       enif_make_uint64(env, __atomic_load_n(&stack_handoffs, __ATOMIC_RELAXED)),
                       enif_make_uint64(env, __atomic_load_n(&guards_fired, __ATOMIC_RELAXED))};
  return enif_make_tuple_from_array(env, f, 4);
}

/* set_guards(true | false): whether calls use their process's guard (default
 * true; false only to measure what the guard costs). */
ERL_NIF_TERM nif_set_guards(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)env;
  (void)argc;
  __atomic_store_n(&guards_enabled, enif_is_identical(argv[0], a_true) ? 1 : 0, __ATOMIC_RELAXED);
  return a_ok;
}
