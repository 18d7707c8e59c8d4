#include "harness.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// The XLA FFI C ABI 0.1 layouts (64-bit), as an XLA runtime builds them.

typedef struct ext_base { size_t struct_size; int type; struct ext_base *next; } ext_base;
typedef struct api_version { size_t struct_size; void *extension_start; int major; int minor; } api_version;
typedef struct buffer { size_t struct_size; void *extension_start; int dtype; void *data; int64_t rank; int64_t *dims; } buffer;
typedef struct args { size_t struct_size; void *extension_start; int64_t size; int *types; void **args; } args;
typedef struct byte_span { const char *ptr; size_t len; } byte_span;
typedef struct scalar { int dtype; void *value; } scalar;
typedef struct attrs { size_t struct_size; void *extension_start; int64_t size; int *types; byte_span **names; void **attrs; } attrs;
typedef struct error { int code; char *msg; } error;
typedef struct error_create_args { size_t struct_size; void *extension_start; const char *message; int errc; } error_create_args;
typedef struct error_get_message_args { size_t struct_size; void *extension_start; error *error; const char *message; } error_get_message_args;
typedef struct error_destroy_args { size_t struct_size; void *extension_start; error *error; } error_destroy_args;
typedef struct stream_get_args { size_t struct_size; void *extension_start; void *ctx; void *stream; } stream_get_args;
typedef struct api {
  size_t struct_size;
  void *extension_start;
  api_version version;
  void *internal_api;
  error *(*error_create)(error_create_args *);
  void (*error_get_message)(error_get_message_args *);
  void (*error_destroy)(error_destroy_args *);
  void *handler_register;
  error *(*stream_get)(stream_get_args *);
  void *more[8];  // later slots: never called
} api;
typedef struct call_frame {
  size_t struct_size;
  void *extension_start;
  const api *api;
  void *ctx;
  int stage;
  args args;
  args rets;
  attrs attrs;
  void *future;
} call_frame;
typedef struct metadata { size_t struct_size; api_version api_version; uint32_t traits; int64_t state_type_id; } metadata;
typedef struct metadata_ext { ext_base base; metadata *metadata; } metadata_ext;

_Static_assert(sizeof(call_frame) == 176, "call frame");
_Static_assert(offsetof(api, stream_get) == 80, "slot 4");

typedef struct ctx { void *stream; int fail; } ctx;

static atomic_llong live_errors;
static atomic_llong stream_gets;

static error *make_error(int code, const char *msg) {
  error *e = calloc(1, sizeof *e);
  e->code = code;
  e->msg = strdup(msg == NULL ? "" : msg);
  atomic_fetch_add(&live_errors, 1);
  return e;
}

static error *x_error_create(error_create_args *a) {
  if (a->struct_size < 28) {
    return make_error(3, "harness: Error_Create_Args too small");
  }
  return make_error(a->errc, a->message);
}

static void x_error_get_message(error_get_message_args *a) { a->message = a->error->msg; }

static void x_error_destroy(error_destroy_args *a) {
  if (a->error != NULL) {
    free(a->error->msg);
    free(a->error);
    atomic_fetch_sub(&live_errors, 1);
  }
}

static error *x_stream_get(stream_get_args *a) {
  atomic_fetch_add(&stream_gets, 1);
  if (a->struct_size < 32) {
    return make_error(3, "harness: Stream_Get_Args too small");
  }
  ctx *c = a->ctx;
  if (c == NULL) {
    return make_error(3, "harness: Stream_Get without the call frame's ctx");
  }
  if (c->fail) {
    return make_error(12, "harness: no stream on this platform");
  }
  a->stream = c->stream;
  return NULL;
}

struct hx_frame {
  call_frame cf;
  api api;
  ctx ctx;
  buffer *arg_bufs, *ret_bufs;
  void **arg_ptrs, **ret_ptrs;
  int *arg_types, *ret_types, *attr_types;
  byte_span **attr_names;
  void **attr_vals;
  int64_t nattrs;
};

hx_frame *hx_new(int64_t nargs, int64_t nrets, int64_t nattrs) {
  hx_frame *f = calloc(1, sizeof *f);
  f->api.struct_size = sizeof(api);
  f->api.version.struct_size = sizeof(api_version);
  f->api.version.minor = 1;
  f->api.error_create = x_error_create;
  f->api.error_get_message = x_error_get_message;
  f->api.error_destroy = x_error_destroy;
  f->api.stream_get = x_stream_get;
  f->cf.struct_size = sizeof(call_frame);
  f->cf.api = &f->api;
  f->cf.ctx = &f->ctx;
  f->cf.stage = 3;
  f->arg_bufs = calloc(nargs + 1, sizeof(buffer));
  f->ret_bufs = calloc(nrets + 1, sizeof(buffer));
  f->arg_ptrs = calloc(nargs + 1, sizeof(void *));
  f->ret_ptrs = calloc(nrets + 1, sizeof(void *));
  f->arg_types = calloc(nargs + 1, sizeof(int));
  f->ret_types = calloc(nrets + 1, sizeof(int));
  f->attr_types = calloc(nattrs + 1, sizeof(int));
  f->attr_names = calloc(nattrs + 1, sizeof(byte_span *));
  f->attr_vals = calloc(nattrs + 1, sizeof(void *));
  f->nattrs = nattrs;
  f->cf.args = (args){sizeof(args), NULL, nargs, f->arg_types, f->arg_ptrs};
  f->cf.rets = (args){sizeof(args), NULL, nrets, f->ret_types, f->ret_ptrs};
  f->cf.attrs = (attrs){sizeof(attrs), NULL, nattrs, f->attr_types, f->attr_names, f->attr_vals};
  return f;
}

static void set_buf(buffer *b, void **ptr, int *type, int32_t t, int32_t dtype, uintptr_t data, int64_t rank,
                    const int64_t *dims) {
  b->struct_size = sizeof(buffer);
  b->dtype = dtype;
  b->data = (void *)data;
  b->rank = rank;
  if (rank > 0 && dims != NULL) {
    b->dims = malloc(rank * sizeof(int64_t));
    memcpy(b->dims, dims, rank * sizeof(int64_t));
  }
  *ptr = b;
  *type = t;
}

void hx_arg(hx_frame *f, int64_t i, int32_t t, int32_t dtype, uintptr_t data, int64_t rank, const int64_t *dims) {
  set_buf(&f->arg_bufs[i], &f->arg_ptrs[i], &f->arg_types[i], t, dtype, data, rank, dims);
}

void hx_ret(hx_frame *f, int64_t i, int32_t t, int32_t dtype, uintptr_t data, int64_t rank, const int64_t *dims) {
  set_buf(&f->ret_bufs[i], &f->ret_ptrs[i], &f->ret_types[i], t, dtype, data, rank, dims);
}

static byte_span *span(const char *p, size_t n) {
  byte_span *s = calloc(1, sizeof *s);
  char *c = malloc(n + 1);
  memcpy(c, p, n);
  c[n] = 'X';  // not NUL-terminated, as XLA's are not
  s->ptr = c;
  s->len = n;
  return s;
}

void hx_attr_str(hx_frame *f, int64_t i, const char *name, size_t name_len, const char *val, size_t val_len) {
  f->attr_types[i] = 4;
  f->attr_names[i] = span(name, name_len);
  f->attr_vals[i] = span(val, val_len);
}

void hx_attr_i64(hx_frame *f, int64_t i, const char *name, size_t name_len, int64_t val) {
  f->attr_types[i] = 3;
  f->attr_names[i] = span(name, name_len);
  scalar *s = calloc(1, sizeof *s);
  int64_t *v = malloc(sizeof *v);
  *v = val;
  s->dtype = 5;
  s->value = v;
  f->attr_vals[i] = s;
}

void hx_set_stage(hx_frame *f, int stage) { f->cf.stage = stage; }
void hx_set_frame_size(hx_frame *f, size_t size) { f->cf.struct_size = size; }
void hx_set_api_size(hx_frame *f, size_t size) { f->api.struct_size = size; }
void hx_set_stream(hx_frame *f, uintptr_t stream, int fail) {
  f->ctx.stream = (void *)stream;
  f->ctx.fail = fail;
}
void hx_set_null_api(hx_frame *f) { f->cf.api = NULL; }

static int finish(const api *a, error *e, char *msg, size_t cap) {
  if (e == NULL) {
    return -1;
  }
  error_get_message_args g = {sizeof g, NULL, e, NULL};
  a->error_get_message(&g);
  strncpy(msg, g.message, cap - 1);
  msg[cap - 1] = 0;
  int code = e->code;
  error_destroy_args d = {sizeof d, NULL, e};
  a->error_destroy(&d);
  return code;
}

int hx_call(hx_frame *f, void *handler, char *msg, size_t cap) {
  error *(*h)(call_frame *) = (error * (*)(call_frame *)) handler;
  error *e = h(&f->cf);
  return finish(&f->api, e, msg, cap);
}

int hx_metadata(void *handler, int32_t framework_minor, int api_table, int32_t *major, int32_t *minor,
                uint32_t *traits) {
  hx_frame *f = hx_new(0, 0, 0);
  f->api.version.minor = framework_minor;
  if (framework_minor < 2) f->cf.struct_size = offsetof(call_frame, future);
  if (!api_table) f->cf.api = NULL;
  metadata m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  m.api_version.major = 99;
  m.traits = 77;
  metadata_ext ext = {{sizeof ext, 1, NULL}, &m};
  f->cf.extension_start = &ext;
  f->cf.ctx = NULL;
  char msg[256];
  int code = hx_call(f, handler, msg, sizeof msg);
  f->cf.extension_start = NULL;
  f->cf.api = &f->api;
  hx_free(f);
  *major = m.api_version.major;
  *minor = m.api_version.minor;
  *traits = m.traits;
  return code;
}

void hx_free(hx_frame *f) {
  for (int64_t i = 0; i < f->cf.args.size; i++) free(f->arg_bufs[i].dims);
  for (int64_t i = 0; i < f->cf.rets.size; i++) free(f->ret_bufs[i].dims);
  for (int64_t i = 0; i < f->nattrs; i++) {
    if (f->attr_names[i] != NULL) {
      free((void *)f->attr_names[i]->ptr);
      free(f->attr_names[i]);
    }
    if (f->attr_types[i] == 4 && f->attr_vals[i] != NULL) {
      byte_span *s = f->attr_vals[i];
      free((void *)s->ptr);
      free(s);
    } else if (f->attr_types[i] == 3 && f->attr_vals[i] != NULL) {
      scalar *s = f->attr_vals[i];
      free(s->value);
      free(s);
    }
  }
  free(f->arg_bufs);
  free(f->ret_bufs);
  free(f->arg_ptrs);
  free(f->ret_ptrs);
  free(f->arg_types);
  free(f->ret_types);
  free(f->attr_types);
  free(f->attr_names);
  free(f->attr_vals);
  free(f);
}

int64_t hx_live_errors(void) { return atomic_load(&live_errors); }
int64_t hx_stream_gets(void) { return atomic_load(&stream_gets); }

typedef struct dl_tensor {
  void *data;
  int32_t device_type, device_id;
  int32_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} dl_tensor;
_Static_assert(sizeof(dl_tensor) == 48, "DLTensor");

void *hx_tensor(uintptr_t data, int32_t device_type, int32_t ndim, const int64_t *shape, uint8_t code, uint8_t bits) {
  dl_tensor *t = calloc(1, sizeof *t);
  t->data = (void *)data;
  t->device_type = device_type;
  t->ndim = ndim;
  t->code = code;
  t->bits = bits;
  t->lanes = 1;
  if (ndim > 0) {
    t->shape = malloc(ndim * sizeof(int64_t));
    memcpy(t->shape, shape, ndim * sizeof(int64_t));
  }
  return t;
}

void hx_free_tensor(void *p) {
  dl_tensor *t = p;
  free(t->shape);
  free(t);
}

int hx_call_dlpack(void *entry, const char *callback, uintptr_t stream, void **ins, size_t nin, void **outs,
                   size_t nout, char *msg, size_t cap) {
  int (*fn)(const char *, uintptr_t, void *, size_t, void *, size_t, char *, size_t) =
      (int (*)(const char *, uintptr_t, void *, size_t, void *, size_t, char *, size_t))entry;
  return fn(callback, stream, ins, nin, outs, nout, msg, cap);
}
