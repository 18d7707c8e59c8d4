// The library's exported C API: thin C wrappers over the Go functions
// (cbxgo_*, capi.go and gpu.go), so that every entry first checks, in C,
// that the process is not a fork() child of one that had loaded the
// library. The Go runtime does not survive fork(): its threads are not
// copied, and the first call into Go in the child would wait forever for
// them. A child gets a FailedPrecondition error at once instead, naming
// the fix, and never enters Go. callbox_error_free is pure C for the same
// reason (a child must be able to free the error it got).
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/callbox.h"

// ---- fork detection ----

static int cbx_forked;

static void cbx_atfork_child(void) { __atomic_store_n(&cbx_forked, 1, __ATOMIC_RELAXED); }

__attribute__((constructor)) static void cbx_register_atfork(void) { pthread_atfork(NULL, NULL, cbx_atfork_child); }

// cbx_in_fork_child is 1 in a fork() child of a process that had loaded
// the library (xla.c asks too).
int cbx_in_fork_child(void) { return __atomic_load_n(&cbx_forked, __ATOMIC_RELAXED); }

// cbx_fork_message writes the error a fork child gets for entry where.
void cbx_fork_message(const char *where, char *buf, size_t cap) {
  snprintf(buf, cap,
           "%s: this process was forked from one that had loaded libcallbox, and the Go runtime inside the library "
           "does not survive fork(): use the library only in processes started with spawn or forkserver (Python: "
           "multiprocessing.get_context(\"spawn\") or \"forkserver\"; PyTorch DataLoader: "
           "multiprocessing_context=\"spawn\"), or load it only after forking",
           where);
}

// The kinds' codes and names, the library's one table (abi.Kinds, built in
// Go and handed over when the library loads: capi.go's init), for the
// errors this file makes where Go cannot run.
static const callbox_kind_info *cbx_kinds;
static size_t cbx_nkinds;

// The error for allocation failures while making an error: static, and
// never freed by callbox_error_free. Its code and kind name are set from
// the table when the library loads (cbx_kinds_ready).
static char cbx_oom_text[64] = "out of memory";
static callbox_error cbx_oom_error = {
    sizeof(callbox_error), CALLBOX_KIND_HOST_PANIC, 0, 0, 0, "", "", "", "out of memory", "", cbx_oom_text, "", 0, "", 0, 0, "", NULL, 0};

// cbx_kind looks a kind up in the table; NULL before the library loaded.
static const callbox_kind_info *cbx_kind(int32_t kind) {
  for (size_t i = 0; i < cbx_nkinds; i++)
    if (cbx_kinds[i].kind == kind) return &cbx_kinds[i];
  return NULL;
}

void cbx_kinds_ready(const callbox_kind_info *table, size_t n) {
  cbx_kinds = table;
  cbx_nkinds = n;
  const callbox_kind_info *k = cbx_kind(CALLBOX_KIND_HOST_PANIC);
  if (k != NULL) {
    cbx_oom_error.code = k->code;
    cbx_oom_error.kind_name = k->name;
    snprintf(cbx_oom_text, sizeof cbx_oom_text, "%s: out of memory", k->name);
  }
}

// cbx_c_error is an error made in C, with no callback or chain: its kind
// (code and name from the table), then the message.
static callbox_error *cbx_c_error(int32_t kind, const char *msg) {
  const callbox_kind_info *k = cbx_kind(kind);
  // No table only in a process that forked while the library was still
  // loading: the error then has no code and no kind name to give.
  int32_t code = k ? k->code : 0;
  const char *kind_name = k ? k->name : "";
  char text[1200];
  snprintf(text, sizeof text, "%s: %s", kind_name, msg);
  callbox_error *e = calloc(1, sizeof *e);
  if (e == NULL) return &cbx_oom_error;
  e->struct_size = sizeof *e;
  e->kind = kind;
  e->code = code;
  e->kind_name = strdup(kind_name);
  e->callback = strdup("");
  e->chain = strdup("");
  e->message = strdup(msg);
  e->guest_message = strdup("");
  e->text = strdup(text);
  e->failed_callback = strdup("");
  e->failed_message = strdup("");
  e->failed_text = strdup("");
  return e;
}

static callbox_error *cbx_fork_error(const char *where) {
  char msg[1024];
  cbx_fork_message(where, msg, sizeof msg);
  return cbx_c_error(CALLBOX_KIND_FAILED_PRECONDITION, msg);
}

void callbox_error_free(callbox_error *e) {
  if (e == NULL || e == &cbx_oom_error) return;
  free((void *)e->kind_name);
  free((void *)e->callback);
  free((void *)e->chain);
  free((void *)e->message);
  free((void *)e->guest_message);
  free((void *)e->text);
  if (e->struct_size >= offsetof(callbox_error, failed_message) + sizeof(char *)) {
    free((void *)e->failed_callback);
    free((void *)e->failed_message);
  }
  if (e->struct_size >= offsetof(callbox_error, failed_text) + sizeof(char *)) free((void *)e->failed_text);
  if (e->struct_size >= offsetof(callbox_error, frame_count) + sizeof(uint64_t) && e->frames != NULL) {
    for (uint64_t i = 0; i < e->frame_count; i++) {
      free((void *)e->frames[i].func);
      free((void *)e->frames[i].module);
      free((void *)e->frames[i].file);
    }
    free((void *)e->frames);
  }
  free(e);
}

// ---- the Go side (capi.go, gpu.go) ----

extern callbox_error *cbxgo_open(const char *, callbox_host *);
extern callbox_error *cbxgo_open_config(const char *, const char *, const char *, callbox_host *);
extern callbox_error *cbxgo_close(callbox_host);
extern callbox_error *cbxgo_callback_count(callbox_host, size_t *);
extern callbox_error *cbxgo_callback_at(callbox_host, size_t, callbox_callback_info *);
extern callbox_error *cbxgo_callback_find(callbox_host, const char *, callbox_callback_info *);
extern callbox_error *cbxgo_callback_limits(callbox_host, const char *, callbox_limits *);
extern callbox_error *cbxgo_callback_params(callbox_host, const char *, callbox_param_info *, size_t, size_t *);
extern callbox_error *cbxgo_callback_refusal(callbox_host, const char *, const char *);
extern callbox_error *cbxgo_output_types(callbox_host, const char *, const callbox_tensor *, size_t, callbox_type *,
                                         size_t);
extern callbox_error *cbxgo_call(callbox_host, const char *, const callbox_tensor *, size_t, callbox_tensor *, size_t);
extern callbox_error *cbxgo_profile(callbox_host, const char *, const callbox_tensor *, size_t, int64_t, const char *, char **);
extern callbox_error *cbxgo_call_cancelable(callbox_host, callbox_cancel_token, const char *, const char *,
                                            const callbox_tensor *, size_t, callbox_tensor *, size_t);
extern callbox_error *cbxgo_call_within(callbox_host, callbox_cancel_token, const char *, const callbox_tensor *, size_t,
                                         callbox_tensor *, size_t, uint64_t, int32_t *);
extern callbox_error *cbxgo_call_batch(callbox_host, callbox_cancel_token, const char *, const char *,
                                       const callbox_tensor *, size_t, callbox_tensor *, size_t);
extern callbox_error *cbxgo_request_run(callbox_host, const callbox_request *);
extern callbox_error *cbxgo_reload(callbox_host, const char *);
extern callbox_error *cbxgo_reload_config(callbox_host, const char *, const char *, const char *);
extern callbox_error *cbxgo_request_prepare(callbox_host, const callbox_request *, uintptr_t *);
extern callbox_error *cbxgo_tap(callbox_host, const char *, const callbox_tensor *, size_t);
extern callbox_error *cbxgo_barrier(callbox_host);
extern callbox_error *cbxgo_chain_call(callbox_host, const char *, const char *, const callbox_tensor *, size_t,
                                       callbox_tensor *, size_t);
extern callbox_error *cbxgo_chain_tap(callbox_host, const char *, const char *, const callbox_tensor *, size_t);
extern callbox_error *cbxgo_chain_barrier(callbox_host, const char *);
extern callbox_error *cbxgo_barrier_cancelable(callbox_host, callbox_cancel_token, const char *);
extern callbox_error *cbxgo_chain_reset(callbox_host, const char *);
extern callbox_error *cbxgo_set_default_host(callbox_host);
extern callbox_error *cbxgo_default_host(callbox_host *);
extern callbox_error *cbxgo_cancel_token_new(callbox_cancel_token *);
extern callbox_error *cbxgo_cancel_token_fire(callbox_cancel_token);
extern callbox_error *cbxgo_cancel_token_free(callbox_cancel_token);
extern callbox_error *cbxgo_cancel_on_signal(callbox_cancel_token, int);
extern callbox_error *cbxgo_set_log_callback(callbox_log_fn, void *, int32_t);
extern callbox_error *cbxgo_async_prepare(callbox_host, callbox_cancel_token, const char *, const char *,
                                          const callbox_tensor *, size_t, callbox_tensor *, size_t, uintptr_t *);
extern callbox_error *cbxgo_async_run(uintptr_t);
extern void cbxgo_async_drop(uintptr_t);
extern callbox_error *cbxgo_xla_failure(const char *, callbox_error **);
extern callbox_error *cbxgo_xla_host_attr(callbox_host, char *, size_t);
extern size_t cbxgo_dtypes(callbox_dtype_info *, size_t);
extern int cbxgo_cuda_call_dlpack(const char *, uintptr_t, callbox_tensor *const *, size_t, callbox_tensor *const *,
                                  size_t, char *, size_t);
extern int64_t cbxgo_cuda_stats(char *, size_t);

// ---- callbox_call_async's workers ----
//
// Asynchronous calls run on a pool of C threads, each of which enters Go
// (cbxgo_async_run) per call: a worker blocked on a condition variable is
// woken directly by the caller, where a goroutine started from the
// caller's cgo callback would wait until Go's sysmon took back the P the
// caller's thread keeps after returning to C (100-200 us per call). The
// pool grows when a call finds no idle worker, up to CBX_ASYNC_MAX threads
// (then calls queue); workers stay for reuse. A worker done with a call
// polls the queue for CBX_ASYNC_SPIN_NS before it sleeps (one worker at a
// time), so that calls made one after another find it awake. Each has a 16 MiB stack, which a
// wasmtime guest runs on (max_stack plus about 1 MiB).
#define CBX_ASYNC_MAX 1024
#define CBX_ASYNC_STACK ((size_t)16 << 20)
#define CBX_ASYNC_SPIN_NS 20000.0

typedef struct cbx_async_job {
  uintptr_t call;
  callbox_done_fn done;
  void *user;
  struct cbx_async_job *next;
} cbx_async_job;

static pthread_mutex_t cbx_async_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cbx_async_cv = PTHREAD_COND_INITIALIZER;
static cbx_async_job *cbx_async_head, *cbx_async_tail;
static int cbx_async_queued;   // jobs in the queue
static int cbx_async_spinning; // workers polling the queue before they sleep
static int cbx_async_idle;     // workers asleep on cbx_async_cv
static int cbx_async_woken;    // of those, signaled and not yet up
static int cbx_async_threads;

static inline void cbx_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static double cbx_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *cbx_async_worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&cbx_async_mu);
  for (;;) {
    if (cbx_async_head != NULL) {
      cbx_async_job *j = cbx_async_head;
      cbx_async_head = j->next;
      if (cbx_async_head == NULL) cbx_async_tail = NULL;
      cbx_async_queued--;
      pthread_mutex_unlock(&cbx_async_mu);
      callbox_error *err = cbxgo_async_run(j->call);
      j->done(j->user, err);
      free(j);
      pthread_mutex_lock(&cbx_async_mu);
      continue;
    }
    // Poll the queue for a while before sleeping: a caller making calls
    // one after another finds this worker awake (no wake-up to pay). One
    // worker polls at a time: several would keep every core busy and
    // starve the caller (measured: a 34 us hand-over on 2 cores).
    if (cbx_async_spinning > 0) goto sleep;
    cbx_async_spinning++;
    pthread_mutex_unlock(&cbx_async_mu);
    double until = cbx_now_ns() + CBX_ASYNC_SPIN_NS;
    for (unsigned i = 1; __atomic_load_n(&cbx_async_head, __ATOMIC_ACQUIRE) == NULL; i++) {
      if (i < 128) {
        cbx_pause();
        continue;
      }
      if (cbx_now_ns() > until) break;
      // Past a short pure spin, yield between looks: when the caller's
      // thread shares this core, a pure spin kept it off the core for the
      // whole poll (measured: every hand-over took 34 us on 2 loaded cores).
      sched_yield();
    }
    pthread_mutex_lock(&cbx_async_mu);
    cbx_async_spinning--;
    if (cbx_async_head != NULL) continue;
  sleep:
    cbx_async_idle++;
    while (cbx_async_head == NULL) pthread_cond_wait(&cbx_async_cv, &cbx_async_mu);
    cbx_async_idle--;
    if (cbx_async_woken > 0) cbx_async_woken--;
  }
  return NULL;
}

// cbx_async_queue queues j and makes sure a worker will take it: one
// polling the queue, else one asleep (woken), else a new one. 0 when no
// worker exists and none could start.
static int cbx_async_queue(cbx_async_job *j) {
  j->next = NULL;
  pthread_mutex_lock(&cbx_async_mu);
  if (cbx_async_tail != NULL)
    cbx_async_tail->next = j;
  else
    __atomic_store_n(&cbx_async_head, j, __ATOMIC_RELEASE);
  cbx_async_tail = j;
  cbx_async_queued++;
  if (cbx_async_spinning >= cbx_async_queued) {
    // a polling worker takes it
  } else if (cbx_async_idle > cbx_async_woken) {
    cbx_async_woken++;
    pthread_cond_signal(&cbx_async_cv);
  } else if (cbx_async_threads < CBX_ASYNC_MAX) {
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) == 0) {
      pthread_attr_setstacksize(&a, CBX_ASYNC_STACK);
      pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&t, &a, cbx_async_worker, NULL) == 0) cbx_async_threads++;
      pthread_attr_destroy(&a);
    }
    if (cbx_async_threads == 0) {  // nobody will ever take it
      cbx_async_head = cbx_async_tail = NULL;
      cbx_async_queued = 0;
      pthread_mutex_unlock(&cbx_async_mu);
      return 0;
    }
  }
  pthread_mutex_unlock(&cbx_async_mu);
  return 1;
}

// cbx_local_error is an INVALID_ARGUMENT error made in C.
static callbox_error *cbx_local_error(const char *msg) {
  return cbx_c_error(CALLBOX_KIND_INVALID_ARGUMENT, msg);
}

// ---- the entries ----

#define CBX_GUARD(name) \
  if (cbx_in_fork_child()) return cbx_fork_error(name)

callbox_error *callbox_open(const char *path, callbox_host *out) {
  if (out != NULL && cbx_in_fork_child()) *out = 0;
  CBX_GUARD("callbox_open");
  return cbxgo_open(path, out);
}

callbox_error *callbox_open_config(const char *text, const char *format, const char *base_dir, callbox_host *out) {
  if (out != NULL && cbx_in_fork_child()) *out = 0;
  CBX_GUARD("callbox_open_config");
  return cbxgo_open_config(text, format, base_dir, out);
}

callbox_error *callbox_close(callbox_host host) {
  CBX_GUARD("callbox_close");
  return cbxgo_close(host);
}

callbox_error *callbox_callback_count(callbox_host host, size_t *out) {
  CBX_GUARD("callbox_callback_count");
  return cbxgo_callback_count(host, out);
}

callbox_error *callbox_callback_at(callbox_host host, size_t index, callbox_callback_info *out) {
  CBX_GUARD("callbox_callback_at");
  return cbxgo_callback_at(host, index, out);
}

callbox_error *callbox_callback_find(callbox_host host, const char *name_or_id, callbox_callback_info *out) {
  CBX_GUARD("callbox_callback_find");
  return cbxgo_callback_find(host, name_or_id, out);
}

callbox_error *callbox_callback_limits(callbox_host host, const char *name_or_id, callbox_limits *out) {
  CBX_GUARD("callbox_callback_limits");
  return cbxgo_callback_limits(host, name_or_id, out);
}

callbox_error *callbox_callback_params(callbox_host host, const char *name_or_id, callbox_param_info *out,
                                       size_t capacity, size_t *count) {
  CBX_GUARD("callbox_callback_params");
  return cbxgo_callback_params(host, name_or_id, out, capacity, count);
}

callbox_error *callbox_callback_refusal(callbox_host host, const char *name_or_id, const char *reason) {
  CBX_GUARD("callbox_callback_refusal");
  return cbxgo_callback_refusal(host, name_or_id, reason);
}

callbox_error *callbox_output_types(callbox_host host, const char *callback, const callbox_tensor *inputs,
                                    size_t num_inputs, callbox_type *outputs, size_t num_outputs) {
  CBX_GUARD("callbox_output_types");
  return cbxgo_output_types(host, callback, inputs, num_inputs, outputs, num_outputs);
}

callbox_error *callbox_call(callbox_host host, const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                            callbox_tensor *outputs, size_t num_outputs) {
  CBX_GUARD("callbox_call");
  return cbxgo_call(host, callback, inputs, num_inputs, outputs, num_outputs);
}

callbox_error *callbox_profile(callbox_host host, const char *callback, const callbox_tensor *inputs,
                               size_t num_inputs, int64_t calls, const char *pprof_path, char **summary) {
  if (summary != NULL && cbx_in_fork_child()) *summary = NULL;
  CBX_GUARD("callbox_profile");
  return cbxgo_profile(host, callback, inputs, num_inputs, calls, pprof_path, summary);
}

void callbox_string_free(char *s) { free(s); }

callbox_error *callbox_call_batch(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                  const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                  callbox_tensor *outputs, size_t num_outputs) {
  CBX_GUARD("callbox_call_batch");
  return cbxgo_call_batch(host, cancel, chain, callback, inputs, num_inputs, outputs, num_outputs);
}

callbox_error *callbox_call_cancelable(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                       const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                       callbox_tensor *outputs, size_t num_outputs) {
  CBX_GUARD("callbox_call_cancelable");
  return cbxgo_call_cancelable(host, cancel, chain, callback, inputs, num_inputs, outputs, num_outputs);
}

callbox_error *callbox_call_within(callbox_host host, callbox_cancel_token cancel, const char *callback,
                                   const callbox_tensor *inputs, size_t num_inputs, callbox_tensor *outputs,
                                   size_t num_outputs, uint64_t budget_ns, int32_t *expired) {
  if (expired != NULL) *expired = 0;
  CBX_GUARD("callbox_call_within");
  return cbxgo_call_within(host, cancel, callback, inputs, num_inputs, outputs, num_outputs, budget_ns, expired);
}

// cbx_async_launch queues job j, whose call a cbxgo_*_prepare has just
// prepared with result e: an error frees j and is returned; so is a queue
// that cannot start a worker (no_worker, the entry's own message).
static callbox_error *cbx_async_launch(cbx_async_job *j, callbox_error *e, callbox_done_fn done, void *user,
                                       const char *no_worker) {
  if (e != NULL) {
    free(j);
    return e;
  }
  j->done = done;
  j->user = user;
  if (!cbx_async_queue(j)) {
    cbxgo_async_drop(j->call);
    free(j);
    return cbx_local_error(no_worker);
  }
  return NULL;
}

callbox_error *callbox_call_async(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                  const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                  callbox_tensor *outputs, size_t num_outputs, callbox_done_fn done, void *user) {
  CBX_GUARD("callbox_call_async");
  if (done == NULL) return cbx_local_error("callbox_call_async: done: NULL");
  cbx_async_job *j = malloc(sizeof *j);
  if (j == NULL) return &cbx_oom_error;
  callbox_error *e =
      cbxgo_async_prepare(host, cancel, chain, callback, inputs, num_inputs, outputs, num_outputs, &j->call);
  return cbx_async_launch(j, e, done, user, "callbox_call_async: cannot start a worker thread");
}

callbox_error *callbox_reload(callbox_host host, const char *config_path) {
  CBX_GUARD("callbox_reload");
  return cbxgo_reload(host, config_path);
}

callbox_error *callbox_reload_config(callbox_host host, const char *text, const char *format, const char *base_dir) {
  CBX_GUARD("callbox_reload_config");
  return cbxgo_reload_config(host, text, format, base_dir);
}

callbox_error *callbox_request_run(callbox_host host, const callbox_request *req) {
  CBX_GUARD("callbox_request_run");
  return cbxgo_request_run(host, req);
}

callbox_error *callbox_request_async(callbox_host host, const callbox_request *req, callbox_done_fn done, void *user) {
  CBX_GUARD("callbox_request_async");
  if (done == NULL) return cbx_local_error("callbox_request_async: done: NULL");
  cbx_async_job *j = malloc(sizeof *j);
  if (j == NULL) return &cbx_oom_error;
  callbox_error *e = cbxgo_request_prepare(host, req, &j->call);
  return cbx_async_launch(j, e, done, user, "callbox_request_async: cannot start a worker thread");
}

callbox_error *callbox_tap(callbox_host host, const char *callback, const callbox_tensor *inputs, size_t num_inputs) {
  CBX_GUARD("callbox_tap");
  return cbxgo_tap(host, callback, inputs, num_inputs);
}

callbox_error *callbox_barrier(callbox_host host) {
  CBX_GUARD("callbox_barrier");
  return cbxgo_barrier(host);
}

callbox_error *callbox_chain_call(callbox_host host, const char *chain, const char *callback,
                                  const callbox_tensor *inputs, size_t num_inputs, callbox_tensor *outputs,
                                  size_t num_outputs) {
  CBX_GUARD("callbox_chain_call");
  return cbxgo_chain_call(host, chain, callback, inputs, num_inputs, outputs, num_outputs);
}

callbox_error *callbox_chain_tap(callbox_host host, const char *chain, const char *callback,
                                 const callbox_tensor *inputs, size_t num_inputs) {
  CBX_GUARD("callbox_chain_tap");
  return cbxgo_chain_tap(host, chain, callback, inputs, num_inputs);
}

callbox_error *callbox_barrier_cancelable(callbox_host host, callbox_cancel_token cancel, const char *chain) {
  CBX_GUARD("callbox_barrier_cancelable");
  return cbxgo_barrier_cancelable(host, cancel, chain);
}

callbox_error *callbox_chain_barrier(callbox_host host, const char *chain) {
  CBX_GUARD("callbox_chain_barrier");
  return cbxgo_chain_barrier(host, chain);
}

callbox_error *callbox_chain_reset(callbox_host host, const char *chain) {
  CBX_GUARD("callbox_chain_reset");
  return cbxgo_chain_reset(host, chain);
}

callbox_error *callbox_set_default_host(callbox_host host) {
  CBX_GUARD("callbox_set_default_host");
  return cbxgo_set_default_host(host);
}

callbox_error *callbox_default_host(callbox_host *out) {
  if (out != NULL && cbx_in_fork_child()) *out = 0;
  CBX_GUARD("callbox_default_host");
  return cbxgo_default_host(out);
}

callbox_error *callbox_cancel_token_new(callbox_cancel_token *out) {
  if (out != NULL && cbx_in_fork_child()) *out = 0;
  CBX_GUARD("callbox_cancel_token_new");
  return cbxgo_cancel_token_new(out);
}

callbox_error *callbox_cancel_token_fire(callbox_cancel_token cancel) {
  CBX_GUARD("callbox_cancel_token_fire");
  return cbxgo_cancel_token_fire(cancel);
}

callbox_error *callbox_cancel_token_free(callbox_cancel_token cancel) {
  CBX_GUARD("callbox_cancel_token_free");
  return cbxgo_cancel_token_free(cancel);
}

callbox_error *callbox_cancel_on_signal(callbox_cancel_token cancel, int signum) {
  CBX_GUARD("callbox_cancel_on_signal");
  return cbxgo_cancel_on_signal(cancel, signum);
}

callbox_error *callbox_set_log_callback(callbox_log_fn fn, void *user, int32_t min_level) {
  CBX_GUARD("callbox_set_log_callback");
  return cbxgo_set_log_callback(fn, user, min_level);
}

callbox_error *callbox_xla_failure(const char *xla_message, callbox_error **failure) {
  if (failure != NULL && cbx_in_fork_child()) *failure = NULL;
  CBX_GUARD("callbox_xla_failure");
  return cbxgo_xla_failure(xla_message, failure);
}

callbox_error *callbox_xla_host_attr(callbox_host host, char *buf, size_t cap) {
  if (buf != NULL && cap > 0 && cbx_in_fork_child()) buf[0] = 0;
  CBX_GUARD("callbox_xla_host_attr");
  return cbxgo_xla_host_attr(host, buf, cap);
}

size_t callbox_kinds(callbox_kind_info *out, size_t capacity) {
  // The table handed over at load (capi.go): it stays readable in a fork
  // child, where Go cannot run.
  if (cbx_kinds == NULL) return 0;
  if (out != NULL) memcpy(out, cbx_kinds, (capacity < cbx_nkinds ? capacity : cbx_nkinds) * sizeof *out);
  return cbx_nkinds;
}

size_t callbox_dtypes(callbox_dtype_info *out, size_t capacity) {
  if (cbx_in_fork_child()) return 0;
  return cbxgo_dtypes(out, capacity);
}

int callbox_cuda_call_dlpack(const char *callback, uintptr_t stream, callbox_tensor *const *inputs, size_t num_inputs,
                             callbox_tensor *const *outputs, size_t num_outputs, char *msg, size_t msg_cap) {
  if (cbx_in_fork_child()) {
    if (msg != NULL && msg_cap > 0) cbx_fork_message("callbox_cuda_call_dlpack", msg, msg_cap);
    const callbox_kind_info *k = cbx_kind(CALLBOX_KIND_FAILED_PRECONDITION);
    return k ? k->code : 0;
  }
  return cbxgo_cuda_call_dlpack(callback, stream, inputs, num_inputs, outputs, num_outputs, msg, msg_cap);
}

int64_t callbox_cuda_stats(char *buf, size_t cap) {
  if (cbx_in_fork_child()) return -1;
  return cbxgo_cuda_stats(buf, cap);
}

// The log callback's trampoline: Go cannot call a C function pointer.
void cbx_call_log(callbox_log_fn fn, void *user, int32_t level, const char *callback, const char *message) {
  fn(user, level, callback, message);
}
