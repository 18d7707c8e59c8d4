// The XLA FFI handlers callbox_xla_ffi (CPU) and callbox_xla_ffi_cuda
// (CUDA): thin wrappers over one decoder, cbx_handle, which checks the
// call frame in C (no Go on the metadata and non-execute paths) and calls
// into Go once per EXECUTE call with {stream or none, callback, chain,
// buffers}, or with its refusal of a malformed frame. Go (xla.go) sends a
// call without a stream to the host and one with a stream to the GPU path,
// and alone decides every error's code (errors.go, describe).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/callbox.h"
#include "xla_ffi.h"

// Every offset the handler relies on, from shared/xla-ffi.md (64-bit).
_Static_assert(sizeof(cbx_xla_extension) == 24, "Extension_Base size");
_Static_assert(offsetof(cbx_xla_extension, type) == 8, "Extension_Base.type");
_Static_assert(offsetof(cbx_xla_extension, next) == 16, "Extension_Base.next");
_Static_assert(sizeof(cbx_xla_api_version) == 24, "Api_Version size");
_Static_assert(offsetof(cbx_xla_api_version, major_version) == 16, "Api_Version.major");
_Static_assert(offsetof(cbx_xla_api_version, minor_version) == 20, "Api_Version.minor");
_Static_assert(sizeof(cbx_xla_buffer) == 48, "Buffer size");
_Static_assert(offsetof(cbx_xla_buffer, dtype) == 16, "Buffer.dtype");
_Static_assert(offsetof(cbx_xla_buffer, data) == 24, "Buffer.data");
_Static_assert(offsetof(cbx_xla_buffer, rank) == 32, "Buffer.rank");
_Static_assert(offsetof(cbx_xla_buffer, dims) == 40, "Buffer.dims");
_Static_assert(sizeof(cbx_xla_args) == 40, "Args size");
_Static_assert(offsetof(cbx_xla_args, size) == 16, "Args.size");
_Static_assert(offsetof(cbx_xla_args, types) == 24, "Args.types");
_Static_assert(offsetof(cbx_xla_args, args) == 32, "Args.args");
_Static_assert(sizeof(cbx_xla_attrs) == 48, "Attrs size");
_Static_assert(offsetof(cbx_xla_attrs, size) == 16, "Attrs.size");
_Static_assert(offsetof(cbx_xla_attrs, types) == 24, "Attrs.types");
_Static_assert(offsetof(cbx_xla_attrs, names) == 32, "Attrs.names");
_Static_assert(offsetof(cbx_xla_attrs, attrs) == 40, "Attrs.attrs");
_Static_assert(sizeof(cbx_xla_bytespan) == 16, "ByteSpan size");
_Static_assert(offsetof(cbx_xla_bytespan, len) == 8, "ByteSpan.len");
_Static_assert(sizeof(struct callbox_xla_call_frame) == 176, "CallFrame size");
_Static_assert(offsetof(struct callbox_xla_call_frame, api) == 16, "CallFrame.api");
_Static_assert(offsetof(struct callbox_xla_call_frame, ctx) == 24, "CallFrame.ctx");
_Static_assert(offsetof(struct callbox_xla_call_frame, stage) == 32, "CallFrame.stage");
_Static_assert(offsetof(struct callbox_xla_call_frame, args) == 40, "CallFrame.args");
_Static_assert(offsetof(struct callbox_xla_call_frame, rets) == 80, "CallFrame.rets");
_Static_assert(offsetof(struct callbox_xla_call_frame, attrs) == 120, "CallFrame.attrs");
_Static_assert(offsetof(struct callbox_xla_call_frame, future) == 168, "CallFrame.future");
_Static_assert(offsetof(cbx_xla_metadata, api_version) == 8, "Metadata.api_version");
_Static_assert(offsetof(cbx_xla_metadata, traits) == 32, "Metadata.traits");
_Static_assert(offsetof(cbx_xla_metadata, state_type_id) == 40, "Metadata.state_type_id");
_Static_assert(sizeof(cbx_xla_metadata_extension) == 32, "Metadata_Extension size");
_Static_assert(offsetof(cbx_xla_metadata_extension, metadata) == 24, "Metadata_Extension.metadata");
_Static_assert(offsetof(cbx_xla_error_create_args, message) == 16, "Error_Create_Args.message");
_Static_assert(offsetof(cbx_xla_error_create_args, errc) == 24, "Error_Create_Args.errc");
_Static_assert(CBX_XLA_ERROR_CREATE_ARGS_SIZE == 28, "Error_Create_Args struct_size");
_Static_assert(offsetof(cbx_xla_api, api_version) == 16, "Api.api_version");
_Static_assert(offsetof(cbx_xla_api, internal_api) == 40, "Api.internal_api");
_Static_assert(offsetof(cbx_xla_api, error_create) == 48, "Api slot 0");
_Static_assert(offsetof(cbx_xla_api, error_destroy) == 64, "Api slot 2");
_Static_assert(offsetof(cbx_xla_api, stream_get) == 80, "Api slot 4");
_Static_assert(sizeof(cbx_xla_stream_get_args) == 32, "Stream_Get_Args size");
_Static_assert(offsetof(cbx_xla_stream_get_args, ctx) == 16, "Stream_Get_Args.ctx");
_Static_assert(offsetof(cbx_xla_stream_get_args, stream) == 24, "Stream_Get_Args.stream");

// The DLPack layout of callbox_tensor.
_Static_assert(sizeof(callbox_tensor) == 48, "callbox_tensor size");
_Static_assert(offsetof(callbox_tensor, device) == 8, "callbox_tensor.device");
_Static_assert(offsetof(callbox_tensor, ndim) == 16, "callbox_tensor.ndim");
_Static_assert(offsetof(callbox_tensor, dtype) == 20, "callbox_tensor.dtype");
_Static_assert(offsetof(callbox_tensor, shape) == 24, "callbox_tensor.shape");
_Static_assert(offsetof(callbox_tensor, strides) == 32, "callbox_tensor.strides");
_Static_assert(offsetof(callbox_tensor, byte_offset) == 40, "callbox_tensor.byte_offset");

// The Go side (xla.go): runs a decoded call, or reports a refused one.
// Returns 0, or an absl code with call->message set (malloc'd).
extern int32_t cbxXlaExecute(cbx_call *call);

// Fork detection (exports.c).
int cbx_in_fork_child(void);
void cbx_fork_message(const char *where, char *buf, size_t cap);

// How far the handler follows an extension chain.
#define CBX_MAX_EXTENSIONS 64

// abi.Kind numbers of the decoder's refusals (abi/kind.go; Go maps them
// to codes).
enum { CBX_KIND_INVALID_ARGUMENT = 17, CBX_KIND_FAILED_PRECONDITION = 19 };

static struct callbox_xla_error *cbx_error(const struct callbox_xla_call_frame *frame, int32_t code,
                                           const char *msg) {
  const cbx_xla_api *api = frame->api;
  if (api == NULL || api->struct_size < CBX_XLA_API_MIN_SIZE || api->error_create == NULL) {
    // No way to report an error without XLA's Error_Create; XLA always
    // passes its api table, so this is a malformed frame from elsewhere.
    return NULL;
  }
  cbx_xla_error_create_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = CBX_XLA_ERROR_CREATE_ARGS_SIZE;
  args.message = msg;  // XLA copies it
  args.errc = code;
  return api->error_create(&args);
}

// cbx_refuse records the decoder's refusal of a malformed frame; it
// returns -1 so that a decoding step can `return cbx_refuse(...)`.
static int cbx_refuse(cbx_call *call, int32_t kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int cbx_refuse(cbx_call *call, int32_t kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call->refusal, sizeof call->refusal, fmt, ap);
  va_end(ap);
  call->refusal_kind = kind;
  return -1;
}

// cbx_metadata finds the metadata extension, if any.
static cbx_xla_metadata_extension *cbx_metadata(const struct callbox_xla_call_frame *frame) {
  const cbx_xla_extension *e = frame->extension_start;
  for (int i = 0; e != NULL && i < CBX_MAX_EXTENSIONS; i++, e = e->next) {
    if (e->type == CBX_XLA_EXTENSION_METADATA) return (cbx_xla_metadata_extension *)e;
  }
  return NULL;
}

// cbx_buffers decodes one side's buffers, skipping tokens.
static int cbx_buffers(cbx_call *call, const cbx_xla_args *side, const char *what, cbx_buf *out, int64_t *n_out) {
  *n_out = 0;
  if (side->size < 0) return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "%s: count %lld is negative", what, (long long)side->size);
  if (side->size > 0 && (side->types == NULL || side->args == NULL))
    return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "%s: %lld buffers but NULL arrays", what, (long long)side->size);
  for (int64_t i = 0; i < side->size; i++) {
    if (side->types[i] != CBX_XLA_ARG_BUFFER)
      return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "%s %lld: type %d is not a buffer", what, (long long)i, side->types[i]);
    const cbx_xla_buffer *b = (const cbx_xla_buffer *)side->args[i];
    if (b == NULL) return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "%s %lld: NULL buffer", what, (long long)i);
    if (b->dtype == CBX_XLA_DT_TOKEN) continue;  // ordering only: never read or written
    if (*n_out >= CBX_MAX_BUFFERS)
      return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "%s: more than %d buffers", what, CBX_MAX_BUFFERS);
    cbx_buf *o = &out[(*n_out)++];
    o->data = b->data;
    o->dims = b->dims;
    o->rank = b->rank;
    o->dtype = b->dtype;
    o->index = (int32_t)i;
  }
  return 0;
}

static int cbx_name_is(const cbx_xla_bytespan *s, const char *name) {
  size_t n = strlen(name);
  return s != NULL && s->len == n && s->ptr != NULL && memcmp(s->ptr, name, n) == 0;
}

// cbx_string reads a STRING attribute.
static int cbx_string(cbx_call *call, const cbx_xla_attrs *attrs, int64_t i, const char *name, const char **ptr,
                      size_t *len) {
  if (attrs->types[i] != CBX_XLA_ATTR_STRING)
    return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "attribute %s has type %d, want a string (%d)", name, attrs->types[i],
                      CBX_XLA_ATTR_STRING);
  const cbx_xla_bytespan *v = (const cbx_xla_bytespan *)attrs->attrs[i];
  if (v == NULL || (v->ptr == NULL && v->len != 0))
    return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "attribute %s: NULL string", name);
  *ptr = v->ptr != NULL ? v->ptr : "";
  *len = v->len;
  return 0;
}

// cbx_attrs reads the attributes: callback (required), chain, batched
// ("true": every buffer has a leading batch dimension and the call is the
// host's batched call; "false": a plain call), and host (the host to call
// instead of the default host, as callbox_xla_host_attr names it; Go
// checks it); any other is refused, so that a misspelt "chian" never runs
// unordered.
static int cbx_attrs(cbx_call *call, const cbx_xla_attrs *attrs) {
  if (attrs->size < 0 || (attrs->size > 0 && (attrs->types == NULL || attrs->names == NULL || attrs->attrs == NULL)))
    return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "malformed attributes (%lld)", (long long)attrs->size);
  for (int64_t i = 0; i < attrs->size; i++) {
    const cbx_xla_bytespan *name = attrs->names[i];
    if (cbx_name_is(name, "callback")) {
      if (cbx_string(call, attrs, i, "callback", &call->callback, &call->callback_len) < 0) return -1;
    } else if (cbx_name_is(name, "chain")) {
      if (cbx_string(call, attrs, i, "chain", &call->chain, &call->chain_len) < 0) return -1;
    } else if (cbx_name_is(name, "host")) {
      if (cbx_string(call, attrs, i, "host", &call->host, &call->host_len) < 0) return -1;
    } else if (cbx_name_is(name, "batched")) {
      const char *v;
      size_t n;
      if (cbx_string(call, attrs, i, "batched", &v, &n) < 0) return -1;
      if (n == 4 && memcmp(v, "true", 4) == 0) {
        call->batched = 1;
      } else if (!(n == 5 && memcmp(v, "false", 5) == 0)) {
        return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "attribute batched is \"%.*s\", want \"true\" or \"false\"",
                          (int)(n > 64 ? 64 : n), v);
      }
    } else if (name == NULL || name->ptr == NULL) {
      return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "attribute %lld has no name", (long long)i);
    } else {
      return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT,
                        "unknown attribute %.*s (callbox takes callback, chain, batched and host)",
                        (int)(name->len > 64 ? 64 : name->len), name->ptr);
    }
  }
  if (call->callback == NULL)
    return cbx_refuse(call, CBX_KIND_INVALID_ARGUMENT, "missing attribute callback (a callback name or content id)");
  return 0;
}

// cbx_stream gets the CUDA stream of the call from XLA (api slot 4). On
// failure it returns -1 with a refusal, or sets *xla_err to XLA's own
// error (passed back as XLA made it).
static int cbx_stream(cbx_call *call, const struct callbox_xla_call_frame *frame, struct callbox_xla_error **xla_err) {
  const cbx_xla_api *api = frame->api;
  if (api == NULL || api->struct_size < CBX_XLA_API_STREAM_SIZE || api->stream_get == NULL)
    return cbx_refuse(call, CBX_KIND_FAILED_PRECONDITION,
                      "XLA's API table has no Stream_Get (register callbox_xla_ffi_cuda for platform \"CUDA\"; use "
                      "callbox_xla_ffi on CPU)");
  cbx_xla_stream_get_args sa;
  memset(&sa, 0, sizeof sa);
  sa.struct_size = CBX_XLA_STREAM_GET_ARGS_SIZE;
  sa.ctx = frame->ctx;
  *xla_err = api->stream_get(&sa);
  if (*xla_err != NULL) return -1;  // XLA's own error (UNIMPLEMENTED on CPU)
  if (sa.stream == NULL) return cbx_refuse(call, CBX_KIND_FAILED_PRECONDITION, "XLA gave no CUDA stream");
  call->stream = (uintptr_t)sa.stream;
  return 0;
}

// cbx_handle is both handlers: gpu says whether the call's buffers are in
// device memory on XLA's stream.
static struct callbox_xla_error *cbx_handle(struct callbox_xla_call_frame *frame, int gpu) {
  if (frame == NULL) return NULL;  // nothing to report through
  cbx_call call;
  // The fields before the refusal's text, and the text as empty: Go reads
  // the text only when refusal_kind is set, and cbx_refuse then writes it
  // whole (clearing all 256 bytes cost more than the rest of the decoding).
  memset(&call, 0, offsetof(cbx_call, refusal));
  call.refusal[0] = 0;
  if (frame->struct_size < CBX_XLA_FRAME_MIN_SIZE) {
    cbx_refuse(&call, CBX_KIND_INVALID_ARGUMENT, "call frame of %zu bytes, want at least %d", frame->struct_size,
               CBX_XLA_FRAME_MIN_SIZE);
  } else {
    // The metadata handshake comes before the stage check: XLA asks for
    // it with stage EXECUTE.
    cbx_xla_metadata_extension *meta = cbx_metadata(frame);
    if (meta != NULL) {
      if (meta->metadata == NULL) {
        cbx_refuse(&call, CBX_KIND_INVALID_ARGUMENT, "metadata extension without metadata");
      } else {
        // The version declared: ours, or 0.1 to a framework at 0.1 (jaxlib
        // before 0.8 refuses a handler that declares 0.2). Such a framework
        // is told by its api table's version or, in the handshake, where
        // jaxlib 0.7 passes no table, by its frame: a 0.1 frame ends before
        // CallFrame.future. The handlers use nothing that 0.1 lacks: future
        // and Metadata.state_type_id are never read or written.
        int32_t minor = CBX_XLA_API_MINOR;
        if (frame->api != NULL && frame->api->struct_size >= offsetof(cbx_xla_api, internal_api)) {
          if (frame->api->api_version.major_version == CBX_XLA_API_MAJOR &&
              frame->api->api_version.minor_version == 1) {
            minor = 1;
          }
        } else if (frame->struct_size < offsetof(struct callbox_xla_call_frame, future) + sizeof(void *)) {
          minor = 1;
        }
        meta->metadata->api_version.major_version = CBX_XLA_API_MAJOR;
        meta->metadata->api_version.minor_version = minor;
        // Not command-buffer (CUDA graph) compatible: the callback runs on
        // the host, so a captured graph could not replay it.
        meta->metadata->traits = 0;
        return NULL;
      }
    } else if (frame->stage != CBX_XLA_STAGE_EXECUTE) {
      return NULL;
    } else {
      struct callbox_xla_error *xla_err = NULL;
      if (gpu && cbx_stream(&call, frame, &xla_err) < 0 && xla_err != NULL) return xla_err;
      if (call.refusal_kind == 0 && cbx_buffers(&call, &frame->args, "argument", call.args, &call.num_args) == 0 &&
          cbx_buffers(&call, &frame->rets, "result", call.rets, &call.num_rets) == 0) {
        cbx_attrs(&call, &frame->attrs);
      }
    }
  }
  if (cbx_in_fork_child()) {
    // The Go runtime did not survive the fork: never enter it (exports.c).
    char msg[1024];
    cbx_fork_message(gpu ? "callbox_xla_ffi_cuda" : "callbox_xla_ffi", msg, sizeof msg);
    return cbx_error(frame, 9, msg);  // FAILED_PRECONDITION
  }
  int32_t code = cbxXlaExecute(&call);
  if (code == 0) return NULL;
  struct callbox_xla_error *err = cbx_error(frame, code, call.message != NULL ? call.message : "callbox: call failed");
  free(call.message);
  return err;
}

struct callbox_xla_error *callbox_xla_ffi(struct callbox_xla_call_frame *frame) { return cbx_handle(frame, 0); }

struct callbox_xla_error *callbox_xla_ffi_cuda(struct callbox_xla_call_frame *frame) { return cbx_handle(frame, 1); }

// cbx_entry_addr gives tests the addresses of the entries XLA and a
// binding call through a pointer: 0 the CPU handler, 1 the CUDA handler,
// 2 callbox_cuda_call_dlpack.
void *cbx_entry_addr(int which) {
  switch (which) {
    case 0: return (void *)callbox_xla_ffi;
    case 1: return (void *)callbox_xla_ffi_cuda;
    default: return (void *)callbox_cuda_call_dlpack;
  }
}
