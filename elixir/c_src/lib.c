/*
 * lib.c - libcallbox itself: dlopen and dlsym of its entries (init/1), the
 * kind and dtype tables it reports (read once, and looked up), version/0,
 * dtypes/0, and guest logs forwarded to an Elixir process
 * (set_log_process/2).
 */
#include "nif.h"

#define DEFINE(name) __typeof__(name) *p_##name;
ENTRIES(DEFINE)
#undef DEFINE

int lib_ready;
static char lib_problem[4608] = "libcallbox is not loaded (Callbox.Native.init/1 was not called)";

/* ---- the kind table: callbox_kinds, read once ---- */

#define MAX_KINDS 64
static callbox_kind_info kinds[MAX_KINDS];
static size_t nkinds;

/* ---- the dtype table: callbox_dtypes, read once ---- */

#define MAX_DTYPES 64
static dtype_entry dtypes[MAX_DTYPES];
static size_t num_dtypes;

/* The name and code of kind: the library's (callbox_kinds). Without a
 * library there is none to ask, and the only error then is that it is
 * not loaded: FailedPrecondition, code FAILED_PRECONDITION (9), the one
 * kind this binding names itself. */
const char *lib_kind(int kind, int *code) {
  const char *kind_name = "FailedPrecondition";
  *code = 9;
  for (size_t i = 0; i < nkinds; i++) {
    if (kinds[i].kind == kind) {
      kind_name = kinds[i].name;
      *code = kinds[i].code;
    }
  }
  return kind_name;
}

ERL_NIF_TERM not_loaded(ErlNifEnv *env) {
  return local_error(env, CALLBOX_KIND_FAILED_PRECONDITION, "", lib_problem);
}

const dtype_entry *dtype_by_atom(ERL_NIF_TERM atom) {
  for (size_t i = 0; i < num_dtypes; i++)
    if (enif_is_identical(dtypes[i].atom, atom)) return &dtypes[i];
  return NULL;
}

const dtype_entry *dtype_by_type(ErlNifEnv *env, ERL_NIF_TERM type) {
  const ERL_NIF_TERM *el;
  int arity, bits;
  if (!enif_get_tuple(env, type, &arity, &el) || arity != 2 || !enif_get_int(env, el[1], &bits)) return NULL;
  for (size_t i = 0; i < num_dtypes; i++)
    if (dtypes[i].bits == bits && enif_is_identical(dtypes[i].kind, el[0])) return &dtypes[i];
  return NULL;
}

const dtype_entry *dtype_by_dl(callbox_dtype dl) {
  for (size_t i = 0; i < num_dtypes; i++)
    if (dtypes[i].dl.code == dl.code && dtypes[i].dl.bits == dl.bits) return &dtypes[i];
  return NULL;
}

/* ---- init/1, version/0, dtypes/0 ---- */

ERL_NIF_TERM nif_init_lib(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
  if (!closer_start()) {
    snprintf(lib_problem, sizeof lib_problem, "cannot start the host closer thread");
    return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  }
  lib_ready = 1;
  return a_ok;
}

ERL_NIF_TERM nif_version(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  (void)argv;
  if (!lib_ready) return enif_make_tuple2(env, a_error, bin_of(env, lib_problem));
  return enif_make_tuple2(env, a_ok, bin_of(env, p_callbox_version()));
}

/* [{name_atom, bytes, dlpack_code, bits, xla}] */
ERL_NIF_TERM nif_dtypes(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

/* ---- guest logs to an Elixir process ---- */

static ErlNifMutex *log_mu;
static ErlNifPid log_pid;
static int log_set;

/* thread_call_env (call.c) is the environment of the
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
ERL_NIF_TERM nif_set_log_process(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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

int lib_load(void) {
  log_mu = enif_mutex_create("callbox_log");
  return log_mu != NULL;
}
