/*
 * cancel.c - stopping a call: cancel tokens (the token resource,
 * cancel_token/0, cancel/1) and guards, a process's monitor that fires
 * the token of its call in flight when it dies (the guard resource,
 * new_guard/0), with what a call does to run under its process's guard.
 */
#include "nif.h"

static ErlNifResourceType *token_type, *guard_type;

/* A process's guard: a monitor on the process, made once (new_guard/0, on
 * its first call; Callbox keeps it in the process dictionary), that fires
 * the cancel token of the process's call in flight, if any, when the
 * process dies, so a killed caller's guest stops within milliseconds
 * instead of running to its timeout on a dirty scheduler nobody waits
 * for. (A monitor per call costs more than the call: the monitor and
 * demonitor signals make the process take another scheduling round.) */
struct guard_res {
  callbox_cancel_token token;
  int active; /* under guard_mu */
  int fired;
  /* The process's own token for its asynchronous calls (call_async/6),
   * made on its first one, and how many are in flight (under guard_mu). */
  callbox_cancel_token async_token;
  int async_active;
};

static ErlNifMutex *guard_mu;

uint64_t guards_fired;
int guards_enabled = 1; /* set_guards/1: for measuring what a guard costs */

static __thread TLS_IE callbox_cancel_token thread_token; /* this thread's token for guards */

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

int cancel_load(ErlNifEnv *env) {
  token_type = enif_open_resource_type(env, NULL, "callbox_cancel_token", token_dtor, ERL_NIF_RT_CREATE, NULL);
  ErlNifResourceTypeInit guard_init = {.dtor = guard_dtor, .stop = NULL, .down = guard_down};
  guard_type = enif_open_resource_type_x(env, "callbox_call_guard", &guard_init, ERL_NIF_RT_CREATE, NULL);
  guard_mu = enif_mutex_create("callbox_guard");
  return token_type && guard_type && guard_mu;
}

/* A cancel token resource (cancel_token/0's). */
int get_token(ErlNifEnv *env, ERL_NIF_TERM t, token_res **out) {
  return enif_get_resource(env, t, token_type, (void **)out);
}

/* The guard a call runs under: the process's guard resource (argument
 * guard, or nil), when the caller passed no token of its own and the
 * thread has a token; NULL otherwise. */
guard_res *guard_for(ErlNifEnv *env, ERL_NIF_TERM arg, token_res *tok) {
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

/* A call_many call under guard g (guard_for's) begins: the guard
 * covers it, with this thread's token, which the call is to run with. */
callbox_cancel_token guard_enter(guard_res *g) {
  enif_mutex_lock(guard_mu);
  g->token = thread_token;
  g->active = 1;
  enif_mutex_unlock(guard_mu);
  return thread_token;
}

/* The call guard_enter began is over. */
void guard_leave(guard_res *g) {
  enif_mutex_lock(guard_mu);
  g->active = 0;
  enif_mutex_unlock(guard_mu);
}

/* The guard an asynchronous call runs under (call_async/8): the
 * process's guard resource (argument arg, or nil) when the caller passed
 * no token of its own, *token set to the guard's async token (made on
 * the process's first such call), which now counts the call in flight;
 * NULL (*token unchanged) otherwise. */
guard_res *guard_async_enter(ErlNifEnv *env, ERL_NIF_TERM arg, token_res *tok, callbox_cancel_token *token) {
  guard_res *g = NULL, *guarded = NULL;
  if (tok == NULL && __atomic_load_n(&guards_enabled, __ATOMIC_RELAXED) &&
      enif_get_resource(env, arg, guard_type, (void **)&g)) {
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
      *token = g->async_token;
      guarded = g;
    }
    enif_mutex_unlock(guard_mu);
  }
  return guarded;
}

/* An asynchronous call guard_async_enter counted is over (or refused). */
void guard_async_leave(guard_res *g) {
  enif_mutex_lock(guard_mu);
  g->async_active--;
  enif_mutex_unlock(guard_mu);
}

/* new_guard() -> guard (monitoring the caller) */
ERL_NIF_TERM nif_new_guard(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

/* cancel_token() -> {:ok, token} */
ERL_NIF_TERM nif_cancel_token(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_cancel(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  token_res *t;
  if (!enif_get_resource(env, argv[0], token_type, (void **)&t)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_cancel_token_fire(t->token);
  return e ? error_term(env, e) : a_ok;
}
