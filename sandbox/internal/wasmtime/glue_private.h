// glue_private.h: what the glue's C files share and Go never sees (glue.h
// is what the Go files include). It holds our declarations of the wasmtime
// C API functions glue.h lacks, with the layouts they take; the Go
// callbacks; the ticker's struct, which the ticker, the core turns and the
// guard all reach into; the clocks; and the few functions one C file calls
// in another, named cb__ (every other function is static: a non-static
// symbol is global across the whole link). Include it first in every C
// file: it defines _GNU_SOURCE before any system header.
//
// The glue, one job a file:
//   ticker.c  the epoch ticker thread; engine and guard registration
//   turns.c   core turns: the queue, lingering turns, pinning
//   guard.c   the per-call guard: epoch callback, host-call trampoline,
//             budget counter, begin/end
//   stack.c   a big stack for wasmtime's entries (switch, ucontext,
//             per-thread stacks)
//   memory.c  shared linear memory (process isolation)
//   call.c    instantiate, call, memory view, trap/error/frame accessors
#ifndef CALLBOX_WASMTIME_GLUE_PRIVATE_H
#define CALLBOX_WASMTIME_GLUE_PRIVATE_H

// sched_getcpu, sched_setaffinity and the CPU_* macros (core turns),
// pthread_getattr_np (the big stack), memfd_create (shared memory).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glue.h"

// ---- the wasmtime C API (wasmtime v39's headers) ------------------------

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
extern wasmtime_error_t *wasmtime_linker_instantiate(
    const wasmtime_linker_t *linker, wasmtime_context_t *store,
    const wasmtime_module_t *module, cb_instance_t *instance,
    wasm_trap_t **trap);
// wasmtime_val_t: a kind byte, then a 16-byte union at offset 8.
typedef struct {
  uint8_t kind;
  union {
    int64_t i64;
    uint8_t bytes[16];
  } of;
} cb_val_t;
enum { CB_WASMTIME_I64 = 1 };
extern void wasmtime_global_get(wasmtime_context_t *store,
                                const cb_global_t *global, cb_val_t *out);
extern wasmtime_error_t *wasmtime_global_set(wasmtime_context_t *store,
                                             const cb_global_t *global,
                                             const cb_val_t *val);
typedef struct wasmtime_memory wasmtime_memory_t;
extern uint8_t *wasmtime_memory_data(const wasmtime_context_t *store,
                                     const wasmtime_memory_t *memory);
extern size_t wasmtime_memory_data_size(const wasmtime_context_t *store,
                                        const wasmtime_memory_t *memory);
extern bool wasmtime_trap_code(const wasm_trap_t *trap, uint8_t *code);
extern void wasm_trap_message(const wasm_trap_t *trap, cb_byte_vec_t *out);
extern void wasm_trap_trace(const wasm_trap_t *trap, cb_frame_vec_t *out);
extern void wasmtime_error_wasm_trace(const wasmtime_error_t *error,
                                      cb_frame_vec_t *out);
extern void wasm_trap_delete(wasm_trap_t *trap);
extern void wasm_byte_vec_delete(cb_byte_vec_t *vec);
extern void wasm_frame_vec_delete(cb_frame_vec_t *vec);
extern uint32_t wasm_frame_func_index(const wasm_frame_t *frame);
extern size_t wasm_frame_module_offset(const wasm_frame_t *frame);
extern const cb_byte_vec_t *wasmtime_frame_func_name(const wasm_frame_t *frame);

extern void wasmtime_engine_increment_epoch(wasm_engine_t *engine);

typedef struct wasmtime_caller wasmtime_caller_t;
// wasmtime_extern_t: a kind byte, then a union whose largest member is the
// 24-byte wasmtime_memory_t (8-byte aligned).
typedef struct {
  uint8_t kind;
  union {
    cb_memory_t memory;
    cb_global_t global;
    cb_wasmtime_func_t func;
  } of;
} cb_extern_t;
#define CB_EXTERN_GLOBAL 1
#define CB_EXTERN_MEMORY 3
extern wasmtime_error_t *wasmtime_linker_define_func_unchecked(
    wasmtime_linker_t *linker, const char *module, size_t module_len,
    const char *name, size_t name_len, const wasm_functype_t *ty,
    wasm_trap_t *(*cb)(void *env, wasmtime_caller_t *caller,
                       cb_val_raw_t *args_and_results, size_t n),
    void *data, void (*finalizer)(void *));
extern bool wasmtime_caller_export_get(wasmtime_caller_t *caller,
                                       const char *name, size_t name_len,
                                       cb_extern_t *item);
extern wasmtime_context_t *wasmtime_caller_context(wasmtime_caller_t *caller);
extern wasm_trap_t *wasmtime_trap_new(const char *msg, size_t msg_len);

// The memory-creator API (wasmtime/config.h), for memory.c: a creator
// returns a linear memory as an env pointer and two callbacks, and
// wasmtime owns what it returns.
typedef struct wasm_memorytype_t wasm_memorytype_t;
typedef uint8_t *(*cb_memory_get_fn)(void *env, size_t *byte_size, size_t *byte_capacity);
typedef wasmtime_error_t *(*cb_memory_grow_fn)(void *env, size_t new_size);
typedef struct {
  void *env;
  cb_memory_get_fn get_memory;
  cb_memory_grow_fn grow_memory;
  void (*finalizer)(void *);
} cb_linear_memory_t;
typedef wasmtime_error_t *(*cb_new_memory_fn)(void *env, const wasm_memorytype_t *ty,
                                              size_t minimum, size_t maximum,
                                              size_t reserved_size_in_bytes,
                                              size_t guard_size_in_bytes,
                                              cb_linear_memory_t *memory_ret);
typedef struct {
  void *env;
  cb_new_memory_fn new_memory;
  void (*finalizer)(void *);
} cb_memory_creator_t;
extern void wasmtime_config_host_memory_creator_set(wasm_config_t *, cb_memory_creator_t *);
extern void wasmtime_config_memory_init_cow_set(wasm_config_t *, bool);

// The layouts copied from wasmtime's headers must match them exactly.
_Static_assert(sizeof(cb_memory_t) == 24, "wasmtime_memory_t is 24 bytes");
_Static_assert(sizeof(cb_global_t) == 24, "wasmtime_global_t is 24 bytes");
_Static_assert(sizeof(cb_val_t) == 24, "wasmtime_val_t is 24 bytes");
_Static_assert(sizeof(cb_wasmtime_func_t) == 16, "wasmtime_func_t is 16 bytes");
_Static_assert(sizeof(cb_val_raw_t) == 16, "wasmtime_val_raw_t is 16 bytes");
_Static_assert(sizeof(cb_extern_t) == 32, "wasmtime_extern_t is 32 bytes");

// ---- Go callbacks (cgo exports) -----------------------------------------

// Implemented in Go (engine.go): runs host function fn for the instance
// inst, on args (results written back), with the guest's memory.
extern int callboxHost(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                       uint8_t *mem, size_t mem_size);

// Implemented in Go (instance.go): starts watching the calling context.
extern void callboxWatch(uintptr_t handle);

// ---- clocks -------------------------------------------------------------

static inline int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// thread_cpu_ns is the CPU time the calling thread has used.
static inline int64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
    return 0;
  }
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- the ticker (ticker.c) ----------------------------------------------

#define CB_MAX_ENGINES 64

// cb_linger_t is a turn kept by the thread whose call just ended (see
// core turns): owner identifies the thread's claim (0: slot unused), until
// is when the ticker gives the turn on.
typedef struct {
  uint64_t owner;
  int64_t until;
} cb_linger_t;

struct cb_ticker {
  pthread_mutex_t mu; // guards engines, closed and the sleep/wake hand-off
  pthread_cond_t cond;
  pthread_t thread;
  int64_t interval_ns;
  int64_t cores; // turns: guest calls past a tick that run at once (0: no limit)
  wasm_engine_t *engines[CB_MAX_ENGINES];
  size_t n_engines;
  int closed;
  int64_t active;  // atomic: guest calls running
  int32_t running; // atomic: the thread is ticking (not parked)
  int32_t tid;     // the thread's id (Linux; -1 elsewhere), set before cb_ticker_new returns
  // Every instance's guard, whose deadline_ns the thread reads to tick at
  // the earliest deadline of a running call (guarded by mu).
  cb_guard_t **guards;
  size_t n_guards, cap_guards;
  // Core turns: cores_mu guards free_cores (turns nobody holds) and the
  // queue of calls waiting for one (earliest waiting_key first);
  // n_waiting mirrors the queue's length for a lock-free look.
  pthread_mutex_t cores_mu;
  int64_t free_cores;
  cb_guard_t *waiting;
  int32_t n_waiting;
  int64_t head_key; // atomic: the first waiting call's key (INT64_MAX: none)
  // Turns lingering with the threads whose calls just ended (cores slots,
  // guarded by cores_mu; n_lingering, atomic, counts the used ones).
  cb_linger_t *linger;
  int32_t n_lingering;
  uint64_t linger_seq; // the last owner number given out (cores_mu)
  uint64_t given_up;   // atomic: turns given up by calls blocking in host calls
};

// ---- across files -------------------------------------------------------

// ticker.c: cb__ticker_enter marks a call as running, waking the thread if
// it is parked; cb__ticker_exit marks it done.
void cb__ticker_enter(cb_ticker_t *t);
void cb__ticker_exit(cb_ticker_t *t);

// turns.c: cb__linger_expire hands on every lingering turn whose tick is
// over (cores_mu held); cb__take_turn runs at every tick of a call and
// returns CB_TRIP_NONE or why the call must stop; cb__turn_end gives up
// the turn g's call holds, if any.
void cb__linger_expire(cb_ticker_t *t, int64_t now);
int cb__take_turn(cb_ticker_t *t, cb_guard_t *g, int64_t now);
void cb__turn_end(cb_guard_t *g);

// stack.c: cb__on_big_stack runs fn(arg) with need bytes of native stack
// below it (0), or returns the thread's room when it cannot; cb__host_call
// runs callboxHost, on the thread's own stack when the guest runs on a
// switched one.
size_t cb__on_big_stack(void (*fn)(void *), void *arg, size_t need);
int cb__host_call(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                  uint8_t *data, size_t size);

// memory.c: the memory the last instantiation on this thread made, for
// cb_instantiate to report. cb__new_memory_reset forgets it before an
// instantiation; cb__new_memory_take returns its memfd (-1: none) and
// capacity and forgets the memfd.
void cb__new_memory_reset(void);
int cb__new_memory_take(size_t *cap);

#endif
