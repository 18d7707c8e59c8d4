// call.c: the entries into a guest, each one cgo crossing: instantiation
// (cb_instantiate) and a call (cb_call), each armed by the guard (guard.c)
// and run on a big enough stack (stack.c); and the accessors Go reads a
// store, a memory, a trap, an error and a trap's frames through.
#include "glue_private.h"

wasmtime_context_t *cb_store_context(wasmtime_store_t *store) {
  return wasmtime_store_context(store);
}

typedef struct {
  wasmtime_context_t *ctx;
  const cb_wasmtime_func_t *fn;
  cb_val_raw_t *args;
  size_t nargs;
  const wasmtime_linker_t *linker;
  const wasmtime_module_t *module;
  cb_instance_t *instance;
  cb_call_result_t *out;
} cb_entry_t;

static void cb_entry_call(void *p) {
  cb_entry_t *e = p;
  e->out->error = wasmtime_func_call_unchecked(
      e->ctx, (const wasmtime_func_t *)e->fn, e->args, e->nargs, &e->out->trap);
}

static void cb_entry_instantiate(void *p) {
  cb_entry_t *e = p;
  e->out->error = wasmtime_linker_instantiate(e->linker, e->ctx, e->module,
                                              e->instance, &e->out->trap);
}

void cb_instantiate(const wasmtime_linker_t *linker, wasmtime_context_t *ctx,
                    const wasmtime_module_t *module, size_t need,
                    cb_instance_t *instance, cb_call_result_t *out) {
  out->trap = NULL;
  out->error = NULL;
  out->stack_room = 0;
  cb__new_memory_reset();
  cb_entry_t e = {ctx, NULL, NULL, 0, linker, module, instance, out};
  out->stack_room = cb__on_big_stack(cb_entry_instantiate, &e, need);
  out->memfd = cb__new_memory_take(&out->mem_cap);
}

void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, const cb_memory_t *mem,
             const cb_global_t *budget, int64_t counter, cb_guard_t *guard,
             int64_t deadline_ns, int64_t cpu_limit_ns, int32_t watch, size_t need,
             cb_call_result_t *out) {
  out->trap = NULL;
  out->error = NULL;
  out->counter = 0;
  out->stack_room = 0;
  if (budget) {
    cb_val_t v = {0};
    v.kind = CB_WASMTIME_I64;
    v.of.i64 = counter;
    wasmtime_error_t *err = wasmtime_global_set(ctx, budget, &v);
    if (err) {
      out->error = err;
      return;
    }
  }
  guard->mem = mem;
  guard->cpu_limit_ns = cpu_limit_ns;
  guard->cpu_start_ns = cpu_limit_ns ? thread_cpu_ns() : 0;
  cb_guard_begin(guard, deadline_ns, watch);
  wasmtime_context_set_epoch_deadline(ctx, 1);
  cb_entry_t e = {ctx, fn, args, nargs, NULL, NULL, NULL, out};
  out->stack_room = cb__on_big_stack(cb_entry_call, &e, need);
  cb_guard_end(guard);
  guard->cpu_limit_ns = 0;
  if (budget) {
    cb_val_t v = {0};
    wasmtime_global_get(ctx, budget, &v);
    out->counter = v.of.i64;
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

static size_t frames_of(cb_frame_vec_t *trace, cb_frame_t *frames, size_t cap,
                        void **trace_out);

size_t cb_trap_frames(wasm_trap_t *trap, cb_frame_t *frames, size_t cap,
                      void **trace_out) {
  cb_frame_vec_t *trace = malloc(sizeof(cb_frame_vec_t));
  trace->size = 0;
  trace->data = NULL;
  wasm_trap_trace(trap, trace);
  return frames_of(trace, frames, cap, trace_out);
}

// cb_error_frames is cb_trap_frames for an error that ended a call (the
// epoch callback's interruption: a timeout, a cancel, the CPU limit).
size_t cb_error_frames(wasmtime_error_t *err, cb_frame_t *frames, size_t cap,
                       void **trace_out) {
  cb_frame_vec_t *trace = malloc(sizeof(cb_frame_vec_t));
  trace->size = 0;
  trace->data = NULL;
  wasmtime_error_wasm_trace(err, trace);
  return frames_of(trace, frames, cap, trace_out);
}

static size_t frames_of(cb_frame_vec_t *trace, cb_frame_t *frames, size_t cap,
                        void **trace_out) {
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
