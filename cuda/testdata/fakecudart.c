// A stand-in for libcudart with the signatures of the CUDA runtime
// functions callbox binds, for testing the purego bindings on a machine
// without CUDA: copies run at once with memcpy, and the arguments of the
// last call are kept for the test to check. Built by runtime_test.go.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int last_kind;
static uintptr_t last_stream, last_event;
static unsigned last_flags;
static struct { uintptr_t p; size_t n; } regs[64];
static int nregs;
static uintptr_t dev_lo, dev_hi;

int last_memcpy_kind(void) { return last_kind; }
uintptr_t last_stream_used(void) { return last_stream; }
unsigned last_register_flags(void) { return last_flags; }
int registrations(void) { return nregs; }
// fake_set_device makes [lo, hi) "device memory" for cudaPointerGetAttributes.
void fake_set_device(uintptr_t lo, uintptr_t hi) { dev_lo = lo; dev_hi = hi; }

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, uintptr_t stream) {
  if (kind < 1 || kind > 3) return 21;  // cudaErrorInvalidMemcpyDirection
  last_kind = kind;
  last_stream = stream;
  memcpy(dst, src, n);
  return 0;
}
int cudaStreamSynchronize(uintptr_t s) { last_stream = s; return s == 0xBAD ? 400 : 0; }
int cudaEventCreateWithFlags(uintptr_t *ev, unsigned flags) { *ev = 0xE000 + flags; return 0; }
int cudaEventRecord(uintptr_t ev, uintptr_t s) { last_event = ev; last_stream = s; return 0; }
int cudaEventSynchronize(uintptr_t ev) { return ev == last_event ? 0 : 400; }
int cudaEventDestroy(uintptr_t ev) { return 0; }
int cudaHostRegister(void *p, size_t n, unsigned flags) {
  uintptr_t a = (uintptr_t)p;
  if (n == 0 || nregs == 64) return 1;
  for (int i = 0; i < nregs; i++)
    if (a < regs[i].p + regs[i].n && regs[i].p < a + n) return 712;
  regs[nregs].p = a;
  regs[nregs].n = n;
  nregs++;
  last_flags = flags;
  return 0;
}
int cudaHostUnregister(void *p) {
  for (int i = 0; i < nregs; i++) {
    if (regs[i].p == (uintptr_t)p) {
      regs[i] = regs[--nregs];
      return 0;
    }
  }
  return 713;
}
// As CUDA 12 and 13 declare it (driver_types.h): reserved[8] is written
// too; the fake fills it with a pattern the test looks for.
struct attrs { int type; int device; void *dptr; void *hptr; long reserved[8]; };
int cudaPointerGetAttributes(struct attrs *a, uintptr_t p) {
  if (p == 0) return 1;
  memset(a, 0, sizeof *a);
  for (int i = 0; i < 8; i++) a->reserved[i] = 0x5EC0DE00 + i;
  if (p >= dev_lo && p < dev_hi) a->type = 2;
  for (int i = 0; i < nregs; i++)
    if (p >= regs[i].p && p < regs[i].p + regs[i].n) a->type = 1;
  return 0;
}
int cudaGetLastError(void) { return 0; }
const char *cudaGetErrorName(int code) {
  static char buf[64];
  snprintf(buf, sizeof buf, "cudaErrorFake%d", code);
  return buf;
}
const char *cudaGetErrorString(int code) { return code == 712 ? "part or all of the requested memory range is already mapped" : "fake error"; }
