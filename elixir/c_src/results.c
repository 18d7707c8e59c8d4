/*
 * results.c - where a call's outputs are written (heap binaries, slices of
 * a thread's arena, binaries of their own) and the slice clock an inline
 * call's time is measured with.
 */
#include "nif.h"

/* ---- results: where a call's outputs are written ----
 *
 * A result binary from enif_alloc_binary, with its release when the
 * garbage collector frees it, cost about 130 ns on the development VM
 * (the ERTS binary allocator; malloc and free, 10 ns): as much as the
 * rest of the NIF's work on a 1 KiB call together. So a result of up to
 * ARENA_MAX_OUT bytes is written into a slice of its thread's arena
 * instead: a resource of ARENA_SIZE bytes, allocated once for many
 * results, cut in order, each slice made a binary term after the call
 * with enif_make_resource_binary (a reference the term holds: the arena
 * is freed when the last result in it is garbage). The cost is
 * retention: a result kept alive keeps its whole arena (up to
 * ARENA_SIZE / 65, some 500 times its size), as a sub-binary keeps its
 * parent; :binary.copy/1 keeps only its bytes. A result of up to
 * HEAP_BIN_MAX bytes is a heap binary (enif_make_new_binary, whose bytes
 * stay writable until the NIF returns; on the process heap, nothing
 * retained), and a larger one than ARENA_MAX_OUT a binary of its own. A
 * failed call leaves a heap result garbage and its arena slice unused. */
#define ARENA_SIZE (32 * 1024)
#define ARENA_MAX_OUT (4 * 1024)
#define HEAP_BIN_MAX 64

static ErlNifResourceType *arena_type;
uint64_t arenas_live; /* call_stats/0: arenas made and not yet freed */
static __thread TLS_IE unsigned char *thread_arena; /* the resource; the thread holds a reference */
static __thread TLS_IE size_t thread_arena_used;

static void arena_dtor(ErlNifEnv *env, void *obj) {
  (void)env;
  (void)obj;
  __atomic_sub_fetch(&arenas_live, 1, __ATOMIC_RELAXED);
}

/* Memory of size bytes for a result; NULL when none could be had. */
unsigned char *result_alloc(ErlNifEnv *env, size_t size, result_buf *o) {
  o->kind = RESULT_TERM;
  if (size <= HEAP_BIN_MAX) return enif_make_new_binary(env, size, &o->term);
  if (size <= ARENA_MAX_OUT) {
    size_t need = (size + 63) & ~(size_t)63; /* slices on cache lines */
    if (thread_arena == NULL || thread_arena_used + need > ARENA_SIZE) {
      unsigned char *fresh = enif_alloc_resource(arena_type, ARENA_SIZE);
      if (fresh != NULL) {
        __atomic_add_fetch(&arenas_live, 1, __ATOMIC_RELAXED);
        if (thread_arena) enif_release_resource(thread_arena);
        thread_arena = fresh;
        thread_arena_used = 0;
      }
    }
    if (thread_arena != NULL && thread_arena_used + need <= ARENA_SIZE) {
      o->kind = RESULT_ARENA;
      o->arena = thread_arena;
      o->data = thread_arena + thread_arena_used;
      o->size = size;
      thread_arena_used += need;
      enif_keep_resource(o->arena);
      return o->data;
    }
  }
  if (!enif_alloc_binary(size, &o->bin)) return NULL;
  o->kind = RESULT_OWN;
  return o->bin.data;
}

/* The term of a result, its bytes final (after its call). */
ERL_NIF_TERM result_term(ErlNifEnv *env, result_buf *o) {
  if (o->kind == RESULT_ARENA) {
    o->term = enif_make_resource_binary(env, o->arena, o->data, o->size);
    enif_release_resource(o->arena);
  } else if (o->kind == RESULT_OWN) {
    o->term = enif_make_binary(env, &o->bin);
  }
  o->kind = RESULT_TERM;
  return o->term;
}

/* Drops a result whose call failed. */
void result_discard(result_buf *o) {
  if (o->kind == RESULT_ARENA) enif_release_resource(o->arena);
  if (o->kind == RESULT_OWN) enif_release_binary(&o->bin);
  o->kind = RESULT_TERM;
}

/* The slice clock: what an inline call's time is measured with (for
 * enif_consume_timeslice and call_stats/0), two reads a call. A vDSO
 * clock_gettime costs about 30 ns on the development VM, the TSC about
 * 11; so on x86-64 with an invariant TSC (CPUID 0x80000007 EDX bit 8) the
 * clock reads the TSC, and its ticks are turned into ns at a rate taken
 * from the monotonic clock over the first 10 ms or more after the NIF
 * loaded (until then, and elsewhere, the monotonic clock). A skewed
 * reading only misstates a share of a timeslice or a statistic: a call's
 * budget is the library's, on its own clock. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define SLICE_TSC 1
#else
#define SLICE_TSC 0
#endif
static int slice_tsc;              /* the TSC is invariant: may be used */
static uint64_t slice_tsc0;        /* a TSC reading at load, */
static double slice_ns0;           /* and the monotonic clock's then */
static double slice_ns_per_tick;   /* 0 until measured */

static void slice_clock_init(void) {
#if SLICE_TSC
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000007 && __get_cpuid(0x80000007, &a, &b, &c, &d) &&
      (d & (1u << 8))) {
    slice_ns0 = mono_ns();
    slice_tsc0 = __rdtsc();
    slice_tsc = 1;
  }
#endif
}

/* A reading of the slice clock: TSC ticks (*tsc set) or monotonic ns. */
uint64_t slice_now(int *tsc) {
#if SLICE_TSC
  double rate;
  __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  if (slice_tsc && rate > 0) {
    *tsc = 1;
    return __rdtsc();
  }
#endif
  *tsc = 0;
  return (uint64_t)mono_ns();
}

/* The ns since start, a reading of slice_now; measures the TSC's rate
 * once it may. */
uint64_t slice_since(uint64_t start, int tsc) {
#if SLICE_TSC
  if (tsc) {
    uint64_t now = __rdtsc();
    double rate;
    __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
    return now > start ? (uint64_t)((double)(now - start) * rate) : 0;
  }
#endif
  double now = mono_ns();
#if SLICE_TSC
  if (slice_tsc && now - slice_ns0 > 1e7) {
    uint64_t ticks = __rdtsc() - slice_tsc0;
    double rate = (now - slice_ns0) / (double)ticks;
    if (ticks > 0) __atomic_store(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  }
#endif
  return now > (double)start ? (uint64_t)(now - (double)start) : 0;
}

/* Whether the slice clock reads the TSC now (call_stats/0). */
int slice_clock_tsc(void) {
  double rate;
  __atomic_load(&slice_ns_per_tick, &rate, __ATOMIC_RELAXED);
  return slice_tsc && rate > 0;
}

int results_load(ErlNifEnv *env) {
  arena_type = enif_open_resource_type(env, NULL, "callbox_result_arena", arena_dtor, ERL_NIF_RT_CREATE, NULL);
  slice_clock_init();
  return arena_type != NULL;
}
