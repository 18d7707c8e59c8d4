// memory.c: shared linear memory for process isolation: a memory creator
// that makes every linear memory of an engine a memfd sealed against
// shrinking, which another process may map (cb_config_shared_memory), and
// the memfd the last instantiation on this thread made, for cb_instantiate
// to report.
#include "glue_private.h"

// ---- Shared linear memory (process isolation) ----------------------------
//
// wasmtime's memory creator (declared in glue_private.h) returns a linear
// memory as an env pointer and two callbacks, and wasmtime owns what it
// returns. The memory is a memfd: a PROT_NONE reservation of reserved +
// guard bytes (wasmtime elides bounds checks against it), with the file
// mapped read-write over the first size bytes, and more of the file mapped
// in place as the memory grows, so it never moves. The file is sealed
// against shrinking, so a process that maps it can trust a size it has
// seen.

// The memory made by the last instantiation on this thread, for
// cb_instantiate to report (the creator runs inside it, on this thread).
static __thread int cb_new_memfd = -1;
static __thread size_t cb_new_memcap;

void cb__new_memory_reset(void) {
  cb_new_memfd = -1;
  cb_new_memcap = 0;
}

int cb__new_memory_take(size_t *cap) {
  int fd = cb_new_memfd;
  *cap = cb_new_memcap;
  cb_new_memfd = -1;
  return fd;
}

#ifdef __linux__
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
  uint8_t *base;
  size_t total;  // the reservation: capacity (or reserved) plus guard
  size_t cap;    // the most the memory may grow to
  size_t size;   // bytes mapped from the file, and the file's size
  int fd;
} cb_shared_mem_t;

static uint8_t *cb_shared_get(void *env, size_t *byte_size, size_t *byte_capacity) {
  cb_shared_mem_t *m = env;
  *byte_size = m->size;
  *byte_capacity = m->cap;
  return m->base;
}

static wasmtime_error_t *cb_shared_grow(void *env, size_t new_size) {
  cb_shared_mem_t *m = env;
  if (new_size <= m->size) {
    return NULL;
  }
  if (new_size > m->cap) {
    return wasmtime_error_new("callbox: memory grown past its reservation");
  }
  if (ftruncate(m->fd, (off_t)new_size) != 0) {
    return wasmtime_error_new("callbox: growing the shared memory file failed");
  }
  // wasm pages are 64 KiB: size and new_size are page-aligned.
  if (mmap(m->base + m->size, new_size - m->size, PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_FIXED, m->fd, (off_t)m->size) == MAP_FAILED) {
    return wasmtime_error_new("callbox: mapping the grown shared memory failed");
  }
  m->size = new_size;
  return NULL;
}

static void cb_shared_free(void *env) {
  cb_shared_mem_t *m = env;
  munmap(m->base, m->total);
  close(m->fd);
  free(m);
}

static wasmtime_error_t *cb_shared_new(void *env, const wasm_memorytype_t *ty,
                                       size_t minimum, size_t maximum, size_t reserved,
                                       size_t guard, cb_linear_memory_t *ret) {
  (void)env;
  (void)ty;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t cap = reserved ? reserved : maximum;
  if (maximum < cap) {
    cap = maximum;
  }
  if (cap < minimum) {
    return wasmtime_error_new("callbox: a memory's minimum exceeds its reservation");
  }
  size_t span = reserved > cap ? reserved : cap;
  if (span > SIZE_MAX - guard - page) {
    return wasmtime_error_new("callbox: a memory reservation too large to map");
  }
  size_t total = (span + guard + page - 1) / page * page;
  cb_shared_mem_t *m = calloc(1, sizeof *m);
  if (!m) {
    return wasmtime_error_new("callbox: out of memory");
  }
  m->fd = memfd_create("callbox-guest-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m->fd < 0 || fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
      ftruncate(m->fd, (off_t)minimum) != 0) {
    if (m->fd >= 0) close(m->fd);
    free(m);
    return wasmtime_error_new("callbox: creating the shared memory file failed");
  }
  m->base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m->base == MAP_FAILED ||
      (minimum > 0 && mmap(m->base, minimum, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                           m->fd, 0) == MAP_FAILED)) {
    if (m->base != MAP_FAILED) munmap(m->base, total);
    close(m->fd);
    free(m);
    return wasmtime_error_new("callbox: mapping the shared memory failed");
  }
  m->total = total;
  m->cap = cap;
  m->size = minimum;
  cb_new_memfd = m->fd;
  cb_new_memcap = cap;
  ret->env = m;
  ret->get_memory = cb_shared_get;
  ret->grow_memory = cb_shared_grow;
  ret->finalizer = cb_shared_free;
  return NULL;
}

int cb_config_shared_memory(wasm_config_t *cfg) {
  cb_memory_creator_t c = {NULL, cb_shared_new, NULL};
  wasmtime_config_host_memory_creator_set(cfg, &c);
  wasmtime_config_memory_init_cow_set(cfg, false);
  return 1;
}
#else
int cb_config_shared_memory(wasm_config_t *cfg) {
  (void)cfg;
  return 0;
}
#endif
