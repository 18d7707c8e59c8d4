// harness_threads.c: calls from C threads the Go runtime did not create:
// many at once through both APIs (threads), every hostile guest
// (hostile), and on threads with small stacks (smallstack).
#include "harness.h"

// ---- threads ----

#define NTHREADS 8
#define NCALLS 200

static void *worker(void *arg) {
  long id = (long)arg;
  float x[64], y[64];
  int64_t n = 64;
  for (int c = 0; c < NCALLS; c++) {
    for (int i = 0; i < 64; i++) x[i] = (float)(id * 100000 + c * 64 + i);
    memset(y, 0, sizeof y);
    callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
    callbox_error *e;
    if (c % 2 == 0) {
      e = callbox_call(host, "copy_f32", &ti, 1, &to, 1);
      CHECK(e == NULL, "thread %ld call %d: %s", id, c, e ? e->text : "");
      callbox_error_free(e);
    } else {
      xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
      xframe f;
      xattr attr = {"callback", 4, "copy_f32", 0};
      xbuild(&f, 3, &a, 1, &r, 1, &attr, 1);
      fake_error *xe = (fake_error *)callbox_xla_ffi((struct callbox_xla_call_frame *)f.frame);
      CHECK(xe == NULL, "thread %ld xla call %d: %s", id, c, xe ? xe->message : "");
      free(xe);
    }
    CHECK(memcmp(x, y, sizeof x) == 0, "thread %ld call %d: wrong output", id, c);
  }
  return NULL;
}

void group_threads(void) {
  pthread_t t[NTHREADS];
  for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  val("threads", "%d threads x %d calls", NTHREADS, NCALLS);
}

// ---- hostile guests: every callback whose name starts with "hostile_" ----

void group_hostile(void) {
  size_t n = 0;
  report("hostile_count", callbox_callback_count(host, &n));
  for (size_t i = 0; i < n; i++) {
    callbox_callback_info info;
    callbox_error *e = callbox_callback_at(host, i, &info);
    if (e != NULL) {
      report("hostile_at", e);
      continue;
    }
    if (strncmp(info.name, "hostile_", 8) != 0) continue;
    float x[4] = {0}, y[4] = {0};  // the hostile suite's guests expect zeros
    int64_t len = 4;
    callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
    char label[160];
    snprintf(label, sizeof label, "capi_%s", info.name);
    report(label, callbox_call(host, info.name, &ti, 1, &to, 1));
    xbuf a = {11, x, 1, &len, 0}, r = {11, y, 1, &len, 0};
    snprintf(label, sizeof label, "xla_%s", info.name);
    xcall(label, info.name, &a, 1, &r, 1);
    snprintf(label, sizeof label, "xlaf_%s", info.name);
    xfailure(label);
  }
  // The process survives and still serves.
  float x[2] = {5, 6}, y[2] = {0};
  int64_t len = 2;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  report("hostile_survived", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[1] == 6, "call after the hostile guests");
}

// group_smallstack calls wasmtime guests from a thread with a 256 KiB
// stack, less than wasmtime's 512 KiB wasm stack: a first call (which
// instantiates), later calls, a guest recursing until its wasm stack is
// exhausted, which must be a StackOverflow, not a fault of the thread's
// stack, and traps, a timeout and a host call on the switched stack. The
// library runs such entries on a stack of its own (Linux with glibc, or
// x86-64). CBX_HARNESS_SWITCH chooses the switch through the wasmtime
// engine's test knob (found with dlsym): 1 the makecontext/swapcontext one
// that glibc targets other than x86-64 run, 2 none, as on musl off x86-64.
static void *smallstack_thread(void *p) {
  (void)p;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  for (int i = 0; i < 3; i++) {
    y[3] = 0;
    callbox_error *e = callbox_call(host, "copy_wasmtime", &ti, 1, &to, 1);
    int ran = e == NULL;
    report(i == 0 ? "smallstack_first" : "smallstack_again", e);
    // A call refused (no switch) leaves its output untouched.
    CHECK(y[3] == (ran ? 4 : 0), "copy_wasmtime from a small stack");
  }
  float z[4] = {0};
  callbox_tensor tz = f32(z, 1, &len), tw = f32(y, 1, &len);
  report("smallstack_recurse", callbox_call(host, "hostile_recurse_wasmtime", &tz, 1, &tw, 1));
  // Traps that arrive as signals on the switched stack (a guard-page
  // fault, a trap instruction), an interrupt at the deadline, and a host
  // call (a callback into Go) from it.
  const char *more[] = {"load_oob", "div_by_zero", "unreachable", "spin", "error_megabytes"};
  for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
    char name[64], label[96];
    snprintf(name, sizeof name, "hostile_%s_wasmtime", more[i]);
    snprintf(label, sizeof label, "smallstack_%s", more[i]);
    memset(z, 0, sizeof z);
    report(label, callbox_call(host, name, &tz, 1, &tw, 1));
  }
  report("smallstack_after", callbox_call(host, "copy_wasmtime", &ti, 1, &to, 1));
  return NULL;
}

// smallstack_open opens a host from the config (wasmtime modules among
// its callbacks, compiled as it opens), calls one of them, reloads it and
// closes it, all on a thread of 32 KiB: the library opens and reloads on
// a thread of the Go runtime's, so the caller's stack size is no concern
// (on this thread's own stack, opening one wasmtime module died below
// 64 KiB).
static const char *smallstack_cfg;

static void *smallstack_open(void *p) {
  (void)p;
  callbox_host h = 0;
  callbox_error *e = callbox_open(smallstack_cfg, &h);
  report("smallstack_open", e);
  if (e != NULL) return NULL;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  e = callbox_call(h, "copy_wasmtime", &ti, 1, &to, 1);
  int ran = e == NULL;
  report("smallstack_open_call", e);
  CHECK(y[3] == (ran ? 4 : 0), "copy_wasmtime on a host opened from a 32 KiB thread");
  report("smallstack_reload", callbox_reload(h, smallstack_cfg));
  report("smallstack_close", callbox_close(h));
  return NULL;
}

void group_smallstack(const char *cfg) {
  smallstack_cfg = cfg;
  const char *mode = getenv("CBX_HARNESS_SWITCH");
  if (mode != NULL) {
    int (*knob)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cb_test_stack_switch");
    val("smallstack_switch", knob != NULL && knob(atoi(mode)) ? "chosen" : "unavailable");
  }
  pthread_attr_t a;
  pthread_t th;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256 << 10);
  if (pthread_create(&th, &a, smallstack_thread, NULL) != 0) {
    val("smallstack_thread", "not started");
    return;
  }
  pthread_join(th, NULL);
  pthread_attr_setstacksize(&a, 32 << 10);
  if (pthread_create(&th, &a, smallstack_open, NULL) != 0) {
    val("smallstack_open_thread", "not started");
  } else {
    pthread_join(th, NULL);
  }
  pthread_attr_destroy(&a);
}
