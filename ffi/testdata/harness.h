// harness.h: what the harness's files share (harness.c and the
// harness_*.c files beside it, one a topic): the includes, the output
// (CHECK, report, val), the host the groups run on, tensors, the XLA call
// frames built byte by byte (harness_xla.c), and the groups main runs.
#ifndef CALLBOX_HARNESS_H
#define CALLBOX_HARNESS_H

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callbox.h"

// ---- output (harness.c) ----

extern int checks, failures;
extern pthread_mutex_t out_mu;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);           \
    if (!(cond)) {                                              \
      pthread_mutex_lock(&out_mu);                              \
      printf("FAIL\t%s:%d\t", __func__, __LINE__);              \
      printf(__VA_ARGS__);                                      \
      printf("\n");                                             \
      failures++;                                               \
      pthread_mutex_unlock(&out_mu);                            \
    }                                                           \
  } while (0)

const char *clean(const char *s, char *buf, size_t n);
int report(const char *label, callbox_error *e);
void val(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// host is the host the groups call (the config's; its default host too).
extern callbox_host host;

// now_ms is the monotonic clock, in ms.
double now_ms(void);

// ---- tensors ----

static inline callbox_tensor tensor(void *data, uint8_t code, uint8_t bits, int32_t ndim, int64_t *shape) {
  callbox_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = CALLBOX_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static inline callbox_tensor f32(float *data, int32_t ndim, int64_t *shape) {
  return tensor(data, CALLBOX_DL_FLOAT, 32, ndim, shape);
}

// ---- XLA call frames, byte by byte (harness_xla.c) ----

typedef struct {
  int32_t code;
  char message[1 << 16];  // whole, so that its token is kept (XLA copies it whole)
} fake_error;

void *fake_error_create(void *args);
extern uint8_t fake_api[88];
void xinit(void);

static inline void put64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static inline void put32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static inline void putp(uint8_t *p, size_t off, const void *v) { memcpy(p + off, &v, 8); }

typedef struct {
  int32_t dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
  int32_t type;  // ArgType/RetType; 0 means BUFFER (1)
} xbuf;

typedef struct {
  const char *name;
  int32_t type;  // AttrType: 4 STRING, 3 SCALAR
  const char *str;
  int64_t scalar;
} xattr;

#define XMAX 16

// A frame and everything it points to.
typedef struct {
  uint8_t frame[176];
  uint8_t bufs[2][XMAX][48];
  int32_t types[2][XMAX];
  void *ptrs[2][XMAX];
  int32_t attr_types[XMAX];
  uint8_t spans[XMAX][16];
  void *span_ptrs[XMAX];
  uint8_t values[XMAX][16];
  void *value_ptrs[XMAX];
  uint8_t meta_ext[32];
  uint8_t meta[48];
} xframe;

void xbuild(xframe *f, int stage, const xbuf *args, int nargs, const xbuf *rets, int nrets, const xattr *attrs,
            int nattrs);

typedef struct callbox_xla_error *(*xhandler)(struct callbox_xla_call_frame *);

int xrun_with(const char *label, xframe *f, xhandler handler);
int xrun(const char *label, xframe *f);
int xcall(const char *label, const char *callback, const xbuf *args, int nargs, const xbuf *rets, int nrets);
void xfailure_of(const char *label, const char *text);
void xfailure(const char *label);

// ---- the groups, by file (main runs them by name) ----

// harness_host.c
void group_version(void);
void group_kinds(void);
void group_params(void);
void group_limits(void);
void group_open(const char *dir);
void group_reload(const char *dir);
void group_list(void);
void group_close(void);
void group_log(void);
// harness_calls.c
void group_dtypes(void);
void group_shapes(void);
void group_bad(void);
void group_chains(void);
void group_batch(void);
// harness_xla.c
void group_xla(void);
void group_lazy(void);
void group_xlahost(const char *cfg);
// harness_cuda.c
void group_cuda(void);
void group_both(const char *dir);
// harness_threads.c
void group_threads(void);
void group_hostile(void);
void group_smallstack(const char *cfg);
// harness_process.c
void group_soak(const char *cfg_path, int rounds);
void group_sigflags(void);
void group_fork(const char *cfg);
// harness_cancel.c
void group_within(void);
void group_cancel(void);
// harness_async.c
void group_async(const char *cfg);
void group_request(void);
// harness_doors.c
void group_doors(const char *cfg);

#endif
