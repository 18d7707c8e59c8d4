#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"

typedef struct {
  size_t size;
  char *data;
} cb_byte_vec_t;

typedef struct {
  size_t size;
  wasm_frame_t **data;
} cb_frame_vec_t;

typedef uint8_t wasmtime_update_deadline_kind_t;
typedef struct wasmtime_func wasmtime_func_t;

extern wasmtime_context_t *wasmtime_store_context(wasmtime_store_t *store);
extern void wasmtime_store_epoch_deadline_callback(
    wasmtime_store_t *store,
    wasmtime_error_t *(*func)(wasmtime_context_t *context, void *data,
                              uint64_t *epoch_deadline_delta,
                              wasmtime_update_deadline_kind_t *update_kind),
    void *data, void (*finalizer)(void *));
extern wasmtime_error_t *wasmtime_error_new(const char *msg);
extern void wasmtime_error_delete(wasmtime_error_t *error);
extern void wasmtime_error_message(const wasmtime_error_t *error,
                                   cb_byte_vec_t *message);
extern wasmtime_error_t *wasmtime_func_call_unchecked(
    wasmtime_context_t *store, const wasmtime_func_t *func, cb_val_raw_t *args,
    size_t nargs, wasm_trap_t **trap);
extern void wasmtime_context_set_epoch_deadline(wasmtime_context_t *context,
                                                uint64_t ticks_beyond_current);
extern wasmtime_error_t *wasmtime_context_set_fuel(wasmtime_context_t *store,
                                                   uint64_t fuel);
extern wasmtime_error_t *wasmtime_context_get_fuel(
    const wasmtime_context_t *context, uint64_t *fuel);
typedef struct wasmtime_memory wasmtime_memory_t;
extern uint8_t *wasmtime_memory_data(const wasmtime_context_t *store,
                                     const wasmtime_memory_t *memory);
extern size_t wasmtime_memory_data_size(const wasmtime_context_t *store,
                                        const wasmtime_memory_t *memory);
extern bool wasmtime_trap_code(const wasm_trap_t *trap, uint8_t *code);
extern void wasm_trap_message(const wasm_trap_t *trap, cb_byte_vec_t *out);
extern void wasm_trap_trace(const wasm_trap_t *trap, cb_frame_vec_t *out);
extern void wasm_trap_delete(wasm_trap_t *trap);
extern void wasm_byte_vec_delete(cb_byte_vec_t *vec);
extern void wasm_frame_vec_delete(cb_frame_vec_t *vec);
extern uint32_t wasm_frame_func_index(const wasm_frame_t *frame);
extern size_t wasm_frame_module_offset(const wasm_frame_t *frame);
extern const cb_byte_vec_t *wasmtime_frame_func_name(const wasm_frame_t *frame);

// Implemented in Go (epoch.go): returns non-zero to stop the guest.
extern int callboxEpochTick(uintptr_t handle);

static wasmtime_error_t *epoch_callback(wasmtime_context_t *ctx, void *data,
                                        uint64_t *delta,
                                        wasmtime_update_deadline_kind_t *kind) {
  (void)ctx;
  *kind = 0; // continue
  *delta = 1;
  if (callboxEpochTick((uintptr_t)data)) {
    return wasmtime_error_new("callbox: guest interrupted");
  }
  return NULL;
}

wasmtime_context_t *cb_store_context(wasmtime_store_t *store) {
  return wasmtime_store_context(store);
}

void cb_set_epoch_callback(wasmtime_store_t *store, uintptr_t handle) {
  wasmtime_store_epoch_deadline_callback(store, epoch_callback, (void *)handle,
                                         NULL);
}

void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, const cb_memory_t *mem,
             uint64_t fuel, cb_call_result_t *out) {
  out->trap = NULL;
  out->error = NULL;
  out->fuel_left = 0;
  if (fuel) {
    wasmtime_error_t *err = wasmtime_context_set_fuel(ctx, fuel);
    if (err) {
      out->error = err;
      return;
    }
  }
  wasmtime_context_set_epoch_deadline(ctx, 1);
  out->error = wasmtime_func_call_unchecked(ctx, (const wasmtime_func_t *)fn,
                                            args, nargs, &out->trap);
  if (fuel) {
    wasmtime_error_t *err = wasmtime_context_get_fuel(ctx, &out->fuel_left);
    if (err) {
      wasmtime_error_delete(err);
    }
  }
  if (mem) {
    cb_memory_view(ctx, mem, &out->mem_data, &out->mem_size);
  }
}

void cb_memory_view(wasmtime_context_t *ctx, const cb_memory_t *mem,
                    uint8_t **data, size_t *size) {
  *data = wasmtime_memory_data(ctx, (const wasmtime_memory_t *)mem);
  *size = wasmtime_memory_data_size(ctx, (const wasmtime_memory_t *)mem);
}

int cb_trap_code(wasm_trap_t *trap, uint8_t *code) {
  return wasmtime_trap_code(trap, code) ? 1 : 0;
}

static size_t copy_vec(cb_byte_vec_t *v, char *buf, size_t cap) {
  size_t n = v->size;
  // wasm_trap_message's vector includes a trailing NUL.
  if (n > 0 && v->data[n - 1] == 0) {
    n--;
  }
  memcpy(buf, v->data, n < cap ? n : cap);
  return n;
}

size_t cb_trap_message(wasm_trap_t *trap, char *buf, size_t cap) {
  cb_byte_vec_t msg = {0, NULL};
  wasm_trap_message(trap, &msg);
  size_t n = copy_vec(&msg, buf, cap);
  wasm_byte_vec_delete(&msg);
  return n;
}

size_t cb_error_message(wasmtime_error_t *err, char *buf, size_t cap) {
  cb_byte_vec_t msg = {0, NULL};
  wasmtime_error_message(err, &msg);
  size_t n = copy_vec(&msg, buf, cap);
  wasm_byte_vec_delete(&msg);
  return n;
}

size_t cb_trap_frames(wasm_trap_t *trap, cb_frame_t *frames, size_t cap,
                      void **trace_out) {
  cb_frame_vec_t *trace = malloc(sizeof(cb_frame_vec_t));
  trace->size = 0;
  trace->data = NULL;
  wasm_trap_trace(trap, trace);
  for (size_t i = 0; i < trace->size && i < cap; i++) {
    wasm_frame_t *f = trace->data[i];
    frames[i].func_index = wasm_frame_func_index(f);
    frames[i].module_offset = wasm_frame_module_offset(f);
    const cb_byte_vec_t *name = wasmtime_frame_func_name(f);
    frames[i].func_name = name ? name->data : NULL;
    frames[i].func_name_len = name ? name->size : 0;
  }
  *trace_out = trace;
  return trace->size;
}

void cb_trace_delete(void *trace) {
  cb_frame_vec_t *t = trace;
  wasm_frame_vec_delete(t);
  free(t);
}

void cb_trap_delete(wasm_trap_t *trap) { wasm_trap_delete(trap); }

void cb_error_delete(wasmtime_error_t *err) { wasmtime_error_delete(err); }

// The layouts copied from wasmtime's headers must match them exactly.
_Static_assert(sizeof(cb_memory_t) == 24, "wasmtime_memory_t is 24 bytes");
_Static_assert(sizeof(cb_wasmtime_func_t) == 16, "wasmtime_func_t is 16 bytes");
_Static_assert(sizeof(cb_val_raw_t) == 16, "wasmtime_val_raw_t is 16 bytes");
