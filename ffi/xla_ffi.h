/*
 * xla_ffi.h - callbox's own declarations of the parts of the XLA FFI C ABI
 * its two handlers (callbox_xla_ffi for CPU, callbox_xla_ffi_cuda for
 * CUDA) use: the typed custom-call ABI, api_version 4 in StableHLO,
 * written from the documented layouts (shared/xla-ffi.md): 64-bit, every
 * enum a 4-byte int. Offsets are asserted in xla.c. Internal to
 * libcallbox: the one set of XLA declarations in the project.
 */
#ifndef CALLBOX_XLA_FFI_H
#define CALLBOX_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

/* Enums. */
enum {
  CBX_XLA_DT_TOKEN = 17,

  CBX_XLA_ARG_BUFFER = 1,
  CBX_XLA_RET_BUFFER = 1,

  CBX_XLA_ATTR_ARRAY = 1,
  CBX_XLA_ATTR_DICTIONARY = 2,
  CBX_XLA_ATTR_SCALAR = 3,
  CBX_XLA_ATTR_STRING = 4,

  CBX_XLA_STAGE_EXECUTE = 3,

  CBX_XLA_EXTENSION_METADATA = 1,
};

/* The XLA FFI API version these declarations are written against, which
 * the handlers declare in the metadata handshake. XLA accepts a handler
 * whose version is at most its own and not older than it still supports;
 * 0.2 has the fields declared here that 0.1 lacked (CallFrame.future, in
 * the frame's struct_size; Metadata.state_type_id), and jaxlib ships 0.2
 * headers since jax 0.9. The version is also ffi.xlaAPIVersion (Go). */
#define CBX_XLA_API_MAJOR 0
#define CBX_XLA_API_MINOR 2

typedef struct cbx_xla_extension {
  size_t struct_size;
  int32_t type;
  struct cbx_xla_extension *next;
} cbx_xla_extension;

typedef struct cbx_xla_api_version {
  size_t struct_size;
  void *extension_start;
  int32_t major_version;
  int32_t minor_version;
} cbx_xla_api_version;

typedef struct cbx_xla_buffer {
  size_t struct_size;
  void *extension_start;
  int32_t dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
} cbx_xla_buffer;

typedef struct cbx_xla_args {
  size_t struct_size;
  void *extension_start;
  int64_t size;
  int32_t *types;
  void **args; /* each a cbx_xla_buffer* for BUFFER */
} cbx_xla_args;

typedef struct cbx_xla_bytespan {
  const char *ptr;
  size_t len;
} cbx_xla_bytespan;

typedef struct cbx_xla_attrs {
  size_t struct_size;
  void *extension_start;
  int64_t size;
  int32_t *types;
  cbx_xla_bytespan **names;
  void **attrs; /* a cbx_xla_bytespan* for STRING */
} cbx_xla_attrs;

struct cbx_xla_api;

/* The call frame (callbox.h names it struct callbox_xla_call_frame). */
struct callbox_xla_call_frame {
  size_t struct_size;
  cbx_xla_extension *extension_start;
  const struct cbx_xla_api *api;
  void *ctx;
  int32_t stage;
  cbx_xla_args args;
  cbx_xla_args rets;
  cbx_xla_attrs attrs;
  void *future; /* only when struct_size >= 176 */
};

/* The smallest call frame an api 0.1 XLA passes. */
#define CBX_XLA_FRAME_MIN_SIZE 168

typedef struct cbx_xla_metadata {
  size_t struct_size;
  cbx_xla_api_version api_version;
  uint32_t traits;
  int64_t state_type_id; /* only when struct_size >= 48 */
} cbx_xla_metadata;

typedef struct cbx_xla_metadata_extension {
  cbx_xla_extension extension_base;
  cbx_xla_metadata *metadata;
} cbx_xla_metadata_extension;

typedef struct cbx_xla_error_create_args {
  size_t struct_size;
  void *extension_start;
  const char *message;
  int32_t errc;
} cbx_xla_error_create_args;

/* XLA's own struct size for Error_Create_Args: up to the end of errc. */
#define CBX_XLA_ERROR_CREATE_ARGS_SIZE (offsetof(cbx_xla_error_create_args, errc) + sizeof(int32_t))

typedef struct callbox_xla_error *(*cbx_xla_error_create_fn)(cbx_xla_error_create_args *args);

typedef struct cbx_xla_stream_get_args {
  size_t struct_size;
  void *extension_start;
  void *ctx;
  void *stream; /* out: the cudaStream_t the call is ordered on */
} cbx_xla_stream_get_args;

#define CBX_XLA_STREAM_GET_ARGS_SIZE (offsetof(cbx_xla_stream_get_args, stream) + sizeof(void *))

typedef struct callbox_xla_error *(*cbx_xla_stream_get_fn)(cbx_xla_stream_get_args *args);

typedef struct cbx_xla_api {
  size_t struct_size;
  void *extension_start;
  cbx_xla_api_version api_version;
  void *internal_api;
  cbx_xla_error_create_fn error_create; /* slot 0 */
  void *error_get_message;              /* slot 1 */
  void *error_destroy;                  /* slot 2 */
  void *handler_register;               /* slot 3 */
  cbx_xla_stream_get_fn stream_get;     /* slot 4 */
} cbx_xla_api;

/* The smallest api table with slot 0 (Error_Create), and with slot 4
 * (Stream_Get, which only the CUDA platform's table serves). */
#define CBX_XLA_API_MIN_SIZE (offsetof(cbx_xla_api, error_create) + sizeof(void *))
#define CBX_XLA_API_STREAM_SIZE (offsetof(cbx_xla_api, stream_get) + sizeof(void *))

/* ---- between xla.c (the one decoder) and the Go side (xla.go) ---- */

/* The most non-token buffers a call may have on each side. */
#define CBX_MAX_BUFFERS 64

/* One decoded buffer. index is its position among XLA's arguments or
 * results (tokens included), for messages. */
typedef struct cbx_buf {
  void *data;
  int64_t *dims;
  int64_t rank;
  int32_t dtype;
  int32_t index;
} cbx_buf;

/* The longest refusal message the decoder writes. */
#define CBX_REFUSAL_CAP 256

/* A decoded EXECUTE call, or the decoder's refusal of a malformed one:
 * either way Go gets it, and Go alone turns failures into codes. */
typedef struct cbx_call {
  uintptr_t stream; /* the CUDA stream (callbox_xla_ffi_cuda); 0: none, a host call */
  const char *callback;
  size_t callback_len;
  const char *chain; /* NULL: no chain attribute */
  size_t chain_len;
  const char *host; /* NULL: no host attribute (the default host) */
  size_t host_len;
  int64_t num_args;
  int64_t num_rets;
  char *message;          /* out: malloc'd by the Go side on failure */
  int32_t refusal_kind;   /* an abi.Kind when the decoder refused the frame, else 0 */
  int32_t batched;        /* attribute batched = "true": a batched call (host.Request.Batch) */
  char refusal[CBX_REFUSAL_CAP]; /* the refusal's message */
  cbx_buf args[CBX_MAX_BUFFERS];
  cbx_buf rets[CBX_MAX_BUFFERS];
} cbx_call;

#endif
