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

// Outcome of one guest call.
typedef struct cb_call_result {
  wasmtime_error_t *error;
  wasm_trap_t *trap;
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
void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, cb_call_result_t *out);
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
