// bench_floor.c: the floor of any XLA FFI callback on the CPU, for
// python/bench_jax.py (which builds it with cc -I ffi): a plain-C handler
// that copies its f32 argument into its result, skipping tokens, and
// nothing else. It uses the project's one set of XLA FFI declarations
// (ffi/xla_ffi.h), declares API 0.1 in the metadata handshake (what every
// jaxlib accepts), and is registered as the target "bench_floor". The
// benchmark calls it on f32 arrays only.
#include <string.h>

#include "xla_ffi.h"

enum { F32 = 11 };

void *bench_floor(struct callbox_xla_call_frame *f) {
  for (cbx_xla_extension *e = f->extension_start; e != NULL; e = e->next) {
    if (e->type == CBX_XLA_EXTENSION_METADATA) {
      cbx_xla_metadata *m = ((cbx_xla_metadata_extension *)e)->metadata;
      m->api_version.major_version = 0;
      m->api_version.minor_version = 1;
      m->traits = 0;
      return NULL;
    }
  }
  if (f->stage != CBX_XLA_STAGE_EXECUTE) return NULL;
  cbx_xla_buffer *in = NULL, *out = NULL;
  for (int64_t i = 0; i < f->args.size && in == NULL; i++) {
    cbx_xla_buffer *b = f->args.args[i];
    if (b->dtype == F32) in = b;
  }
  for (int64_t i = 0; i < f->rets.size && out == NULL; i++) {
    cbx_xla_buffer *b = f->rets.args[i];
    if (b->dtype == F32) out = b;
  }
  if (in == NULL || out == NULL) return NULL;  // not the benchmark's call: nothing to copy
  size_t n = sizeof(float);
  for (int64_t d = 0; d < in->rank; d++) n *= (size_t)in->dims[d];
  memcpy(out->data, in->data, n);
  return NULL;
}
