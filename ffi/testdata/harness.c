// harness: drives libcallbox through its C API and its XLA FFI handler,
// from C, the way a foreign runtime does. Built and run by
// ffi/harness_build_test.go and the harness_*_test.go beside it, which write
// the config and assert on the output.
//
// Output lines (tab-separated):
//   ERR   <label> <kind> <code> <callback> <chain> <seq> <guest> <message>   a C API error
//   XLA   <label> <code> <message>                                      an XLA FFI error (OK: code 0)
//   VAL   <label> <value>                                               a value to check
//   FAIL  <function>:<line> <what>                                      a check inside the harness failed
//   DONE  <checks> <failures>
// The XLA call frames are built byte by byte at the offsets of
// shared/xla-ffi.md, independently of the library's own declarations.
//
// The harness's files, one a topic, share harness.h: this one holds the
// output and main, which runs the groups named on its command line;
// harness_host.c (the host and its callbacks), harness_calls.c (dtypes,
// shapes, refused arguments, chains, batches), harness_xla.c (the XLA
// frames and the CPU handler), harness_cuda.c (the CUDA handler),
// harness_threads.c (threads, hostile guests, small stacks),
// harness_process.c (soak, signals, fork), harness_cancel.c (budgets and
// cancel tokens), harness_async.c (asynchronous calls and requests) and
// harness_doors.c (the door-conformance table).
#include "harness.h"

int checks, failures;
pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

// clean replaces tabs and newlines so a message stays on one line.
const char *clean(const char *s, char *buf, size_t n) {
  size_t i = 0;
  for (; s != NULL && s[i] != 0 && i + 1 < n; i++) buf[i] = (s[i] == '\t' || s[i] == '\n') ? ' ' : s[i];
  buf[i] = 0;
  return buf;
}

// report prints an error (or OK) under label and frees it; returns its kind.
int report(const char *label, callbox_error *e) {
  static char g[512], m[4096];
  pthread_mutex_lock(&out_mu);
  if (e == NULL) {
    printf("ERR\t%s\tOK\t0\t\t\t0\t\t\t\n", label);
    pthread_mutex_unlock(&out_mu);
    return 0;
  }
  int kind = e->kind;
  CHECK(e->struct_size == sizeof *e, "struct_size %u", e->struct_size);
  printf("ERR\t%s\t%s\t%d\t%s\t%s\t%llu\t%s\t%s\t", label, e->kind_name, e->code, e->callback, e->chain,
         (unsigned long long)e->seq, clean(e->guest_message, g, sizeof g), clean(e->text, m, sizeof m));
  if (e->failed_seq != 0) printf("%s#%llu %s", e->failed_callback, (unsigned long long)e->failed_seq, clean(e->failed_message, m, sizeof m));
  printf("\n");
  pthread_mutex_unlock(&out_mu);
  callbox_error_free(e);
  return kind;
}

// val prints a value to check under label.
void val(const char *label, const char *fmt, ...) {
  pthread_mutex_lock(&out_mu);
  printf("VAL\t%s\t", label);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  pthread_mutex_unlock(&out_mu);
}

// host is the host the groups call: the config's, made the default host.
callbox_host host;

// now_ms is the monotonic clock, in ms.
double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: harness CONFIG|- DIR GROUP...\n");
    return 2;
  }
  xinit();
  setvbuf(stdout, NULL, _IOLBF, 0);

  if (strcmp(argv[1], "-") != 0) {
    callbox_error *e = callbox_open(argv[1], &host);
    if (e != NULL) {
      report("open", e);
      return 1;
    }
    report("set_default", callbox_set_default_host(host));
  }
  for (int i = 3; i < argc; i++) {
    const char *g = argv[i];
    if (!strcmp(g, "version")) group_version();
    else if (!strcmp(g, "open")) group_open(argv[2]);
    else if (!strcmp(g, "list")) group_list();
    else if (!strcmp(g, "dtypes")) group_dtypes();
    else if (!strcmp(g, "shapes")) group_shapes();
    else if (!strcmp(g, "bad")) group_bad();
    else if (!strcmp(g, "chains")) group_chains();
    else if (!strcmp(g, "sigflags")) group_sigflags();
    else if (!strcmp(g, "batch")) group_batch();
    else if (!strcmp(g, "xla")) group_xla();
    else if (!strcmp(g, "threads")) group_threads();
    else if (!strcmp(g, "hostile")) group_hostile();
    else if (!strcmp(g, "smallstack")) group_smallstack(argv[1]);
    else if (!strcmp(g, "close")) group_close();
    else if (!strcmp(g, "lazy")) group_lazy();
    else if (!strcmp(g, "cuda")) group_cuda();
    else if (!strcmp(g, "both")) group_both(argv[2]);
    else if (!strncmp(g, "soak", 4)) group_soak(argv[1], atoi(g + 4));
    else if (!strcmp(g, "fork")) group_fork(argv[1]);
    else if (!strcmp(g, "cancel")) group_cancel();
    else if (!strcmp(g, "log")) group_log();
    else if (!strcmp(g, "async")) group_async(argv[1]);
    else if (!strcmp(g, "within")) group_within();
    else if (!strcmp(g, "request")) group_request();
    else if (!strcmp(g, "reload")) group_reload(argv[2]);
    else if (!strcmp(g, "doors")) group_doors(argv[1]);
    else if (!strcmp(g, "kinds")) group_kinds();
    else if (!strcmp(g, "params")) group_params();
    else if (!strcmp(g, "limits")) group_limits();
    else if (!strcmp(g, "xlahost")) group_xlahost(argv[1]);
    else {
      fprintf(stderr, "unknown group %s\n", g);
      return 2;
    }
  }
  printf("DONE\t%d\t%d\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
