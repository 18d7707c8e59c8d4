// guard.c: the per-call guard: its life (cb_guard_new, cb_guard_free),
// the epoch callback that stops a call at its deadline, its CPU limit or
// Go's stop word (and takes its core turn, turns.c), the trampoline every
// host call enters by, the metered budget counter host calls read and
// write, and arming a call (cb_guard_begin, cb_guard_end).
#include "glue_private.h"

// The guard of the guest call running on this thread: set while cb_call
// (or an instantiation between cb_guard_begin and cb_guard_end) runs, so a
// host call finds its instance and memory without a lookup.
static __thread cb_guard_t *cb_current;

// ---- the guard's life ------------------------------------------------------

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
  int why = cb__take_turn(g->ticker, g, now);
  if (why == CB_TRIP_NONE && g->deadline_ns && mono_ns() >= g->deadline_ns) {
    why = CB_TRIP_DEADLINE; // it came while the call waited for its turn
  }
  return why == CB_TRIP_NONE ? NULL : trip(g, why);
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
  int abort = cb__host_call(g->inst, (uintptr_t)env, args, n, data, size);
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
  cb__ticker_enter(g->ticker);
}

void cb_guard_end(cb_guard_t *g) {
  __atomic_store_n(&g->deadline_ns, 0, __ATOMIC_RELAXED); // no tick for it
  cb__turn_end(g);
  cb_current = NULL;
  cb__ticker_exit(g->ticker);
}
