// bench_floor.c: the floor of any XLA FFI callback on the CPU, for
// python/bench_jax.py (which builds it with cc): a plain-C handler that
// copies each non-token argument into its result, and nothing else. It is
// written from the layouts of the XLA FFI C ABI in ffi/xla_ffi.h (api 0.1:
// the fields every jaxlib since 0.4.3x passes), declares 0.1 in the
// metadata handshake, and is registered as the target "bench_floor".
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct ext { size_t struct_size; int32_t type; struct ext *next; } ext;
typedef struct ver { size_t struct_size; void *ext; int32_t major, minor; } ver;
typedef struct meta { size_t struct_size; ver api_version; uint32_t traits; } meta;
typedef struct metaext { ext base; meta *m; } metaext;
typedef struct buf { size_t struct_size; void *ext; int32_t dtype; void *data; int64_t rank; int64_t *dims; } buf;
typedef struct args { size_t struct_size; void *ext; int64_t size; int32_t *types; void **args; } args;
typedef struct frame { size_t struct_size; ext *ext; void *api; void *ctx; int32_t stage; args a, r; } frame;

enum { TOKEN = 17 };

static size_t bytes_of(const buf *b) {
  static const int size[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 0, 0, 8, 2, 0, 16};
  size_t n = b->dtype > 0 && b->dtype < 19 ? (size_t)size[b->dtype] : 0;
  for (int64_t i = 0; i < b->rank; i++) n *= (size_t)b->dims[i];
  return n;
}

void *bench_floor(frame *f) {
  for (ext *e = f->ext; e != NULL; e = e->next) {
    if (e->type == 1) {
      meta *m = ((metaext *)e)->m;
      m->api_version.major = 0;
      m->api_version.minor = 1;
      m->traits = 0;
      return NULL;
    }
  }
  if (f->stage != 3) return NULL;  // only execute
  int64_t j = 0;
  for (int64_t i = 0; i < f->a.size; i++) {
    buf *in = f->a.args[i];
    if (in->dtype == TOKEN) continue;
    while (j < f->r.size && ((buf *)f->r.args[j])->dtype == TOKEN) j++;
    if (j == f->r.size) break;
    buf *out = f->r.args[j++];
    memcpy(out->data, in->data, bytes_of(in));
  }
  return NULL;
}
