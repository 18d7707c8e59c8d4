#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glue.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

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

// Implemented in Go (engine.go): runs host function fn for the instance
// inst, on args (results written back), with the guest's memory.
extern int callboxHost(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                       uint8_t *mem, size_t mem_size);

// The guard of the guest call running on this thread: set while cb_call
// (or an instantiation between cb_guard_begin and cb_guard_end) runs, so a
// host call finds its instance and memory without a lookup.
static __thread cb_guard_t *cb_current;

// Implemented in Go (engine.go): starts watching the calling context.
extern void callboxWatch(uintptr_t handle);

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- ticker ----------------------------------------------------------------

#define CB_MAX_ENGINES 64

struct cb_ticker {
  pthread_mutex_t mu; // guards engines, closed and the sleep/wake hand-off
  pthread_cond_t cond;
  pthread_t thread;
  int64_t interval_ns;
  int64_t cpus; // cores this process may run on
  wasm_engine_t *engines[CB_MAX_ENGINES];
  size_t n_engines;
  int closed;
  int64_t active;  // atomic: guest calls running
  int32_t running; // atomic: the thread is ticking (not parked)
  // Every instance's guard, whose deadline_ns the thread reads to tick at
  // the earliest deadline of a running call (guarded by mu).
  cb_guard_t **guards;
  size_t n_guards, cap_guards;
  // atomic: when the thread last ticked for a call's deadline (0: never).
  // Until that call has stopped (or an interval has passed), guests far
  // from their own deadline get off their cores when cores are short.
  int64_t urgent_since;
  int64_t urgent_deadline; // atomic: the deadline ticked for at urgent_since
};

// earliest_deadline is the earliest deadline after `after` of a running
// call, or INT64_MAX. Called with t->mu held.
static int64_t earliest_deadline(cb_ticker_t *t, int64_t after) {
  int64_t best = INT64_MAX;
  for (size_t i = 0; i < t->n_guards; i++) {
    int64_t d = __atomic_load_n(&t->guards[i]->deadline_ns, __ATOMIC_RELAXED);
    if (d > after && d < best) {
      best = d;
    }
  }
  return best;
}

static void sleep_until(int64_t when) {
  struct timespec ts = {when / 1000000000, when % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

// The thread ticks every interval, and also at the earliest deadline of a
// running call: a call's deadline then trips within the wake-up latency of
// this thread, not up to a whole interval late.
static void *ticker_main(void *arg) {
  cb_ticker_t *t = arg;
#ifdef __linux__
  // The default timer slack (50 us) delays every wake-up by as much.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif
  // A real-time priority, where the process may take one (CAP_SYS_NICE or
  // RLIMIT_RTPRIO), lets a tick preempt CPU-bound threads at once instead
  // of waiting for the scheduler to give this thread a turn. The thread
  // runs for microseconds per tick. Without the right it stays as it is.
  struct sched_param sp = {.sched_priority = 1};
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
  int64_t next_tick = 0;
  int64_t ticked_until = 0; // deadlines up to here have had their tick
  for (;;) {
    if (!__atomic_load_n(&t->running, __ATOMIC_ACQUIRE)) {
      pthread_mutex_lock(&t->mu);
      while (!t->closed && !__atomic_load_n(&t->running, __ATOMIC_ACQUIRE)) {
        pthread_cond_wait(&t->cond, &t->mu);
      }
      pthread_mutex_unlock(&t->mu);
      next_tick = 0;
    }
    if (__atomic_load_n(&t->closed, __ATOMIC_ACQUIRE)) {
      return NULL;
    }
    int64_t now = mono_ns();
    if (next_tick == 0 || next_tick < now - t->interval_ns) {
      next_tick = now + t->interval_ns; // (re)start the period
    }
    pthread_mutex_lock(&t->mu);
    int64_t deadline = earliest_deadline(t, ticked_until);
    pthread_mutex_unlock(&t->mu);
    int64_t wake = deadline < next_tick ? deadline : next_tick;
    if (wake > now) {
      sleep_until(wake);
      now = mono_ns();
    }
    if (now >= next_tick) {
      next_tick += t->interval_ns;
    }
    if (deadline <= now) {
      // A call's deadline is due: this tick is for it, if the call is
      // still running (it may have ended while the thread slept).
      pthread_mutex_lock(&t->mu);
      int64_t due = earliest_deadline(t, ticked_until);
      pthread_mutex_unlock(&t->mu);
      ticked_until = now;
      if (due <= now) {
        __atomic_store_n(&t->urgent_deadline, due, __ATOMIC_RELEASE);
        __atomic_store_n(&t->urgent_since, now, __ATOMIC_RELEASE);
      }
    }
    if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) == 0) {
      // Idle: park. A call that entered after the load may have seen
      // running still set and not woken us, so look once more.
      __atomic_store_n(&t->running, 0, __ATOMIC_RELEASE);
      int32_t zero = 0;
      if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) == 0 ||
          !__atomic_compare_exchange_n(&t->running, &zero, 1, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        continue;
      }
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n_engines; i++) {
      wasmtime_engine_increment_epoch(t->engines[i]);
    }
    pthread_mutex_unlock(&t->mu);
  }
}

cb_ticker_t *cb_ticker_new(int64_t interval_ns, int64_t cpus) {
  cb_ticker_t *t = calloc(1, sizeof(cb_ticker_t));
  if (!t) {
    return NULL;
  }
  t->interval_ns = interval_ns;
  t->cpus = cpus > 0 ? cpus : 1;
  // Priority inheritance: the ticker thread may run at a real-time
  // priority, and must not wait behind a normal thread preempted while
  // holding the lock (registering an instance, say).
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
  pthread_mutex_init(&t->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_cond_init(&t->cond, NULL);
  if (pthread_create(&t->thread, NULL, ticker_main, t) != 0) {
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  return t;
}

int cb_ticker_add(cb_ticker_t *t, wasm_engine_t *engine) {
  pthread_mutex_lock(&t->mu);
  int ok = t->n_engines < CB_MAX_ENGINES;
  if (ok) {
    t->engines[t->n_engines++] = engine;
  }
  pthread_mutex_unlock(&t->mu);
  return ok;
}

void cb_ticker_close(cb_ticker_t *t) {
  pthread_mutex_lock(&t->mu);
  __atomic_store_n(&t->closed, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&t->cond);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->thread, NULL);
  pthread_cond_destroy(&t->cond);
  pthread_mutex_destroy(&t->mu);
  free(t->guards);
  free(t);
}

int cb_ticker_register(cb_ticker_t *t, cb_guard_t *g) {
  pthread_mutex_lock(&t->mu);
  if (t->n_guards == t->cap_guards) {
    size_t cap = t->cap_guards ? 2 * t->cap_guards : 64;
    cb_guard_t **grown = realloc(t->guards, cap * sizeof(*grown));
    if (!grown) {
      pthread_mutex_unlock(&t->mu);
      return 0;
    }
    t->guards = grown;
    t->cap_guards = cap;
  }
  t->guards[t->n_guards++] = g;
  pthread_mutex_unlock(&t->mu);
  return 1;
}

void cb_ticker_unregister(cb_ticker_t *t, cb_guard_t *g) {
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n_guards; i++) {
    if (t->guards[i] == g) {
      t->guards[i] = t->guards[--t->n_guards];
      break;
    }
  }
  pthread_mutex_unlock(&t->mu);
}

// ticker_enter marks a call as running, waking the thread if it is parked:
// two atomic operations per call, a lock only on the idle-to-busy edge.
static void ticker_enter(cb_ticker_t *t) {
  __atomic_add_fetch(&t->active, 1, __ATOMIC_ACQ_REL);
  int32_t zero = 0;
  if (!__atomic_load_n(&t->running, __ATOMIC_ACQUIRE) &&
      __atomic_compare_exchange_n(&t->running, &zero, 1, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->mu);
  }
}

static void ticker_exit(cb_ticker_t *t) {
  __atomic_sub_fetch(&t->active, 1, __ATOMIC_ACQ_REL);
}

// ---- per-call guard --------------------------------------------------------

static wasmtime_error_t *epoch_callback(wasmtime_context_t *ctx, void *data,
                                        uint64_t *delta,
                                        wasmtime_update_deadline_kind_t *kind) {
  (void)ctx;
  cb_guard_t *g = data;
  *kind = 0; // continue
  *delta = 1;
  int64_t now = mono_ns();
  cb_ticker_t *t = g->ticker;
  if (g->deadline_ns && now >= g->deadline_ns) {
    int64_t d = g->deadline_ns;
    __atomic_compare_exchange_n(&t->urgent_deadline, &d, 0, false,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    g->tripped = CB_TRIP_DEADLINE;
    return wasmtime_error_new("callbox: guest interrupted");
  }
  if (g->watch) {
    // The call outlived a tick: from now on Go sets stop when the
    // caller's context ends.
    g->watch = 0;
    callboxWatch(g->handle);
  }
  if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) == g->seq) {
    g->tripped = CB_TRIP_STOP;
    return wasmtime_error_new("callbox: guest interrupted");
  }
  if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) > t->cpus &&
      (g->deadline_ns == 0 || g->deadline_ns - now > 4 * t->interval_ns)) {
    // More guests running than cores, and this one's deadline is not
    // near: give the core to a waiting thread (a guest whose deadline may
    // be, the ticker), as the wazero engine yields its Go thread once per
    // slice. The OS otherwise time-slices CPU-bound threads at several
    // milliseconds, and a runaway guest waiting for a core overshoots its
    // deadline by as much.
    if (__atomic_load_n(&t->urgent_deadline, __ATOMIC_ACQUIRE) != 0 &&
        now - __atomic_load_n(&t->urgent_since, __ATOMIC_ACQUIRE) <
            t->interval_ns) {
      // A call's deadline has passed and it has not stopped yet: it may
      // be waiting for a core. sched_yield only lets a thread queued on
      // this core run; sleeping empties the core, and the scheduler then
      // pulls a waiting thread to it from any core.
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();
    }
  }
  return NULL;
}

// ---- host functions --------------------------------------------------------

static wasm_trap_t *host_trampoline(void *env, wasmtime_caller_t *caller,
                                    cb_val_raw_t *args, size_t n) {
  cb_guard_t *g = cb_current;
  if (!g || !g->inst) {
    static const char msg[] = "callbox: host call outside a guest call";
    return wasmtime_trap_new(msg, sizeof(msg) - 1);
  }
  wasmtime_context_t *ctx = wasmtime_caller_context(caller);
  uint8_t *data = NULL;
  size_t size = 0;
  cb_extern_t item;
  if (g->mem) {
    cb_memory_view(ctx, g->mem, &data, &size);
  } else if (wasmtime_caller_export_get(caller, "memory", 6, &item) &&
             item.kind == CB_EXTERN_MEMORY) {
    // The start function runs before the instance's memory is known to
    // Go: the caller's own export, as a call would see it.
    cb_memory_view(ctx, &item.of.memory, &data, &size);
  }
  g->caller = caller; // for cb_counter_get/cb_counter_set
  int abort = callboxHost(g->inst, (uintptr_t)env, args, n, data, size);
  g->caller = NULL;
  if (abort) {
    static const char msg[] = "callbox: call aborted by the host";
    return wasmtime_trap_new(msg, sizeof(msg) - 1);
  }
  return NULL;
}

static const char cb_budget_export[] = "callbox_meter_budget";

const char *cb_budget_name(void) { return cb_budget_export; }

// counter_global finds the budget global of a metered instance for the
// host call in progress: through the caller's exports the first time (the
// start function runs before Go knows the instance's exports), from the
// guard after.
static bool counter_global(cb_guard_t *g) {
  if (!g->caller) {
    return false;
  }
  if (!g->has_budget) {
    cb_extern_t item;
    if (!wasmtime_caller_export_get(g->caller, cb_budget_export,
                                    sizeof(cb_budget_export) - 1, &item) ||
        item.kind != CB_EXTERN_GLOBAL) {
      return false;
    }
    g->budget = item.of.global;
    g->has_budget = 1;
  }
  return true;
}

int64_t cb_counter_get(cb_guard_t *g) {
  cb_val_t v = {0};
  if (counter_global(g)) {
    wasmtime_global_get(wasmtime_caller_context(g->caller), &g->budget, &v);
  }
  return v.of.i64;
}

void cb_counter_set(cb_guard_t *g, int64_t val) {
  if (!counter_global(g)) {
    return;
  }
  cb_val_t v = {0};
  v.kind = CB_WASMTIME_I64;
  v.of.i64 = val;
  wasmtime_error_t *err =
      wasmtime_global_set(wasmtime_caller_context(g->caller), &g->budget, &v);
  if (err) { // cannot happen: the global is the module's own mutable i64
    wasmtime_error_delete(err);
  }
}

wasmtime_error_t *cb_define_host(wasmtime_linker_t *linker, const char *module,
                                 size_t module_len, const char *name,
                                 size_t name_len, const wasm_functype_t *ty,
                                 uintptr_t fn) {
  return wasmtime_linker_define_func_unchecked(linker, module, module_len,
                                               name, name_len, ty,
                                               host_trampoline, (void *)fn,
                                               NULL);
}

wasmtime_context_t *cb_store_context(wasmtime_store_t *store) {
  return wasmtime_store_context(store);
}

void cb_set_epoch_callback(wasmtime_store_t *store, cb_guard_t *guard) {
  wasmtime_store_epoch_deadline_callback(store, epoch_callback, guard, NULL);
}

int64_t cb_mono_ns(void) { return mono_ns(); }

static void guard_arm(cb_guard_t *g, int64_t deadline_ns, int32_t watch) {
  if (++g->seq == 0) {
    g->seq = 1;
  }
  __atomic_store_n(&g->deadline_ns, deadline_ns, __ATOMIC_RELAXED);
  g->watch = watch;
  g->tripped = CB_TRIP_NONE;
}

void cb_guard_begin(cb_guard_t *g, int64_t deadline_ns, int32_t watch) {
  guard_arm(g, deadline_ns, watch);
  cb_current = g;
  ticker_enter(g->ticker);
}

void cb_guard_end(cb_guard_t *g) {
  __atomic_store_n(&g->deadline_ns, 0, __ATOMIC_RELAXED); // no tick for it
  cb_current = NULL;
  ticker_exit(g->ticker);
}

void cb_call(wasmtime_context_t *ctx, const cb_wasmtime_func_t *fn,
             cb_val_raw_t *args, size_t nargs, const cb_memory_t *mem,
             const cb_global_t *budget, int64_t counter, cb_guard_t *guard,
             int64_t deadline_ns, int32_t watch, cb_call_result_t *out) {
  out->trap = NULL;
  out->error = NULL;
  out->counter = 0;
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
  cb_guard_begin(guard, deadline_ns, watch);
  wasmtime_context_set_epoch_deadline(ctx, 1);
  out->error = wasmtime_func_call_unchecked(ctx, (const wasmtime_func_t *)fn,
                                            args, nargs, &out->trap);
  cb_guard_end(guard);
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
_Static_assert(sizeof(cb_global_t) == 24, "wasmtime_global_t is 24 bytes");
_Static_assert(sizeof(cb_val_t) == 24, "wasmtime_val_t is 24 bytes");
_Static_assert(sizeof(cb_wasmtime_func_t) == 16, "wasmtime_func_t is 16 bytes");
_Static_assert(sizeof(cb_val_raw_t) == 16, "wasmtime_val_raw_t is 16 bytes");
_Static_assert(sizeof(cb_extern_t) == 32, "wasmtime_extern_t is 32 bytes");
