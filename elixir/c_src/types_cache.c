/*
 * types_cache.c - the result types of a call: derived from the library
 * (callbox_callback_find, callbox_output_types) and kept in its host's
 * cache (derive), which also counts down the calls to send straight to a
 * library thread (cache_mark); output_types/3.
 */
#include "nif.h"

/* A host's cache of derived result types: callbox_callback_find and
 * callbox_output_types cost about 1 us together per call, as much as a
 * small call itself; a host's callbacks never change, so the types of a
 * (callback, input types and shapes) pair are derived once. A few slots
 * per host, each allocated when first used, replaced round-robin. */
#define CACHE_NAME 128
#define CACHE_KEY 64
#define CACHE_OUTS 4
struct cache_entry {
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
};

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

/* After a call of in's types outran its inline slice (slow set) or fit in it
 * after earlier ones had not: the k-th attempt in a row that outran it
 * sends the next 2^k calls, at most INLINE_BACKOFF, straight to a library
 * thread; one that fits clears the count. So a callback that is slow
 * at those types spends a slice once per 1024 calls, and one slow only
 * once (its first call instantiating the module, say) returns to the
 * inline route two calls later. */
#define INLINE_BACKOFF 1024
void cache_mark(host_res *r, const char *callback, const tensor_list *in, int slow) {
  int64_t key[CACHE_KEY];
  size_t key_len = cache_key(in, key);
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

/* The result types of callback at in's types (*n_out of them, at
 * *types_out: stack, caller storage for up to cap, or enif_alloc'd when
 * there are more), and (caller_stack, optional) the native stack a
 * thread calling it must have (callbox_callback_limits: 0 when any
 * thread will do), from the cache or derived and cached: 1, or 0 with
 * *err set. dirty (optional): 1 when the (callback, types) pair is one
 * whose calls go straight to a library thread for now, -1 when it may
 * run inline after attempts that outran their slice (cache_mark). */
int derive(ErlNifEnv *env, host_res *r, const char *callback, tensor_list *in, callbox_type *stack, size_t cap,
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
ERL_NIF_TERM nif_output_types(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]) {
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
