/*
 * hosts.c - hosts: the host resource and its destructor, the closer
 * thread that closes the hosts collected without close/1, and the NIFs
 * on a host as a whole: open/1, open_config/3, close/1, callbacks/1,
 * callback/2, set_default_host/1.
 */
#include "nif.h"

static ErlNifResourceType *host_type;

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

/* Starts the closer thread (init/1): 1, or 0 when it cannot start. */
int closer_start(void) {
  pthread_t closer;
  return pthread_create(&closer, NULL, closer_main, NULL) == 0 && pthread_detach(closer) == 0;
}

/* The hosts queued for the closer thread or being closed by it, and
 * those it has closed (closer_stats/0). */
void closer_counts(uint64_t *pending, uint64_t *done) {
  enif_mutex_lock(closer_mu);
  *pending = close_len + closing;
  *done = closed_by_gc;
  enif_mutex_unlock(closer_mu);
}

/* A host's destructor never closes the host itself (callbox_close waits
 * for the host's taps, and a destructor may run on a normal scheduler):
 * it queues the handle for the closer thread. */
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

int hosts_load(ErlNifEnv *env) {
  host_type = enif_open_resource_type(env, NULL, "callbox_host", host_dtor, ERL_NIF_RT_CREATE, NULL);
  closer_mu = enif_mutex_create("callbox_closer");
  closer_cv = enif_cond_create("callbox_closer");
  return host_type && closer_mu && closer_cv;
}

int get_host(ErlNifEnv *env, ERL_NIF_TERM t, host_res **out) {
  return enif_get_resource(env, t, host_type, (void **)out);
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
ERL_NIF_TERM nif_open(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_open_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

/* close(host) */
ERL_NIF_TERM nif_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_callbacks(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_callback(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

/* set_default_host(host | nil) */
ERL_NIF_TERM nif_set_default_host(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r = NULL;
  if (!enif_is_identical(argv[0], a_nil) && !get_host(env, argv[0], &r)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_set_default_host(r ? r->handle : 0);
  return e ? error_term(env, e) : a_ok;
}
