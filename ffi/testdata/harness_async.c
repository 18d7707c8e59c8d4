// harness_async.c: calls that return before they are over:
// callbox_call_async (async) and requests, run and asynchronous
// (request).
#include "harness.h"

// ---- callbox_call_async ----

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, calls, wrong;
  callbox_error *err;  // the last failure (single-call uses)
  callbox_host close_in_done;
} async_wait;

static void async_init(async_wait *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
}

// An async call's state: its own buffers, kept until done.
typedef struct {
  async_wait *w;
  float x[256], y[256];
  int64_t n;
} async_call;

static void async_done(void *user, callbox_error *err) {
  async_call *c = user;
  async_wait *w = c->w;
  int right = err == NULL;
  for (int64_t i = 0; right && i < c->n; i++) right = c->y[i] == c->x[i];
  if (w->close_in_done != 0) report("async_close_in_done", callbox_close(w->close_in_done));
  pthread_mutex_lock(&w->mu);
  w->calls++;
  if (!right) w->wrong++;
  if (err != NULL) {
    if (w->err != NULL) callbox_error_free(w->err);
    w->err = err;
  }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void async_wait_for(async_wait *w, int calls) {
  pthread_mutex_lock(&w->mu);
  while (w->calls < calls) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

// async_start starts one call of callback on h with its own input (seed),
// its tensor structs and shape on this stack frame and poisoned when it
// returns (the library must have copied them).
static callbox_error *async_start(callbox_host h, callbox_cancel_token tok, const char *callback, async_call *c,
                                  int seed) {
  for (int64_t i = 0; i < c->n; i++) {
    c->x[i] = (float)(seed * 1000 + i);
    c->y[i] = -1;
  }
  int64_t *shape = malloc(sizeof *shape);
  *shape = c->n;
  callbox_tensor ti = f32(c->x, 1, shape), to = f32(c->y, 1, shape);
  callbox_error *e = callbox_call_async(h, tok, NULL, callback, &ti, 1, &to, 1, async_done, c);
  *shape = -7;  // poisoned: the library copied the shape
  free(shape);
  ti.ndim = to.ndim = 99;
  return e;
}

typedef struct {
  async_wait *w;
  async_call *calls;
  int first, count;
} async_thread_arg;

static void *async_thread(void *p) {
  async_thread_arg *a = p;
  for (int i = 0; i < a->count; i++) {
    async_call *c = &a->calls[a->first + i];
    c->w = a->w;
    c->n = 1 + (a->first + i) % 256;
    callbox_error *e = async_start(host, 0, (a->first + i) % 2 ? "copy_f32" : "copy_wasmtime", c, a->first + i);
    if (e != NULL) {
      report("async_many_start", e);
      pthread_mutex_lock(&a->w->mu);
      a->w->calls++;  // counted, as wrong
      a->w->wrong++;
      pthread_mutex_unlock(&a->w->mu);
    }
  }
  return NULL;
}

// group_async drives callbox_call_async: 400 calls from 4 threads on both
// engines, each done once with its own right output; refusals (no done
// called); an unknown callback; cancel; a host closed while a call is in
// flight (close waits for it); a done function that closes its host.
void group_async(const char *cfg) {
  enum { THREADS = 4, PER = 100 };
  static async_call calls[THREADS * PER];
  async_wait w;
  async_init(&w);
  pthread_t th[THREADS];
  async_thread_arg args[THREADS];
  for (int t = 0; t < THREADS; t++) {
    args[t] = (async_thread_arg){&w, calls, t * PER, PER};
    pthread_create(&th[t], NULL, async_thread, &args[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  async_wait_for(&w, THREADS * PER);
  struct timespec d = {0, 50 * 1000 * 1000};
  nanosleep(&d, NULL);  // a second done would land here
  val("async_many", "%d calls %d wrong", w.calls, w.wrong);
  report("async_many_err", w.err);
  w.err = NULL;

  // Refused at once: done never called.
  async_call c;
  async_wait w1;
  async_init(&w1);
  c.w = &w1;
  c.n = 4;
  report("async_unknown_callback", async_start(host, 0, "no_such", &c, 1));
  report("async_bad_host", async_start(987654, 0, "copy_f32", &c, 1));
  report("async_bad_token", async_start(host, 987654, "copy_f32", &c, 1));
  {
    int64_t n = 4;
    callbox_tensor ti = f32(c.x, 1, &n), to = f32(c.y, 1, &n);
    report("async_null_done", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, NULL, NULL));
    ti.ndim = -1;
    report("async_bad_tensor", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, async_done, &c));
    ti.ndim = 1;
    // A wrong count is the callback's to judge: reported through done.
    report("async_wrong_count_start", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 0, async_done, &c));
    async_wait_for(&w1, 1);
    report("async_wrong_count", w1.err);
    w1.err = NULL;
  }
  nanosleep(&d, NULL);
  val("async_refused_done_calls", "%d", w1.calls);

  // A guest error through done, with no output byte written.
  async_wait w2;
  async_init(&w2);
  c.w = &w2;
  report("async_fail_start", async_start(host, 0, "fail", &c, 2));
  async_wait_for(&w2, 1);
  report("async_fail", w2.err);
  CHECK(c.y[0] == -1 && c.y[3] == -1, "a failed async call wrote its output");

  // Cancel: a 5 s spinner canceled 100 ms in.
  callbox_cancel_token tok = 0;
  report("async_cancel_new", callbox_cancel_token_new(&tok));
  async_wait w3;
  async_init(&w3);
  c.w = &w3;
  double t0 = now_ms();
  report("async_cancel_start", async_start(host, tok, "spin_long", &c, 3));
  struct timespec hundred = {0, 100 * 1000 * 1000};
  nanosleep(&hundred, NULL);
  report("async_cancel_fire", callbox_cancel_token_fire(tok));
  async_wait_for(&w3, 1);
  val("async_cancel_ms", "%.0f", now_ms() - t0);
  report("async_cancel", w3.err);
  CHECK(c.y[0] == -1, "a canceled async call wrote its output");
  report("async_cancel_free", callbox_cancel_token_free(tok));

  // Close while a call is in flight: close waits for it (spin times out
  // at 250 ms), then the host is closed.
  callbox_host h2 = 0;
  report("async_open_2", callbox_open(cfg, &h2));
  async_wait w4;
  async_init(&w4);
  c.w = &w4;
  t0 = now_ms();
  report("async_close_start", async_start(h2, 0, "spin", &c, 4));
  report("async_close", callbox_close(h2));
  val("async_close_ms", "%.0f", now_ms() - t0);
  async_wait_for(&w4, 1);
  report("async_in_flight_at_close", w4.err);
  report("async_after_close", async_start(h2, 0, "copy_f32", &c, 5));

  // done may close the host it was called for.
  callbox_host h3 = 0;
  report("async_open_3", callbox_open(cfg, &h3));
  async_wait w5;
  async_init(&w5);
  w5.close_in_done = h3;
  c.w = &w5;
  report("async_done_close_start", async_start(h3, 0, "copy_f32", &c, 6));
  async_wait_for(&w5, 1);
  val("async_done_close_calls", "%d %d", w5.calls, w5.wrong);
  report("async_after_done_close", async_start(h3, 0, "copy_f32", &c, 7));
}

// group_request drives callbox_request_run and callbox_request_async (1.7):
// a plain, a chained and a batched request; a budget that runs out (a
// TIMEOUT, the output untouched); the host's bounds (a budget past an
// hour, a budget on a batch); the sized struct (too small, a bigger
// caller's zero tail accepted and a non-zero one refused, reserved and
// unknown flags refused, NULL); an asynchronous request whose struct and
// shape are gone when it runs.
void group_request(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  callbox_request r;
  memset(&r, 0, sizeof r);
  r.size = sizeof r;
  r.callback = "copy_f32";
  r.inputs = &ti;
  r.num_inputs = 1;
  r.outputs = &to;
  r.num_outputs = 1;
  report("request_ok", callbox_request_run(host, &r));
  val("request_ok", "%g %g", y[0], y[3]);
  y[0] = y[3] = 9;
  r.chain = "rq";
  report("request_chain", callbox_request_run(host, &r));
  val("request_chain", "%g %g", y[0], y[3]);
  r.chain = NULL;

  enum { B = 8, N = 4 };
  float bx[B * N], by[B * N];
  int64_t shape[2] = {B, N};
  callbox_tensor bti = f32(bx, 2, shape), bto = f32(by, 2, shape);
  for (int i = 0; i < B * N; i++) bx[i] = (float)i, by[i] = -7;
  callbox_request b = r;
  b.callback = "nonneg_par";
  b.inputs = &bti;
  b.outputs = &bto;
  b.flags = CALLBOX_REQUEST_BATCH;
  report("request_batch", callbox_request_run(host, &b));
  val("request_batch", "%d", memcmp(bx, by, sizeof bx) == 0);
  b.budget_ns = 1000000000ull;
  report("request_batch_budget", callbox_request_run(host, &b));

  callbox_request s = r;
  s.callback = "spin_long";
  s.budget_ns = 20000000ull;
  y[0] = y[3] = 9;
  double t0 = now_ms();
  report("request_budget", callbox_request_run(host, &s));
  val("request_budget", "%.0f %g %g", now_ms() - t0, y[0], y[3]);
  s.budget_ns = 2ull * 3600 * 1000000000ull;
  report("request_budget_huge", callbox_request_run(host, &s));
  s.budget_ns = UINT64_MAX;
  report("request_budget_max", callbox_request_run(host, &s));

  callbox_request small = r;
  small.size = 8;
  report("request_small", callbox_request_run(host, &small));
  struct {
    callbox_request r;
    uint64_t later;
  } big;
  memset(&big, 0, sizeof big);
  big.r = r;
  big.r.size = sizeof big;
  report("request_bigger_zero", callbox_request_run(host, &big.r));
  big.later = 1;
  report("request_bigger_set", callbox_request_run(host, &big.r));
  callbox_request odd = r;
  odd.reserved = 1;
  report("request_reserved", callbox_request_run(host, &odd));
  odd = r;
  odd.flags = 2;
  report("request_flags", callbox_request_run(host, &odd));
  report("request_null", callbox_request_run(host, NULL));

  async_call c;
  async_wait w;
  async_init(&w);
  c.w = &w;
  c.n = 4;
  for (int i = 0; i < 4; i++) c.x[i] = (float)(10 + i), c.y[i] = -1;
  int64_t *ashape = malloc(sizeof *ashape);
  *ashape = 4;
  callbox_tensor *at = malloc(2 * sizeof *at);
  at[0] = f32(c.x, 1, ashape);
  at[1] = f32(c.y, 1, ashape);
  callbox_request *ar = malloc(sizeof *ar);
  memset(ar, 0, sizeof *ar);
  ar->size = sizeof *ar;
  ar->callback = "copy_f32";
  ar->inputs = &at[0];
  ar->num_inputs = 1;
  ar->outputs = &at[1];
  ar->num_outputs = 1;
  report("request_async_start", callbox_request_async(host, ar, async_done, &c));
  memset(ar, 0xAB, sizeof *ar);  // poisoned: the library copied what it needs
  free(ar);
  *ashape = -7;
  free(ashape);
  free(at);
  async_wait_for(&w, 1);
  val("request_async", "%d calls %d wrong", w.calls, w.wrong);
  report("request_async", w.err);
  report("request_async_null_done", callbox_request_async(host, &r, NULL, NULL));
}
