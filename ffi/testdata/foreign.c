/* The hostile suite inside a process that is not a Go program.
 *
 * A host program with its own signal handlers (SIGINT, SIGTERM, SIGUSR1,
 * and crash handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE with
 * SA_ONSTACK|SA_SIGINFO that chain to the handler they replaced) loads
 * libcallbox with dlopen and runs every case of a manifest written by
 * foreign_test.go (internal/hostile's cases, on both engines) from
 * several threads at once, while another thread keeps sending it SIGUSR1.
 *
 *   foreign LIB MANIFEST MODE PASSES THREADS
 *
 * MODE "first": the handlers are installed before the library is loaded
 * (the Go runtime saves them and forwards signals that are not its own);
 * "after": the library is loaded first and the handlers installed after
 * it, chaining to the Go runtime's (what a host that loads plugins before
 * installing a crash reporter does); "late": installed after the hosts
 * are open, so after wasmtime's own handlers: the program's crash handler
 * then sees every wasmtime trap first and must chain to wasmtime's.
 *
 * Manifest lines (tab-separated):
 *   host  ENGINE CONFIG                       open CONFIG as ENGINE's host
 *   call  ENGINE NAME KIND BEFORE INPUT WANT  call NAME: BEFORE healthy calls
 *                                             on [0 1 2 3], then INPUT (a
 *                                             comma list); KIND 0: it must
 *                                             succeed with WANT
 *   load  ENGINE NAME KIND CONFIG             opening CONFIG must fail with
 *                                             KIND (0: succeed)
 * Every host has a callback "healthy" (copy, f32[n]).
 *
 * Prints CASE PASS ENGINE NAME KIND MS for every case and pass, MEM PASS
 * RSS_KB THREADS after every pass, SIG lines, FAIL lines for failed
 * checks, and DONE at the end; exits 0 when nothing failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callbox.h"

/* ---- The library, loaded with dlopen ---------------------------------- */

static const char *(*p_version)(void);
static void (*p_error_free)(callbox_error *);
static callbox_error *(*p_open)(const char *, callbox_host *);
static callbox_error *(*p_close)(callbox_host);
static callbox_error *(*p_call)(callbox_host, const char *, const callbox_tensor *, size_t,
                                callbox_tensor *, size_t);

static void load_library(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
#define SYM(p, name)                                          \
  do {                                                        \
    *(void **)(&p) = dlsym(lib, name);                        \
    if (!p) {                                                 \
      fprintf(stderr, "dlsym %s: %s\n", name, dlerror());     \
      exit(2);                                                \
    }                                                         \
  } while (0)
  SYM(p_version, "callbox_version");
  SYM(p_error_free, "callbox_error_free");
  SYM(p_open, "callbox_open");
  SYM(p_close, "callbox_close");
  SYM(p_call, "callbox_call");
#undef SYM
}

/* ---- The host program's own signal handlers ---------------------------- */

static atomic_long got_usr1, got_int, got_term, got_fatal;

static void on_async(int sig) {
  if (sig == SIGUSR1) atomic_fetch_add(&got_usr1, 1);
  if (sig == SIGINT) atomic_fetch_add(&got_int, 1);
  if (sig == SIGTERM) atomic_fetch_add(&got_term, 1);
}

#define NFATAL 4
static const int fatal_sigs[NFATAL] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
static struct sigaction fatal_prev[NFATAL];

/* A crash reporter: counts the fault, then hands it to whoever handled it
 * before (the Go runtime in mode "after", wasmtime's handler in mode
 * "late"; the default action, which kills the process, in mode "first").
 * In modes first and after a wasm trap never gets here: wasmtime's
 * handler, installed after the program's, consumes it. */
static void on_fatal(int sig, siginfo_t *info, void *uctx) {
  atomic_fetch_add(&got_fatal, 1);
  for (int i = 0; i < NFATAL; i++) {
    if (fatal_sigs[i] != sig) continue;
    struct sigaction *p = &fatal_prev[i];
    if (p->sa_flags & SA_SIGINFO) {
      if (p->sa_sigaction) {
        p->sa_sigaction(sig, info, uctx);
        return;
      }
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
      p->sa_handler(sig);
      return;
    }
    static const char msg[] = "foreign: a fault nobody handles\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    signal(sig, SIG_DFL); /* returning re-executes the fault: default action */
    return;
  }
}

static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  /* SA_ONSTACK: the handler may run on a thread the Go runtime created,
   * whose own stack is small; Go requires it of every handler. */
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  sa.sa_handler = on_async;
  if (sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL)) {
    perror("sigaction");
    exit(2);
  }
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sa.sa_sigaction = on_fatal;
  for (int i = 0; i < NFATAL; i++) {
    if (sigaction(fatal_sigs[i], &sa, &fatal_prev[i])) {
      perror("sigaction");
      exit(2);
    }
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- The manifest ---------------------------------------------------------- */

enum { HOST_LINE, CALL_LINE, LOAD_LINE };

typedef struct item {
  int what;
  char engine[16];
  char name[64];
  int kind;
  int before;
  float *input, *want;
  size_t n, nwant;
  char config[4096];
  int host; /* index into hosts, for calls */
} item;

typedef struct host_entry {
  char engine[16];
  callbox_host h;
} host_entry;

static item *items;
static size_t nitems;
static host_entry hosts[8];
static size_t nhosts;

static atomic_int failures;

#define FAIL(...)                          \
  do {                                     \
    flockfile(stdout);                     \
    printf("FAIL\t");                      \
    printf(__VA_ARGS__);                   \
    printf("\n");                          \
    fflush(stdout);                        \
    funlockfile(stdout);                   \
    atomic_fetch_add(&failures, 1);        \
  } while (0)

static float *parse_floats(const char *s, size_t *n) {
  *n = 0;
  if (strcmp(s, "-") == 0) return NULL;
  size_t cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  float *v = calloc(cap, sizeof *v);
  char *end;
  for (const char *p = s; *p;) {
    v[(*n)++] = strtof(p, &end);
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return v;
}

static void read_manifest(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  size_t cap = 0;
  char *line = NULL;
  size_t len = 0;
  while (getline(&line, &len, f) > 0) {
    line[strcspn(line, "\n")] = 0;
    char *fields[8] = {0};
    int nf = 0;
    for (char *save = NULL, *tok = strtok_r(line, "\t", &save); tok && nf < 8; tok = strtok_r(NULL, "\t", &save))
      fields[nf++] = tok;
    if (nf == 0) continue;
    if (strcmp(fields[0], "host") == 0 && nf == 3) {
      snprintf(hosts[nhosts].engine, sizeof hosts[nhosts].engine, "%s", fields[1]);
      double start = now_ms();
      callbox_error *err = p_open(fields[2], &hosts[nhosts].h);
      if (err) {
        fprintf(stderr, "opening %s (%.0f ms): %s\n", fields[2], now_ms() - start, err->text);
        exit(2);
      }
      nhosts++;
      continue;
    }
    if (nitems == cap) {
      cap = cap ? 2 * cap : 256;
      items = realloc(items, cap * sizeof *items);
    }
    item *it = &items[nitems];
    memset(it, 0, sizeof *it);
    snprintf(it->engine, sizeof it->engine, "%s", fields[1]);
    snprintf(it->name, sizeof it->name, "%s", fields[2]);
    it->kind = atoi(fields[3]);
    if (strcmp(fields[0], "call") == 0 && nf == 7) {
      it->what = CALL_LINE;
      it->before = atoi(fields[4]);
      it->input = parse_floats(fields[5], &it->n);
      it->want = parse_floats(fields[6], &it->nwant);
      it->host = -1;
      for (size_t i = 0; i < nhosts; i++)
        if (strcmp(hosts[i].engine, it->engine) == 0) it->host = (int)i;
      if (it->host < 0) {
        fprintf(stderr, "no host for engine %s\n", it->engine);
        exit(2);
      }
    } else if (strcmp(fields[0], "load") == 0 && nf == 5) {
      it->what = LOAD_LINE;
      snprintf(it->config, sizeof it->config, "%s", fields[4]);
    } else {
      fprintf(stderr, "bad manifest line %zu\n", nitems + 1);
      exit(2);
    }
    nitems++;
  }
  free(line);
  fclose(f);
}

/* ---- Running cases --------------------------------------------------------- */

static callbox_tensor f32(float *data, int64_t *shape) {
  callbox_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = CALLBOX_DEVICE_CPU;
  t.ndim = 1;
  t.dtype.code = CALLBOX_DL_FLOAT;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* copy_call calls callback with x and checks it returns a copy. */
static int copy_call(callbox_host h, const char *callback, const float *x, size_t n, const char *what) {
  float *in = malloc((n + 1) * sizeof *in), *out = calloc(n + 1, sizeof *out);
  memcpy(in, x, n * sizeof *in);
  int64_t shape[1] = {(int64_t)n};
  callbox_tensor ti = f32(in, shape), to = f32(out, shape);
  callbox_error *err = p_call(h, callback, &ti, 1, &to, 1);
  int ok = err == NULL && memcmp(in, out, n * sizeof *in) == 0;
  if (!ok) FAIL("%s: %s: %s", callback, what, err ? err->text : "wrong output");
  p_error_free(err);
  free(in);
  free(out);
  return ok;
}

// report_case prints one case's line (the Go side reads them) and returns
// the error's kind (0: none).
static int report_case(int pass, const item *it, const callbox_error *err, double ms) {
  int kind = err ? err->kind : 0;
  flockfile(stdout);
  printf("CASE\t%d\t%s\t%s\t%d\t%.0f\n", pass, it->engine, it->name, kind, ms);
  fflush(stdout);
  funlockfile(stdout);
  return kind;
}

static void run_call(int pass, item *it) {
  callbox_host h = hosts[it->host].h;
  static const float x0[4] = {0, 1, 2, 3};
  for (int i = 0; i < it->before; i++)
    if (!copy_call(h, it->name, x0, 4, "a call before the hostile one")) return;
  size_t n = it->n;
  float *in = malloc((n + 1) * sizeof *in);
  memcpy(in, it->input, n * sizeof *in);
  unsigned char *out = malloc(n * sizeof(float) + 1);
  memset(out, 0x7e, n * sizeof(float));
  int64_t shape[1] = {(int64_t)n};
  callbox_tensor ti = f32(in, shape), to = f32((float *)out, shape);
  double start = now_ms();
  callbox_error *err = p_call(h, it->name, &ti, 1, &to, 1);
  double ms = now_ms() - start;
  int kind = report_case(pass, it, err, ms);
  if (kind != it->kind)
    FAIL("%s/%s: kind %d, want %d: %s", it->name, it->engine, kind, it->kind, err ? err->text : "no error");
  if (memcmp(in, it->input, n * sizeof *in) != 0) FAIL("%s/%s: the caller's input changed", it->name, it->engine);
  if (err) {
    for (size_t i = 0; i < n * sizeof(float); i++)
      if (out[i] != 0x7e) {
        FAIL("%s/%s: a failed call changed output byte %zu", it->name, it->engine, i);
        break;
      }
    if (strcmp(err->callback, it->name) != 0)
      FAIL("%s/%s: the error names callback %s", it->name, it->engine, err->callback);
  } else if (it->nwant != n || memcmp(out, it->want, n * sizeof(float)) != 0) {
    FAIL("%s/%s: wrong output", it->name, it->engine);
  }
  p_error_free(err);
  free(in);
  free(out);
}

static void run_load(int pass, item *it) {
  callbox_host h = 0;
  double start = now_ms();
  callbox_error *err = p_open(it->config, &h);
  double ms = now_ms() - start;
  int kind = report_case(pass, it, err, ms);
  if (kind != it->kind)
    FAIL("%s/%s: open: kind %d, want %d: %s", it->name, it->engine, kind, it->kind, err ? err->text : "no error");
  if (err && strcmp(err->callback, it->name) != 0)
    FAIL("%s/%s: the open's error names callback %s", it->name, it->engine, err->callback);
  p_error_free(err);
  if (h) {
    static const float x0[4] = {0, 1, 2, 3};
    copy_call(h, "healthy", x0, 4, "beside a loaded module");
    callbox_error *cerr = p_close(h);
    if (cerr) FAIL("%s/%s: close: %s", it->name, it->engine, cerr->text);
    p_error_free(cerr);
  }
}

static atomic_size_t next_item;
static int current_pass;

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    size_t i = atomic_fetch_add(&next_item, 1);
    if (i >= nitems) return NULL;
    /* The manifest interleaves engines and phases, so that load cases,
     * call cases and both engines run side by side. */
    item *it = &items[i];
    if (it->what == CALL_LINE)
      run_call(current_pass, it);
    else
      run_load(current_pass, it);
  }
}

static atomic_int signalling;
static atomic_long sent_usr1;

/* Keeps signalling the process while the cases run: the signal lands on
 * whichever thread the kernel picks (Go's, wasmtime's, the workers'). */
static void *signaller(void *arg) {
  (void)arg;
  while (atomic_load(&signalling)) {
    kill(getpid(), SIGUSR1);
    atomic_fetch_add(&sent_usr1, 1);
    usleep(2000);
  }
  return NULL;
}

static void memory(int pass) {
  long rss = -1, threads = -1;
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) rss = atol(line + 6);
    if (strncmp(line, "Threads:", 8) == 0) threads = atol(line + 8);
  }
  if (f) fclose(f);
  printf("MEM\t%d\t%ld\t%ld\n", pass, rss, threads);
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: foreign LIB MANIFEST first|after|late PASSES THREADS\n");
    return 2;
  }
  const char *mode = argv[3];
  int passes = atoi(argv[4]), nthreads = atoi(argv[5]);
  if (nthreads < 1 || nthreads > 64 || passes < 1) return 2;
  if (strcmp(mode, "first") == 0) {
    install_handlers();
    load_library(argv[1]);
    read_manifest(argv[2]);
  } else if (strcmp(mode, "after") == 0) {
    load_library(argv[1]);
    printf("VAL\tversion\t%s\n", p_version()); /* the Go runtime is up */
    install_handlers();
    read_manifest(argv[2]);
  } else if (strcmp(mode, "late") == 0) {
    load_library(argv[1]);
    read_manifest(argv[2]); /* opening a wasmtime host installs wasmtime's handlers */
    install_handlers();
  } else {
    return 2;
  }
  if (nhosts == 0 || nitems == 0) {
    fprintf(stderr, "empty manifest\n");
    return 2;
  }

  atomic_store(&signalling, 1);
  pthread_t sig;
  pthread_create(&sig, NULL, signaller, NULL);
  pthread_t *ts = calloc(nthreads, sizeof *ts);
  for (int pass = 1; pass <= passes; pass++) {
    current_pass = pass;
    atomic_store(&next_item, 0);
    for (int t = 0; t < nthreads; t++) pthread_create(&ts[t], NULL, worker, NULL);
    for (int t = 0; t < nthreads; t++) pthread_join(ts[t], NULL);
    /* The hosts keep serving. */
    static const float x[3] = {1, 2, 3};
    for (size_t i = 0; i < nhosts; i++) copy_call(hosts[i].h, "healthy", x, 3, "after the pass");
    memory(pass);
  }
  atomic_store(&signalling, 0);
  pthread_join(sig, NULL);

  /* The host program's own handlers still get its signals. */
  long usr1 = atomic_load(&got_usr1);
  raise(SIGUSR1);
  raise(SIGINT);
  raise(SIGTERM);
  printf("SIG\tusr1\t%ld\t%ld\n", atomic_load(&sent_usr1), usr1);
  if (atomic_load(&got_usr1) != usr1 + 1) FAIL("raise(SIGUSR1) did not run the program's handler");
  if (usr1 == 0) FAIL("none of the %ld SIGUSR1 sent during the passes reached the program's handler", atomic_load(&sent_usr1));
  if (atomic_load(&got_int) != 1) FAIL("raise(SIGINT) ran the program's handler %ld times", atomic_load(&got_int));
  if (atomic_load(&got_term) != 1) FAIL("raise(SIGTERM) ran the program's handler %ld times", atomic_load(&got_term));
  /* In modes first and after, wasmtime's handler comes before the
   * program's, and no wasm trap may reach the program's. In mode late the
   * program's handler sees every wasmtime trap first and must pass it on. */
  printf("SIG\tfatal\t%ld\n", atomic_load(&got_fatal));
  if (strcmp(mode, "late") != 0 && atomic_load(&got_fatal) != 0)
    FAIL("the program's crash handler saw %ld faults", atomic_load(&got_fatal));

  for (size_t i = 0; i < nhosts; i++) {
    callbox_error *err = p_close(hosts[i].h);
    if (err) FAIL("close %s: %s", hosts[i].engine, err->text);
    p_error_free(err);
  }
  free(ts);
  printf("DONE\t%d\n", atomic_load(&failures));
  fflush(stdout);
  return atomic_load(&failures) ? 1 : 0;
}
