// The XLA FFI handler for the CUDA platform (callbox_xla_ffi_cuda) and
// the flat buffer list it hands Go. Declarations only: cgo preambles that
// use //export include this file.
#ifndef CALLBOX_XLA_CUDA_H
#define CALLBOX_XLA_CUDA_H

#include <stddef.h>
#include <stdint.h>

// One XLA buffer as the handler passes it to Go (TOKEN buffers left out).
typedef struct cbcuda_buf {
  int32_t dtype;        // XLA_FFI_DataType (= abi.DType)
  int32_t index;        // its position among XLA's arguments or results
  uintptr_t data;       // device address
  int64_t rank;
  const int64_t *dims;  // rank entries, owned by XLA
} cbcuda_buf;

// At most this many non-token arguments, and as many results, per call.
#define CBCUDA_MAX_BUFFERS 64

// The message buffer the handler gives Go for an error.
#define CBCUDA_MSG_CAP 2048

struct cbcuda_xla_error;
struct cbcuda_xla_call_frame;

// callbox_xla_ffi_cuda is the XLA FFI handler (api_version 4 custom call)
// for platform "CUDA". Attributes: callback (string, required), chain
// (string, optional: the call is the named chain's next step).
struct cbcuda_xla_error *callbox_xla_ffi_cuda(struct cbcuda_xla_call_frame *call_frame);

// callbox_cuda_call_dlpack's address (tests call it through a pointer).
void *cbcuda_dlpack_entry(void);

#endif
