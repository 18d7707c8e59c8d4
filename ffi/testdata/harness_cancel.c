// harness_cancel.c: stopping calls: callbox_call_within's budget (within)
// and cancel tokens fired from a thread, by a signal and on a chain
// (cancel).
#include "harness.h"

// group_within drives callbox_call_within: a quick call within its budget;
// a 5 s spinner on each engine given up 20 ms in (nothing written, the
// host then serving the callback's next call); a callback whose own 250 ms
// timeout is shorter than the budget (TIMEOUT, not given up); a cancel
// token fired 100 ms in (CANCELED); refused arguments.
static void *within_cancel_thread(void *p) {
  callbox_cancel_token tok = *(callbox_cancel_token *)p;
  struct timespec d = {0, 100 * 1000 * 1000};
  nanosleep(&d, NULL);
  report("within_cancel_fire", callbox_cancel_token_fire(tok));
  return NULL;
}

void group_within(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  int32_t expired = -1;
  report("within_quick", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000000ull, &expired));
  val("within_quick", "%d %g %g", expired, y[0], y[3]);
  const char *spinners[2] = {"spin_long", "spin_wasmtime"};
  for (int e = 0; e < 2; e++) {
    char label[64];
    y[0] = y[3] = 9;
    expired = -1;
    double t0 = now_ms();
    snprintf(label, sizeof label, "within_gave_up_%s", spinners[e]);
    report(label, callbox_call_within(host, 0, spinners[e], &ti, 1, &to, 1, 20000000ull, &expired));
    double ms = now_ms() - t0;
    val(label, "%d %.0f", expired, ms);
    CHECK(y[0] == 9 && y[3] == 9, "a call given up wrote its output");
  }
  // The host serves the next call (on a new instance).
  expired = -1;
  report("within_after", callbox_call_within(host, 0, "copy_wasmtime", &ti, 1, &to, 1, 1000000000ull, &expired));
  val("within_after", "%d %g", expired, y[3]);
  // The callback's own timeout (250 ms) first: a TIMEOUT like any other.
  y[0] = y[3] = 9;
  expired = -1;
  report("within_timeout", callbox_call_within(host, 0, "spin", &ti, 1, &to, 1, 3000000000ull, &expired));
  val("within_timeout", "%d", expired);
  CHECK(y[0] == 9 && y[3] == 9, "a call that timed out wrote its output");
  // A token fired 100 ms in: CANCELED.
  callbox_cancel_token tok = 0;
  report("within_cancel_new", callbox_cancel_token_new(&tok));
  pthread_t th;
  pthread_create(&th, NULL, within_cancel_thread, &tok);
  expired = -1;
  double t0 = now_ms();
  report("within_cancel", callbox_call_within(host, tok, "spin_long", &ti, 1, &to, 1, 3000000000ull, &expired));
  val("within_cancel", "%d %.0f", expired, now_ms() - t0);
  pthread_join(th, NULL);
  report("within_cancel_free", callbox_cancel_token_free(tok));
  // Refused.
  report("within_zero_budget", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 0, &expired));
  report("within_null_expired", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000ull, NULL));
  report("within_bad_token", callbox_call_within(host, 424242, "copy_f32", &ti, 1, &to, 1, 1000000ull, &expired));
  report("within_unknown", callbox_call_within(host, 0, "no_such", &ti, 1, &to, 1, 1000000ull, &expired));
}

typedef struct {
  callbox_cancel_token tok;
  const char *chain;
  double ms;
  callbox_error *err;
} spin_arg;

static void *spin_thread(void *p) {
  spin_arg *a = p;
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  double t0 = now_ms();
  a->err = callbox_call_cancelable(host, a->tok, a->chain, "spin_long", &ti, 1, &to, 1);
  a->ms = now_ms() - t0;
  CHECK(y[0] == 9 && y[3] == 9, "a canceled call wrote its output");
  return NULL;
}

static volatile sig_atomic_t usr2_seen;
static void on_usr2(int sig) {
  (void)sig;
  usr2_seen++;
}

// group_cancel cancels calls of a 5 s spinning callback 100 ms in: by
// firing the token from another thread, by a signal the token was bound
// to (the program's own handler for it still runs), and on a chain.
void group_cancel(void) {
  callbox_cancel_token tok = 0;
  report("cancel_new", callbox_cancel_token_new(&tok));
  for (int round = 0; round < 3; round++) {
    spin_arg a = {tok, round == 2 ? "canceled_chain" : NULL, 0, NULL};
    pthread_t th;
    pthread_create(&th, NULL, spin_thread, &a);
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    if (round == 1) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_usr2;
      sa.sa_flags = SA_ONSTACK;
      sigaction(SIGUSR2, &sa, NULL);
      report("cancel_on_signal", callbox_cancel_on_signal(tok, SIGUSR2));
      kill(getpid(), SIGUSR2);
    } else {
      report("cancel_fire", callbox_cancel_token_fire(tok));
    }
    pthread_join(th, NULL);
    char label[32];
    snprintf(label, sizeof label, "cancel_call_%d", round);
    report(label, a.err);
    snprintf(label, sizeof label, "cancel_ms_%d", round);
    val(label, "%.0f", a.ms);
  }
  val("cancel_usr2_seen", "%d", (int)usr2_seen);
  // A call after the token fired runs: firing cancels only calls in flight.
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("cancel_later_call", callbox_call_cancelable(host, tok, NULL, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[3] == 4, "the call after the token fired");
  report("cancel_free", callbox_cancel_token_free(tok));
  report("cancel_freed", callbox_cancel_token_fire(tok));
  report("cancel_new_2", callbox_cancel_token_new(&tok));
  report("cancel_bad_signal", callbox_cancel_on_signal(tok, SIGSEGV));
  report("cancel_free_2", callbox_cancel_token_free(tok));
}
