/*
 * terms.c - Erlang terms to and from C: the atoms, error tuples (the
 * library's and the NIF's own), strings, a dtype's and a shape's terms,
 * and the lists of {binary, dtype, shape} that become callbox_tensors.
 */
#include "nif.h"

/* ---- atoms ---- */

ERL_NIF_TERM a_ok, a_error, a_nil, a_true, a_false, a_continue;

void terms_load(ErlNifEnv *env) {
  a_ok = enif_make_atom(env, "ok");
  a_error = enif_make_atom(env, "error");
  a_nil = enif_make_atom(env, "nil");
  a_true = enif_make_atom(env, "true");
  a_false = enif_make_atom(env, "false");
  a_continue = enif_make_atom(env, "continue");
}

/* ---- errors and strings ---- */

ERL_NIF_TERM bin_of(ErlNifEnv *env, const char *s) {
  ERL_NIF_TERM t;
  size_t n = s ? strlen(s) : 0;
  unsigned char *p = enif_make_new_binary(env, n, &t);
  if (n) memcpy(p, s, n);
  return t;
}

/* frames_term is a failure's guest frames (C API 1.12), innermost first:
 * a list of {func, module, file, line, column, func_index, offset}. */
static ERL_NIF_TERM frames_term(ErlNifEnv *env, const callbox_error *e) {
  ERL_NIF_TERM list = enif_make_list(env, 0);
  if (e->struct_size < offsetof(callbox_error, frame_count) + sizeof(e->frame_count) || e->frames == NULL) return list;
  for (uint64_t i = e->frame_count; i > 0; i--) {
    const callbox_frame *f = &e->frames[i - 1];
    ERL_NIF_TERM frame = enif_make_tuple7(env, bin_of(env, f->func), bin_of(env, f->module), bin_of(env, f->file),
                                          enif_make_uint(env, f->line), enif_make_uint(env, f->column),
                                          enif_make_uint(env, f->func_index), enif_make_uint64(env, f->offset));
    list = enif_make_list_cell(env, frame, list);
  }
  return list;
}

/* An error tuple: {:error, {kind, code, guest_status, seq, kind_name,
 * callback, chain, message, guest_message, text, failed_callback,
 * failed_seq, failed_message, frames}} (Callbox.Error.from_native/1). */
ERL_NIF_TERM error_term(ErlNifEnv *env, callbox_error *e) {
  int has_failed = e->struct_size >= offsetof(callbox_error, failed_message) + sizeof(e->failed_message);
  ERL_NIF_TERM fields[14] = {
      enif_make_int(env, e->kind),
      enif_make_int(env, e->code),
      enif_make_int(env, e->guest_status),
      enif_make_uint64(env, e->seq),
      bin_of(env, e->kind_name),
      bin_of(env, e->callback),
      bin_of(env, e->chain),
      bin_of(env, e->message),
      bin_of(env, e->guest_message),
      bin_of(env, e->text),
      bin_of(env, has_failed ? e->failed_callback : ""),
      enif_make_uint64(env, has_failed ? e->failed_seq : 0),
      bin_of(env, has_failed ? e->failed_message : ""),
      frames_term(env, e),
  };
  p_callbox_error_free(e);
  return enif_make_tuple2(env, a_error, enif_make_tuple_from_array(env, fields, 14));
}

/* An error made here (kind INVALID_ARGUMENT or FAILED_PRECONDITION), in
 * the library's shape. */
ERL_NIF_TERM local_error(ErlNifEnv *env, int kind, const char *callback, const char *msg) {
  /* The kind's code and name are the library's (lib_kind). */
  int code;
  const char *kind_name = lib_kind(kind, &code);
  char text[1024];
  if (callback && *callback)
    snprintf(text, sizeof text, "%s: callback \"%s\": %s", kind_name, callback, msg);
  else
    snprintf(text, sizeof text, "%s: %s", kind_name, msg);
  ERL_NIF_TERM fields[14] = {
      enif_make_int(env, kind), enif_make_int(env, code), enif_make_int(env, 0), enif_make_uint64(env, 0),
      bin_of(env, kind_name),   bin_of(env, callback),    bin_of(env, ""),      bin_of(env, msg),
      bin_of(env, ""),          bin_of(env, text),        bin_of(env, ""),      enif_make_uint64(env, 0),
      bin_of(env, ""),          enif_make_list(env, 0),
  };
  return enif_make_tuple2(env, a_error, enif_make_tuple_from_array(env, fields, 14));
}

int get_cstr(ErlNifEnv *env, ERL_NIF_TERM t, cstr *out) {
  ErlNifBinary b;
  out->owned = 0;
  if (!enif_inspect_binary(env, t, &b)) return 0;
  if (memchr(b.data, 0, b.size) != NULL) return 0;
  if (b.size < sizeof out->buf) {
    out->s = out->buf;
  } else {
    out->s = enif_alloc(b.size + 1);
    if (!out->s) return 0;
    out->owned = 1;
  }
  memcpy(out->s, b.data, b.size);
  out->s[b.size] = 0;
  return 1;
}

void free_cstr(cstr *c) {
  if (c->owned) enif_free(c->s);
  c->owned = 0;
}

int get_chain(ErlNifEnv *env, ERL_NIF_TERM t, cstr *c, int *has) {
  *has = !enif_is_identical(t, a_nil);
  if (!*has) return 1;
  return get_cstr(env, t, c);
}

/* ---- dtypes and shapes ---- */

/* A dtype's type tuple, as Nx writes it: {:f, 32}. */
ERL_NIF_TERM type_tuple(ErlNifEnv *env, const dtype_entry *d) {
  return enif_make_tuple2(env, d->kind, enif_make_int(env, d->bits));
}

ERL_NIF_TERM shape_tuple(ErlNifEnv *env, int32_t ndim, const int64_t *shape) {
  ERL_NIF_TERM dims[CALLBOX_MAX_RANK];
  for (int32_t i = 0; i < ndim; i++) dims[i] = enif_make_int64(env, shape[i]);
  return enif_make_tuple_from_array(env, dims, (unsigned)ndim);
}

/* ---- tensors ---- */

int tensors_alloc(tensor_list *l, size_t n) {
  l->n = n;
  if (n <= STACK_TENSORS) {
    l->t = l->t_stack;
    l->shapes = l->shapes_stack;
  } else {
    l->t = enif_alloc(n * sizeof *l->t);
    l->shapes = enif_alloc(n * CALLBOX_MAX_RANK * sizeof *l->shapes);
    if (!l->t || !l->shapes) {
      if (l->t) enif_free(l->t);
      if (l->shapes) enif_free(l->shapes);
      l->t = NULL;
      l->shapes = NULL;
      return 0;
    }
  }
  return 1; /* every tensor is written whole (tensor_set) before use */
}

void tensors_free(tensor_list *l) {
  if (l->t && l->t != l->t_stack) {
    enif_free(l->t);
    enif_free(l->shapes);
  }
  l->t = NULL;
}

/* Reads a list of {binary, dtype, shape_tuple} (with_data) or of
 * {dtype, shape_tuple} into l, a dtype an atom (:f32) or a type tuple
 * ({:f, 32}: Callbox.call/4 passes its structs' fields as they are; the
 * BEAM reads a struct's fields far faster than enif_get_map_value, about
 * 50 ns for the four). On a bad element writes why into msg and returns
 * 0 (badarg: -1). */
int get_tensors(ErlNifEnv *env, ERL_NIF_TERM list, int with_data, tensor_list *l, char *msg, size_t msg_cap) {
  unsigned len;
  if (!enif_get_list_length(env, list, &len)) return -1;
  if (!tensors_alloc(l, len)) {
    snprintf(msg, msg_cap, "out of memory for %u tensors", len);
    return 0;
  }
  ERL_NIF_TERM head, tail = list;
  for (unsigned i = 0; i < len; i++) {
    enif_get_list_cell(env, tail, &head, &tail);
    const ERL_NIF_TERM *el;
    int arity;
    if (!enif_get_tuple(env, head, &arity, &el) || arity != (with_data ? 3 : 2)) return -1;
    ERL_NIF_TERM dt = el[with_data ? 1 : 0];
    const dtype_entry *d = enif_is_atom(env, dt) ? dtype_by_atom(dt) : dtype_by_type(env, dt);
    if (d == NULL && !enif_is_atom(env, dt)) {
      snprintf(msg, msg_cap, "input %u: its type is not one of libcallbox's dtypes", i);
      return 0;
    }
    ERL_NIF_TERM sh = el[with_data ? 2 : 1];
    if (d == NULL) {
      char name[64] = "?";
      enif_get_atom(env, dt, name, sizeof name, ERL_NIF_LATIN1);
      snprintf(msg, msg_cap, "input %u: dtype %s is not one of libcallbox's", i, name);
      return 0;
    }
    const ERL_NIF_TERM *dims;
    int ndim;
    if (!enif_get_tuple(env, sh, &ndim, &dims)) return -1;
    if (ndim > CALLBOX_MAX_RANK) {
      snprintf(msg, msg_cap, "input %u: rank %d is above the most callbox takes (%d)", i, ndim, CALLBOX_MAX_RANK);
      return 0;
    }
    int64_t *shape = &l->shapes[(size_t)i * CALLBOX_MAX_RANK];
    uint64_t elems = 1;
    int overflow = 0;
    for (int k = 0; k < ndim; k++) {
      ErlNifSInt64 v;
      if (!enif_get_int64(env, dims[k], &v)) return -1;
      if (v < 0) {
        snprintf(msg, msg_cap, "input %u: dimension %d is negative (%lld)", i, k, (long long)v);
        return 0;
      }
      shape[k] = v;
      if (v != 0 && elems > UINT64_MAX / (uint64_t)v) overflow = 1;
      elems *= (uint64_t)v;
    }
    void *data = NULL;
    if (with_data) {
      ErlNifBinary b;
      if (!enif_inspect_binary(env, el[0], &b)) return -1;
      if (overflow || elems > UINT64_MAX / d->bytes || elems * d->bytes != b.size) {
        snprintf(msg, msg_cap, "input %u: a %s tensor of %llu elements is %llu bytes, its binary %zu", i, d->name,
                 (unsigned long long)elems, (unsigned long long)(elems * d->bytes), b.size);
        return 0;
      }
      data = b.size ? b.data : NULL;
    }
    tensor_set(&l->t[i], data, ndim, d->dl, shape);
  }
  return 1;
}
