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
 * async.c). Chain calls and inline_us: 0 go there at once.
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
 *
 * The sources, by what they own (nif.h names what crosses between them):
 *   callbox_nif.c  the NIF table, load and upgrade
 *   lib.c          libcallbox: dlopen, its entries, kinds and dtypes, logs
 *   terms.c        atoms, errors, strings, dtype and shape terms, tensors
 *   hosts.c        the host resource, the closer thread, open and close
 *   cancel.c       cancel tokens and guards
 *   types_cache.c  a host's cache of derived result types
 *   results.c      result binaries and arenas, the slice clock
 *   call.c         call/7 and call_many/6 (one_call), call_stats/0
 *   async.c        call_async/8
 *   chain.c        tap/4, barrier/2, chain_reset/2
 *   diag.c         benchmarks, test counters and knobs
 */
#include "nif.h"

/* ---- loading ---- */

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
  (void)priv;
  (void)info;
  terms_load(env);
  int ok = hosts_load(env);
  ok &= cancel_load(env);
  ok &= results_load(env);
  ok &= lib_load();
  return ok ? 0 : 1;
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
