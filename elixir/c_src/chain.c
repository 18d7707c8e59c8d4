/*
 * chain.c - ordering: tap/4 (a call whose results nobody waits for),
 * barrier/2 (waiting for a host's or a chain's taps) and chain_reset/2.
 */
#include "nif.h"

/* tap(host, chain | nil, callback, [{binary, dtype, shape}]) -> :ok | {:error, e} */
ERL_NIF_TERM nif_tap(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_barrier(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
ERL_NIF_TERM nif_chain_reset(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
  (void)argc;
  REQUIRE_LIB(env);
  host_res *r;
  cstr chain;
  if (!get_host(env, argv[0], &r) || !get_cstr(env, argv[1], &chain)) return enif_make_badarg(env);
  callbox_error *e = p_callbox_chain_reset(r->handle, chain.s);
  free_cstr(&chain);
  return e ? error_term(env, e) : a_ok;
}
