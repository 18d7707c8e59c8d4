// Prototypes of the few wasmtime C API functions callbox calls directly.
// The symbols are linked by wasmtime-go (libwasmtime.a); the declarations
// are ours because wasmtime-go does not export its include path. They match
// wasmtime v39's headers (wasmtime/func.h, store.h, trap.h, error.h, wasm.h).
#ifndef CALLBOX_WASMTIME_GLUE_H
#define CALLBOX_WASMTIME_GLUE_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_trap_t wasm_trap_t;
typedef struct wasm_frame_t wasm_frame_t;
typedef struct wasm_engine_t wasm_engine_t;
typedef struct wasmtime_linker wasmtime_linker_t;
typedef struct wasmtime_module wasmtime_module_t;

// wasmtime_instance_t, laid out as wasmtime/instance.h declares it.
typedef struct cb_instance {
  uint64_t store_id;
  size_t private_;
} cb_instance_t;

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

// wasmtime_global_t, laid out as wasmtime/extern.h declares it (20 bytes of
// fields, padded to 24).
typedef struct cb_global {
  uint64_t store_id;
  uint32_t private1;
  uint32_t private2;
  uint32_t private3;
} cb_global_t;

// Outcome of one guest call, with the memory view and the metered budget
// counter after it.
typedef struct cb_call_result {
  wasmtime_error_t *error;
  wasm_trap_t *trap;
  uint8_t *mem_data;
  size_t mem_size;
  int64_t counter;
  // cb_instantiate only: the memfd behind the instance's memory and the
  // bytes it may grow to, when its engine shares memory
  // (cb_config_shared_memory); -1 otherwise.
  int memfd;
  size_t mem_cap;
  // Nonzero when the entry did not run: the calling thread had only this
  // many bytes of native stack below it, fewer than need, and no stack
  // of its own could be had (no switch on this system, or no memory).
  size_t stack_room;
} cb_call_result_t;

// Frame information copied out of a trap.
typedef struct cb_frame {
  uint32_t func_index;
  size_t module_offset;
  const char *func_name;
  size_t func_name_len;
} cb_frame_t;

// cb_ticker_t advances the epoch of every engine it holds at a fixed
// interval, on a thread of its own that Go's scheduler does not run, and
// only while at least one guest call is running. Opaque to Go.
typedef struct cb_ticker cb_ticker_t;

// cb_ticker_new starts the ticker thread. cores is how many guest calls
// that outlive a tick run at once (core turns, turns.c); 0 turns the limit
// off.
cb_ticker_t *cb_ticker_new(int64_t interval_ns, int64_t cores);
// cb_ticker_tid is the ticker thread's id (Linux's gettid), or -1 where
// there is none to give; a worker's host raises its priority by it.
int32_t cb_ticker_tid(cb_ticker_t *t);
// cb_ticker_add registers an engine; it returns 0 when the ticker is full.
int cb_ticker_add(cb_ticker_t *t, wasm_engine_t *engine);
// cb_ticker_close stops the thread and frees the ticker; no engine is
// touched after it returns.
void cb_ticker_close(cb_ticker_t *t);

// Why the epoch callback stopped a guest.
enum { CB_TRIP_NONE = 0, CB_TRIP_DEADLINE = 1, CB_TRIP_STOP = 2, CB_TRIP_CPU = 3 };

// cb_guard_t is one store's per-call interruption state, read by the epoch
// callback on the guest's thread. The deadline is checked in C, so a
// timeout never waits for the Go scheduler; the caller's context is
// watched from Go only for calls that outlive one tick.
typedef struct cb_guard {
  cb_ticker_t *ticker;
  uintptr_t handle;     // cgo handle of the Go instance
  void *inst;           // the Go instance itself, pinned (runtime.Pinner)
  const struct cb_memory *mem; // the instance's memory once known; NULL before
  // A metered instance's budget global, as host calls reach it: the caller
  // of the host call in progress (NULL outside one), and the global once
  // found through it.
  struct wasmtime_caller *caller;
  cb_global_t budget;
  int32_t has_budget;
  int64_t deadline_ns;  // CLOCK_MONOTONIC; 0: none (also between calls)
  // max_cpu: the call's CPU time limit (0: none) and its thread's CPU clock
  // when it began (CLOCK_THREAD_CPUTIME_ID: the guest runs on the calling
  // thread, on its own stack or a big one of the library's).
  int64_t cpu_limit_ns;
  int64_t cpu_start_ns;
  uint32_t seq;         // the call's number, never 0
  uint32_t stop;        // set (atomically, from Go) to seq to stop the call
  int32_t watch;        // ask Go to watch the context at the first tick
  int32_t tripped;      // CB_TRIP_*: set by the callback when it stops a call
  // The core turn (see cb_ticker_t): whether this call holds one (set by
  // whichever thread hands it over, under the ticker's cores lock), the
  // next guard in the queue waiting for one, the waiting call's place in
  // it, and the condition it waits on.
  int32_t core;
  int64_t turn_since; // when the turn was taken (while core is set)
  struct cb_guard *next_waiting;
  int64_t waiting_key;
  pthread_cond_t wake;
#ifdef __linux__
  // The waiting thread (core_give pins it to the giver's core until it
  // runs), and the cores it may run on otherwise.
  int32_t tid;
  int32_t has_mask;
  int32_t pinned;
  cpu_set_t mask;
#endif
} cb_guard_t;

// cb_guard_new allocates a zeroed guard for one instance (NULL when out of
// memory); cb_guard_free frees it once its store is gone.
cb_guard_t *cb_guard_new(cb_ticker_t *t, uintptr_t handle);
void cb_guard_free(cb_guard_t *g);
// cb_guard_release_turn gives up the core turn g's call holds, if any;
// called on the call's own thread, from a host call about to block.
void cb_guard_release_turn(cb_guard_t *g);

// cb_ticker_turns reports the core turns now: those nobody holds, the
// calls waiting for one, and how many turns calls blocking in host calls
// have given up so far (for tests that wait on these instead of sleeping).
void cb_ticker_turns(cb_ticker_t *t, int64_t *free_cores, int32_t *waiting, uint64_t *given_up);
// cb_guard_poke wakes g's call if it is waiting for a turn, to see that
// its stop word was set.
void cb_guard_poke(cb_guard_t *g);

// cb_ticker_register adds a guard whose call deadlines the thread ticks
// at (besides every interval); it returns 0 when out of memory.
// cb_ticker_unregister removes it; after it returns the thread no longer
// reads the guard.
int cb_ticker_register(cb_ticker_t *t, cb_guard_t *g);
void cb_ticker_unregister(cb_ticker_t *t, cb_guard_t *g);

typedef struct wasmtime_linker wasmtime_linker_t;
typedef struct wasm_functype_t wasm_functype_t;

// cb_define_host defines module.name in linker as a host function whose
// body is Go's callboxHost: wasmtime's unchecked host-call path, so a call
// from the guest costs one C-to-Go crossing and no allocation. fn is the
// function's index in the engine's host-function table.
wasmtime_error_t *cb_define_host(wasmtime_linker_t *linker, const char *module,
                                 size_t module_len, const char *name,
                                 size_t name_len, const wasm_functype_t *ty,
                                 uintptr_t fn);
// cb_counter_get and cb_counter_set read and write a metered instance's
// budget counter from the host call in progress on g (0 / nothing when
// there is none, or no counter).
int64_t cb_counter_get(cb_guard_t *g);
void cb_counter_set(cb_guard_t *g, int64_t v);
// cb_budget_name is the name of the metered module's budget global that
// the counter functions look up (meter.BudgetExport; the engine checks
// they agree).
const char *cb_budget_name(void);
wasmtime_context_t *cb_store_context(wasmtime_store_t *store);

typedef struct wasm_config_t wasm_config_t;
// cb_config_shared_memory makes engines built from cfg create every linear
// memory as a memfd mapped MAP_SHARED and sealed against shrinking, which
// another process may map (the process-isolation worker hands it to the
// host): wasmtime's host memory creator, with copy-on-write images off.
// Returns 0 where memfd is not available (not Linux).
int cb_config_shared_memory(wasm_config_t *cfg);
void cb_set_epoch_callback(wasmtime_store_t *store, cb_guard_t *guard);
// cb_mono_ns reads CLOCK_MONOTONIC, the clock of the guard's deadlines.
int64_t cb_mono_ns(void);
// cb_guard_begin arms a call made outside cb_call (instantiation): its
// absolute deadline (CLOCK_MONOTONIC ns; 0: none), the ticker running, and
// the guard as the calling thread's current one (host calls find their
// instance through it), until cb_guard_end. The caller keeps the goroutine
// on its thread (runtime.LockOSThread) in between.
void cb_guard_begin(cb_guard_t *g, int64_t deadline_ns, int32_t watch);
void cb_guard_end(cb_guard_t *g);
// cb_call arms the call (the metered budget counter, when budget is not
// NULL, to counter; the guard's absolute deadline deadline_ns; an epoch
// deadline one tick ahead), calls fn with wasmtime's unchecked API, and
// reads back the counter and the memory's data pointer and size: one cgo
// crossing per call.
// need is the native stack the guest may use (its max_stack and wasmtime's
// own frames): where the calling thread has less room below its frame,
// the call runs on a stack of the thread's own (cb_on_big_stack).
void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, const cb_memory_t *mem,
             const cb_global_t *budget, int64_t counter, cb_guard_t *guard,
             int64_t deadline_ns, int64_t cpu_limit_ns, int32_t watch, size_t need,
             cb_call_result_t *out);
// cb_instantiate is wasmtime_linker_instantiate (start functions run in
// it) with need as for cb_call; the error or trap goes to out.
void cb_instantiate(const wasmtime_linker_t *linker, wasmtime_context_t *ctx,
                    const wasmtime_module_t *module, size_t need,
                    cb_instance_t *instance, cb_call_result_t *out);
// cb_stack_switches says whether this build runs guests on a stack of the
// thread's own when the thread's is small (Linux on x86-64, or with glibc).
int cb_stack_switches(void);
// cb_test_stack_switch chooses the switch: the x86-64 assembly (0),
// makecontext/swapcontext (1), what other glibc targets run, or none (2),
// what musl off x86-64 and other systems have, so that tests run each
// here. It returns the mode before, plus 1, or 0 where that choice is not
// offered.
int cb_test_stack_switch(int mode);
// cb_stack_switch_count counts the entries that switched stacks, and
// cb_stacks_freed the threads' own stacks unmapped as their threads ended.
uint64_t cb_stack_switch_count(void);
uint64_t cb_stacks_freed(void);
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
// cb_error_frames is cb_trap_frames for an error that ended a call.
size_t cb_error_frames(wasmtime_error_t *err, cb_frame_t *frames, size_t cap,
                       void **trace_out);
void cb_trace_delete(void *trace);
void cb_trap_delete(wasm_trap_t *trap);
void cb_error_delete(wasmtime_error_t *err);

#endif
