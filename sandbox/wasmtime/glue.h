// Prototypes of the few wasmtime C API functions callbox calls directly.
// The symbols are linked by wasmtime-go (libwasmtime.a); the declarations
// are ours because wasmtime-go does not export its include path. They match
// wasmtime v39's headers (wasmtime/func.h, store.h, trap.h, error.h, wasm.h).
#ifndef CALLBOX_WASMTIME_GLUE_H
#define CALLBOX_WASMTIME_GLUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_trap_t wasm_trap_t;
typedef struct wasm_frame_t wasm_frame_t;

typedef struct cb_wasmtime_func {
  uint64_t store_id;
  void *private_;
} cb_wasmtime_func_t;

// wasmtime_val_raw_t is a 16-byte union (v128 is its largest member).
typedef struct cb_val_raw {
  uint64_t lo;
  uint64_t hi;
} cb_val_raw_t;

// wasmtime_memory_t, laid out exactly as wasmtime/extern.h declares it: the
// inner struct is padded to 16 bytes, so the second private word sits at
// offset 16 and the whole is 24 bytes.
typedef struct cb_memory {
  struct {
    uint64_t store_id;
    uint32_t private1;
  } inner;
  uint32_t private2;
} cb_memory_t;

// Outcome of one guest call, with the memory view and fuel after it.
typedef struct cb_call_result {
  wasmtime_error_t *error;
  wasm_trap_t *trap;
  uint8_t *mem_data;
  size_t mem_size;
  uint64_t fuel_left;
} cb_call_result_t;

// Frame information copied out of a trap.
typedef struct cb_frame {
  uint32_t func_index;
  size_t module_offset;
  const char *func_name;
  size_t func_name_len;
} cb_frame_t;

wasmtime_context_t *cb_store_context(wasmtime_store_t *store);
void cb_set_epoch_callback(wasmtime_store_t *store, uintptr_t handle);
// cb_call arms the call (fuel when non-zero, an epoch deadline one tick
// ahead), calls fn with wasmtime's unchecked API, and reads back the fuel
// left and the memory's data pointer and size: one cgo crossing per call.
void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, const cb_memory_t *mem,
             uint64_t fuel, cb_call_result_t *out);
// cb_memory_view reads a memory's data pointer and size.
void cb_memory_view(wasmtime_context_t *ctx, const cb_memory_t *mem,
                    uint8_t **data, size_t *size);
int cb_trap_code(wasm_trap_t *trap, uint8_t *code);
// cb_trap_message copies the message into buf (NUL-free) and returns its
// full length.
size_t cb_trap_message(wasm_trap_t *trap, char *buf, size_t cap);
size_t cb_error_message(wasmtime_error_t *err, char *buf, size_t cap);
// cb_trap_frames fills up to cap frames and returns the total count. Names
// point into the trap's trace, valid until cb_trap_delete.
size_t cb_trap_frames(wasm_trap_t *trap, cb_frame_t *frames, size_t cap,
                      void **trace_out);
void cb_trace_delete(void *trace);
void cb_trap_delete(wasm_trap_t *trap);
void cb_error_delete(wasmtime_error_t *err);

#endif
