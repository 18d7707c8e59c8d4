// bench: times libcallbox from C, single-threaded: the C API call and the
// XLA FFI handler on the same callback, and the floor of any entry into
// the library's Go half (callbox_callback_count: one C-to-Go crossing and
// a handle lookup). Run by ffi/bench_test.go.
//   bench CONFIG capi|request|within|xla|crossing|async|phases CALLBACK ELEMENTS ITERATIONS
// (request: the same call as capi through callbox_request_run, 1.7)
// (within: callbox_call_within with a 100 us budget, which the call never
// reaches: what the budget's deadline costs beside capi)
// (async: callbox_call_async, the caller spinning on a flag its done
// function sets, one call after another: the library's own cost of the
// asynchronous route, without any event loop; phases: callbox_call and
// callbox_call_async alternately, each call timed alone, printing the
// medians of the sync call, of handing the async call over, and of the
// time from its hand-over to its done function)
// prints "ns_per_call <wall ns> cpu_ns_per_call <process CPU ns>", each
// the fastest of five rounds.
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callbox.h"

// The fake XLA api table, as in harness.c: Error_Create at offset 48.
static void *fake_error_create(void *args) {
  (void)args;
  static int e;
  return &e;
}

static int async_flag;
static double async_done_at;
static double clock_ns(clockid_t c);
// async_wait spins a little, then yields between looks (the worker may
// need this core), until the done function has run.
static void async_wait(void) {
  for (unsigned i = 1; !__atomic_load_n(&async_flag, __ATOMIC_ACQUIRE); i++) i < 128 ? __builtin_ia32_pause() : (void)sched_yield();
}
static void async_done(void *user, callbox_error *err) {
  (void)user;
  async_done_at = clock_ns(CLOCK_MONOTONIC);
  if (err != NULL) {
    fprintf(stderr, "async call: %s\n", err->text);
    exit(1);
  }
  __atomic_store_n(&async_flag, 1, __ATOMIC_RELEASE);
}

static double clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void put64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static void putp(uint8_t *p, size_t off, const void *v) { memcpy(p + off, &v, 8); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// phases times callbox_call and callbox_call_async alternately, call by
// call, and prints the medians: sync, handover (callbox_call_async's
// return), to_done (from its return to its done function).
static int phases(callbox_host host, const char *name, callbox_tensor *in, callbox_tensor *out, long iters) {
  double *sync = calloc((size_t)iters, sizeof(double)), *hand = calloc((size_t)iters, sizeof(double)),
         *done = calloc((size_t)iters, sizeof(double));
  for (long i = 0; i < iters; i++) {
    double t0 = clock_ns(CLOCK_MONOTONIC);
    callbox_error *e = callbox_call(host, name, in, 1, out, 1);
    sync[i] = clock_ns(CLOCK_MONOTONIC) - t0;
    __atomic_store_n(&async_flag, 0, __ATOMIC_RELAXED);
    t0 = clock_ns(CLOCK_MONOTONIC);
    if (e == NULL) e = callbox_call_async(host, 0, NULL, name, in, 1, out, 1, async_done, NULL);
    double t1 = clock_ns(CLOCK_MONOTONIC);
    if (e != NULL) {
      fprintf(stderr, "call: %s\n", e->text);
      return 1;
    }
    async_wait();
    hand[i] = t1 - t0;
    done[i] = async_done_at - t1;  // may be negative: done before the hand-over returned
  }
  qsort(sync, (size_t)iters, sizeof(double), cmp_double);
  qsort(hand, (size_t)iters, sizeof(double), cmp_double);
  qsort(done, (size_t)iters, sizeof(double), cmp_double);
  printf("sync_ns %.0f handover_ns %.0f to_done_ns %.0f\n", sync[iters / 2], hand[iters / 2], done[iters / 2]);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: bench CONFIG capi|within|xla|crossing|async|phases CALLBACK ELEMENTS ITERATIONS\n");
    return 2;
  }
  const char *mode = argv[2], *name = argv[3];
  int64_t n = atoll(argv[4]);
  long iters = atol(argv[5]);
  callbox_host host;
  callbox_error *e = callbox_open(argv[1], &host);
  if (e != NULL) {
    fprintf(stderr, "open: %s\n", e->text);
    return 1;
  }
  callbox_set_default_host(host);
  float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
  for (int64_t i = 0; i < n; i++) x[i] = (float)i;

  callbox_tensor in = {.data = x, .device = {CALLBOX_DEVICE_CPU, 0}, .ndim = 1, .dtype = {CALLBOX_DL_FLOAT, 32, 1}, .shape = &n};
  callbox_tensor out = in;
  out.data = y;

  // An XLA call frame at the offsets of shared/xla-ffi.md.
  static uint8_t api[88], frame[176], abuf[48], rbuf[48], span[16], value[16];
  void *create = (void *)fake_error_create;
  put64(api, 0, sizeof api);
  memcpy(api + 48, &create, 8);
  int32_t buffer_type = 1, string_type = 4;
  void *aptr = abuf, *rptr = rbuf, *sptr = span, *vptr = value;
  put64(abuf, 0, 48);
  memcpy(abuf + 16, &(int32_t){11}, 4);
  putp(abuf, 24, x);
  put64(abuf, 32, 1);
  putp(abuf, 40, &n);
  memcpy(rbuf, abuf, 48);
  putp(rbuf, 24, y);
  putp(span, 0, "callback");
  put64(span, 8, 8);
  putp(value, 0, name);
  put64(value, 8, strlen(name));
  put64(frame, 0, 176);
  putp(frame, 16, api);
  memcpy(frame + 32, &(int32_t){3}, 4);
  put64(frame, 40, 40);
  put64(frame, 56, 1);
  putp(frame, 64, &buffer_type);
  putp(frame, 72, &aptr);
  put64(frame, 80, 40);
  put64(frame, 96, 1);
  putp(frame, 104, &buffer_type);
  putp(frame, 112, &rptr);
  put64(frame, 120, 48);
  put64(frame, 136, 1);
  putp(frame, 144, &string_type);
  putp(frame, 152, &sptr);
  putp(frame, 160, &vptr);

  // Five timed rounds after a warm-up; the fastest round is reported
  // (the machine is shared: slower rounds measure the neighbours).
  int xla = strcmp(mode, "xla") == 0, crossing = strcmp(mode, "crossing") == 0, async = strcmp(mode, "async") == 0;
  int within = strcmp(mode, "within") == 0, request = strcmp(mode, "request") == 0;
  callbox_request req = {sizeof req, name, NULL, 0, &in, 1, &out, 1, 0, 0, 0};
  int32_t expired = 0;
  size_t count = 0;
  if (strcmp(mode, "phases") == 0) return phases(host, name, &in, &out, iters);
  long per_round = iters / 5 + 1;
  double per = 0, cpu = 0;
  for (int round = -1; round < 5; round++) {
    double start = clock_ns(CLOCK_MONOTONIC), cpu_start = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < per_round; i++) {
      if (crossing) {
        if ((e = callbox_callback_count(host, &count)) != NULL || count != 1) {
          fprintf(stderr, "callback_count failed\n");
          return 1;
        }
      } else if (xla) {
        if (callbox_xla_ffi((struct callbox_xla_call_frame *)frame) != NULL) {
          fprintf(stderr, "xla call failed\n");
          return 1;
        }
      } else if (async) {
        __atomic_store_n(&async_flag, 0, __ATOMIC_RELAXED);
        if ((e = callbox_call_async(host, 0, NULL, name, &in, 1, &out, 1, async_done, NULL)) != NULL) {
          fprintf(stderr, "call_async: %s\n", e->text);
          return 1;
        }
        async_wait();
      } else if (request) {
        if ((e = callbox_request_run(host, &req)) != NULL) {
          fprintf(stderr, "request_run: %s\n", e->text);
          return 1;
        }
      } else if (within) {
        if ((e = callbox_call_within(host, 0, name, &in, 1, &out, 1, 100000, &expired)) != NULL || expired) {
          fprintf(stderr, "call_within: %s\n", e ? e->text : "gave up");
          return 1;
        }
      } else if ((e = callbox_call(host, name, &in, 1, &out, 1)) != NULL) {
        fprintf(stderr, "call: %s\n", e->text);
        return 1;
      }
    }
    double t = (clock_ns(CLOCK_MONOTONIC) - start) / (double)per_round;
    double c = (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start) / (double)per_round;
    if (round >= 0 && (per == 0 || t < per)) per = t;
    if (round >= 0 && (cpu == 0 || c < cpu)) cpu = c;
  }
  if (!crossing && memcmp(x, y, (size_t)n * sizeof(float)) != 0) {
    fprintf(stderr, "wrong output\n");
    return 1;
  }
  printf("ns_per_call %.1f cpu_ns_per_call %.1f\n", per, cpu);
  callbox_close(host);
  return 0;
}
