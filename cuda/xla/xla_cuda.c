// callbox_xla_ffi_cuda: the XLA FFI handler for the CUDA platform.
//
// It decodes XLA's call frame (layouts written from docs/xla-ffi facts, not
// XLA's headers; every offset is checked below), gets the stream from the
// API table, leaves TOKEN buffers alone, and hands the buffers to Go
// (callboxCudaXLACall), which copies device -> guest memory on the stream,
// runs the callback and copies the results back. A failure comes back as
// an XLA error with the callback's absl code (abi.Kind.Code) and message.
// Nothing here panics or aborts: every pointer XLA hands over is checked
// before it is read.

#include <stdio.h>
#include <string.h>

#include "xla_cuda.h"
#include "_cgo_export.h"

// ---- XLA FFI C ABI, version 0.1 (64-bit) ----

enum {
  CBX_EXT_METADATA = 1,
  CBX_STAGE_EXECUTE = 3,
  CBX_ARG_BUFFER = 1,
  CBX_RET_BUFFER = 1,
  CBX_ATTR_STRING = 4,
  CBX_DTYPE_TOKEN = 17,
};

enum {
  CBX_INVALID_ARGUMENT = 3,
  CBX_FAILED_PRECONDITION = 9,
  CBX_INTERNAL = 13,
};

typedef struct cbx_extension {
  size_t struct_size;
  int type;
  struct cbx_extension *next;
} cbx_extension;

typedef struct cbx_api_version {
  size_t struct_size;
  void *extension_start;
  int major;
  int minor;
} cbx_api_version;

typedef struct cbx_buffer {
  size_t struct_size;
  void *extension_start;
  int dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
} cbx_buffer;

typedef struct cbx_args {
  size_t struct_size;
  void *extension_start;
  int64_t size;
  int *types;
  void **args;
} cbx_args;

typedef struct cbx_attrs {
  size_t struct_size;
  void *extension_start;
  int64_t size;
  int *types;
  struct cbx_byte_span **names;
  void **attrs;
} cbx_attrs;

typedef struct cbx_byte_span {
  const char *ptr;
  size_t len;
} cbx_byte_span;

typedef struct cbx_error_create_args {
  size_t struct_size;
  void *extension_start;
  const char *message;
  int errc;
} cbx_error_create_args;

typedef struct cbx_stream_get_args {
  size_t struct_size;
  void *extension_start;
  void *ctx;
  void *stream;
} cbx_stream_get_args;

typedef struct cbcuda_xla_error cbx_error;
typedef cbx_error *(*cbx_error_create_fn)(cbx_error_create_args *);
typedef cbx_error *(*cbx_stream_get_fn)(cbx_stream_get_args *);

typedef struct cbx_api {
  size_t struct_size;
  void *extension_start;
  cbx_api_version api_version;
  void *internal_api;
  cbx_error_create_fn error_create;  // slot 0
  void *error_get_message;           // slot 1
  void *error_destroy;               // slot 2
  void *handler_register;            // slot 3
  cbx_stream_get_fn stream_get;      // slot 4
} cbx_api;

struct cbcuda_xla_call_frame {
  size_t struct_size;
  void *extension_start;
  const cbx_api *api;
  void *ctx;
  int stage;
  cbx_args args;
  cbx_args rets;
  cbx_attrs attrs;
  void *future;  // only if struct_size >= 176
};

typedef struct cbx_metadata {
  size_t struct_size;
  cbx_api_version api_version;
  uint32_t traits;
} cbx_metadata;

typedef struct cbx_metadata_extension {
  cbx_extension extension_base;
  cbx_metadata *metadata;
} cbx_metadata_extension;

#define CBX_CHECK(what, got, want) _Static_assert((got) == (want), what)
CBX_CHECK("Extension_Base size", sizeof(cbx_extension), 24);
CBX_CHECK("Api_Version size", sizeof(cbx_api_version), 24);
CBX_CHECK("Api_Version.major", offsetof(cbx_api_version, major), 16);
CBX_CHECK("Api_Version.minor", offsetof(cbx_api_version, minor), 20);
CBX_CHECK("Buffer size", sizeof(cbx_buffer), 48);
CBX_CHECK("Buffer.dtype", offsetof(cbx_buffer, dtype), 16);
CBX_CHECK("Buffer.data", offsetof(cbx_buffer, data), 24);
CBX_CHECK("Buffer.rank", offsetof(cbx_buffer, rank), 32);
CBX_CHECK("Buffer.dims", offsetof(cbx_buffer, dims), 40);
CBX_CHECK("Args size", sizeof(cbx_args), 40);
CBX_CHECK("Args.size", offsetof(cbx_args, size), 16);
CBX_CHECK("Args.types", offsetof(cbx_args, types), 24);
CBX_CHECK("Args.args", offsetof(cbx_args, args), 32);
CBX_CHECK("Attrs size", sizeof(cbx_attrs), 48);
CBX_CHECK("Attrs.names", offsetof(cbx_attrs, names), 32);
CBX_CHECK("Attrs.attrs", offsetof(cbx_attrs, attrs), 40);
CBX_CHECK("ByteSpan size", sizeof(cbx_byte_span), 16);
CBX_CHECK("CallFrame.api", offsetof(struct cbcuda_xla_call_frame, api), 16);
CBX_CHECK("CallFrame.ctx", offsetof(struct cbcuda_xla_call_frame, ctx), 24);
CBX_CHECK("CallFrame.stage", offsetof(struct cbcuda_xla_call_frame, stage), 32);
CBX_CHECK("CallFrame.args", offsetof(struct cbcuda_xla_call_frame, args), 40);
CBX_CHECK("CallFrame.rets", offsetof(struct cbcuda_xla_call_frame, rets), 80);
CBX_CHECK("CallFrame.attrs", offsetof(struct cbcuda_xla_call_frame, attrs), 120);
CBX_CHECK("CallFrame.future", offsetof(struct cbcuda_xla_call_frame, future), 168);
CBX_CHECK("CallFrame size", sizeof(struct cbcuda_xla_call_frame), 176);
CBX_CHECK("Error_Create_Args.message", offsetof(cbx_error_create_args, message), 16);
CBX_CHECK("Error_Create_Args.errc", offsetof(cbx_error_create_args, errc), 24);
CBX_CHECK("Stream_Get_Args size", sizeof(cbx_stream_get_args), 32);
CBX_CHECK("Stream_Get_Args.ctx", offsetof(cbx_stream_get_args, ctx), 16);
CBX_CHECK("Stream_Get_Args.stream", offsetof(cbx_stream_get_args, stream), 24);
CBX_CHECK("Api.api_version", offsetof(cbx_api, api_version), 16);
CBX_CHECK("Api.internal_api", offsetof(cbx_api, internal_api), 40);
CBX_CHECK("Api slot 0 Error_Create", offsetof(cbx_api, error_create), 48);
CBX_CHECK("Api slot 2 Error_Destroy", offsetof(cbx_api, error_destroy), 64);
CBX_CHECK("Api slot 4 Stream_Get", offsetof(cbx_api, stream_get), 80);
CBX_CHECK("Metadata.api_version", offsetof(cbx_metadata, api_version), 8);
CBX_CHECK("Metadata.traits", offsetof(cbx_metadata, traits), 32);
CBX_CHECK("Metadata_Extension.metadata", offsetof(cbx_metadata_extension, metadata), 24);
CBX_CHECK("cbcuda_buf size", sizeof(cbcuda_buf), 32);

// The smallest call frame XLA 0.1 headers pass (no future).
#define CBX_MIN_FRAME 168
// The API table must reach slot 4 (Stream_Get).
#define CBX_MIN_API (offsetof(cbx_api, stream_get) + sizeof(void *))
// Error_Create_Args as XLA sizes it: up to and including errc.
#define CBX_ERROR_ARGS_SIZE (offsetof(cbx_error_create_args, errc) + sizeof(int))
#define CBX_STREAM_ARGS_SIZE (offsetof(cbx_stream_get_args, stream) + sizeof(void *))

static cbx_error *cbx_fail(const cbx_api *api, int code, const char *msg) {
  if (api == NULL || api->struct_size < offsetof(cbx_api, error_create) + sizeof(void *) ||
      api->error_create == NULL) {
    return NULL;  // nothing to report through
  }
  cbx_error_create_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = CBX_ERROR_ARGS_SIZE;
  a.message = msg;  // XLA copies it
  a.errc = code;
  return api->error_create(&a);
}

// cbx_buffers flattens XLA's arguments (or results) into out, leaving
// TOKEN buffers out. It returns the count, or -1 with msg set.
static int64_t cbx_buffers(const cbx_args *in, const char *what, int want_type, cbcuda_buf *out,
                           char *msg, size_t cap) {
  if (in->size < 0) {
    snprintf(msg, cap, "callbox_xla_ffi_cuda: %s count %lld is negative", what, (long long)in->size);
    return -1;
  }
  if (in->size > 0 && (in->types == NULL || in->args == NULL)) {
    snprintf(msg, cap, "callbox_xla_ffi_cuda: %d %ss with no type or buffer list", (int)in->size, what);
    return -1;
  }
  int64_t n = 0;
  for (int64_t i = 0; i < in->size; i++) {
    if (in->types[i] != want_type) {
      snprintf(msg, cap, "callbox_xla_ffi_cuda: %s %lld has type %d, not a buffer", what, (long long)i, in->types[i]);
      return -1;
    }
    const cbx_buffer *b = (const cbx_buffer *)in->args[i];
    if (b == NULL) {
      snprintf(msg, cap, "callbox_xla_ffi_cuda: %s %lld is a null buffer", what, (long long)i);
      return -1;
    }
    if (b->dtype == CBX_DTYPE_TOKEN) {
      continue;  // ordering only: never read or written
    }
    if (b->rank < 0 || (b->rank > 0 && b->dims == NULL)) {
      snprintf(msg, cap, "callbox_xla_ffi_cuda: %s %lld has rank %lld and %s dims", what, (long long)i,
               (long long)b->rank, b->dims == NULL ? "no" : "some");
      return -1;
    }
    if (n == CBCUDA_MAX_BUFFERS) {
      snprintf(msg, cap, "callbox_xla_ffi_cuda: more than %d %ss", CBCUDA_MAX_BUFFERS, what);
      return -1;
    }
    out[n].dtype = b->dtype;
    out[n].index = (int32_t)i;
    out[n].data = (uintptr_t)b->data;
    out[n].rank = b->rank;
    out[n].dims = b->dims;
    n++;
  }
  return n;
}

// cbx_string_attr finds a STRING attribute by name: 1 found, 0 absent,
// -1 present with another type or malformed (msg set).
static int cbx_string_attr(const cbx_attrs *attrs, const char *name, const char **ptr, size_t *len, char *msg,
                           size_t cap) {
  if (attrs->size <= 0) {
    return 0;
  }
  if (attrs->types == NULL || attrs->names == NULL || attrs->attrs == NULL) {
    snprintf(msg, cap, "callbox_xla_ffi_cuda: malformed attribute list");
    return -1;
  }
  size_t nlen = strlen(name);
  for (int64_t i = 0; i < attrs->size; i++) {
    const cbx_byte_span *n = attrs->names[i];
    if (n == NULL || n->len != nlen || (nlen > 0 && (n->ptr == NULL || memcmp(n->ptr, name, nlen) != 0))) {
      continue;
    }
    const cbx_byte_span *v = (const cbx_byte_span *)attrs->attrs[i];
    if (attrs->types[i] != CBX_ATTR_STRING || v == NULL || (v->len > 0 && v->ptr == NULL)) {
      snprintf(msg, cap, "callbox_xla_ffi_cuda: attribute %s must be a string (got attribute type %d)", name,
               attrs->types[i]);
      return -1;
    }
    *ptr = v->ptr;
    *len = v->len;
    return 1;
  }
  return 0;
}

struct cbcuda_xla_error *callbox_xla_ffi_cuda(struct cbcuda_xla_call_frame *cf) {
  if (cf == NULL) {
    return NULL;
  }
  const cbx_api *api = cf->api;
  if (cf->struct_size < CBX_MIN_FRAME) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT, "callbox_xla_ffi_cuda: call frame too small (older XLA FFI than 0.1?)");
  }
  // The metadata handshake comes before the stage check: XLA asks with
  // stage EXECUTE and empty lists.
  for (cbx_extension *e = (cbx_extension *)cf->extension_start; e != NULL; e = e->next) {
    if (e->type == CBX_EXT_METADATA) {
      cbx_metadata *m = ((cbx_metadata_extension *)e)->metadata;
      if (m != NULL) {
        m->api_version.struct_size = sizeof(cbx_api_version);
        m->api_version.extension_start = NULL;
        m->api_version.major = 0;
        m->api_version.minor = 1;
        m->traits = 0;  // not CUDA-graph compatible: the callback runs on the host
      }
      return NULL;
    }
  }
  if (cf->stage != CBX_STAGE_EXECUTE) {
    return NULL;
  }
  if (api == NULL) {
    return NULL;  // no table to report through; XLA always passes one
  }
  if (api->struct_size < CBX_MIN_API || api->stream_get == NULL) {
    return cbx_fail(api, CBX_FAILED_PRECONDITION,
                    "callbox_xla_ffi_cuda: XLA's API table has no Stream_Get (register this handler for platform "
                    "\"CUDA\"; use callbox_xla_ffi on CPU)");
  }
  cbx_stream_get_args sa;
  memset(&sa, 0, sizeof sa);
  sa.struct_size = CBX_STREAM_ARGS_SIZE;
  sa.ctx = cf->ctx;
  cbx_error *err = api->stream_get(&sa);
  if (err != NULL) {
    return err;  // XLA's own error (UNIMPLEMENTED on CPU), as XLA made it
  }
  if (sa.stream == NULL) {
    return cbx_fail(api, CBX_FAILED_PRECONDITION, "callbox_xla_ffi_cuda: XLA gave no CUDA stream");
  }

  char msg[CBCUDA_MSG_CAP];
  msg[0] = 0;
  cbcuda_buf args[CBCUDA_MAX_BUFFERS], rets[CBCUDA_MAX_BUFFERS];
  int64_t nargs = cbx_buffers(&cf->args, "argument", CBX_ARG_BUFFER, args, msg, sizeof msg);
  if (nargs < 0) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT, msg);
  }
  int64_t nrets = cbx_buffers(&cf->rets, "result", CBX_RET_BUFFER, rets, msg, sizeof msg);
  if (nrets < 0) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT, msg);
  }
  const char *name = NULL, *chain = NULL;
  size_t name_len = 0, chain_len = 0;
  int found = cbx_string_attr(&cf->attrs, "callback", &name, &name_len, msg, sizeof msg);
  if (found < 0) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT, msg);
  }
  if (found == 0 || name_len == 0) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT,
                    "callbox_xla_ffi_cuda: missing string attribute callback (the callback's name or content id)");
  }
  if (cbx_string_attr(&cf->attrs, "chain", &chain, &chain_len, msg, sizeof msg) < 0) {
    return cbx_fail(api, CBX_INVALID_ARGUMENT, msg);
  }
  int code = callboxCudaXLACall((uintptr_t)sa.stream, (char *)name, name_len, (char *)chain, chain_len, args, nargs,
                                rets, nrets, msg, sizeof msg);
  if (code == 0) {
    return NULL;
  }
  msg[sizeof msg - 1] = 0;
  return cbx_fail(api, code, msg);
}

// The C entries' addresses, for tests that call them through a pointer.
void *cbcuda_dlpack_entry(void) { return (void *)callbox_cuda_call_dlpack; }
