// stack.c: a big stack for wasmtime's entries: whether the calling
// thread has room for a guest, a stack of the thread's own when it has not
// (reserved on first use, unmapped when the thread ends), the switch to it
// (x86-64 assembly or makecontext/swapcontext), and the way back to the
// thread's own stack for host calls (cb__host_call).
#include "glue_private.h"

// ---- a big stack for wasmtime's entries --------------------------------
//
// wasmtime runs a guest on the calling thread's native stack. A thread
// that entered through the C API may have a small one (an Erlang
// scheduler's is 320 KB to 1 MB; wasmtime's default wasm stack alone is
// 512 KiB), or one smaller than a large max_stack needs: a deep guest
// would fault past its guard page and kill the process. So on Linux an
// entry whose thread has less than `need` bytes below the current frame
// runs on a stack of the thread's own, reserved on first use (at least
// 16 MiB and need + 1 MiB, with a guard page; pages are committed only as
// touched) and kept for the thread's life (unmapped when it ends): the
// stack pointer is switched to it for the entry and back, on the same
// thread, so the call's guard, core turn and CPU-time count (all per
// thread) hold as they are. On x86-64 the switch is a few instructions of
// assembly; on other glibc targets (aarch64, ppc64le, s390x, riscv64) it
// is makecontext and swapcontext, which also save and restore the signal
// mask (a system call each way, paid only by calls that switch). The
// switch is inside this cgo call, so the Go runtime never sees the
// switched stack; a host call the guest makes from it goes back to the
// thread's own stack first (cb__host_call). Where there is no switch
// (musl off x86-64, other systems) or no memory for one, an entry whose
// thread is known to be short of room does not run: the call fails as a
// stack overflow that names the thread's room and the need, instead of
// faulting (CallerStack says how much a caller must give).
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__linux__) && (defined(__x86_64__) || defined(__GLIBC__))
#define CB_HAVE_SWITCH 1
#endif
#if defined(__GLIBC__) && defined(CB_HAVE_SWITCH)
#include <ucontext.h>
#endif

enum { CB_SWITCH_ASM, CB_SWITCH_UCONTEXT, CB_SWITCH_NONE };

// Which switch runs: the assembly on x86-64, ucontext on other glibc
// targets, none elsewhere. Tests choose the others on x86-64
// (cb_test_stack_switch), so that the code other targets run is tested on
// the machines CI has.
#if defined(CB_HAVE_SWITCH) && defined(__x86_64__)
static int switch_mode = CB_SWITCH_ASM;
#elif defined(CB_HAVE_SWITCH)
static int switch_mode = CB_SWITCH_UCONTEXT;
#else
static int switch_mode = CB_SWITCH_NONE;
#endif

int cb_test_stack_switch(int mode) {
  int ok = mode == switch_mode || mode == CB_SWITCH_NONE;
#if defined(CB_HAVE_SWITCH) && defined(__x86_64__) && defined(__GLIBC__)
  ok = mode == CB_SWITCH_ASM || mode == CB_SWITCH_UCONTEXT || mode == CB_SWITCH_NONE;
#endif
  if (!ok) {
    return 0;
  }
  int was = switch_mode;
  switch_mode = mode;
  return was + 1;
}

int cb_stack_switches(void) { return switch_mode != CB_SWITCH_NONE; }

// The thread's own stack, found on first need: lo 1 when unknown (a
// system without pthread_getattr_np, or it failed).
static __thread uintptr_t thread_stack_lo, thread_stack_hi;

// thread_room is how many bytes of the thread's own stack lie below sp,
// or SIZE_MAX when that is unknown (sp is not on it: a stack its caller
// switched to, or the bounds are unknown).
static size_t thread_room(uintptr_t sp) {
  if (thread_stack_lo == 0) {
    thread_stack_lo = 1;
#if defined(__linux__)
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr != NULL) {
        thread_stack_lo = (uintptr_t)addr;
        thread_stack_hi = (uintptr_t)addr + size;
      }
      pthread_attr_destroy(&a);
    }
#endif
  }
  if (thread_stack_lo > 1 && sp > thread_stack_lo && sp <= thread_stack_hi) {
    return sp - thread_stack_lo;
  }
  return SIZE_MAX;
}

static __thread int on_own_stack;

#if defined(CB_HAVE_SWITCH)
static __thread char *own_stack;
static __thread size_t own_stack_size;
// Where a host call made from the switched stack runs (0: on that stack):
// below the frames of the switch on the thread's own stack, which still
// has room for the Go callback (checked when it is set).
static __thread uintptr_t back_sp;

#if defined(__x86_64__)
// cb_call_on_stack calls fn(arg) with the stack pointer at top, then
// restores it. Every register the ABI lets fn change is clobbered; rbx
// (callee-saved) holds the caller's stack pointer meanwhile.
static void cb_call_on_stack(void (*fn)(void *), void *arg, char *top) {
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %2, %%rsp\n\t"
      "and $-16, %%rsp\n\t"
      "mov %1, %%rdi\n\t"
      "call *%0\n\t"
      "mov %%rbx, %%rsp\n\t"
      : "+r"(fn), "+r"(arg), "+r"(top)
      :
      : "rbx", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
        "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
        "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15");
}
#endif

#if defined(__GLIBC__)
// The entry a ucontext switch runs: makecontext passes only int
// arguments, so the function and its argument wait in a thread-local.
static __thread struct {
  void (*fn)(void *);
  void *arg;
} uc_job;

static void uc_trampoline(void) { uc_job.fn(uc_job.arg); }

// cb_call_on_context calls fn(arg) on the stack [base, base+size) with
// makecontext/swapcontext, returning here (uc_link) when fn returns. 0
// when the context could not be made (fn not called).
static int cb_call_on_context(void (*fn)(void *), void *arg, char *base, size_t size) {
  ucontext_t here, there;
  if (getcontext(&there) != 0) {
    return 0;
  }
  there.uc_stack.ss_sp = base;
  there.uc_stack.ss_size = size;
  there.uc_link = &here;
  uc_job.fn = fn;
  uc_job.arg = arg;
  makecontext(&there, uc_trampoline, 0);
  return swapcontext(&here, &there) == 0;
}
#endif

// cb_run_at runs fn(arg) on the stack whose top is top and whose lowest
// usable byte is base; 0 when it could not (fn not called).
static int cb_run_at(void (*fn)(void *), void *arg, char *base, char *top) {
#if defined(__GLIBC__)
  if (switch_mode == CB_SWITCH_UCONTEXT) {
    return cb_call_on_context(fn, arg, base, (size_t)(top - base));
  }
#endif
#if defined(__x86_64__)
  (void)base;
  cb_call_on_stack(fn, arg, top);
  return 1;
#else
  (void)fn;
  (void)arg;
  (void)base;
  (void)top;
  return 0;
#endif
}

// The frames of a switch (cb_switch, and cb_call_on_context's two
// contexts, 4.5 KiB each on aarch64) stay live below the switching frame
// while the guest runs: a host call goes this far below it.
#define BACK_GAP ((uintptr_t)32 << 10)
// The least room a host call needs below back_sp: Go's callback runs on
// the thread's stack only until it reaches its goroutine's.
#define BACK_ROOM ((uintptr_t)64 << 10)

// cb_switch runs fn(arg) on the stack this thread keeps for entries
// (own_stack); 0 when it could not (fn not called).
__attribute__((noinline)) static int cb_switch(void (*fn)(void *), void *arg) {
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  back_sp = 0;
  if (thread_stack_lo > 1 && here > thread_stack_lo + BACK_GAP + BACK_ROOM && here <= thread_stack_hi) {
    back_sp = (here - BACK_GAP) & ~(uintptr_t)63;
  }
  return cb_run_at(fn, arg, own_stack + 4096, own_stack + own_stack_size);
}

// A thread's own stack is unmapped when the thread ends (a caller's
// thread that came and went must not leave its touched pages behind): a
// key whose destructor gets the stack's address and size.
typedef struct {
  char *base;
  size_t size;
} own_stack_rec;

static pthread_key_t own_stack_key;
static pthread_once_t own_stack_once = PTHREAD_ONCE_INIT;
static int own_stack_keyed;

// Own stacks unmapped at their thread's end (for tests).
static uint64_t own_stacks_freed;

uint64_t cb_stacks_freed(void) { return __atomic_load_n(&own_stacks_freed, __ATOMIC_RELAXED); }

static void own_stack_free(void *p) {
  own_stack_rec *r = p;
  munmap(r->base, r->size);
  free(r);
  __atomic_add_fetch(&own_stacks_freed, 1, __ATOMIC_RELAXED);
}

static void own_stack_key_init(void) { own_stack_keyed = pthread_key_create(&own_stack_key, own_stack_free) == 0; }

// own_stack_release records this thread's own stack for unmapping at the
// thread's end.
static void own_stack_release(void) {
  pthread_once(&own_stack_once, own_stack_key_init);
  if (!own_stack_keyed) {
    return; // kept for the process's life
  }
  own_stack_rec *r = pthread_getspecific(own_stack_key);
  if (r == NULL && (r = malloc(sizeof *r)) == NULL) {
    return;
  }
  r->base = own_stack;
  r->size = own_stack_size;
  pthread_setspecific(own_stack_key, r);
}

// own_stack_ready makes sure this thread's own stack has need bytes and
// 1 MiB more (at least 16 MiB); 0 when no memory could be had for it.
static int own_stack_ready(size_t need) {
  size_t want = need + ((size_t)1 << 20);
  if (want < ((size_t)16 << 20)) want = (size_t)16 << 20;
  if (own_stack_size >= want) {
    return 1;
  }
  char *p = mmap(NULL, want, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) {
    if (p != MAP_FAILED) munmap(p, want);
    return 0;
  }
  if (own_stack) munmap(own_stack, own_stack_size);
  own_stack = p;
  own_stack_size = want;
  own_stack_release();
  return 1;
}
#else
uint64_t cb_stacks_freed(void) { return 0; }
#endif

// Entries that switched stacks since the process started (for tests).
static uint64_t switches;

uint64_t cb_stack_switch_count(void) { return __atomic_load_n(&switches, __ATOMIC_RELAXED); }

// cb__on_big_stack runs fn(arg) with need bytes of native stack below it:
// on the thread's own stack when it has them, else on a stack of the
// thread's own (see above). It returns 0 when fn ran, else (fn not run)
// the room the thread has, at least 1: no switch and a thread known to be
// short. A thread whose room is unknown runs fn where it is, as before.
size_t cb__on_big_stack(void (*fn)(void *), void *arg, size_t need) {
  if (on_own_stack) {
    fn(arg);
    return 0;
  }
  size_t room = thread_room((uintptr_t)__builtin_frame_address(0));
  if (room != SIZE_MAX && room >= need) {
    fn(arg);
    return 0;
  }
#if defined(CB_HAVE_SWITCH)
  if (switch_mode != CB_SWITCH_NONE && own_stack_ready(need)) {
    on_own_stack = 1;
    int ran = cb_switch(fn, arg);
    on_own_stack = 0;
    if (ran) {
      __atomic_add_fetch(&switches, 1, __ATOMIC_RELAXED);
      return 0;
    }
  }
#endif
  if (room == SIZE_MAX) {
    fn(arg);
    return 0;
  }
  return room > 0 ? room : 1;
}

// A host call from the switched stack goes back to the thread's own: the
// Go runtime knows a Go-made thread's stack bounds from its start and does
// not re-read them in a callback, so a callback on a stack of ours would
// run outside them (a fatal "morestack on g0" whenever our stack lies
// below the thread's).
typedef struct {
  void *inst;
  uintptr_t fn;
  cb_val_raw_t *args;
  size_t n;
  uint8_t *data;
  size_t size;
  int abort;
} cb_host_args_t;

static void cb_host_entry(void *p) {
  cb_host_args_t *h = p;
  h->abort = callboxHost(h->inst, h->fn, h->args, h->n, h->data, h->size);
}

int cb__host_call(void *inst, uintptr_t fn, cb_val_raw_t *args, size_t n,
                  uint8_t *data, size_t size) {
  cb_host_args_t h = {inst, fn, args, n, data, size, 0};
#if defined(CB_HAVE_SWITCH)
  uintptr_t top = back_sp;
  if (on_own_stack && top != 0) {
    back_sp = 0; // a host call inside this one stays where it is
    // Above the thread's guard page (a page is at least 4 KiB).
    if (!cb_run_at(cb_host_entry, &h, (char *)(thread_stack_lo + 4096), (char *)top)) {
      cb_host_entry(&h);
    }
    back_sp = top;
    return h.abort;
  }
#endif
  cb_host_entry(&h);
  return h.abort;
}
