// harness_process.c: the library in its process: memory over many opens
// and closes (soak), the flags of the signal handlers it chains to
// (sigflags), and a fork after use (fork).
#include "harness.h"

// rss_kib is the process's resident set (VmRSS), in KiB.
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long rss = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) rss = atol(line + 6);
  }
  fclose(f);
  return rss;
}

// group_soak opens and closes a host from the config text (both engines'
// callbacks, as callbox_open_config gets it from a binding) rounds times
// with a call on every 10th, printing the RSS after the first tenth, after
// half and at the end: a closed host must release everything.
void group_soak(const char *cfg_path, int rounds) {
  FILE *f = fopen(cfg_path, "r");
  CHECK(f != NULL, "open %s", cfg_path);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", cfg_path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL) *slash = 0;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  long first = 0, half = 0;
  for (int i = 0; i < rounds; i++) {
    callbox_host h = 0;
    callbox_error *e = callbox_open_config(text, "yaml", dir, &h);
    if (e != NULL) {
      report("soak_open", e);
      return;
    }
    if (i % 10 == 0) {
      callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
      e = callbox_call(h, "copy_f32", &ti, 1, &to, 1);
      if (e == NULL) e = callbox_call(h, "copy_wasmtime", &ti, 1, &to, 1);
      if (e != NULL) {
        report("soak_call", e);
        return;
      }
    }
    e = callbox_close(h);
    if (e != NULL) {
      report("soak_close", e);
      return;
    }
    if (i + 1 == rounds / 10) first = rss_kib();
    if (i + 1 == rounds / 2) half = rss_kib();
  }
  val("soak", "%d %ld %ld %ld", rounds, first, half, rss_kib());
}

static void fork_done(void *user, callbox_error *err) {
  (void)user;
  callbox_error_free(err);
}

static void sig_noop(int signo) { (void)signo; }

// sigcall runs spin_long under a cancel token and records how it ended.
typedef struct {
  callbox_cancel_token tok;
  char kind[32];
} sigcall;

static void *sigcall_run(void *p) {
  sigcall *c = p;
  float x[1] = {1}, y[1] = {0};
  int64_t n = 1;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  callbox_error *e = callbox_call_cancelable(host, c->tok, NULL, "spin_long", &ti, 1, &to, 1);
  snprintf(c->kind, sizeof c->kind, "%s", e != NULL ? e->kind_name : "ok");
  callbox_error_free(e);
  return NULL;
}

// group_sigflags: callbox_cancel_on_signal keeps the SA_RESTART flag of
// the handler it chains to (Python installs its own without it, so that
// Ctrl-C interrupts a blocking read), and restarts under an ignored or
// default disposition. No signal is sent: the flags are read back.
void group_sigflags(void) {
  callbox_cancel_token tok = 0;
  report("sigflags_token", callbox_cancel_token_new(&tok));
  struct sigaction sa, got;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_handler = sig_noop;
  sa.sa_flags = 0;
  sigaction(SIGUSR2, &sa, NULL);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, NULL);
  signal(SIGTSTP, SIG_IGN);
  report("sigflags_install_plain", callbox_cancel_on_signal(tok, SIGUSR2));
  report("sigflags_install_restart", callbox_cancel_on_signal(tok, SIGWINCH));
  report("sigflags_install_ignored", callbox_cancel_on_signal(tok, SIGTSTP));
  sigaction(SIGUSR2, NULL, &got);
  val("sigflags_plain", "restart=%d mask_term=%d", (got.sa_flags & SA_RESTART) != 0, sigismember(&got.sa_mask, SIGTERM));
  sigaction(SIGWINCH, NULL, &got);
  val("sigflags_restart", "restart=%d", (got.sa_flags & SA_RESTART) != 0);
  sigaction(SIGTSTP, NULL, &got);
  val("sigflags_ignored", "restart=%d", (got.sa_flags & SA_RESTART) != 0);
  report("sigflags_free", callbox_cancel_token_free(tok));
}

// group_fork forks a child after the parent has used the library: every
// entry the child calls must fail at once with FailedPrecondition (the Go
// runtime did not survive the fork), and the parent keeps serving.
void group_fork(const char *cfg) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("fork_parent_before", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);  // a hang fails the group instead of the test's timeout
    double t0 = now_ms();
    callbox_host h = 7;
    report("fork_child_open", callbox_open(cfg, &h));
    val("fork_child_handle", "%llu", (unsigned long long)h);
    report("fork_child_call", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
    xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
    xcall("fork_child_xla", "copy_f32", &a, 1, &r, 1);
    val("fork_child_dtypes", "%zu", callbox_dtypes(NULL, 0));
    // Every other guarded entry, each reported as fork_entry_<name>: all
    // must refuse at once, naming themselves (a missing guard would enter
    // the dead Go runtime and hang or crash the child).
    size_t count = 0;
    callbox_callback_info info;
    callbox_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.struct_size = sizeof lim;
    callbox_type types[1];
    callbox_cancel_token tok = 0;
    int32_t expired = 0;
    callbox_host dh = 0;
    report("fork_entry_callbox_open_config", callbox_open_config("callbacks: {}", "yaml", ".", &h));
    report("fork_entry_callbox_reload", callbox_reload(host, "x.yaml"));
    report("fork_entry_callbox_reload_config", callbox_reload_config(host, "callbacks: {}", "yaml", "."));
    report("fork_entry_callbox_callback_count", callbox_callback_count(host, &count));
    report("fork_entry_callbox_callback_at", callbox_callback_at(host, 0, &info));
    report("fork_entry_callbox_callback_find", callbox_callback_find(host, "copy_f32", &info));
    report("fork_entry_callbox_callback_limits", callbox_callback_limits(host, "copy_f32", &lim));
    size_t nparams = 0;
    report("fork_entry_callbox_callback_params", callbox_callback_params(host, "copy_f32", NULL, 0, &nparams));
    report("fork_entry_callbox_callback_refusal", callbox_callback_refusal(host, "copy_f32", "why"));
    report("fork_entry_callbox_output_types", callbox_output_types(host, "copy_f32", &ti, 1, types, 1));
    char *summary = NULL;
    report("fork_entry_callbox_profile", callbox_profile(host, "copy_f32", &ti, 1, 1, NULL, &summary));
    report("fork_entry_callbox_call_batch", callbox_call_batch(host, 0, NULL, "copy_f32", &ti, 1, &to, 1));
    callbox_request req = {sizeof req, "copy_f32", NULL, 0, &ti, 1, &to, 1, 0, 0, 0};
    report("fork_entry_callbox_request_run", callbox_request_run(host, &req));
    report("fork_entry_callbox_request_async", callbox_request_async(host, &req, fork_done, NULL));
    report("fork_entry_callbox_call_cancelable", callbox_call_cancelable(host, 0, NULL, "copy_f32", &ti, 1, &to, 1));
    report("fork_entry_callbox_call_within",
           callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000000, &expired));
    report("fork_entry_callbox_call_async",
           callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, fork_done, NULL));
    report("fork_entry_callbox_tap", callbox_tap(host, "copy_f32", &ti, 1));
    report("fork_entry_callbox_barrier", callbox_barrier(host));
    report("fork_entry_callbox_barrier_cancelable", callbox_barrier_cancelable(host, 0, NULL));
    report("fork_entry_callbox_chain_call", callbox_chain_call(host, "fc", "copy_f32", &ti, 1, &to, 1));
    report("fork_entry_callbox_chain_tap", callbox_chain_tap(host, "fc", "copy_f32", &ti, 1));
    report("fork_entry_callbox_chain_barrier", callbox_chain_barrier(host, "fc"));
    report("fork_entry_callbox_chain_reset", callbox_chain_reset(host, "fc"));
    report("fork_entry_callbox_set_default_host", callbox_set_default_host(host));
    report("fork_entry_callbox_default_host", callbox_default_host(&dh));
    report("fork_entry_callbox_cancel_token_new", callbox_cancel_token_new(&tok));
    report("fork_entry_callbox_cancel_token_fire", callbox_cancel_token_fire(1));
    report("fork_entry_callbox_cancel_token_free", callbox_cancel_token_free(1));
    report("fork_entry_callbox_cancel_on_signal", callbox_cancel_on_signal(1, SIGUSR1));
    report("fork_entry_callbox_set_log_callback", callbox_set_log_callback(NULL, NULL, 0));
    callbox_error *failure = (callbox_error *)0x1;
    report("fork_entry_callbox_xla_failure", callbox_xla_failure("[callbox error 0-1]", &failure));
    CHECK(failure == NULL, "a fork child's callbox_xla_failure gave a failure");
    char attr[CALLBOX_XLA_HOST_ATTR_SIZE] = "x";
    report("fork_entry_callbox_xla_host_attr", callbox_xla_host_attr(host, attr, sizeof attr));
    CHECK(attr[0] == 0, "a fork child's callbox_xla_host_attr wrote %s", attr);
    report("fork_entry_callbox_close", callbox_close(host));
    val("fork_child_cancel_token", "%llu", (unsigned long long)tok);
    val("fork_child_default_host", "%llu", (unsigned long long)dh);
    char msg[64];
    val("fork_child_cuda_call", "%d", callbox_cuda_call_dlpack("copy_f32", 0, NULL, 0, NULL, 0, msg, sizeof msg));
    val("fork_child_cuda_stats", "%lld", (long long)callbox_cuda_stats(msg, sizeof msg));
    val("fork_child_ms", "%.0f", now_ms() - t0);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  val("fork_child_exit", "%d", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  memset(y, 0, sizeof y);
  report("fork_parent_after", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[3] == 4, "the parent's call after the fork");

  // A signal to a fork child must not fire the parent's token (the child
  // inherits the handler and the pipe's write end). A call under token a
  // spins (5 s timeout) while a child raises a's signal: the call must end
  // at its timeout, not be canceled. (It starts 200 ms before the fork; were
  // it later, the check could only pass, never fail wrongly.)
  callbox_cancel_token ta = 0;
  report("fork_signal_token", callbox_cancel_token_new(&ta));
  signal(SIGUSR2, sig_noop);
  callbox_error_free(callbox_cancel_on_signal(ta, SIGUSR2));
  sigcall sc = {ta, ""};
  pthread_t th;
  pthread_create(&th, NULL, sigcall_run, &sc);
  usleep(200000);
  pid_t c2 = fork();
  if (c2 == 0) {
    alarm(10);
    raise(SIGUSR2);
    _exit(0);
  }
  waitpid(c2, &status, 0);
  pthread_join(th, NULL);
  val("fork_signal_call", "%s", sc.kind);
  callbox_error_free(callbox_cancel_token_free(ta));
}
