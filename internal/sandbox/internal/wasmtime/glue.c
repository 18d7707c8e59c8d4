// sched_getcpu, sched_setaffinity and the CPU_* macros (core turns).
#define _GNU_SOURCE
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
#include <sys/syscall.h>
#include <unistd.h>
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

// thread_cpu_ns is the CPU time the calling thread has used.
static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
    return 0;
  }
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- ticker ----------------------------------------------------------------

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

static void linger_expire(cb_ticker_t *t, int64_t now);

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
      ticked_until = now; // this tick is for it
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
    if (__atomic_load_n(&t->n_lingering, __ATOMIC_ACQUIRE) > 0) {
      pthread_mutex_lock(&t->cores_mu);
      linger_expire(t, now);
      pthread_mutex_unlock(&t->cores_mu);
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n_engines; i++) {
      wasmtime_engine_increment_epoch(t->engines[i]);
    }
    pthread_mutex_unlock(&t->mu);
  }
}

cb_ticker_t *cb_ticker_new(int64_t interval_ns, int64_t cores) {
  cb_ticker_t *t = calloc(1, sizeof(cb_ticker_t));
  if (!t) {
    return NULL;
  }
  t->interval_ns = interval_ns;
  t->cores = cores > 0 ? cores : 0;
  // Priority inheritance: the ticker thread may run at a real-time
  // priority, and must not wait behind a normal thread preempted while
  // holding the lock (registering an instance, say).
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
  pthread_mutex_init(&t->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_cond_init(&t->cond, NULL);
  pthread_mutex_init(&t->cores_mu, NULL);
  t->free_cores = t->cores;
  t->head_key = INT64_MAX;
  t->linger = calloc(t->cores > 0 ? (size_t)t->cores : 1, sizeof(cb_linger_t));
  if (!t->linger || pthread_create(&t->thread, NULL, ticker_main, t) != 0) {
    free(t->linger);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->cores_mu);
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
  pthread_mutex_destroy(&t->cores_mu);
  free(t->linger);
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

// ---- core turns -------------------------------------------------------------
//
// A guest call that outlives an epoch tick takes a turn on a core: at most
// t->cores such calls run at once, the rest wait (blocked, not runnable),
// as only GOMAXPROCS wazero guests (goroutines) run at once. Without turns
// the OS time-slices more runnable guest threads than cores at several
// milliseconds, and a runaway guest that is not on a core when its
// deadline tick comes stops that much late. See RATIONALE.md, "Runaway
// guests stop on time on wasmtime: core turns".
//
// - A call holding a turn passes it to the first waiting call at a tick
//   once it has held it CB_SLICE_TICKS ticks, or at once when that call
//   is within CB_NEAR_TICKS ticks of its deadline, and queues again; a
//   call within CB_NEAR_TICKS of its own deadline keeps its turn, so it
//   is on a core when its deadline comes.
// - The queue is ordered by deadline, earliest first (a call without one
//   counts as due CB_NO_DEADLINE_KEY_NS after it queued, so it is not
//   starved). A waiting call wakes at its own deadline and stops without
//   a turn; the context watcher wakes a canceled one (cb_guard_poke).
// - The thread passing a turn on pins the thread it wakes to its own core
//   until that one runs (core_give).
// - When the epoch callback stops a call, its thread keeps the turn for
//   one more tick (it lingers), as a goroutine keeps its P when a cgo
//   call returns: the host's work after the stop (reading the error,
//   discarding the instance, starting the next call) then does not wait
//   behind a guest handed the core, which the OS would let run a whole
//   time slice first. The thread's next call takes the lingering turn
//   back; otherwise the ticker hands it on once the tick is over. Calls
//   that end normally hand their turn on at once.
// - A call about to sleep in a host call (a WASI clock subscription)
//   gives its turn up (cb_guard_release_turn), and takes one again at
//   its next tick.
// - Calls shorter than a tick never take a turn and pay nothing.

#define CB_NO_DEADLINE_KEY_NS 1000000000LL
#define CB_NEAR_TICKS 2
#define CB_SLICE_TICKS 4

// The turn lingering with this thread, if any: its ticker, slot and owner
// number (the slot is still the thread's while its owner matches).
static __thread struct {
  cb_ticker_t *t;
  size_t slot;
  uint64_t owner;
} cb_lingering;

// set_head_key mirrors the first waiting call's key for take_turn's
// lock-free look. Called with cores_mu held.
static void set_head_key(cb_ticker_t *t) {
  __atomic_store_n(&t->head_key, t->waiting ? t->waiting->waiting_key : INT64_MAX,
                   __ATOMIC_RELEASE);
}

// core_give hands a turn nobody holds to the first waiting call, or back
// to the pool. Called with cores_mu held.
//
// here is the core the giving thread runs on when it is about to wait for
// a turn itself (-1 otherwise): the waking call is pinned to it until it
// runs. The OS would otherwise queue it on the core it last ran on, busy
// with another guest, and leave this core idle once the giver blocks
// (an idle core pulls waiting threads only when it has been idle long
// enough to be worth it), so the turn would sit unused for a time slice.
static void core_give(cb_ticker_t *t, int here) {
  cb_guard_t *h = t->waiting;
  if (!h) {
    t->free_cores++;
    return;
  }
  t->waiting = h->next_waiting;
  h->next_waiting = NULL;
  __atomic_store_n(&t->n_waiting, t->n_waiting - 1, __ATOMIC_RELEASE);
  set_head_key(t);
  h->core = 1;
#ifdef __linux__
  if (here >= 0 && h->has_mask && here < CPU_SETSIZE && CPU_ISSET(here, &h->mask)) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(here, &one);
    h->pinned = sched_setaffinity(h->tid, sizeof(one), &one) == 0;
  }
#else
  (void)here;
#endif
  pthread_cond_signal(&h->wake);
}

// linger_expire hands on every lingering turn whose tick is over. Called
// with cores_mu held.
static void linger_expire(cb_ticker_t *t, int64_t now) {
  for (int64_t i = 0; i < t->cores && t->n_lingering > 0; i++) {
    cb_linger_t *l = &t->linger[i];
    if (l->owner != 0 && l->until <= now) {
      l->owner = 0;
      __atomic_store_n(&t->n_lingering, t->n_lingering - 1, __ATOMIC_RELEASE);
      core_give(t, -1);
    }
  }
}

// linger_reclaim takes back the turn lingering with this thread, if it
// still does: 1 when it did. Called with cores_mu held.
static int linger_reclaim(cb_ticker_t *t) {
  if (cb_lingering.t != t || cb_lingering.owner == 0) {
    return 0;
  }
  cb_linger_t *l = &t->linger[cb_lingering.slot];
  uint64_t owner = cb_lingering.owner;
  cb_lingering.owner = 0;
  if (l->owner != owner) {
    return 0; // handed on already
  }
  l->owner = 0;
  __atomic_store_n(&t->n_lingering, t->n_lingering - 1, __ATOMIC_RELEASE);
  return 1;
}

// core_end gives up g's turn: a call the epoch callback stopped leaves it
// lingering with this thread for a tick, any other (a call that returned,
// or one about to sleep in a host call) hands it on at once. Called with
// cores_mu held. (A thread never has a turn lingering while its call holds
// one: the call's first tick took the lingering one back, or found it
// handed on and forgot it.)
static void core_end(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  g->core = 0;
  if (g->tripped == CB_TRIP_NONE) {
    core_give(t, -1);
    return;
  }
  for (int64_t i = 0; i < t->cores; i++) {
    cb_linger_t *l = &t->linger[i];
    if (l->owner == 0) {
      l->owner = ++t->linger_seq;
      l->until = now + t->interval_ns;
      __atomic_store_n(&t->n_lingering, t->n_lingering + 1, __ATOMIC_RELEASE);
      cb_lingering.t = t;
      cb_lingering.slot = (size_t)i;
      cb_lingering.owner = l->owner;
      return;
    }
  }
  core_give(t, -1); // cannot happen: turns held and lingering are at most cores
}

static void queue_remove(cb_ticker_t *t, cb_guard_t *g) {
  for (cb_guard_t **p = &t->waiting; *p; p = &(*p)->next_waiting) {
    if (*p == g) {
      *p = g->next_waiting;
      g->next_waiting = NULL;
      __atomic_store_n(&t->n_waiting, t->n_waiting - 1, __ATOMIC_RELEASE);
      set_head_key(t);
      return;
    }
  }
}

// core_wait_prepare records what core_give needs to pin g's thread: its
// id and the cores it may run on, to go back to. Called before g queues.
static void core_wait_prepare(cb_guard_t *g) {
#ifdef __linux__
  g->tid = (int32_t)syscall(SYS_gettid);
  g->has_mask = sched_getaffinity(0, sizeof(g->mask), &g->mask) == 0;
  g->pinned = 0;
#else
  (void)g;
#endif
}

// core_wait queues g and waits for a turn: CB_TRIP_NONE once it has one,
// or why the call must stop first. Called with cores_mu held.
static int core_wait(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  g->waiting_key = g->deadline_ns ? g->deadline_ns : now + CB_NO_DEADLINE_KEY_NS;
  cb_guard_t **p = &t->waiting;
  while (*p && (*p)->waiting_key <= g->waiting_key) {
    p = &(*p)->next_waiting;
  }
  g->next_waiting = *p;
  *p = g;
  __atomic_store_n(&t->n_waiting, t->n_waiting + 1, __ATOMIC_RELEASE);
  set_head_key(t);
  for (;;) {
    if (g->core) {
      g->turn_since = now;
#ifdef __linux__
      if (g->pinned) {
        g->pinned = 0;
        (void)sched_setaffinity(0, sizeof(g->mask), &g->mask);
      }
#endif
      return CB_TRIP_NONE;
    }
    if (g->deadline_ns && now >= g->deadline_ns) {
      queue_remove(t, g);
      return CB_TRIP_DEADLINE;
    }
    if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) == g->seq) {
      queue_remove(t, g);
      return CB_TRIP_STOP;
    }
    if (g->deadline_ns) {
      struct timespec ts = {g->deadline_ns / 1000000000,
                            g->deadline_ns % 1000000000};
      pthread_cond_timedwait(&g->wake, &t->cores_mu, &ts);
    } else {
      pthread_cond_wait(&g->wake, &t->cores_mu);
    }
    now = mono_ns();
  }
}

// take_turn runs at every tick of a call: it takes a turn if the call has
// none, or passes it on when others wait and the call's deadline is not
// near. It returns CB_TRIP_NONE, or why the call must stop.
static int take_turn(cb_ticker_t *t, cb_guard_t *g, int64_t now) {
  if (t->cores == 0) {
    return CB_TRIP_NONE; // no limit
  }
  if (g->core) {
    int64_t near = CB_NEAR_TICKS * t->interval_ns;
    if (__atomic_load_n(&t->n_waiting, __ATOMIC_ACQUIRE) == 0 ||
        (g->deadline_ns && g->deadline_ns - now <= near)) {
      return CB_TRIP_NONE; // nobody waits, or this call's deadline is near
    }
    if (now - g->turn_since < CB_SLICE_TICKS * t->interval_ns &&
        __atomic_load_n(&t->head_key, __ATOMIC_ACQUIRE) - now > near) {
      return CB_TRIP_NONE; // its slice goes on, and nobody waiting is due
    }
  }
  pthread_mutex_lock(&t->cores_mu);
  int r = CB_TRIP_NONE;
  if (g->core) {
    if (t->waiting) {
      g->core = 0;
      core_wait_prepare(g);
#ifdef __linux__
      core_give(t, sched_getcpu());
#else
      core_give(t, -1);
#endif
      r = core_wait(t, g, now);
    }
  } else if (linger_reclaim(t)) {
    g->core = 1;
    g->turn_since = now;
  } else {
    linger_expire(t, now);
    if (t->free_cores > 0) {
      t->free_cores--;
      g->core = 1;
      g->turn_since = now;
    } else {
      core_wait_prepare(g);
      r = core_wait(t, g, now);
    }
  }
  pthread_mutex_unlock(&t->cores_mu);
  return r;
}

// turn_end gives up the turn g's call holds, if any (core_end). Only the
// call's own thread sets core while the call holds a turn, so the unlocked
// read is exact.
static void turn_end(cb_guard_t *g) {
  if (!g->core) {
    return;
  }
  cb_ticker_t *t = g->ticker;
  pthread_mutex_lock(&t->cores_mu);
  core_end(t, g, mono_ns());
  pthread_mutex_unlock(&t->cores_mu);
}

void cb_guard_release_turn(cb_guard_t *g) {
  if (g->core) {
    __atomic_add_fetch(&g->ticker->given_up, 1, __ATOMIC_RELAXED);
  }
  turn_end(g);
}

void cb_ticker_turns(cb_ticker_t *t, int64_t *free_cores, int32_t *waiting, uint64_t *given_up) {
  pthread_mutex_lock(&t->cores_mu);
  *free_cores = t->free_cores;
  *waiting = t->n_waiting;
  pthread_mutex_unlock(&t->cores_mu);
  *given_up = __atomic_load_n(&t->given_up, __ATOMIC_RELAXED);
}

void cb_guard_poke(cb_guard_t *g) {
  cb_ticker_t *t = g->ticker;
  pthread_mutex_lock(&t->cores_mu);
  pthread_cond_signal(&g->wake);
  pthread_mutex_unlock(&t->cores_mu);
}

cb_guard_t *cb_guard_new(cb_ticker_t *t, uintptr_t handle) {
  cb_guard_t *g = calloc(1, sizeof(cb_guard_t));
  if (!g) {
    return NULL;
  }
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int err = pthread_cond_init(&g->wake, &attr);
  pthread_condattr_destroy(&attr);
  if (err != 0) {
    free(g);
    return NULL;
  }
  g->ticker = t;
  g->handle = handle;
  return g;
}

void cb_guard_free(cb_guard_t *g) {
  pthread_cond_destroy(&g->wake);
  free(g);
}

// ---- per-call guard --------------------------------------------------------

static wasmtime_error_t *trip(cb_guard_t *g, int why) {
  g->tripped = why;
  return wasmtime_error_new("callbox: guest interrupted");
}

static wasmtime_error_t *epoch_callback(wasmtime_context_t *ctx, void *data,
                                        uint64_t *delta,
                                        wasmtime_update_deadline_kind_t *kind) {
  (void)ctx;
  cb_guard_t *g = data;
  *kind = 0; // continue
  *delta = 1;
  int64_t now = mono_ns();
  if (g->deadline_ns && now >= g->deadline_ns) {
    return trip(g, CB_TRIP_DEADLINE);
  }
  if (g->watch) {
    // The call outlived a tick: from now on Go sets stop when the
    // caller's context ends.
    g->watch = 0;
    callboxWatch(g->handle);
  }
  if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) == g->seq) {
    return trip(g, CB_TRIP_STOP);
  }
  if (g->cpu_limit_ns && thread_cpu_ns() - g->cpu_start_ns >= g->cpu_limit_ns) {
    return trip(g, CB_TRIP_CPU);
  }
  int why = take_turn(g->ticker, g, now);
  if (why == CB_TRIP_NONE && g->deadline_ns && mono_ns() >= g->deadline_ns) {
    why = CB_TRIP_DEADLINE; // it came while the call waited for its turn
  }
  return why == CB_TRIP_NONE ? NULL : trip(g, why);
}

// ---- host functions --------------------------------------------------------

// cb_host_call runs callboxHost, on the thread's own stack when the guest
// runs on a switched one (see "a big stack" below).
static int cb_host_call(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                        uint8_t *data, size_t size);

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
  int abort = cb_host_call(g->inst, (uintptr_t)env, args, n, data, size);
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
  turn_end(g);
  cb_current = NULL;
  ticker_exit(g->ticker);
}

// ---- a big stack for wasmtime's entries --------------------------------
//
// wasmtime runs a guest on the calling thread's native stack. A thread
// that entered through the C API may have a small one (an Erlang
// scheduler's is 320 KB to 1 MB; wasmtime's default wasm stack alone is
// 512 KiB), or one smaller than a large max_stack needs: a deep guest
// would fault past its guard page and kill the process. So on Linux an
// entry whose thread has less than `need` bytes below the current frame
// runs on a stack of the thread's own, reserved on first use (at least
// 16 MiB and need + 1 MiB, with a guard page; pages are committed only as
// touched) and kept for the thread's life (unmapped when it ends): the
// stack pointer is switched to it for the entry and back, on the same
// thread, so the call's guard, core turn and CPU-time count (all per
// thread) hold as they are. On x86-64 the switch is a few instructions of
// assembly; on other glibc targets (aarch64, ppc64le, s390x, riscv64) it
// is makecontext and swapcontext, which also save and restore the signal
// mask (a system call each way, paid only by calls that switch). The
// switch is inside this cgo call, so the Go runtime never sees the
// switched stack; a host call the guest makes from it goes back to the
// thread's own stack first (cb_host_call). Where there is no switch
// (musl off x86-64, other systems) or no memory for one, an entry whose
// thread is known to be short of room does not run: the call fails as a
// stack overflow that names the thread's room and the need, instead of
// faulting (CallerStack says how much a caller must give).
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__linux__) && (defined(__x86_64__) || defined(__GLIBC__))
#define CB_HAVE_SWITCH 1
#endif
#if defined(__GLIBC__) && defined(CB_HAVE_SWITCH)
#include <ucontext.h>
#endif

enum { CB_SWITCH_ASM, CB_SWITCH_UCONTEXT, CB_SWITCH_NONE };

// Which switch runs: the assembly on x86-64, ucontext on other glibc
// targets, none elsewhere. Tests choose the others on x86-64
// (cb_test_stack_switch), so that the code other targets run is tested on
// the machines CI has.
#if defined(CB_HAVE_SWITCH) && defined(__x86_64__)
static int switch_mode = CB_SWITCH_ASM;
#elif defined(CB_HAVE_SWITCH)
static int switch_mode = CB_SWITCH_UCONTEXT;
#else
static int switch_mode = CB_SWITCH_NONE;
#endif

int cb_test_stack_switch(int mode) {
  int ok = mode == switch_mode || mode == CB_SWITCH_NONE;
#if defined(CB_HAVE_SWITCH) && defined(__x86_64__) && defined(__GLIBC__)
  ok = mode == CB_SWITCH_ASM || mode == CB_SWITCH_UCONTEXT || mode == CB_SWITCH_NONE;
#endif
  if (!ok) {
    return 0;
  }
  int was = switch_mode;
  switch_mode = mode;
  return was + 1;
}

int cb_stack_switches(void) { return switch_mode != CB_SWITCH_NONE; }

// The thread's own stack, found on first need: lo 1 when unknown (a
// system without pthread_getattr_np, or it failed).
static __thread uintptr_t thread_stack_lo, thread_stack_hi;

// thread_room is how many bytes of the thread's own stack lie below sp,
// or SIZE_MAX when that is unknown (sp is not on it: a stack its caller
// switched to, or the bounds are unknown).
static size_t thread_room(uintptr_t sp) {
  if (thread_stack_lo == 0) {
    thread_stack_lo = 1;
#if defined(__linux__)
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr != NULL) {
        thread_stack_lo = (uintptr_t)addr;
        thread_stack_hi = (uintptr_t)addr + size;
      }
      pthread_attr_destroy(&a);
    }
#endif
  }
  if (thread_stack_lo > 1 && sp > thread_stack_lo && sp <= thread_stack_hi) {
    return sp - thread_stack_lo;
  }
  return SIZE_MAX;
}

static __thread int on_own_stack;

#if defined(CB_HAVE_SWITCH)
static __thread char *own_stack;
static __thread size_t own_stack_size;
// Where a host call made from the switched stack runs (0: on that stack):
// below the frames of the switch on the thread's own stack, which still
// has room for the Go callback (checked when it is set).
static __thread uintptr_t back_sp;

#if defined(__x86_64__)
// cb_call_on_stack calls fn(arg) with the stack pointer at top, then
// restores it. Every register the ABI lets fn change is clobbered; rbx
// (callee-saved) holds the caller's stack pointer meanwhile.
static void cb_call_on_stack(void (*fn)(void *), void *arg, char *top) {
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %2, %%rsp\n\t"
      "and $-16, %%rsp\n\t"
      "mov %1, %%rdi\n\t"
      "call *%0\n\t"
      "mov %%rbx, %%rsp\n\t"
      : "+r"(fn), "+r"(arg), "+r"(top)
      :
      : "rbx", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
        "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
        "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15");
}
#endif

#if defined(__GLIBC__)
// The entry a ucontext switch runs: makecontext passes only int
// arguments, so the function and its argument wait in a thread-local.
static __thread struct {
  void (*fn)(void *);
  void *arg;
} uc_job;

static void uc_trampoline(void) { uc_job.fn(uc_job.arg); }

// cb_call_on_context calls fn(arg) on the stack [base, base+size) with
// makecontext/swapcontext, returning here (uc_link) when fn returns. 0
// when the context could not be made (fn not called).
static int cb_call_on_context(void (*fn)(void *), void *arg, char *base, size_t size) {
  ucontext_t here, there;
  if (getcontext(&there) != 0) {
    return 0;
  }
  there.uc_stack.ss_sp = base;
  there.uc_stack.ss_size = size;
  there.uc_link = &here;
  uc_job.fn = fn;
  uc_job.arg = arg;
  makecontext(&there, uc_trampoline, 0);
  return swapcontext(&here, &there) == 0;
}
#endif

// cb_run_at runs fn(arg) on the stack whose top is top and whose lowest
// usable byte is base; 0 when it could not (fn not called).
static int cb_run_at(void (*fn)(void *), void *arg, char *base, char *top) {
#if defined(__GLIBC__)
  if (switch_mode == CB_SWITCH_UCONTEXT) {
    return cb_call_on_context(fn, arg, base, (size_t)(top - base));
  }
#endif
#if defined(__x86_64__)
  (void)base;
  cb_call_on_stack(fn, arg, top);
  return 1;
#else
  (void)fn;
  (void)arg;
  (void)base;
  (void)top;
  return 0;
#endif
}

// The frames of a switch (cb_switch, and cb_call_on_context's two
// contexts, 4.5 KiB each on aarch64) stay live below the switching frame
// while the guest runs: a host call goes this far below it.
#define BACK_GAP ((uintptr_t)32 << 10)
// The least room a host call needs below back_sp: Go's callback runs on
// the thread's stack only until it reaches its goroutine's.
#define BACK_ROOM ((uintptr_t)64 << 10)

// cb_switch runs fn(arg) on the stack this thread keeps for entries
// (own_stack); 0 when it could not (fn not called).
__attribute__((noinline)) static int cb_switch(void (*fn)(void *), void *arg) {
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  back_sp = 0;
  if (thread_stack_lo > 1 && here > thread_stack_lo + BACK_GAP + BACK_ROOM && here <= thread_stack_hi) {
    back_sp = (here - BACK_GAP) & ~(uintptr_t)63;
  }
  return cb_run_at(fn, arg, own_stack + 4096, own_stack + own_stack_size);
}

// A thread's own stack is unmapped when the thread ends (a caller's
// thread that came and went must not leave its touched pages behind): a
// key whose destructor gets the stack's address and size.
typedef struct {
  char *base;
  size_t size;
} own_stack_rec;

static pthread_key_t own_stack_key;
static pthread_once_t own_stack_once = PTHREAD_ONCE_INIT;
static int own_stack_keyed;

// Own stacks unmapped at their thread's end (for tests).
static uint64_t own_stacks_freed;

uint64_t cb_stacks_freed(void) { return __atomic_load_n(&own_stacks_freed, __ATOMIC_RELAXED); }

static void own_stack_free(void *p) {
  own_stack_rec *r = p;
  munmap(r->base, r->size);
  free(r);
  __atomic_add_fetch(&own_stacks_freed, 1, __ATOMIC_RELAXED);
}

static void own_stack_key_init(void) { own_stack_keyed = pthread_key_create(&own_stack_key, own_stack_free) == 0; }

// own_stack_release records this thread's own stack for unmapping at the
// thread's end.
static void own_stack_release(void) {
  pthread_once(&own_stack_once, own_stack_key_init);
  if (!own_stack_keyed) {
    return; // kept for the process's life
  }
  own_stack_rec *r = pthread_getspecific(own_stack_key);
  if (r == NULL && (r = malloc(sizeof *r)) == NULL) {
    return;
  }
  r->base = own_stack;
  r->size = own_stack_size;
  pthread_setspecific(own_stack_key, r);
}

// own_stack_ready makes sure this thread's own stack has need bytes and
// 1 MiB more (at least 16 MiB); 0 when no memory could be had for it.
static int own_stack_ready(size_t need) {
  size_t want = need + ((size_t)1 << 20);
  if (want < ((size_t)16 << 20)) want = (size_t)16 << 20;
  if (own_stack_size >= want) {
    return 1;
  }
  char *p = mmap(NULL, want, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) {
    if (p != MAP_FAILED) munmap(p, want);
    return 0;
  }
  if (own_stack) munmap(own_stack, own_stack_size);
  own_stack = p;
  own_stack_size = want;
  own_stack_release();
  return 1;
}
#else
uint64_t cb_stacks_freed(void) { return 0; }
#endif

// Entries that switched stacks since the process started (for tests).
static uint64_t switches;

uint64_t cb_stack_switch_count(void) { return __atomic_load_n(&switches, __ATOMIC_RELAXED); }

// cb_on_big_stack runs fn(arg) with need bytes of native stack below it:
// on the thread's own stack when it has them, else on a stack of the
// thread's own (see above). It returns 0 when fn ran, else (fn not run)
// the room the thread has, at least 1: no switch and a thread known to be
// short. A thread whose room is unknown runs fn where it is, as before.
static size_t cb_on_big_stack(void (*fn)(void *), void *arg, size_t need) {
  if (on_own_stack) {
    fn(arg);
    return 0;
  }
  size_t room = thread_room((uintptr_t)__builtin_frame_address(0));
  if (room != SIZE_MAX && room >= need) {
    fn(arg);
    return 0;
  }
#if defined(CB_HAVE_SWITCH)
  if (switch_mode != CB_SWITCH_NONE && own_stack_ready(need)) {
    on_own_stack = 1;
    int ran = cb_switch(fn, arg);
    on_own_stack = 0;
    if (ran) {
      __atomic_add_fetch(&switches, 1, __ATOMIC_RELAXED);
      return 0;
    }
  }
#endif
  if (room == SIZE_MAX) {
    fn(arg);
    return 0;
  }
  return room > 0 ? room : 1;
}

// A host call from the switched stack goes back to the thread's own: the
// Go runtime knows a Go-made thread's stack bounds from its start and does
// not re-read them in a callback, so a callback on a stack of ours would
// run outside them (a fatal "morestack on g0" whenever our stack lies
// below the thread's).
typedef struct {
  void *inst;
  uintptr_t fn;
  cb_val_raw_t *args;
  size_t n;
  uint8_t *data;
  size_t size;
  int abort;
} cb_host_args_t;

static void cb_host_entry(void *p) {
  cb_host_args_t *h = p;
  h->abort = callboxHost(h->inst, h->fn, h->args, h->n, h->data, h->size);
}

static int cb_host_call(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                        uint8_t *data, size_t size) {
  cb_host_args_t h = {inst, fn, args, n, data, size, 0};
#if defined(CB_HAVE_SWITCH)
  uintptr_t top = back_sp;
  if (on_own_stack && top != 0) {
    back_sp = 0; // a host call inside this one stays where it is
    // Above the thread's guard page (a page is at least 4 KiB).
    if (!cb_run_at(cb_host_entry, &h, (char *)(thread_stack_lo + 4096), (char *)top)) {
      cb_host_entry(&h);
    }
    back_sp = top;
    return h.abort;
  }
#endif
  cb_host_entry(&h);
  return h.abort;
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

// ---- Shared linear memory (process isolation) ----------------------------
//
// Our declarations of wasmtime's memory-creator API (wasmtime/config.h):
// a creator returns a linear memory as an env pointer and two callbacks,
// and wasmtime owns what it returns. The memory is a memfd: a PROT_NONE
// reservation of reserved + guard bytes (wasmtime elides bounds checks
// against it), with the file mapped read-write over the first size bytes,
// and more of the file mapped in place as the memory grows, so it never
// moves. The file is sealed against shrinking, so a process that maps it
// can trust a size it has seen.

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

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>

typedef struct {
  uint8_t *base;
  size_t total;  // the reservation: capacity (or reserved) plus guard
  size_t cap;    // the most the memory may grow to
  size_t size;   // bytes mapped from the file, and the file's size
  int fd;
} cb_shared_mem_t;

// The memory made by the last instantiation on this thread, for
// cb_instantiate to report (the creator runs inside it, on this thread).
static __thread int cb_new_memfd = -1;
static __thread size_t cb_new_memcap;

static uint8_t *cb_shared_get(void *env, size_t *byte_size, size_t *byte_capacity) {
  cb_shared_mem_t *m = env;
  *byte_size = m->size;
  *byte_capacity = m->cap;
  return m->base;
}

static wasmtime_error_t *cb_shared_grow(void *env, size_t new_size) {
  cb_shared_mem_t *m = env;
  if (new_size <= m->size) {
    return NULL;
  }
  if (new_size > m->cap) {
    return wasmtime_error_new("callbox: memory grown past its reservation");
  }
  if (ftruncate(m->fd, (off_t)new_size) != 0) {
    return wasmtime_error_new("callbox: growing the shared memory file failed");
  }
  // wasm pages are 64 KiB: size and new_size are page-aligned.
  if (mmap(m->base + m->size, new_size - m->size, PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_FIXED, m->fd, (off_t)m->size) == MAP_FAILED) {
    return wasmtime_error_new("callbox: mapping the grown shared memory failed");
  }
  m->size = new_size;
  return NULL;
}

static void cb_shared_free(void *env) {
  cb_shared_mem_t *m = env;
  munmap(m->base, m->total);
  close(m->fd);
  free(m);
}

static wasmtime_error_t *cb_shared_new(void *env, const wasm_memorytype_t *ty,
                                       size_t minimum, size_t maximum, size_t reserved,
                                       size_t guard, cb_linear_memory_t *ret) {
  (void)env;
  (void)ty;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t cap = reserved ? reserved : maximum;
  if (maximum < cap) {
    cap = maximum;
  }
  if (cap < minimum) {
    return wasmtime_error_new("callbox: a memory's minimum exceeds its reservation");
  }
  size_t span = reserved > cap ? reserved : cap;
  if (span > SIZE_MAX - guard - page) {
    return wasmtime_error_new("callbox: a memory reservation too large to map");
  }
  size_t total = (span + guard + page - 1) / page * page;
  cb_shared_mem_t *m = calloc(1, sizeof *m);
  if (!m) {
    return wasmtime_error_new("callbox: out of memory");
  }
  m->fd = memfd_create("callbox-guest-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m->fd < 0 || fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
      ftruncate(m->fd, (off_t)minimum) != 0) {
    if (m->fd >= 0) close(m->fd);
    free(m);
    return wasmtime_error_new("callbox: creating the shared memory file failed");
  }
  m->base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m->base == MAP_FAILED ||
      (minimum > 0 && mmap(m->base, minimum, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                           m->fd, 0) == MAP_FAILED)) {
    if (m->base != MAP_FAILED) munmap(m->base, total);
    close(m->fd);
    free(m);
    return wasmtime_error_new("callbox: mapping the shared memory failed");
  }
  m->total = total;
  m->cap = cap;
  m->size = minimum;
  cb_new_memfd = m->fd;
  cb_new_memcap = cap;
  ret->env = m;
  ret->get_memory = cb_shared_get;
  ret->grow_memory = cb_shared_grow;
  ret->finalizer = cb_shared_free;
  return NULL;
}

int cb_config_shared_memory(wasm_config_t *cfg) {
  cb_memory_creator_t c = {NULL, cb_shared_new, NULL};
  wasmtime_config_host_memory_creator_set(cfg, &c);
  wasmtime_config_memory_init_cow_set(cfg, false);
  return 1;
}
#else
static __thread int cb_new_memfd = -1;
static __thread size_t cb_new_memcap;
int cb_config_shared_memory(wasm_config_t *cfg) {
  (void)cfg;
  return 0;
}
#endif

void cb_instantiate(const wasmtime_linker_t *linker, wasmtime_context_t *ctx,
                    const wasmtime_module_t *module, size_t need,
                    cb_instance_t *instance, cb_call_result_t *out) {
  out->trap = NULL;
  out->error = NULL;
  out->stack_room = 0;
  cb_new_memfd = -1;
  cb_new_memcap = 0;
  cb_entry_t e = {ctx, NULL, NULL, 0, linker, module, instance, out};
  out->stack_room = cb_on_big_stack(cb_entry_instantiate, &e, need);
  out->memfd = cb_new_memfd;
  out->mem_cap = cb_new_memcap;
  cb_new_memfd = -1;
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
  out->stack_room = cb_on_big_stack(cb_entry_call, &e, need);
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
