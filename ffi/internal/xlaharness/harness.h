// A stand-in for XLA in tests: builds XLA FFI call frames and an API table
// (Error_Create, Error_GetMessage, Error_Destroy, Stream_Get) with the
// layouts of the XLA FFI C ABI 0.1, and calls a handler with them.
#ifndef CALLBOX_XLA_HARNESS_H
#define CALLBOX_XLA_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hx_frame hx_frame;

hx_frame *hx_new(int64_t nargs, int64_t nrets, int64_t nattrs);
void hx_free(hx_frame *f);
void hx_arg(hx_frame *f, int64_t i, int32_t arg_type, int32_t dtype, uintptr_t data, int64_t rank, const int64_t *dims);
void hx_ret(hx_frame *f, int64_t i, int32_t ret_type, int32_t dtype, uintptr_t data, int64_t rank, const int64_t *dims);
void hx_attr_str(hx_frame *f, int64_t i, const char *name, size_t name_len, const char *val, size_t val_len);
void hx_attr_i64(hx_frame *f, int64_t i, const char *name, size_t name_len, int64_t val);

// Knobs: the frame's stage and struct_size, the API table's struct_size,
// the stream Stream_Get returns, whether Stream_Get fails, and a metadata
// extension.
void hx_set_stage(hx_frame *f, int stage);
void hx_set_frame_size(hx_frame *f, size_t size);
void hx_set_api_size(hx_frame *f, size_t size);
void hx_set_stream(hx_frame *f, uintptr_t stream, int fail);
void hx_set_null_api(hx_frame *f);

// hx_call calls handler with the frame. It returns -1 when the handler
// returned NULL, else the error's code, its message copied into msg.
int hx_call(hx_frame *f, void *handler, char *msg, size_t cap);

// hx_metadata runs the metadata handshake as a framework at API
// 0.framework_minor does: its frame that version's size, with its api table
// when api_table is non-zero (jaxlib 0.7 passes none): -1 and the version and traits
// the handler reported when it returned NULL, else the error's code.
int hx_metadata(void *handler, int32_t framework_minor, int api_table, int32_t *major, int32_t *minor, uint32_t *traits);

// Errors created by Error_Create and not yet destroyed.
int64_t hx_live_errors(void);
// Stream_Get calls so far.
int64_t hx_stream_gets(void);

#endif

// A DLTensor in C memory (freed with hx_free_tensor), and a call of a
// callbox_cuda_call_dlpack-shaped entry with arrays of them.
void *hx_tensor(uintptr_t data, int32_t device_type, int32_t ndim, const int64_t *shape, uint8_t code, uint8_t bits);
void hx_free_tensor(void *t);
int hx_call_dlpack(void *entry, const char *callback, uintptr_t stream, void **ins, size_t nin, void **outs,
                   size_t nout, char *msg, size_t cap);
