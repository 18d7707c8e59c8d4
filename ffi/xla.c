// The XLA FFI handler callbox_xla_ffi: decodes the call frame in C (no Go
// on the metadata, non-execute and malformed-frame paths) and calls into Go
// once per EXECUTE call with the decoded buffers.
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

// The DLPack layout of callbox_tensor.
_Static_assert(sizeof(callbox_tensor) == 48, "callbox_tensor size");
_Static_assert(offsetof(callbox_tensor, device) == 8, "callbox_tensor.device");
_Static_assert(offsetof(callbox_tensor, ndim) == 16, "callbox_tensor.ndim");
_Static_assert(offsetof(callbox_tensor, dtype) == 20, "callbox_tensor.dtype");
_Static_assert(offsetof(callbox_tensor, shape) == 24, "callbox_tensor.shape");
_Static_assert(offsetof(callbox_tensor, strides) == 32, "callbox_tensor.strides");
_Static_assert(offsetof(callbox_tensor, byte_offset) == 40, "callbox_tensor.byte_offset");

// The Go side (xla.go); returns an absl code, 0 on success, and on failure
// sets call->message (malloc'd).
extern int32_t cbxXlaExecute(cbx_call *call);

// How far the handler follows an extension chain.
#define CBX_MAX_EXTENSIONS 64

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
  args.message = msg;
  args.errc = code;
  return api->error_create(&args);
}

static struct callbox_xla_error *cbx_errorf(const struct callbox_xla_call_frame *frame, int32_t code,
                                            const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static struct callbox_xla_error *cbx_errorf(const struct callbox_xla_call_frame *frame, int32_t code,
                                            const char *fmt, ...) {
  char msg[512];
  int n = snprintf(msg, sizeof msg, "callbox InvalidArgument: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  return cbx_error(frame, code, msg);
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
static struct callbox_xla_error *cbx_buffers(const struct callbox_xla_call_frame *frame,
                                             const cbx_xla_args *side, const char *what,
                                             cbx_buf *out, int64_t *n_out) {
  *n_out = 0;
  if (side->size < 0) return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "%s: count %lld is negative", what, (long long)side->size);
  if (side->size > 0 && (side->types == NULL || side->args == NULL))
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "%s: %lld buffers but NULL arrays", what, (long long)side->size);
  for (int64_t i = 0; i < side->size; i++) {
    if (side->types[i] != CBX_XLA_ARG_BUFFER)
      return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "%s %lld: type %d is not a buffer", what, (long long)i, side->types[i]);
    const cbx_xla_buffer *b = (const cbx_xla_buffer *)side->args[i];
    if (b == NULL) return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "%s %lld: NULL buffer", what, (long long)i);
    if (b->dtype == CBX_XLA_DT_TOKEN) continue;  // ordering only: never read or written
    if (*n_out >= CBX_MAX_BUFFERS)
      return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "%s: more than %d buffers", what, CBX_MAX_BUFFERS);
    cbx_buf *o = &out[(*n_out)++];
    o->data = b->data;
    o->dims = b->dims;
    o->rank = b->rank;
    o->dtype = b->dtype;
    o->index = (int32_t)i;
  }
  return NULL;
}

static int cbx_name_is(const cbx_xla_bytespan *s, const char *name) {
  size_t n = strlen(name);
  return s != NULL && s->len == n && s->ptr != NULL && memcmp(s->ptr, name, n) == 0;
}

// cbx_string reads a STRING attribute.
static struct callbox_xla_error *cbx_string(const struct callbox_xla_call_frame *frame, int64_t i,
                                            const char *name, const char **ptr, size_t *len) {
  if (frame->attrs.types[i] != CBX_XLA_ATTR_STRING)
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "attribute %s has type %d, want a string (%d)", name, frame->attrs.types[i], CBX_XLA_ATTR_STRING);
  const cbx_xla_bytespan *v = (const cbx_xla_bytespan *)frame->attrs.attrs[i];
  if (v == NULL || (v->ptr == NULL && v->len != 0))
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "attribute %s: NULL string", name);
  *ptr = v->ptr;
  *len = v->len;
  return NULL;
}

struct callbox_xla_error *callbox_xla_ffi(struct callbox_xla_call_frame *frame) {
  if (frame == NULL) return NULL;  // nothing to report through
  if (frame->struct_size < CBX_XLA_FRAME_MIN_SIZE)
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "call frame of %zu bytes, want at least %d", frame->struct_size, CBX_XLA_FRAME_MIN_SIZE);

  // The metadata handshake comes before the stage check: XLA asks for it
  // with stage EXECUTE.
  cbx_xla_metadata_extension *meta = cbx_metadata(frame);
  if (meta != NULL) {
    if (meta->metadata == NULL) return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "metadata extension without metadata");
    meta->metadata->api_version.major_version = 0;
    meta->metadata->api_version.minor_version = 1;
    meta->metadata->traits = 0;
    return NULL;
  }
  if (frame->stage != CBX_XLA_STAGE_EXECUTE) return NULL;

  cbx_call call;
  call.callback = NULL;
  call.callback_len = 0;
  call.chain = NULL;
  call.chain_len = 0;
  call.message = NULL;
  struct callbox_xla_error *err;
  if ((err = cbx_buffers(frame, &frame->args, "argument", call.args, &call.num_args)) != NULL) return err;
  if ((err = cbx_buffers(frame, &frame->rets, "result", call.rets, &call.num_rets)) != NULL) return err;

  const cbx_xla_attrs *attrs = &frame->attrs;
  if (attrs->size < 0 || (attrs->size > 0 && (attrs->types == NULL || attrs->names == NULL || attrs->attrs == NULL)))
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "malformed attributes (%lld)", (long long)attrs->size);
  int have_callback = 0;
  for (int64_t i = 0; i < attrs->size; i++) {
    const cbx_xla_bytespan *name = attrs->names[i];
    if (cbx_name_is(name, "callback")) {
      if ((err = cbx_string(frame, i, "callback", &call.callback, &call.callback_len)) != NULL) return err;
      have_callback = 1;
    } else if (cbx_name_is(name, "chain")) {
      if ((err = cbx_string(frame, i, "chain", &call.chain, &call.chain_len)) != NULL) return err;
      if (call.chain == NULL) call.chain = "";
    } else if (name == NULL || name->ptr == NULL) {
      return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "attribute %lld has no name", (long long)i);
    } else {
      return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "unknown attribute %.*s (callbox takes callback and chain)",
                        (int)(name->len > 64 ? 64 : name->len), name->ptr);
    }
  }
  if (!have_callback)
    return cbx_errorf(frame, CBX_XLA_CODE_INVALID_ARGUMENT, "missing attribute callback (a callback name or content id)");

  int32_t code = cbxXlaExecute(&call);
  if (code == 0) return NULL;
  err = cbx_error(frame, code, call.message != NULL ? call.message : "callbox: call failed");
  free(call.message);
  return err;
}
