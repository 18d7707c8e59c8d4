/*
 * async.c - call_async/8: a call handed to a thread of the library's
 * (callbox_request_async) from the caller's normal scheduler, its job,
 * the poll for a short call's end, and the reply.
 */
#include "nif.h"

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
uint64_t async_spin_ns = 20000;

uint64_t async_started; /* calls handed to a library thread (call_async/8; call_stats/0) */
uint64_t async_finished, async_polled; /* async_stats/0, with async_started */

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
  if (j->guard) guard_async_leave(j->guard);
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
ERL_NIF_TERM nif_call_async(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
  j->guard = guard_async_enter(env, argv[5], tok, &token);
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
      guard_async_leave(j->guard);
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
