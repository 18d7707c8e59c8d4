// harness_doors.c: the door-conformance table (ffi/doors_test.go), each
// case through the C API and the CPU XLA handler.
#include "harness.h"

// ---- the door-conformance table (ffi/doors_test.go) ----------------------
//
// group_doors reads the table from $CALLBOX_DOOR_CASES (one case a line,
// doorFileLine's format) and runs each case through the C API
// (callbox_request_run: label door_c_<id>) and the CPU XLA handler
// (door_x_<id>), as its doors say, printing each result and, as
// door_c_<id> / door_x_<id> values, an FNV-1a hash of the output bytes.

typedef struct {
  int32_t xla;
  uint8_t code, bits;
  int esize, rank, fill;
  long neg;
  int64_t dims[40];
  void *data;
  size_t bytes;
} door_tensor;

static int door_parse_tensor(char *s, door_tensor *t) {
  long v[48];
  int n = 0;
  for (char *save = NULL, *f = strtok_r(s, ",", &save); f != NULL && n < 48; f = strtok_r(NULL, ",", &save)) v[n++] = strtol(f, NULL, 10);
  if (n < 7 || v[4] < 0 || v[4] > 40 || n != 7 + v[4]) return 0;
  memset(t, 0, sizeof *t);
  t->xla = (int32_t)v[0], t->code = (uint8_t)v[1], t->bits = (uint8_t)v[2], t->esize = (int)v[3];
  t->rank = (int)v[4], t->fill = (int)v[5], t->neg = v[6];
  int64_t count = 1;
  for (int i = 0; i < t->rank; i++) t->dims[i] = v[7 + i], count *= v[7 + i];
  if (t->fill == 1 || count < 0) return 1;  // no data
  t->bytes = (size_t)count * (size_t)t->esize;
  t->data = calloc(1, t->bytes + 1);
  for (int64_t i = 0; t->fill == 0 && i < count; i++) {
    int64_t x = i == t->neg ? -1 : i;
    uint8_t *p = (uint8_t *)t->data + i * t->esize;
    switch (t->xla) {
      case 11: { float f = (float)x; memcpy(p, &f, 4); break; }    // F32
      case 12: { double d = (double)x; memcpy(p, &d, 8); break; }  // F64
      case 3: { int16_t s = (int16_t)x; memcpy(p, &s, 2); break; } // S16
      case 1: *p = (uint8_t)(x & 1); break;                         // PRED
    }
  }
  return 1;
}

// door_hash is FNV-1a 64 over the outputs' bytes (doors_test.go's outputHash).
static uint64_t door_hash(door_tensor *ts, int n) {
  uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < ts[i].bytes; k++) h = (h ^ ((uint8_t *)ts[i].data)[k]) * 1099511628211ull;
  return h;
}

static void door_zero(door_tensor *ts, int n) {
  for (int i = 0; i < n; i++)
    if (ts[i].data) memset(ts[i].data, 0, ts[i].bytes);
}

void group_doors(const char *cfg) {
  const char *path = getenv("CALLBOX_DOOR_CASES");
  FILE *in = path ? fopen(path, "r") : NULL;
  CHECK(in != NULL, "CALLBOX_DOOR_CASES: cannot open %s", path ? path : "(unset)");
  if (in == NULL) return;
  callbox_host closed = 0;
  report("door_closed_open", callbox_open(cfg, &closed));
  report("door_closed_close", callbox_close(closed));
  // The XLA handler calls the default host: a host of its own, so that its
  // chains are not the C API's (each door runs the table from a fresh host).
  callbox_host xhost = 0;
  report("door_xla_open", callbox_open(cfg, &xhost));
  report("door_xla_default", callbox_set_default_host(xhost));
  static char line[1 << 16];
  while (fgets(line, sizeof line, in) != NULL) {
    line[strcspn(line, "\n")] = 0;
    char *f[200];
    int nf = 0;
    for (char *save = NULL, *p = strtok_r(line, "\t", &save); p != NULL && nf < 200; p = strtok_r(NULL, "\t", &save)) f[nf++] = p;
    if (nf < 8) continue;
    const char *id = f[0], *doors = f[5];
    char callback[256];
    snprintf(callback, sizeof callback, "%s", f[1]);
    callbox_host h = host;
    if (strcmp(callback, "@closed") == 0) {
      h = closed;
      snprintf(callback, sizeof callback, "copy");
    } else if (strncmp(callback, "@id:", 4) == 0) {
      callbox_callback_info info;
      report("door_find", callbox_callback_find(host, callback + 4, &info));
      snprintf(callback, sizeof callback, "%s", info.id);
    }
    const char *chain = strcmp(f[2], "-") == 0 ? NULL : f[2];
    int batch = atoi(f[3]);
    uint64_t budget = strtoull(f[4], NULL, 10);
    int k = 6, nin = atoi(f[k++]);
    door_tensor ins[8], outs[8];
    for (int i = 0; i < nin && i < 8; i++) CHECK(door_parse_tensor(f[k++], &ins[i]), "%s: input %d", id, i);
    int nout = atoi(f[k++]);
    for (int i = 0; i < nout && i < 8; i++) CHECK(door_parse_tensor(f[k++], &outs[i]), "%s: output %d", id, i);
    if (nout < 0) continue;  // the library allocates: not expressible in C
    callbox_tensor ti[8], to[8];
    for (int i = 0; i < nin; i++) ti[i] = tensor(ins[i].data, ins[i].code, ins[i].bits, ins[i].rank, ins[i].dims);
    for (int i = 0; i < nout; i++) to[i] = tensor(outs[i].data, outs[i].code, outs[i].bits, outs[i].rank, outs[i].dims);
    char label[300];
    if (strchr(doors, 'c')) {
      door_zero(outs, nout);
      callbox_request r;
      memset(&r, 0, sizeof r);
      r.size = sizeof r;
      r.callback = callback;
      r.chain = chain;
      r.inputs = nin ? ti : NULL;
      r.num_inputs = (size_t)nin;
      r.outputs = nout ? to : NULL;
      r.num_outputs = (size_t)nout;
      r.budget_ns = budget;
      r.flags = batch ? CALLBOX_REQUEST_BATCH : 0;
      snprintf(label, sizeof label, "door_c_%s", id);
      report(label, callbox_request_run(h, &r));
      val(label, "%016llx", (unsigned long long)door_hash(outs, nout));
    }
    if (strchr(doors, 'x')) {
      door_zero(outs, nout);
      xbuf xa[8], xr[8];
      for (int i = 0; i < nin; i++) xa[i] = (xbuf){ins[i].xla, ins[i].data, ins[i].rank, ins[i].dims, 0};
      for (int i = 0; i < nout; i++) xr[i] = (xbuf){outs[i].xla, outs[i].data, outs[i].rank, outs[i].dims, 0};
      xattr attrs[3];
      int na = 0;
      if (batch) attrs[na++] = (xattr){"batched", 4, "true", 0};
      attrs[na++] = (xattr){"callback", 4, callback, 0};
      if (chain) attrs[na++] = (xattr){"chain", 4, chain, 0};
      xframe fr;
      xbuild(&fr, 3, xa, nin, xr, nout, attrs, na);
      snprintf(label, sizeof label, "door_x_%s", id);
      int code = xrun(label, &fr);
      val(label, "%016llx", (unsigned long long)door_hash(outs, nout));
      if (code != 0) {
        snprintf(label, sizeof label, "door_xf_%s", id);
        xfailure(label);
      }
    }
    for (int i = 0; i < nin; i++) free(ins[i].data);
    for (int i = 0; i < nout; i++) free(outs[i].data);
  }
  fclose(in);
  report("door_xla_default_back", callbox_set_default_host(host));
  report("door_xla_close", callbox_close(xhost));
}
