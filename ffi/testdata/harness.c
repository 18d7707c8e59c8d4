// harness: drives libcallbox through its C API and its XLA FFI handler,
// from C, the way a foreign runtime does. Built and run by
// ffi/harness_test.go, which writes the config and asserts on the output.
//
// Output lines (tab-separated):
//   ERR   <label> <kind> <code> <callback> <chain> <seq> <guest> <message>   a C API error
//   XLA   <label> <code> <message>                                      an XLA FFI error (OK: code 0)
//   VAL   <label> <value>                                               a value to check
//   FAIL  <function>:<line> <what>                                      a check inside the harness failed
//   DONE  <checks> <failures>
// The XLA call frames are built byte by byte at the offsets of
// shared/xla-ffi.md, independently of the library's own declarations.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callbox.h"

static int checks, failures;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

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

// clean replaces tabs and newlines so a message stays on one line.
static const char *clean(const char *s, char *buf, size_t n) {
  size_t i = 0;
  for (; s != NULL && s[i] != 0 && i + 1 < n; i++) buf[i] = (s[i] == '\t' || s[i] == '\n') ? ' ' : s[i];
  buf[i] = 0;
  return buf;
}

// report prints an error (or OK) under label and frees it; returns its kind.
static int report(const char *label, callbox_error *e) {
  static char g[512], m[4096];
  pthread_mutex_lock(&out_mu);
  if (e == NULL) {
    printf("ERR\t%s\tOK\t0\t\t\t0\t\t\t\n", label);
    pthread_mutex_unlock(&out_mu);
    return 0;
  }
  int kind = e->kind;
  CHECK(e->struct_size == sizeof *e, "struct_size %u", e->struct_size);
  printf("ERR\t%s\t%s\t%d\t%s\t%s\t%llu\t%s\t%s\t", label, e->kind_name, e->code, e->callback, e->chain,
         (unsigned long long)e->seq, clean(e->guest_message, g, sizeof g), clean(e->text, m, sizeof m));
  if (e->failed_seq != 0) printf("%s#%llu %s", e->failed_callback, (unsigned long long)e->failed_seq, clean(e->failed_message, m, sizeof m));
  printf("\n");
  pthread_mutex_unlock(&out_mu);
  callbox_error_free(e);
  return kind;
}

static void val(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void val(const char *label, const char *fmt, ...) {
  pthread_mutex_lock(&out_mu);
  printf("VAL\t%s\t", label);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  pthread_mutex_unlock(&out_mu);
}

// ---- tensors ----

typedef struct {
  const char *name;  // callbox dtype name
  uint8_t code, bits;
  int32_t xla;  // XLA FFI DataType
} dtype_t;

static const dtype_t dtypes[] = {
    {"pred", CALLBOX_DL_BOOL, 8, 1},     {"s8", CALLBOX_DL_INT, 8, 2},       {"s16", CALLBOX_DL_INT, 16, 3},
    {"s32", CALLBOX_DL_INT, 32, 4},      {"s64", CALLBOX_DL_INT, 64, 5},     {"u8", CALLBOX_DL_UINT, 8, 6},
    {"u16", CALLBOX_DL_UINT, 16, 7},     {"u32", CALLBOX_DL_UINT, 32, 8},    {"u64", CALLBOX_DL_UINT, 64, 9},
    {"f16", CALLBOX_DL_FLOAT, 16, 10},   {"f32", CALLBOX_DL_FLOAT, 32, 11},  {"f64", CALLBOX_DL_FLOAT, 64, 12},
    {"c64", CALLBOX_DL_COMPLEX, 64, 15}, {"bf16", CALLBOX_DL_BFLOAT, 16, 16}, {"c128", CALLBOX_DL_COMPLEX, 128, 18},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

static callbox_tensor tensor(void *data, uint8_t code, uint8_t bits, int32_t ndim, int64_t *shape) {
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

static callbox_tensor f32(float *data, int32_t ndim, int64_t *shape) {
  return tensor(data, CALLBOX_DL_FLOAT, 32, ndim, shape);
}

// ---- XLA call frames, byte by byte ----

typedef struct {
  int32_t code;
  char message[1 << 16];  // whole, so that its token is kept (XLA copies it whole)
} fake_error;

// The fake XLA api table: 88 bytes, Error_Create in slot 0 (offset 48).
static void *fake_error_create(void *args) {
  const uint8_t *a = args;
  fake_error *e = calloc(1, sizeof *e);
  size_t size;
  memcpy(&size, a, 8);
  const char *msg;
  memcpy(&msg, a + 16, 8);
  memcpy(&e->code, a + 24, 4);
  snprintf(e->message, sizeof e->message, "%s", msg != NULL ? msg : "(null)");
  if (size < 28) e->code = -1000;  // the handler must pass XLA's struct size
  return e;
}

static uint8_t fake_api[88];

static void put64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static void put32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static void putp(uint8_t *p, size_t off, const void *v) { memcpy(p + off, &v, 8); }

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

static void xside(xframe *f, int side, size_t off, const xbuf *b, int n) {
  for (int i = 0; i < n; i++) {
    uint8_t *buf = f->bufs[side][i];
    put64(buf, 0, 48);
    put32(buf, 16, (uint32_t)b[i].dtype);
    putp(buf, 24, b[i].data);
    put64(buf, 32, (uint64_t)b[i].rank);
    putp(buf, 40, b[i].dims);
    f->types[side][i] = b[i].type ? b[i].type : 1;
    f->ptrs[side][i] = buf;
  }
  put64(f->frame, off, 40);
  put64(f->frame, off + 16, (uint64_t)n);
  putp(f->frame, off + 24, f->types[side]);
  putp(f->frame, off + 32, f->ptrs[side]);
}

// xbuild fills f for an EXECUTE call (attrs must be sorted by name).
static void xbuild(xframe *f, int stage, const xbuf *args, int nargs, const xbuf *rets, int nrets, const xattr *attrs,
                   int nattrs) {
  memset(f, 0, sizeof *f);
  put64(f->frame, 0, 176);
  putp(f->frame, 16, fake_api);
  put32(f->frame, 32, (uint32_t)stage);
  xside(f, 0, 40, args, nargs);
  xside(f, 1, 80, rets, nrets);
  for (int i = 0; i < nattrs; i++) {
    putp(f->spans[i], 0, attrs[i].name);
    put64(f->spans[i], 8, strlen(attrs[i].name));
    f->span_ptrs[i] = f->spans[i];
    f->attr_types[i] = attrs[i].type;
    if (attrs[i].type == 4) {
      putp(f->values[i], 0, attrs[i].str);
      put64(f->values[i], 8, strlen(attrs[i].str));
    } else {
      put32(f->values[i], 0, 5);  // Scalar: dtype S64, then a pointer to the value
      putp(f->values[i], 8, &attrs[i].scalar);
    }
    f->value_ptrs[i] = f->values[i];
  }
  put64(f->frame, 120, 48);
  put64(f->frame, 136, (uint64_t)nattrs);
  putp(f->frame, 144, f->attr_types);
  putp(f->frame, 152, f->span_ptrs);
  putp(f->frame, 160, f->value_ptrs);
}

typedef struct callbox_xla_error *(*xhandler)(struct callbox_xla_call_frame *);

// xla_last is the message of this thread's last failed XLA call ("" after
// a success), for xfailure: on the heap, since a thread's TLS takes room
// from its stack (the small-stack group's threads have 32 KiB).
#define XLA_LAST_CAP (1 << 16)
static __thread char *xla_last_buf;

static char *xla_last(void) {
  if (xla_last_buf == NULL) xla_last_buf = calloc(1, XLA_LAST_CAP);
  return xla_last_buf;
}

// xrun_with calls handler and reports under label; returns the code.
static int xrun_with(const char *label, xframe *f, xhandler handler) {
  fake_error *e = (fake_error *)handler((struct callbox_xla_call_frame *)f->frame);
  char m[4096];
  char *last = xla_last();
  if (last != NULL) last[0] = 0;
  pthread_mutex_lock(&out_mu);
  if (e == NULL) {
    printf("XLA\t%s\t0\t\n", label);
    pthread_mutex_unlock(&out_mu);
    return 0;
  }
  int code = e->code;
  if (last != NULL) snprintf(last, XLA_LAST_CAP, "%s", e->message);
  printf("XLA\t%s\t%d\t%s\n", label, e->code, clean(e->message, m, sizeof m));
  pthread_mutex_unlock(&out_mu);
  free(e);
  return code;
}

// xfailure_of reports under label the failure text names
// (callbox_xla_failure), or, as value label, "none" when the library gives
// none.
static void xfailure_of(const char *label, const char *text) {
  callbox_error *failure = (callbox_error *)0x1;
  callbox_error *e = callbox_xla_failure(text, &failure);
  CHECK(e == NULL, "%s: callbox_xla_failure: %s", label, e != NULL ? e->text : "");
  callbox_error_free(e);
  if (failure == NULL) {
    val(label, "none");
    return;
  }
  report(label, failure);
}

// xfailure reports the failure of this thread's last failed XLA call.
static void xfailure(const char *label) { xfailure_of(label, xla_last() != NULL ? xla_last() : ""); }

// xrun calls the CPU handler.
static int xrun(const char *label, xframe *f) { return xrun_with(label, f, callbox_xla_ffi); }

static int xcall(const char *label, const char *callback, const xbuf *args, int nargs, const xbuf *rets, int nrets) {
  xframe f;
  xattr a = {"callback", 4, callback, 0};
  xbuild(&f, 3, args, nargs, rets, nrets, &a, 1);
  return xrun(label, &f);
}

// ---- the groups ----

static callbox_host host;

// group_params reads callbox_callback_params: a callback's parameters
// (names, XLA dtype numbers, ranks), counted first; refusals.
static void group_params(void) {
  size_t n = 99;
  report("params_count", callbox_callback_params(host, "copy2", NULL, 0, &n));
  val("params_count", "%zu", n);
  callbox_param_info p[4];
  memset(p, 0, sizeof p);
  report("params_copy2", callbox_callback_params(host, "copy2", p, 4, &n));
  val("params_copy2", "%zu %s %d %d %s %d %d", n, p[0].name, p[0].xla, p[0].rank, p[1].name, p[1].xla, p[1].rank);
  report("params_short", callbox_callback_params(host, "copy2", p, 1, &n));
  val("params_short", "%zu %s", n, p[0].name);
  report("params_mat", callbox_callback_params(host, "copy_mat", p, 4, &n));
  val("params_mat", "%zu %s %d %d", n, p[0].name, p[0].xla, p[0].rank);
  report("params_unknown", callbox_callback_params(host, "no_such", p, 4, &n));
  report("params_null_count", callbox_callback_params(host, "copy2", p, 4, NULL));
  report("params_null_out", callbox_callback_params(host, "copy2", NULL, 4, &n));
  // A binding's own refusal, worded by the library (1.9).
  report("refusal", callbox_callback_refusal(host, "copy2", "argument 1 (y): a cast this binding will not make"));
  report("refusal_unknown", callbox_callback_refusal(host, "no_such", "why"));
  report("refusal_null", callbox_callback_refusal(host, "copy2", NULL));
}

// group_kinds prints callbox_kinds' table, one value per kind.
static void group_kinds(void) {
  size_t n = callbox_kinds(NULL, 0);
  callbox_kind_info infos[64];
  CHECK(n > 0 && n <= 64, "callbox_kinds: %zu kinds", n);
  size_t got = callbox_kinds(infos, 64);
  CHECK(got == n, "callbox_kinds counted %zu, then %zu", n, got);
  val("kinds", "%zu", n);
  for (size_t i = 0; i < n && i < 64; i++) {
    char label[64];
    snprintf(label, sizeof label, "kind_%d", infos[i].kind);
    val(label, "%d %s", infos[i].code, infos[i].name);
  }
}

static void group_version(void) {
  val("version", "%s %u", callbox_version(), callbox_version_number());
  CHECK(callbox_version_number() == CALLBOX_VERSION_MAJOR * 10000u + CALLBOX_VERSION_MINOR * 100u + CALLBOX_VERSION_PATCH,
        "version number %u", callbox_version_number());
}

// group_reload drives callbox_reload_config (1.7) on a host of its own:
// a changed callback takes its new limits, a new one appears, a removed
// one is unknown, an unchanged one serves throughout; infos read before a
// reload stay readable; a configuration that fails to load is refused and
// the old one keeps serving; a closed host refuses.
static void group_reload(const char *dir) {
  const char *a =
      "callbacks:\n"
      "  keep: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\"}\n"
      "  change: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\", timeout: 100ms}\n"
      "  gone: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\"}\n";
  const char *b =
      "callbacks:\n"
      "  keep: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\"}\n"
      "  change: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\", timeout: 300ms}\n"
      "  added: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\"}\n";
  const char *bad =
      "callbacks:\n"
      "  keep: {module: kit.wasm, export: copy, signature: \"(x: f32[n]) -> f32[n]\"}\n"
      "  broken: {module: missing.wasm}\n";
  callbox_host h = 0;
  report("reload_open", callbox_open_config(a, "yaml", dir, &h));
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  callbox_callback_info before;
  report("reload_info_before", callbox_callback_find(h, "gone", &before));
  report("reload_call_before", callbox_call(h, "keep", &ti, 1, &to, 1));
  report("reload", callbox_reload_config(h, b, "yaml", dir));
  size_t count = 0;
  report("reload_count", callbox_callback_count(h, &count));
  callbox_limits l;
  memset(&l, 0, sizeof l);
  l.struct_size = sizeof l;
  report("reload_limits", callbox_callback_limits(h, "change", &l));
  val("reload_after", "%zu %llu %s", count, (unsigned long long)l.timeout_ns, before.name);
  y[3] = 0;
  report("reload_call_keep", callbox_call(h, "keep", &ti, 1, &to, 1));
  report("reload_call_added", callbox_call(h, "added", &ti, 1, &to, 1));
  val("reload_call_added", "%g", y[3]);
  report("reload_call_gone", callbox_call(h, "gone", &ti, 1, &to, 1));
  report("reload_bad", callbox_reload_config(h, bad, "yaml", dir));
  report("reload_bad_format", callbox_reload_config(h, "callbacks: {}", "ini", dir));
  report("reload_null_text", callbox_reload_config(h, NULL, "yaml", dir));
  report("reload_missing_file", callbox_reload(h, "/nonexistent/callbox.yaml"));
  memset(&l, 0, sizeof l);
  l.struct_size = sizeof l;
  report("reload_limits_kept", callbox_callback_limits(h, "change", &l));
  val("reload_limits_kept", "%llu", (unsigned long long)l.timeout_ns);
  report("reload_call_after_bad", callbox_call(h, "added", &ti, 1, &to, 1));
  report("reload_close", callbox_close(h));
  report("reload_closed", callbox_reload_config(h, b, "yaml", dir));
  report("reload_bad_host", callbox_reload_config(987654, b, "yaml", dir));
}

static void group_open(const char *dir) {
  callbox_host h = 99;
  report("open_null_path", callbox_open(NULL, &h));
  CHECK(h == 0, "a failed open leaves 0");
  report("open_null_out", callbox_open("x.yaml", NULL));
  report("open_missing", callbox_open("/nonexistent/callbox.yaml", &h));
  report("open_bad_format", callbox_open_config("callbacks: {}", "ini", NULL, &h));
  report("open_bad_yaml", callbox_open_config("callbacks:\n  s: [", "yaml", NULL, &h));
  report("open_bad_key", callbox_open_config("callbacks:\n  s:\n    module: kit.wasm\n    colour: red\n", "yaml", dir, &h));
  report("open_bad_module", callbox_open_config("{\"callbacks\": {\"s\": {\"module\": \"missing.wasm\"}}}", "json", dir, &h));
  callbox_error *e = callbox_open_config(
      "{\"callbacks\": {\"c\": {\"module\": \"kit.wasm\", \"export\": \"copy\", \"signature\": \"(x: u8[n]) -> u8[n]\"}}}",
      "json", dir, &h);
  report("open_json", e);
  CHECK(h != 0, "json host handle");
  size_t n = 0;
  report("json_count", callbox_callback_count(h, &n));
  CHECK(n == 1, "json host has %zu callbacks", n);
  report("json_close", callbox_close(h));
  report("json_close_again", callbox_close(h));
  report("json_after_close", callbox_callback_count(h, &n));
  report("unknown_handle", callbox_callback_count(987654, &n));
  report("handle_zero", callbox_callback_count(0, &n));
}

static void group_list(void) {
  size_t n = 0;
  report("count", callbox_callback_count(host, &n));
  val("count", "%zu", n);
  report("count_null", callbox_callback_count(host, NULL));
  char id[80] = "";
  for (size_t i = 0; i < n; i++) {
    callbox_callback_info info;
    callbox_error *e = callbox_callback_at(host, i, &info);
    if (e != NULL) {
      report("at", e);
      continue;
    }
    if (strcmp(info.name, "copy_f32") == 0) {
      val("info_copy_f32", "%s|%s|%s|%s|%d|%d", info.id, info.signature, info.engine, info.batching, info.num_inputs,
          info.num_outputs);
      snprintf(id, sizeof id, "%s", info.id);
    }
  }
  report("at_out_of_range", callbox_callback_at(host, n, &(callbox_callback_info){0}));
  callbox_callback_info info;
  report("find_name", callbox_callback_find(host, "copy_f32", &info));
  report("find_id", callbox_callback_find(host, id, &info));
  CHECK(strcmp(info.name, "copy_f32") == 0, "find by id gave %s", info.name);
  report("find_stale_id", callbox_callback_find(host, "cb1-0000000000000000000000000000000000000000000000000000000000000000", &info));
  report("find_unknown", callbox_callback_find(host, "nope", &info));
  report("find_null", callbox_callback_find(host, NULL, &info));

  // Output types.
  int64_t shape[2] = {3, 5};
  callbox_tensor in = f32(NULL, 2, shape);
  callbox_type out;
  report("types_mat", callbox_output_types(host, "copy_mat", &in, 1, &out, 1));
  val("types_mat", "%d/%d/%d %d [%lld,%lld]", out.dtype.code, out.dtype.bits, out.dtype.lanes, out.ndim,
      (long long)out.shape[0], (long long)out.shape[1]);
  report("types_wrong_rank", callbox_output_types(host, "copy_f32", &in, 1, &out, 1));
  report("types_wrong_count", callbox_output_types(host, "copy_mat", &in, 1, &out, 2));
  in.dtype.bits = 8;
  report("types_unknown_dtype", callbox_output_types(host, "copy_mat", &in, 1, &out, 1));
}

static void group_dtypes(void) {
  for (size_t d = 0; d < NDTYPES; d++) {
    char name[32], label[64];
    snprintf(name, sizeof name, "copy_%s", dtypes[d].name);
    size_t esize = dtypes[d].bits / 8;
    int64_t n = 7;
    uint8_t in[7 * 16 + 16], out[7 * 16 + 16], xout[7 * 16 + 16];
    for (size_t i = 0; i < sizeof in; i++) in[i] = dtypes[d].code == CALLBOX_DL_BOOL ? (uint8_t)(i & 1) : (uint8_t)(i * 7 + 3);
    memset(out, 0xEE, sizeof out);
    callbox_tensor ti = tensor(in, dtypes[d].code, dtypes[d].bits, 1, &n);
    callbox_tensor to = tensor(out, dtypes[d].code, dtypes[d].bits, 1, &n);
    snprintf(label, sizeof label, "dtype_%s", dtypes[d].name);
    report(label, callbox_call(host, name, &ti, 1, &to, 1));
    CHECK(memcmp(in, out, (size_t)n * esize) == 0, "%s: output differs", name);
    CHECK(out[n * esize] == 0xEE, "%s: wrote past the output", name);

    // The same through the XLA handler.
    memset(xout, 0xEE, sizeof xout);
    xbuf a = {dtypes[d].xla, in, 1, &n, 0}, r = {dtypes[d].xla, xout, 1, &n, 0};
    snprintf(label, sizeof label, "xla_dtype_%s", dtypes[d].name);
    xcall(label, name, &a, 1, &r, 1);
    CHECK(memcmp(in, xout, (size_t)n * esize) == 0, "xla %s: output differs", name);
    CHECK(xout[n * esize] == 0xEE, "xla %s: wrote past the output", name);
  }
}

static void group_shapes(void) {
  // Rank 0.
  double x = 2.5, y = 0;
  callbox_tensor ti = tensor(&x, CALLBOX_DL_FLOAT, 64, 0, NULL), to = tensor(&y, CALLBOX_DL_FLOAT, 64, 0, NULL);
  report("rank0", callbox_call(host, "copy_scalar", &ti, 1, &to, 1));
  CHECK(y == 2.5, "rank 0 gave %g", y);
  y = 0;
  xbuf a = {12, &x, 0, NULL, 0}, r = {12, &y, 0, NULL, 0};
  xcall("xla_rank0", "copy_scalar", &a, 1, &r, 1);
  CHECK(y == 2.5, "xla rank 0 gave %g", y);

  // Empty, with NULL data.
  int64_t zero = 0;
  callbox_tensor ei = f32(NULL, 1, &zero), eo = f32(NULL, 1, &zero);
  report("empty", callbox_call(host, "copy_f32", &ei, 1, &eo, 1));
  xbuf ea = {11, NULL, 1, &zero, 0}, er = {11, NULL, 1, &zero, 0};
  xcall("xla_empty", "copy_f32", &ea, 1, &er, 1);
  int64_t zshape[2] = {0, 4};
  callbox_tensor zi = f32(NULL, 2, zshape), zo = f32(NULL, 2, zshape);
  report("empty_2d", callbox_call(host, "copy_mat", &zi, 1, &zo, 1));

  // Rank 2, explicit row-major strides and a byte offset.
  float m[1 + 6], mo[6] = {0};
  for (int i = 0; i < 7; i++) m[i] = (float)i;
  int64_t shape[2] = {2, 3}, rowmajor[2] = {3, 1}, transposed[2] = {1, 2};
  callbox_tensor mi = f32(m, 2, shape), mout = f32(mo, 2, shape);
  mi.strides = rowmajor;
  mi.byte_offset = sizeof(float);
  report("strides_rowmajor", callbox_call(host, "copy_mat", &mi, 1, &mout, 1));
  CHECK(mo[0] == 1 && mo[5] == 6, "byte_offset: got %g..%g", mo[0], mo[5]);
  mi.strides = transposed;
  report("strides_transposed", callbox_call(host, "copy_mat", &mi, 1, &mout, 1));
  // A size-1 dimension may have any stride.
  int64_t shape1[2] = {1, 3}, odd[2] = {99, 1};
  callbox_tensor oi = f32(m, 2, shape1), oo = f32(mo, 2, shape1);
  oi.strides = odd;
  report("strides_unit_dim", callbox_call(host, "copy_mat", &oi, 1, &oo, 1));

  // Two inputs, two outputs of different dtypes.
  int16_t s[3] = {1, -2, 3}, so[3] = {0};
  float f[2] = {1.5f, 2.5f}, fo[2] = {0};
  int64_t n3 = 3, n2 = 2;
  callbox_tensor ins[2] = {tensor(s, CALLBOX_DL_INT, 16, 1, &n3), f32(f, 1, &n2)};
  callbox_tensor outs[2] = {tensor(so, CALLBOX_DL_INT, 16, 1, &n3), f32(fo, 1, &n2)};
  report("two_outputs", callbox_call(host, "copy2", ins, 2, outs, 2));
  CHECK(so[1] == -2 && fo[1] == 2.5f, "copy2 gave %d %g", so[1], fo[1]);
}

static void group_bad(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4, n5 = 5, neg = -1;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("null_callback", callbox_call(host, NULL, &ti, 1, &to, 1));
  report("unknown_callback", callbox_call(host, "nope", &ti, 1, &to, 1));
  report("stale_id", callbox_call(host, "cb1-1111111111111111111111111111111111111111111111111111111111111111", &ti, 1, &to, 1));
  report("null_inputs", callbox_call(host, "copy_f32", NULL, 1, &to, 1));
  report("null_outputs", callbox_call(host, "copy_f32", &ti, 1, NULL, 1));
  report("too_many_inputs", callbox_call(host, "copy_f32", (callbox_tensor[]){ti, ti}, 2, &to, 1));
  report("too_few_outputs", callbox_call(host, "copy_f32", &ti, 1, &to, 0));
  callbox_tensor bad = ti;
  bad.dtype.bits = 8;  // float8
  report("unknown_dtype", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.dtype.lanes = 4;
  report("lanes", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.ndim = 33;
  report("rank_33", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.ndim = -1;
  report("rank_negative", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.shape = &neg;
  report("dim_negative", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.shape = NULL;
  report("shape_null", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.data = NULL;
  report("data_null", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = ti;
  bad.data = (void *)0x10;  // NULL plus an offset: refused, never read
  report("data_null_page", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = to;
  bad.data = (void *)0xff00;
  report("out_null_page", callbox_call(host, "copy_f32", &ti, 1, &bad, 1));
  bad = ti;
  bad.device.device_type = CALLBOX_DEVICE_CUDA;
  report("device_gpu", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = to;
  bad.device.device_type = CALLBOX_DEVICE_CUDA_MANAGED;
  report("device_managed_out", callbox_call(host, "copy_f32", &ti, 1, &bad, 1));
  bad = ti;
  bad.device.device_type = 4;  // OpenCL
  report("device_opencl", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = to;
  bad.shape = &n5;
  report("output_shape", callbox_call(host, "copy_f32", &ti, 1, &bad, 1));
  bad = to;
  bad.dtype.bits = 64;
  report("output_dtype", callbox_call(host, "copy_f32", &ti, 1, &bad, 1));
  report("input_dtype", callbox_call(host, "copy_f32", (callbox_tensor[]){tensor(x, CALLBOX_DL_INT, 32, 1, &n)}, 1, &to, 1));
  CHECK(y[0] == 0 && y[3] == 0, "a refused call wrote its output");
  // Counts of SIZE_MAX through every entry that takes one: refused as
  // InvalidArgument (not a HostPanic from a negative count).
  {
    callbox_type types[1];
    int32_t expired = 0;
    report("count_max_call", callbox_call(host, "copy_f32", &ti, SIZE_MAX, &to, 1));
    report("count_max_call_out", callbox_call(host, "copy_f32", &ti, 1, &to, SIZE_MAX));
    report("count_max_batch", callbox_call_batch(host, 0, NULL, "copy_f32", &ti, SIZE_MAX, &to, 1));
    report("count_max_cancelable", callbox_call_cancelable(host, 0, NULL, "copy_f32", &ti, 1, &to, SIZE_MAX));
    report("count_max_within", callbox_call_within(host, 0, "copy_f32", &ti, SIZE_MAX, &to, 1, 1000000000, &expired));
    report("count_max_tap", callbox_tap(host, "copy_f32", &ti, SIZE_MAX));
    report("count_max_chain_call", callbox_chain_call(host, "cm", "copy_f32", &ti, SIZE_MAX, &to, 1));
    report("count_max_chain_tap", callbox_chain_tap(host, "cm", "copy_f32", &ti, SIZE_MAX));
    report("count_max_output_types", callbox_output_types(host, "copy_f32", &ti, SIZE_MAX, types, 1));
  }
  // Pointers no user-space buffer can have: the kernel half and a
  // non-canonical address, refused before any byte is read.
  bad = ti;
  bad.data = (void *)(uintptr_t)0xffff888000000000ull;
  report("pointer_kernel", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad.data = (void *)(uintptr_t)0x0800000000000000ull;
  report("pointer_noncanonical", callbox_call(host, "copy_f32", &bad, 1, &to, 1));
  bad = to;
  bad.data = (void *)(uintptr_t)0xffff888000000000ull;
  report("pointer_kernel_out", callbox_call(host, "copy_f32", &ti, 1, &bad, 1));
  report("guest_error", callbox_call(host, "fail", &ti, 1, &to, 1));
  CHECK(y[0] == 0, "a failed call wrote its output");
  report("timeout", callbox_call(host, "spin", &ti, 1, &to, 1));
  report("ok_after", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[3] == 4, "call after failures");
}

static void group_chains(void) {
  float x[2] = {1, 2};
  int32_t count = 0;
  int64_t n = 2;
  callbox_tensor ti = f32(x, 1, &n), to = tensor(&count, CALLBOX_DL_INT, 32, 0, NULL);
  report("chain_call", callbox_chain_call(host, "c1", "bump", &ti, 1, &to, 1));
  val("chain_count_1", "%d", count);
  report("chain_tap_1", callbox_chain_tap(host, "c1", "bump", &ti, 1));
  report("chain_tap_fail", callbox_chain_tap(host, "c1", "fail", &ti, 1));
  report("chain_tap_3", callbox_chain_tap(host, "c1", "bump", &ti, 1));
  report("chain_barrier", callbox_chain_barrier(host, "c1"));
  report("chain_after_failure", callbox_chain_call(host, "c1", "bump", &ti, 1, &to, 1));
  report("chain_reset", callbox_chain_reset(host, "c1"));
  report("chain_call_after_reset", callbox_chain_call(host, "c1", "bump", &ti, 1, &to, 1));
  val("chain_count_2", "%d", count);
  report("chain_barrier_ok", callbox_chain_barrier(host, "c1"));
  report("chain_null", callbox_chain_call(host, NULL, "bump", &ti, 1, &to, 1));
  report("chain_empty", callbox_chain_call(host, "", "bump", &ti, 1, &to, 1));
  int64_t bad = 3;
  callbox_tensor wrong = tensor(&count, CALLBOX_DL_INT, 32, 1, &bad);
  report("chain_output_shape", callbox_chain_call(host, "c2", "bump", &ti, 1, &wrong, 1));

  // A tap reads a copy of its inputs, made before callbox_chain_tap
  // returns: the caller overwrites its buffer at once. nonneg refuses a
  // negative first element, so a tap that read the caller's memory late
  // would fail. (The buffer is freed only after the barrier: malloc's own
  // bookkeeping would overwrite the -1 that makes a late read visible.)
  // Sixteen 4 MiB copies queued first on the same chain give the caller a
  // head start of milliseconds (were the caller slower, the check could
  // only pass, never fail wrongly).
  {
    int64_t bn = 1 << 20;
    float *big = calloc((size_t)bn, sizeof(float));
    callbox_tensor tb = f32(big, 1, &bn);
    for (int i = 0; i < 16; i++) callbox_error_free(callbox_chain_tap(host, "tc", "copy_f32", &tb, 1));
    float *mine = malloc(2 * sizeof(float));
    mine[0] = 1;
    mine[1] = 2;
    callbox_tensor tm = f32(mine, 1, &n);
    report("tap_copies_input", callbox_chain_tap(host, "tc", "nonneg_seq", &tm, 1));
    mine[0] = -1;
    mine[1] = -1;
    report("tap_copies_input_barrier", callbox_chain_barrier(host, "tc"));
    free(mine);
    free(big);
  }

  // Unordered taps and the host barrier; inputs may change right after.
  report("tap_ok", callbox_tap(host, "bump", &ti, 1));
  report("tap_fail", callbox_tap(host, "fail", &ti, 1));
  x[0] = -1;
  report("barrier", callbox_barrier(host));
  report("barrier_again", callbox_barrier(host));
  report("tap_unknown", callbox_tap(host, "nope", &ti, 1));

  // Through the XLA handler: the chain attribute, tokens in and out.
  xframe f;
  uint8_t tok_in[8] = {0xAB}, tok_out[8] = {0xCD};
  int32_t c2 = 0;
  xbuf args[2] = {{17, tok_in, 0, NULL, 0}, {11, x, 1, &n, 0}};
  xbuf rets[2] = {{4, &c2, 0, NULL, 0}, {17, tok_out, 0, NULL, 0}};
  xattr attrs[2] = {{"callback", 4, "bump", 0}, {"chain", 4, "xc", 0}};
  xbuild(&f, 3, args, 2, rets, 2, attrs, 2);
  xrun("xla_chain_token", &f);
  CHECK(tok_in[0] == 0xAB && tok_out[0] == 0xCD, "a token buffer was touched");
  val("xla_chain_count", "%d", c2);
  xattr fattrs[2] = {{"callback", 4, "fail", 0}, {"chain", 4, "xc", 0}};
  float y[2];
  xbuf frets[2] = {{11, y, 1, &n, 0}, {17, tok_out, 0, NULL, 0}};
  xbuild(&f, 3, args, 2, frets, 2, fattrs, 2);
  xrun("xla_chain_fail", &f);
  xbuild(&f, 3, args, 2, rets, 2, attrs, 2);
  xrun("xla_chain_after_failure", &f);
}

static void group_xla(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4, n5 = 5;
  xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
  xframe f;

  // Metadata: an extension of type 1 with stage EXECUTE, before any stage check.
  xbuild(&f, 3, NULL, 0, NULL, 0, NULL, 0);
  putp(f.frame, 24, NULL);
  put64(f.meta_ext, 0, 32);
  put32(f.meta_ext, 8, 1);
  putp(f.meta_ext, 16, NULL);
  putp(f.meta_ext, 24, f.meta);
  put64(f.meta, 0, 48);
  put32(f.meta, 32, 0xFFFF);  // traits, to be cleared
  putp(f.frame, 8, f.meta_ext);
  xrun("metadata", &f);
  int32_t major, minor;
  uint32_t traits;
  memcpy(&major, f.meta + 8 + 16, 4);
  memcpy(&minor, f.meta + 8 + 20, 4);
  memcpy(&traits, f.meta + 32, 4);
  val("metadata", "%d.%d traits=%u", major, minor, traits);

  // Non-execute stages do nothing, even with a bogus callback.
  for (int stage = 0; stage < 3; stage++) {
    xattr attr = {"callback", 4, "nope", 0};
    xbuild(&f, stage, &a, 1, &r, 1, &attr, 1);
    char label[32];
    snprintf(label, sizeof label, "stage_%d", stage);
    xrun(label, &f);
  }

  xcall("by_name", "copy_f32", &a, 1, &r, 1);
  CHECK(y[2] == 3, "by name");
  callbox_callback_info info;
  report("find_for_id", callbox_callback_find(host, "copy_f32", &info));
  memset(y, 0, sizeof y);
  xcall("by_id", info.id, &a, 1, &r, 1);
  CHECK(y[2] == 3, "by id");
  // Malformed frames, unknown callbacks and bad buffers: group_both sends
  // each to both handlers.

  xcall("too_many_args", "copy_f32", (xbuf[]){a, a}, 2, &r, 1);
  xcall("no_rets", "copy_f32", &a, 1, NULL, 0);
  xbuf bad = r;
  bad.dims = &n5;
  memset(y, 0, sizeof y);
  xcall("ret_shape", "copy_f32", &a, 1, &bad, 1);
  CHECK(y[0] == 0, "refused call wrote");
  xcall("guest_error", "fail", &a, 1, &r, 1);
  xcall("timeout", "spin", &a, 1, &r, 1);

  // A batched call (attribute batched): f32[2,2] is two elements of f32[2].
  int64_t bd[2] = {2, 2};
  xbuf ba = {11, x, 2, bd, 0}, br = {11, y, 2, bd, 0};
  xattr battrs[2] = {{"callback", 4, "nonneg_par", 0}, {"batched", 4, "true", 0}};
  memset(y, 0, sizeof y);
  xbuild(&f, 3, &ba, 1, &br, 1, battrs, 2);
  xrun("batched", &f);
  CHECK(memcmp(x, y, sizeof x) == 0, "batched result");
  x[2] = -1;
  memset(y, 0, sizeof y);
  xbuild(&f, 3, &ba, 1, &br, 1, battrs, 2);
  xrun("batched_fail", &f);
  CHECK(y[0] == 0 && y[1] == 0, "a failed batch wrote");
  x[2] = 3;
  battrs[1].str = "yes";
  xbuild(&f, 3, &ba, 1, &br, 1, battrs, 2);
  xrun("batched_bad", &f);
  battrs[1].str = "false";
  xbuild(&f, 3, &ba, 1, &br, 1, battrs, 2);
  xrun("batched_false", &f);
}

// ---- threads ----

#define NTHREADS 8
#define NCALLS 200

static void *worker(void *arg) {
  long id = (long)arg;
  float x[64], y[64];
  int64_t n = 64;
  for (int c = 0; c < NCALLS; c++) {
    for (int i = 0; i < 64; i++) x[i] = (float)(id * 100000 + c * 64 + i);
    memset(y, 0, sizeof y);
    callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
    callbox_error *e;
    if (c % 2 == 0) {
      e = callbox_call(host, "copy_f32", &ti, 1, &to, 1);
      CHECK(e == NULL, "thread %ld call %d: %s", id, c, e ? e->text : "");
      callbox_error_free(e);
    } else {
      xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
      xframe f;
      xattr attr = {"callback", 4, "copy_f32", 0};
      xbuild(&f, 3, &a, 1, &r, 1, &attr, 1);
      fake_error *xe = (fake_error *)callbox_xla_ffi((struct callbox_xla_call_frame *)f.frame);
      CHECK(xe == NULL, "thread %ld xla call %d: %s", id, c, xe ? xe->message : "");
      free(xe);
    }
    CHECK(memcmp(x, y, sizeof x) == 0, "thread %ld call %d: wrong output", id, c);
  }
  return NULL;
}

static void group_threads(void) {
  pthread_t t[NTHREADS];
  for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  val("threads", "%d threads x %d calls", NTHREADS, NCALLS);
}

// ---- hostile guests: every callback whose name starts with "hostile_" ----

static void group_hostile(void) {
  size_t n = 0;
  report("hostile_count", callbox_callback_count(host, &n));
  for (size_t i = 0; i < n; i++) {
    callbox_callback_info info;
    callbox_error *e = callbox_callback_at(host, i, &info);
    if (e != NULL) {
      report("hostile_at", e);
      continue;
    }
    if (strncmp(info.name, "hostile_", 8) != 0) continue;
    float x[4] = {0}, y[4] = {0};  // the hostile suite's guests expect zeros
    int64_t len = 4;
    callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
    char label[160];
    snprintf(label, sizeof label, "capi_%s", info.name);
    report(label, callbox_call(host, info.name, &ti, 1, &to, 1));
    xbuf a = {11, x, 1, &len, 0}, r = {11, y, 1, &len, 0};
    snprintf(label, sizeof label, "xla_%s", info.name);
    xcall(label, info.name, &a, 1, &r, 1);
    snprintf(label, sizeof label, "xlaf_%s", info.name);
    xfailure(label);
  }
  // The process survives and still serves.
  float x[2] = {5, 6}, y[2] = {0};
  int64_t len = 2;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  report("hostile_survived", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[1] == 6, "call after the hostile guests");
}

// group_smallstack calls wasmtime guests from a thread with a 256 KiB
// stack, less than wasmtime's 512 KiB wasm stack: a first call (which
// instantiates), later calls, a guest recursing until its wasm stack is
// exhausted, which must be a StackOverflow, not a fault of the thread's
// stack, and traps, a timeout and a host call on the switched stack. The
// library runs such entries on a stack of its own (Linux with glibc, or
// x86-64). CBX_HARNESS_SWITCH chooses the switch through the wasmtime
// engine's test knob (found with dlsym): 1 the makecontext/swapcontext one
// that glibc targets other than x86-64 run, 2 none, as on musl off x86-64.
static void *smallstack_thread(void *p) {
  (void)p;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  for (int i = 0; i < 3; i++) {
    y[3] = 0;
    callbox_error *e = callbox_call(host, "copy_wasmtime", &ti, 1, &to, 1);
    int ran = e == NULL;
    report(i == 0 ? "smallstack_first" : "smallstack_again", e);
    // A call refused (no switch) leaves its output untouched.
    CHECK(y[3] == (ran ? 4 : 0), "copy_wasmtime from a small stack");
  }
  float z[4] = {0};
  callbox_tensor tz = f32(z, 1, &len), tw = f32(y, 1, &len);
  report("smallstack_recurse", callbox_call(host, "hostile_recurse_wasmtime", &tz, 1, &tw, 1));
  // Traps that arrive as signals on the switched stack (a guard-page
  // fault, a trap instruction), an interrupt at the deadline, and a host
  // call (a callback into Go) from it.
  const char *more[] = {"load_oob", "div_by_zero", "unreachable", "spin", "error_megabytes"};
  for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
    char name[64], label[96];
    snprintf(name, sizeof name, "hostile_%s_wasmtime", more[i]);
    snprintf(label, sizeof label, "smallstack_%s", more[i]);
    memset(z, 0, sizeof z);
    report(label, callbox_call(host, name, &tz, 1, &tw, 1));
  }
  report("smallstack_after", callbox_call(host, "copy_wasmtime", &ti, 1, &to, 1));
  return NULL;
}

// smallstack_open opens a host from the config (wasmtime modules among
// its callbacks, compiled as it opens), calls one of them, reloads it and
// closes it, all on a thread of 32 KiB: the library opens and reloads on
// a thread of the Go runtime's, so the caller's stack size is no concern
// (on this thread's own stack, opening one wasmtime module died below
// 64 KiB).
static const char *smallstack_cfg;

static void *smallstack_open(void *p) {
  (void)p;
  callbox_host h = 0;
  callbox_error *e = callbox_open(smallstack_cfg, &h);
  report("smallstack_open", e);
  if (e != NULL) return NULL;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  e = callbox_call(h, "copy_wasmtime", &ti, 1, &to, 1);
  int ran = e == NULL;
  report("smallstack_open_call", e);
  CHECK(y[3] == (ran ? 4 : 0), "copy_wasmtime on a host opened from a 32 KiB thread");
  report("smallstack_reload", callbox_reload(h, smallstack_cfg));
  report("smallstack_close", callbox_close(h));
  return NULL;
}

static void group_smallstack(const char *cfg) {
  smallstack_cfg = cfg;
  const char *mode = getenv("CBX_HARNESS_SWITCH");
  if (mode != NULL) {
    int (*knob)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cb_test_stack_switch");
    val("smallstack_switch", knob != NULL && knob(atoi(mode)) ? "chosen" : "unavailable");
  }
  pthread_attr_t a;
  pthread_t th;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256 << 10);
  if (pthread_create(&th, &a, smallstack_thread, NULL) != 0) {
    val("smallstack_thread", "not started");
    return;
  }
  pthread_join(th, NULL);
  pthread_attr_setstacksize(&a, 32 << 10);
  if (pthread_create(&th, &a, smallstack_open, NULL) != 0) {
    val("smallstack_open_thread", "not started");
  } else {
    pthread_join(th, NULL);
  }
  pthread_attr_destroy(&a);
}

static void group_close(void) {
  float x[2] = {5, 6}, y[2] = {0};
  int64_t len = 2;
  callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
  val("cuda_stats_before_close", "%d", callbox_cuda_stats(NULL, 0) > 0);
  report("close", callbox_close(host));
  val("cuda_stats_after_close", "%lld", (long long)callbox_cuda_stats(NULL, 0));
  report("call_after_close", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  xbuf a = {11, x, 1, &len, 0}, r = {11, y, 1, &len, 0};
  xcall("xla_after_close", "copy_f32", &a, 1, &r, 1);
  report("close_again", callbox_close(host));
}

// The fake XLA api table of the CUDA platform: Stream_Get (slot 4, offset
// 80) hands out a made-up stream, as XLA hands out its cudaStream_t.
static uint8_t fake_cuda_api[88];
static int stream_gets;
static void *fake_stream_get(void *args) {
  __atomic_add_fetch(&stream_gets, 1, __ATOMIC_RELAXED);
  putp(args, 24, (void *)0x5eed);
  return NULL;
}

// group_cuda drives the GPU entries through the library on a machine
// whatever its GPU: with host pointers posing as device memory, every GPU
// call must fail cleanly (no CUDA runtime, or memory that is not the
// device's), write no output byte, and leave the process working.
static void group_cuda(void) {
  put64(fake_cuda_api, 0, sizeof fake_cuda_api);
  void *create = (void *)fake_error_create, *sget = (void *)fake_stream_get;
  memcpy(fake_cuda_api + 48, &create, 8);
  memcpy(fake_cuda_api + 80, &sget, 8);
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
  xattr attr = {"callback", 4, "copy_f32", 0};
  xframe f;
  char json[1024];

  int64_t len = callbox_cuda_stats(json, sizeof json);
  val("cuda_stats", "%lld %s", (long long)len, len >= 0 ? json : "");

  // The metadata handshake.
  xbuild(&f, 3, NULL, 0, NULL, 0, NULL, 0);
  put64(f.meta_ext, 0, 32);
  put32(f.meta_ext, 8, 1);
  putp(f.meta_ext, 24, f.meta);
  put64(f.meta, 0, 48);
  put32(f.meta, 32, 0xFFFF);
  putp(f.frame, 8, f.meta_ext);
  xrun_with("cuda_metadata", &f, callbox_xla_ffi_cuda);
  int32_t major, minor;
  uint32_t traits;
  memcpy(&major, f.meta + 8 + 16, 4);
  memcpy(&minor, f.meta + 8 + 20, 4);
  memcpy(&traits, f.meta + 32, 4);
  val("cuda_metadata", "%d.%d traits=%u", major, minor, traits);

  // The CPU api table has no Stream_Get: the handler says to use the
  // CPU one.
  xbuild(&f, 3, &a, 1, &r, 1, &attr, 1);
  xrun_with("cuda_on_cpu_api", &f, callbox_xla_ffi_cuda);

  // A call on the CUDA api table: a clean error, no output written.
  xbuild(&f, 3, &a, 1, &r, 1, &attr, 1);
  putp(f.frame, 16, fake_cuda_api);
  xrun_with("cuda_call", &f, callbox_xla_ffi_cuda);
  CHECK(stream_gets == 1, "Stream_Get called %d times", stream_gets);
  CHECK(y[0] == 0 && y[3] == 0, "a failed GPU call wrote its output");
  xattr unknown = {"callback", 4, "nope", 0};
  xbuild(&f, 3, &a, 1, &r, 1, &unknown, 1);
  putp(f.frame, 16, fake_cuda_api);
  xrun_with("cuda_unknown", &f, callbox_xla_ffi_cuda);

  // DLPack tensors in CUDA memory.
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  ti.device.device_type = CALLBOX_DEVICE_CUDA;
  to.device.device_type = CALLBOX_DEVICE_CUDA;
  callbox_tensor *ins[1] = {&ti}, *outs[1] = {&to};
  char msg[2048];
  msg[0] = 0;
  int code = callbox_cuda_call_dlpack("copy_f32", 0x5eed, ins, 1, outs, 1, msg, sizeof msg);
  val("cuda_dlpack", "%d %s", code, clean(msg, json, sizeof json));
  xfailure_of("cuda_dlpack_failure", msg);
  CHECK(y[0] == 0 && y[3] == 0, "a failed DLPack call wrote its output");
  msg[0] = 0;
  code = callbox_cuda_call_dlpack(NULL, 0x5eed, ins, 1, outs, 1, msg, sizeof msg);
  val("cuda_dlpack_null", "%d %s", code, clean(msg, json, sizeof json));
  code = callbox_cuda_call_dlpack("copy_f32", 0x5eed, NULL, 1, outs, 1, NULL, 0);
  val("cuda_dlpack_no_msg", "%d", code);
  report("cuda_plain_call", callbox_call(host, "copy_f32", &ti, 1, &to, 1));

  // Without a default host, nothing is served.
  report("cuda_clear_default", callbox_set_default_host(0));
  xbuild(&f, 3, &a, 1, &r, 1, &attr, 1);
  putp(f.frame, 16, fake_cuda_api);
  xrun_with("cuda_no_host", &f, callbox_xla_ffi_cuda);
  val("cuda_stats_no_host", "%lld", (long long)callbox_cuda_stats(json, sizeof json));
  report("cuda_set_default", callbox_set_default_host(host));
  val("cuda_stats_again", "%d", callbox_cuda_stats(NULL, 0) > 0);

  // The process still works.
  callbox_tensor ci = f32(x, 1, &n), co = f32(y, 1, &n);
  report("cuda_cpu_after", callbox_call(host, "copy_f32", &ci, 1, &co, 1));
  CHECK(y[3] == 4, "the CPU call after the GPU calls");
}

// xboth runs one frame through the CPU handler (its api table) and the
// CUDA handler (the CUDA api table, which hands out a stream), as
// "<label>_cpu" and "<label>_cuda": one decoder, one code per failure.
static void xboth(const char *label, xframe *f) {
  char l[96];
  snprintf(l, sizeof l, "%s_cpu", label);
  putp(f->frame, 16, fake_api);
  xrun_with(l, f, callbox_xla_ffi);
  snprintf(l, sizeof l, "%s_cuda", label);
  putp(f->frame, 16, fake_cuda_api);
  xrun_with(l, f, callbox_xla_ffi_cuda);
}

static void xboth_call(const char *label, const char *callback, const xbuf *args, int nargs, const xbuf *rets,
                       int nrets) {
  xframe f;
  xattr a = {"callback", 4, callback, 0};
  xbuild(&f, 3, args, nargs, rets, nrets, &a, 1);
  xboth(label, &f);
}

// group_both sends the same failing frames to both XLA handlers: each
// failure that comes before any byte moves must give the same code (and
// message) from both.
static void group_both(const char *dir) {
  put64(fake_cuda_api, 0, sizeof fake_cuda_api);
  void *create = (void *)fake_error_create, *sget = (void *)fake_stream_get;
  memcpy(fake_cuda_api + 48, &create, 8);
  memcpy(fake_cuda_api + 80, &sget, 8);
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4, neg = -2;
  xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0}, bad;
  xframe f;

  xboth_call("both_unknown", "nope", &a, 1, &r, 1);
  xboth_call("both_stale_id", "cb1-3333333333333333333333333333333333333333333333333333333333333333", &a, 1, &r, 1);
  xboth_call("both_empty_name", "", &a, 1, &r, 1);
  xbuild(&f, 3, &a, 1, &r, 1, NULL, 0);
  xboth("both_no_attrs", &f);
  xattr scalar = {"callback", 3, NULL, 7};
  xbuild(&f, 3, &a, 1, &r, 1, &scalar, 1);
  xboth("both_attr_scalar", &f);
  xattr extra[2] = {{"callback", 4, "copy_f32", 0}, {"colour", 4, "red", 0}};
  xbuild(&f, 3, &a, 1, &r, 1, extra, 2);
  xboth("both_attr_unknown", &f);
  xattr empty_chain[2] = {{"callback", 4, "copy_f32", 0}, {"chain", 4, "", 0}};
  xbuild(&f, 3, &a, 1, &r, 1, empty_chain, 2);
  xboth("both_empty_chain", &f);
  bad = a;
  bad.dtype = 19;
  xboth_call("both_dtype_f8", "copy_f32", &bad, 1, &r, 1);
  bad = a;
  bad.rank = 40;
  xboth_call("both_rank_40", "copy_f32", &bad, 1, &r, 1);
  bad = a;
  bad.dims = &neg;
  xboth_call("both_dim_negative", "copy_f32", &bad, 1, &r, 1);
  bad = a;
  bad.type = 2;
  xboth_call("both_arg_not_buffer", "copy_f32", &bad, 1, &r, 1);
  bad = a;
  bad.data = NULL;
  xboth_call("both_data_null", "copy_f32", &bad, 1, &r, 1);
  xbuild(&f, 3, &a, 1, &r, 1, NULL, 0);
  put64(f.frame, 0, 100);
  xboth("both_small_frame", &f);
  CHECK(y[0] == 0 && y[3] == 0, "a refused call wrote its output");

  // No default host (and no CALLBOX_CONFIG): both say so.
  report("both_clear_default", callbox_set_default_host(0));
  xboth_call("both_no_host", "copy_f32", &a, 1, &r, 1);
  // A closed default host: both say so.
  callbox_host other = 0;
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "%s/callbox.yaml", dir);
  report("both_open_other", callbox_open(cfg, &other));
  report("both_set_other", callbox_set_default_host(other));
  report("both_close_other", callbox_close(other));
  xboth_call("both_closed_host", "copy_f32", &a, 1, &r, 1);
  report("both_restore", callbox_set_default_host(host));
}

// rss_kib is the process's resident set (VmRSS), in KiB.
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long rss = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) rss = atol(line + 6);
  }
  fclose(f);
  return rss;
}

// group_soak opens and closes a host from the config text (both engines'
// callbacks, as callbox_open_config gets it from a binding) rounds times
// with a call on every 10th, printing the RSS after the first tenth, after
// half and at the end: a closed host must release everything.
static void group_soak(const char *cfg_path, int rounds) {
  FILE *f = fopen(cfg_path, "r");
  CHECK(f != NULL, "open %s", cfg_path);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", cfg_path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL) *slash = 0;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t len = 4;
  long first = 0, half = 0;
  for (int i = 0; i < rounds; i++) {
    callbox_host h = 0;
    callbox_error *e = callbox_open_config(text, "yaml", dir, &h);
    if (e != NULL) {
      report("soak_open", e);
      return;
    }
    if (i % 10 == 0) {
      callbox_tensor ti = f32(x, 1, &len), to = f32(y, 1, &len);
      e = callbox_call(h, "copy_f32", &ti, 1, &to, 1);
      if (e == NULL) e = callbox_call(h, "copy_wasmtime", &ti, 1, &to, 1);
      if (e != NULL) {
        report("soak_call", e);
        return;
      }
    }
    e = callbox_close(h);
    if (e != NULL) {
      report("soak_close", e);
      return;
    }
    if (i + 1 == rounds / 10) first = rss_kib();
    if (i + 1 == rounds / 2) half = rss_kib();
  }
  val("soak", "%d %ld %ld %ld", rounds, first, half, rss_kib());
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fork_done(void *user, callbox_error *err) {
  (void)user;
  callbox_error_free(err);
}

static void sig_noop(int signo) { (void)signo; }

// sigcall runs spin_long under a cancel token and records how it ended.
typedef struct {
  callbox_cancel_token tok;
  char kind[32];
} sigcall;

static void *sigcall_run(void *p) {
  sigcall *c = p;
  float x[1] = {1}, y[1] = {0};
  int64_t n = 1;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  callbox_error *e = callbox_call_cancelable(host, c->tok, NULL, "spin_long", &ti, 1, &to, 1);
  snprintf(c->kind, sizeof c->kind, "%s", e != NULL ? e->kind_name : "ok");
  callbox_error_free(e);
  return NULL;
}

// group_sigflags: callbox_cancel_on_signal keeps the SA_RESTART flag of
// the handler it chains to (Python installs its own without it, so that
// Ctrl-C interrupts a blocking read), and restarts under an ignored or
// default disposition. No signal is sent: the flags are read back.
static void group_sigflags(void) {
  callbox_cancel_token tok = 0;
  report("sigflags_token", callbox_cancel_token_new(&tok));
  struct sigaction sa, got;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_handler = sig_noop;
  sa.sa_flags = 0;
  sigaction(SIGUSR2, &sa, NULL);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, NULL);
  signal(SIGTSTP, SIG_IGN);
  report("sigflags_install_plain", callbox_cancel_on_signal(tok, SIGUSR2));
  report("sigflags_install_restart", callbox_cancel_on_signal(tok, SIGWINCH));
  report("sigflags_install_ignored", callbox_cancel_on_signal(tok, SIGTSTP));
  sigaction(SIGUSR2, NULL, &got);
  val("sigflags_plain", "restart=%d mask_term=%d", (got.sa_flags & SA_RESTART) != 0, sigismember(&got.sa_mask, SIGTERM));
  sigaction(SIGWINCH, NULL, &got);
  val("sigflags_restart", "restart=%d", (got.sa_flags & SA_RESTART) != 0);
  sigaction(SIGTSTP, NULL, &got);
  val("sigflags_ignored", "restart=%d", (got.sa_flags & SA_RESTART) != 0);
  report("sigflags_free", callbox_cancel_token_free(tok));
}

// group_fork forks a child after the parent has used the library: every
// entry the child calls must fail at once with FailedPrecondition (the Go
// runtime did not survive the fork), and the parent keeps serving.
static void group_fork(const char *cfg) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("fork_parent_before", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);  // a hang fails the group instead of the test's timeout
    double t0 = now_ms();
    callbox_host h = 7;
    report("fork_child_open", callbox_open(cfg, &h));
    val("fork_child_handle", "%llu", (unsigned long long)h);
    report("fork_child_call", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
    xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
    xcall("fork_child_xla", "copy_f32", &a, 1, &r, 1);
    val("fork_child_dtypes", "%zu", callbox_dtypes(NULL, 0));
    // Every other guarded entry, each reported as fork_entry_<name>: all
    // must refuse at once, naming themselves (a missing guard would enter
    // the dead Go runtime and hang or crash the child).
    size_t count = 0;
    callbox_callback_info info;
    callbox_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.struct_size = sizeof lim;
    callbox_type types[1];
    callbox_cancel_token tok = 0;
    int32_t expired = 0;
    callbox_host dh = 0;
    report("fork_entry_callbox_open_config", callbox_open_config("callbacks: {}", "yaml", ".", &h));
    report("fork_entry_callbox_reload", callbox_reload(host, "x.yaml"));
    report("fork_entry_callbox_reload_config", callbox_reload_config(host, "callbacks: {}", "yaml", "."));
    report("fork_entry_callbox_callback_count", callbox_callback_count(host, &count));
    report("fork_entry_callbox_callback_at", callbox_callback_at(host, 0, &info));
    report("fork_entry_callbox_callback_find", callbox_callback_find(host, "copy_f32", &info));
    report("fork_entry_callbox_callback_limits", callbox_callback_limits(host, "copy_f32", &lim));
    size_t nparams = 0;
    report("fork_entry_callbox_callback_params", callbox_callback_params(host, "copy_f32", NULL, 0, &nparams));
    report("fork_entry_callbox_callback_refusal", callbox_callback_refusal(host, "copy_f32", "why"));
    report("fork_entry_callbox_output_types", callbox_output_types(host, "copy_f32", &ti, 1, types, 1));
    report("fork_entry_callbox_call_batch", callbox_call_batch(host, 0, NULL, "copy_f32", &ti, 1, &to, 1));
    callbox_request req = {sizeof req, "copy_f32", NULL, 0, &ti, 1, &to, 1, 0, 0, 0};
    report("fork_entry_callbox_request_run", callbox_request_run(host, &req));
    report("fork_entry_callbox_request_async", callbox_request_async(host, &req, fork_done, NULL));
    report("fork_entry_callbox_call_cancelable", callbox_call_cancelable(host, 0, NULL, "copy_f32", &ti, 1, &to, 1));
    report("fork_entry_callbox_call_within",
           callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000000, &expired));
    report("fork_entry_callbox_call_async",
           callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, fork_done, NULL));
    report("fork_entry_callbox_tap", callbox_tap(host, "copy_f32", &ti, 1));
    report("fork_entry_callbox_barrier", callbox_barrier(host));
    report("fork_entry_callbox_barrier_cancelable", callbox_barrier_cancelable(host, 0, NULL));
    report("fork_entry_callbox_chain_call", callbox_chain_call(host, "fc", "copy_f32", &ti, 1, &to, 1));
    report("fork_entry_callbox_chain_tap", callbox_chain_tap(host, "fc", "copy_f32", &ti, 1));
    report("fork_entry_callbox_chain_barrier", callbox_chain_barrier(host, "fc"));
    report("fork_entry_callbox_chain_reset", callbox_chain_reset(host, "fc"));
    report("fork_entry_callbox_set_default_host", callbox_set_default_host(host));
    report("fork_entry_callbox_default_host", callbox_default_host(&dh));
    report("fork_entry_callbox_cancel_token_new", callbox_cancel_token_new(&tok));
    report("fork_entry_callbox_cancel_token_fire", callbox_cancel_token_fire(1));
    report("fork_entry_callbox_cancel_token_free", callbox_cancel_token_free(1));
    report("fork_entry_callbox_cancel_on_signal", callbox_cancel_on_signal(1, SIGUSR1));
    report("fork_entry_callbox_set_log_callback", callbox_set_log_callback(NULL, NULL, 0));
    callbox_error *failure = (callbox_error *)0x1;
    report("fork_entry_callbox_xla_failure", callbox_xla_failure("[callbox error 0-1]", &failure));
    CHECK(failure == NULL, "a fork child's callbox_xla_failure gave a failure");
    char attr[CALLBOX_XLA_HOST_ATTR_SIZE] = "x";
    report("fork_entry_callbox_xla_host_attr", callbox_xla_host_attr(host, attr, sizeof attr));
    CHECK(attr[0] == 0, "a fork child's callbox_xla_host_attr wrote %s", attr);
    report("fork_entry_callbox_close", callbox_close(host));
    val("fork_child_cancel_token", "%llu", (unsigned long long)tok);
    val("fork_child_default_host", "%llu", (unsigned long long)dh);
    char msg[64];
    val("fork_child_cuda_call", "%d", callbox_cuda_call_dlpack("copy_f32", 0, NULL, 0, NULL, 0, msg, sizeof msg));
    val("fork_child_cuda_stats", "%lld", (long long)callbox_cuda_stats(msg, sizeof msg));
    val("fork_child_ms", "%.0f", now_ms() - t0);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  val("fork_child_exit", "%d", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  memset(y, 0, sizeof y);
  report("fork_parent_after", callbox_call(host, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[3] == 4, "the parent's call after the fork");

  // A signal to a fork child must not fire the parent's token (the child
  // inherits the handler and the pipe's write end). A call under token a
  // spins (5 s timeout) while a child raises a's signal: the call must end
  // at its timeout, not be canceled. (It starts 200 ms before the fork; were
  // it later, the check could only pass, never fail wrongly.)
  callbox_cancel_token ta = 0;
  report("fork_signal_token", callbox_cancel_token_new(&ta));
  signal(SIGUSR2, sig_noop);
  callbox_error_free(callbox_cancel_on_signal(ta, SIGUSR2));
  sigcall sc = {ta, ""};
  pthread_t th;
  pthread_create(&th, NULL, sigcall_run, &sc);
  usleep(200000);
  pid_t c2 = fork();
  if (c2 == 0) {
    alarm(10);
    raise(SIGUSR2);
    _exit(0);
  }
  waitpid(c2, &status, 0);
  pthread_join(th, NULL);
  val("fork_signal_call", "%s", sc.kind);
  callbox_error_free(callbox_cancel_token_free(ta));
}

// group_within drives callbox_call_within: a quick call within its budget;
// a 5 s spinner on each engine given up 20 ms in (nothing written, the
// host then serving the callback's next call); a callback whose own 250 ms
// timeout is shorter than the budget (TIMEOUT, not given up); a cancel
// token fired 100 ms in (CANCELED); refused arguments.
static void *within_cancel_thread(void *p) {
  callbox_cancel_token tok = *(callbox_cancel_token *)p;
  struct timespec d = {0, 100 * 1000 * 1000};
  nanosleep(&d, NULL);
  report("within_cancel_fire", callbox_cancel_token_fire(tok));
  return NULL;
}

static void group_within(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  int32_t expired = -1;
  report("within_quick", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000000ull, &expired));
  val("within_quick", "%d %g %g", expired, y[0], y[3]);
  const char *spinners[2] = {"spin_long", "spin_wasmtime"};
  for (int e = 0; e < 2; e++) {
    char label[64];
    y[0] = y[3] = 9;
    expired = -1;
    double t0 = now_ms();
    snprintf(label, sizeof label, "within_gave_up_%s", spinners[e]);
    report(label, callbox_call_within(host, 0, spinners[e], &ti, 1, &to, 1, 20000000ull, &expired));
    double ms = now_ms() - t0;
    val(label, "%d %.0f", expired, ms);
    CHECK(y[0] == 9 && y[3] == 9, "a call given up wrote its output");
  }
  // The host serves the next call (on a new instance).
  expired = -1;
  report("within_after", callbox_call_within(host, 0, "copy_wasmtime", &ti, 1, &to, 1, 1000000000ull, &expired));
  val("within_after", "%d %g", expired, y[3]);
  // The callback's own timeout (250 ms) first: a TIMEOUT like any other.
  y[0] = y[3] = 9;
  expired = -1;
  report("within_timeout", callbox_call_within(host, 0, "spin", &ti, 1, &to, 1, 3000000000ull, &expired));
  val("within_timeout", "%d", expired);
  CHECK(y[0] == 9 && y[3] == 9, "a call that timed out wrote its output");
  // A token fired 100 ms in: CANCELED.
  callbox_cancel_token tok = 0;
  report("within_cancel_new", callbox_cancel_token_new(&tok));
  pthread_t th;
  pthread_create(&th, NULL, within_cancel_thread, &tok);
  expired = -1;
  double t0 = now_ms();
  report("within_cancel", callbox_call_within(host, tok, "spin_long", &ti, 1, &to, 1, 3000000000ull, &expired));
  val("within_cancel", "%d %.0f", expired, now_ms() - t0);
  pthread_join(th, NULL);
  report("within_cancel_free", callbox_cancel_token_free(tok));
  // Refused.
  report("within_zero_budget", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 0, &expired));
  report("within_null_expired", callbox_call_within(host, 0, "copy_f32", &ti, 1, &to, 1, 1000000ull, NULL));
  report("within_bad_token", callbox_call_within(host, 424242, "copy_f32", &ti, 1, &to, 1, 1000000ull, &expired));
  report("within_unknown", callbox_call_within(host, 0, "no_such", &ti, 1, &to, 1, 1000000ull, &expired));
}

// group_limits reads callbox_callback_limits: the configured limits of a
// wazero and a wasmtime callback and the native stack a caller needs; a
// struct of a later, bigger version (the 1.5 fields filled, the rest left
// alone); refusals.
static void group_limits(void) {
  const char *names[3] = {"copy_f32", "spin_long", "spin_wasmtime"};
  for (int i = 0; i < 3; i++) {
    char label[64];
    callbox_limits l;
    memset(&l, 0xAB, sizeof l);
    l.struct_size = sizeof l;
    snprintf(label, sizeof label, "limits_%s", names[i]);
    report(label, callbox_callback_limits(host, names[i], &l));
    val(label, "%zu %llu %llu %llu %llu %llu %llu %llu %llu", l.struct_size, (unsigned long long)l.timeout_ns,
        (unsigned long long)l.max_memory, (unsigned long long)l.fuel, (unsigned long long)l.max_stack,
        (unsigned long long)l.max_output, (unsigned long long)l.caller_stack, (unsigned long long)l.max_wait_ns, (unsigned long long)l.max_cpu_ns);
  }
  // A caller compiled against 1.5 passes the struct without max_wait_ns:
  // filled as far as it goes, nothing written past it.
  callbox_limits old15;
  memset(&old15, 0xAB, sizeof old15);
  old15.struct_size = offsetof(callbox_limits, max_wait_ns);
  report("limits_15", callbox_callback_limits(host, "copy_f32", &old15));
  val("limits_15", "%zu %d %d", old15.struct_size, old15.max_output != 0xABABABABABABABABull,
      old15.max_wait_ns == 0xABABABABABABABABull);
  // A 1.6 caller's struct ends before max_cpu_ns.
  callbox_limits old16;
  memset(&old16, 0xAB, sizeof old16);
  old16.struct_size = offsetof(callbox_limits, max_cpu_ns);
  report("limits_16", callbox_callback_limits(host, "spin_long", &old16));
  val("limits_16", "%zu %llu %d", old16.struct_size, (unsigned long long)old16.max_wait_ns,
      old16.max_cpu_ns == 0xABABABABABABABABull);
  struct {
    callbox_limits l;
    uint64_t later;
  } big;
  memset(&big, 0xAB, sizeof big);
  big.l.struct_size = sizeof big;
  report("limits_bigger", callbox_callback_limits(host, "copy_f32", &big.l));
  val("limits_bigger", "%zu %d", big.l.struct_size, big.later == 0xABABABABABABABABull);
  callbox_limits small;
  memset(&small, 0, sizeof small);
  small.struct_size = 8;
  report("limits_small", callbox_callback_limits(host, "copy_f32", &small));
  report("limits_null", callbox_callback_limits(host, "copy_f32", NULL));
  small.struct_size = sizeof small;
  report("limits_unknown", callbox_callback_limits(host, "no_such", &small));
}

typedef struct {
  callbox_cancel_token tok;
  const char *chain;
  double ms;
  callbox_error *err;
} spin_arg;

static void *spin_thread(void *p) {
  spin_arg *a = p;
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  double t0 = now_ms();
  a->err = callbox_call_cancelable(host, a->tok, a->chain, "spin_long", &ti, 1, &to, 1);
  a->ms = now_ms() - t0;
  CHECK(y[0] == 9 && y[3] == 9, "a canceled call wrote its output");
  return NULL;
}

static volatile sig_atomic_t usr2_seen;
static void on_usr2(int sig) {
  (void)sig;
  usr2_seen++;
}

// group_cancel cancels calls of a 5 s spinning callback 100 ms in: by
// firing the token from another thread, by a signal the token was bound
// to (the program's own handler for it still runs), and on a chain.
static void group_cancel(void) {
  callbox_cancel_token tok = 0;
  report("cancel_new", callbox_cancel_token_new(&tok));
  for (int round = 0; round < 3; round++) {
    spin_arg a = {tok, round == 2 ? "canceled_chain" : NULL, 0, NULL};
    pthread_t th;
    pthread_create(&th, NULL, spin_thread, &a);
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    if (round == 1) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_usr2;
      sa.sa_flags = SA_ONSTACK;
      sigaction(SIGUSR2, &sa, NULL);
      report("cancel_on_signal", callbox_cancel_on_signal(tok, SIGUSR2));
      kill(getpid(), SIGUSR2);
    } else {
      report("cancel_fire", callbox_cancel_token_fire(tok));
    }
    pthread_join(th, NULL);
    char label[32];
    snprintf(label, sizeof label, "cancel_call_%d", round);
    report(label, a.err);
    snprintf(label, sizeof label, "cancel_ms_%d", round);
    val(label, "%.0f", a.ms);
  }
  val("cancel_usr2_seen", "%d", (int)usr2_seen);
  // A call after the token fired runs: firing cancels only calls in flight.
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("cancel_later_call", callbox_call_cancelable(host, tok, NULL, "copy_f32", &ti, 1, &to, 1));
  CHECK(y[3] == 4, "the call after the token fired");
  report("cancel_free", callbox_cancel_token_free(tok));
  report("cancel_freed", callbox_cancel_token_fire(tok));
  report("cancel_new_2", callbox_cancel_token_new(&tok));
  report("cancel_bad_signal", callbox_cancel_on_signal(tok, SIGSEGV));
  report("cancel_free_2", callbox_cancel_token_free(tok));
}


// ---- callbox_call_async ----

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, calls, wrong;
  callbox_error *err;  // the last failure (single-call uses)
  callbox_host close_in_done;
} async_wait;

static void async_init(async_wait *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
}

// An async call's state: its own buffers, kept until done.
typedef struct {
  async_wait *w;
  float x[256], y[256];
  int64_t n;
} async_call;

static void async_done(void *user, callbox_error *err) {
  async_call *c = user;
  async_wait *w = c->w;
  int right = err == NULL;
  for (int64_t i = 0; right && i < c->n; i++) right = c->y[i] == c->x[i];
  if (w->close_in_done != 0) report("async_close_in_done", callbox_close(w->close_in_done));
  pthread_mutex_lock(&w->mu);
  w->calls++;
  if (!right) w->wrong++;
  if (err != NULL) {
    if (w->err != NULL) callbox_error_free(w->err);
    w->err = err;
  }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void async_wait_for(async_wait *w, int calls) {
  pthread_mutex_lock(&w->mu);
  while (w->calls < calls) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

// async_start starts one call of callback on h with its own input (seed),
// its tensor structs and shape on this stack frame and poisoned when it
// returns (the library must have copied them).
static callbox_error *async_start(callbox_host h, callbox_cancel_token tok, const char *callback, async_call *c,
                                  int seed) {
  for (int64_t i = 0; i < c->n; i++) {
    c->x[i] = (float)(seed * 1000 + i);
    c->y[i] = -1;
  }
  int64_t *shape = malloc(sizeof *shape);
  *shape = c->n;
  callbox_tensor ti = f32(c->x, 1, shape), to = f32(c->y, 1, shape);
  callbox_error *e = callbox_call_async(h, tok, NULL, callback, &ti, 1, &to, 1, async_done, c);
  *shape = -7;  // poisoned: the library copied the shape
  free(shape);
  ti.ndim = to.ndim = 99;
  return e;
}

typedef struct {
  async_wait *w;
  async_call *calls;
  int first, count;
} async_thread_arg;

static void *async_thread(void *p) {
  async_thread_arg *a = p;
  for (int i = 0; i < a->count; i++) {
    async_call *c = &a->calls[a->first + i];
    c->w = a->w;
    c->n = 1 + (a->first + i) % 256;
    callbox_error *e = async_start(host, 0, (a->first + i) % 2 ? "copy_f32" : "copy_wasmtime", c, a->first + i);
    if (e != NULL) {
      report("async_many_start", e);
      pthread_mutex_lock(&a->w->mu);
      a->w->calls++;  // counted, as wrong
      a->w->wrong++;
      pthread_mutex_unlock(&a->w->mu);
    }
  }
  return NULL;
}

// group_async drives callbox_call_async: 400 calls from 4 threads on both
// engines, each done once with its own right output; refusals (no done
// called); an unknown callback; cancel; a host closed while a call is in
// flight (close waits for it); a done function that closes its host.
static void group_async(const char *cfg) {
  enum { THREADS = 4, PER = 100 };
  static async_call calls[THREADS * PER];
  async_wait w;
  async_init(&w);
  pthread_t th[THREADS];
  async_thread_arg args[THREADS];
  for (int t = 0; t < THREADS; t++) {
    args[t] = (async_thread_arg){&w, calls, t * PER, PER};
    pthread_create(&th[t], NULL, async_thread, &args[t]);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  async_wait_for(&w, THREADS * PER);
  struct timespec d = {0, 50 * 1000 * 1000};
  nanosleep(&d, NULL);  // a second done would land here
  val("async_many", "%d calls %d wrong", w.calls, w.wrong);
  report("async_many_err", w.err);
  w.err = NULL;

  // Refused at once: done never called.
  async_call c;
  async_wait w1;
  async_init(&w1);
  c.w = &w1;
  c.n = 4;
  report("async_unknown_callback", async_start(host, 0, "no_such", &c, 1));
  report("async_bad_host", async_start(987654, 0, "copy_f32", &c, 1));
  report("async_bad_token", async_start(host, 987654, "copy_f32", &c, 1));
  {
    int64_t n = 4;
    callbox_tensor ti = f32(c.x, 1, &n), to = f32(c.y, 1, &n);
    report("async_null_done", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, NULL, NULL));
    ti.ndim = -1;
    report("async_bad_tensor", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 1, async_done, &c));
    ti.ndim = 1;
    // A wrong count is the callback's to judge: reported through done.
    report("async_wrong_count_start", callbox_call_async(host, 0, NULL, "copy_f32", &ti, 1, &to, 0, async_done, &c));
    async_wait_for(&w1, 1);
    report("async_wrong_count", w1.err);
    w1.err = NULL;
  }
  nanosleep(&d, NULL);
  val("async_refused_done_calls", "%d", w1.calls);

  // A guest error through done, with no output byte written.
  async_wait w2;
  async_init(&w2);
  c.w = &w2;
  report("async_fail_start", async_start(host, 0, "fail", &c, 2));
  async_wait_for(&w2, 1);
  report("async_fail", w2.err);
  CHECK(c.y[0] == -1 && c.y[3] == -1, "a failed async call wrote its output");

  // Cancel: a 5 s spinner canceled 100 ms in.
  callbox_cancel_token tok = 0;
  report("async_cancel_new", callbox_cancel_token_new(&tok));
  async_wait w3;
  async_init(&w3);
  c.w = &w3;
  double t0 = now_ms();
  report("async_cancel_start", async_start(host, tok, "spin_long", &c, 3));
  struct timespec hundred = {0, 100 * 1000 * 1000};
  nanosleep(&hundred, NULL);
  report("async_cancel_fire", callbox_cancel_token_fire(tok));
  async_wait_for(&w3, 1);
  val("async_cancel_ms", "%.0f", now_ms() - t0);
  report("async_cancel", w3.err);
  CHECK(c.y[0] == -1, "a canceled async call wrote its output");
  report("async_cancel_free", callbox_cancel_token_free(tok));

  // Close while a call is in flight: close waits for it (spin times out
  // at 250 ms), then the host is closed.
  callbox_host h2 = 0;
  report("async_open_2", callbox_open(cfg, &h2));
  async_wait w4;
  async_init(&w4);
  c.w = &w4;
  t0 = now_ms();
  report("async_close_start", async_start(h2, 0, "spin", &c, 4));
  report("async_close", callbox_close(h2));
  val("async_close_ms", "%.0f", now_ms() - t0);
  async_wait_for(&w4, 1);
  report("async_in_flight_at_close", w4.err);
  report("async_after_close", async_start(h2, 0, "copy_f32", &c, 5));

  // done may close the host it was called for.
  callbox_host h3 = 0;
  report("async_open_3", callbox_open(cfg, &h3));
  async_wait w5;
  async_init(&w5);
  w5.close_in_done = h3;
  c.w = &w5;
  report("async_done_close_start", async_start(h3, 0, "copy_f32", &c, 6));
  async_wait_for(&w5, 1);
  val("async_done_close_calls", "%d %d", w5.calls, w5.wrong);
  report("async_after_done_close", async_start(h3, 0, "copy_f32", &c, 7));
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_seen[512];
static int log_lines;
static void on_log(void *user, int32_t level, const char *callback, const char *message) {
  pthread_mutex_lock(&log_mu);
  log_lines++;
  snprintf(log_seen, sizeof log_seen, "%s|%d|%s|%s", (const char *)user, level, callback, message);
  pthread_mutex_unlock(&log_mu);
}

// group_log routes guest log lines to a C callback, then back to stderr.
static void group_log(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  report("log_set", callbox_set_log_callback(on_log, "user", CALLBOX_LOG_INFO));
  report("log_call", callbox_call(host, "say", &ti, 1, &to, 1));
  val("log_seen", "%d %s", log_lines, log_seen);
  report("log_debug_only", callbox_set_log_callback(on_log, "user", CALLBOX_LOG_ERROR));
  report("log_call_2", callbox_call(host, "say", &ti, 1, &to, 1));
  val("log_lines_after_error_level", "%d", log_lines);
  report("log_clear", callbox_set_log_callback(NULL, NULL, 0));
  report("log_call_3", callbox_call(host, "say", &ti, 1, &to, 1));
  val("log_lines_after_clear", "%d", log_lines);
}

// group_lazy runs one XLA call on the default host, which comes from
// CALLBOX_CONFIG (or is missing).
static void group_lazy(void) {
  float x[3] = {1, 2, 3}, y[3] = {0};
  int64_t n = 3;
  xbuf a = {11, x, 1, &n, 0}, r = {11, y, 1, &n, 0};
  val("lazy_cuda_before", "%lld", (long long)callbox_cuda_stats(NULL, 0));
  xcall("lazy", "copy_f32", &a, 1, &r, 1);
  val("lazy", "%g", y[2]);
  val("lazy_cuda_after", "%d", callbox_cuda_stats(NULL, 0) > 0);
  callbox_host h = 0;
  report("default_host", callbox_default_host(&h));
  if (h != 0) {
    // The lazily opened host has its callback infos, as an opened one does.
    callbox_callback_info info;
    memset(&info, 0, sizeof info);
    report("default_host_info", callbox_callback_at(h, 0, &info));
    val("default_host_info", "%s", info.name != NULL ? info.name : "(null)");
  }
}

// batch_check reports a failed batched call under label: which element,
// and whether the output kept its sentinel.
static void batch_check(const char *label, callbox_error *e, const float *y, int n) {
  int untouched = 1;
  for (int i = 0; i < n; i++) untouched &= y[i] == -7;
  CHECK(e != NULL, "%s: the batch did not fail", label);
  if (e == NULL) return;
  val(label, "%llu of %llu untouched %d", (unsigned long long)e->batch_element, (unsigned long long)e->batch_size,
      untouched);
  report(label, e);
}

// group_request drives callbox_request_run and callbox_request_async (1.7):
// a plain, a chained and a batched request; a budget that runs out (a
// TIMEOUT, the output untouched); the host's bounds (a budget past an
// hour, a budget on a batch); the sized struct (too small, a bigger
// caller's zero tail accepted and a non-zero one refused, reserved and
// unknown flags refused, NULL); an asynchronous request whose struct and
// shape are gone when it runs.
static void group_request(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t n = 4;
  callbox_tensor ti = f32(x, 1, &n), to = f32(y, 1, &n);
  callbox_request r;
  memset(&r, 0, sizeof r);
  r.size = sizeof r;
  r.callback = "copy_f32";
  r.inputs = &ti;
  r.num_inputs = 1;
  r.outputs = &to;
  r.num_outputs = 1;
  report("request_ok", callbox_request_run(host, &r));
  val("request_ok", "%g %g", y[0], y[3]);
  y[0] = y[3] = 9;
  r.chain = "rq";
  report("request_chain", callbox_request_run(host, &r));
  val("request_chain", "%g %g", y[0], y[3]);
  r.chain = NULL;

  enum { B = 8, N = 4 };
  float bx[B * N], by[B * N];
  int64_t shape[2] = {B, N};
  callbox_tensor bti = f32(bx, 2, shape), bto = f32(by, 2, shape);
  for (int i = 0; i < B * N; i++) bx[i] = (float)i, by[i] = -7;
  callbox_request b = r;
  b.callback = "nonneg_par";
  b.inputs = &bti;
  b.outputs = &bto;
  b.flags = CALLBOX_REQUEST_BATCH;
  report("request_batch", callbox_request_run(host, &b));
  val("request_batch", "%d", memcmp(bx, by, sizeof bx) == 0);
  b.budget_ns = 1000000000ull;
  report("request_batch_budget", callbox_request_run(host, &b));

  callbox_request s = r;
  s.callback = "spin_long";
  s.budget_ns = 20000000ull;
  y[0] = y[3] = 9;
  double t0 = now_ms();
  report("request_budget", callbox_request_run(host, &s));
  val("request_budget", "%.0f %g %g", now_ms() - t0, y[0], y[3]);
  s.budget_ns = 2ull * 3600 * 1000000000ull;
  report("request_budget_huge", callbox_request_run(host, &s));
  s.budget_ns = UINT64_MAX;
  report("request_budget_max", callbox_request_run(host, &s));

  callbox_request small = r;
  small.size = 8;
  report("request_small", callbox_request_run(host, &small));
  struct {
    callbox_request r;
    uint64_t later;
  } big;
  memset(&big, 0, sizeof big);
  big.r = r;
  big.r.size = sizeof big;
  report("request_bigger_zero", callbox_request_run(host, &big.r));
  big.later = 1;
  report("request_bigger_set", callbox_request_run(host, &big.r));
  callbox_request odd = r;
  odd.reserved = 1;
  report("request_reserved", callbox_request_run(host, &odd));
  odd = r;
  odd.flags = 2;
  report("request_flags", callbox_request_run(host, &odd));
  report("request_null", callbox_request_run(host, NULL));

  async_call c;
  async_wait w;
  async_init(&w);
  c.w = &w;
  c.n = 4;
  for (int i = 0; i < 4; i++) c.x[i] = (float)(10 + i), c.y[i] = -1;
  int64_t *ashape = malloc(sizeof *ashape);
  *ashape = 4;
  callbox_tensor *at = malloc(2 * sizeof *at);
  at[0] = f32(c.x, 1, ashape);
  at[1] = f32(c.y, 1, ashape);
  callbox_request *ar = malloc(sizeof *ar);
  memset(ar, 0, sizeof *ar);
  ar->size = sizeof *ar;
  ar->callback = "copy_f32";
  ar->inputs = &at[0];
  ar->num_inputs = 1;
  ar->outputs = &at[1];
  ar->num_outputs = 1;
  report("request_async_start", callbox_request_async(host, ar, async_done, &c));
  memset(ar, 0xAB, sizeof *ar);  // poisoned: the library copied what it needs
  free(ar);
  *ashape = -7;
  free(ashape);
  free(at);
  async_wait_for(&w, 1);
  val("request_async", "%d calls %d wrong", w.calls, w.wrong);
  report("request_async", w.err);
  report("request_async_null_done", callbox_request_async(host, &r, NULL, NULL));
}

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

static void group_doors(const char *cfg) {
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

static void group_batch(void) {
  enum { B = 8, N = 4 };
  float x[B * N], y[B * N];
  int64_t shape[2] = {B, N};
  callbox_tensor ti = f32(x, 2, shape), to = f32(y, 2, shape);
  for (int i = 0; i < B * N; i++) x[i] = (float)i, y[i] = -7;
  report("batch_ok", callbox_call_batch(host, 0, NULL, "nonneg_par", &ti, 1, &to, 1));
  int par_ok = memcmp(x, y, sizeof x) == 0;
  for (int i = 0; i < B * N; i++) y[i] = -7;
  report("batch_seq_ok", callbox_call_batch(host, 0, NULL, "nonneg_seq", &ti, 1, &to, 1));
  val("batch_results", "%d %d", par_ok, memcmp(x, y, sizeof x) == 0);
  int64_t none[2] = {0, N};
  callbox_tensor te = f32(x, 2, none), toe = f32(y, 2, none);
  report("batch_empty", callbox_call_batch(host, 0, NULL, "nonneg_par", &te, 1, &toe, 1));

  // Elements 5 and 6 fail: 5 is reported, and nothing is written.
  for (int i = 0; i < B * N; i++) y[i] = -7;
  x[5 * N] = -1, x[6 * N] = -2;
  batch_check("batch_fail", callbox_call_batch(host, 0, NULL, "nonneg_par", &ti, 1, &to, 1), y, B * N);
  batch_check("batch_seq_fail", callbox_call_batch(host, 0, NULL, "nonneg_seq", &ti, 1, &to, 1), y, B * N);
  batch_check("batch_chain_fail", callbox_call_batch(host, 0, "bc", "nonneg_par", &ti, 1, &to, 1), y, B * N);

  int64_t bad[2] = {B - 1, N};
  callbox_tensor tb = f32(y, 2, bad);
  callbox_error *e = callbox_call_batch(host, 0, NULL, "nonneg_par", &ti, 1, &tb, 1);
  CHECK(e != NULL, "a batch with a short output ran");
  if (e != NULL) {
    val("batch_refused", "%llu", (unsigned long long)e->batch_size);
    report("batch_refused", e);
  }
  int64_t n = N;
  callbox_tensor t1 = f32(x, 1, &n), o1 = f32(y, 1, &n);
  e = callbox_call(host, "fail", &t1, 1, &o1, 1);
  CHECK(e != NULL, "fail did not fail");
  if (e != NULL) {
    val("plain_batch_size", "%llu", (unsigned long long)e->batch_size);
    callbox_error_free(e);
  }
  report("batch_bad_cancel", callbox_call_batch(host, 424242, NULL, "nonneg_par", &ti, 1, &to, 1));
}

// group_xlahost runs XLA calls with the attribute host
// (callbox_xla_host_attr): on a second host, on the default host named
// explicitly, and refused (a malformed value, an unknown handle, another
// load's tag, a closed host), and looks failures up through
// callbox_xla_failure, whatever text surrounds their token.
static void group_xlahost(const char *cfg) {
  callbox_host other = 0;
  report("xh_open", callbox_open(cfg, &other));
  char attr[CALLBOX_XLA_HOST_ATTR_SIZE], self[CALLBOX_XLA_HOST_ATTR_SIZE];
  report("xh_attr", callbox_xla_host_attr(other, attr, sizeof attr));
  report("xh_attr_self", callbox_xla_host_attr(host, self, sizeof self));
  val("xh_attr", "%s", attr);
  val("xh_attr_self", "%s", self);
  report("xh_attr_small", callbox_xla_host_attr(host, self, 4));
  report("xh_attr_null", callbox_xla_host_attr(host, NULL, 64));
  char scratch[CALLBOX_XLA_HOST_ATTR_SIZE];
  report("xh_attr_unknown", callbox_xla_host_attr(987654, scratch, sizeof scratch));

  // bump counts its calls, per host (max_instances 1): three on the other
  // host, then one on the default host named explicitly and one on the
  // default host, then one more on the other host through the C API.
  float x[2] = {1, 1};
  int64_t n = 2;
  int32_t count = 0;
  xbuf a = {11, x, 1, &n, 0}, r = {4, &count, 0, NULL, 0};  // S32[]
  int counts[5];
  for (int i = 0; i < 5; i++) {
    xattr attrs[2] = {{"callback", 4, "bump", 0}, {"host", 4, i < 3 ? attr : self, 0}};
    xframe f;
    xbuild(&f, 3, &a, 1, &r, 1, attrs, i < 4 ? 2 : 1);
    char label[32];
    snprintf(label, sizeof label, "xh_bump_%d", i);
    count = -1;
    xrun(label, &f);
    counts[i] = count;
  }
  callbox_tensor ti = f32(x, 1, &n), to = tensor(&count, CALLBOX_DL_INT, 32, 0, NULL);
  report("xh_bump_capi", callbox_call(other, "bump", &ti, 1, &to, 1));
  val("xh_counts", "%d %d %d %d %d %d", counts[0], counts[1], counts[2], counts[3], counts[4], count);

  // Refused values, each failure kept for callbox_xla_failure.
  char other_tag[CALLBOX_XLA_HOST_ATTR_SIZE];
  snprintf(other_tag, sizeof other_tag, "%s", attr);
  char *at = strchr(other_tag, '@');
  if (at != NULL) at[1] = at[1] == '0' ? '1' : '0';  // the same handle, another tag
  char unknown[CALLBOX_XLA_HOST_ATTR_SIZE];
  snprintf(unknown, sizeof unknown, "987654%s", at != NULL ? strchr(attr, '@') : "@x");
  const char *bad[][2] = {{"xh_garbage", "garbage"}, {"xh_zero", "0@abc"}, {"xh_unknown", unknown},
                          {"xh_other_tag", other_tag}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    xattr attrs[2] = {{"callback", 4, "bump", 0}, {"host", 4, bad[i][1], 0}};
    xframe f;
    xbuild(&f, 3, &a, 1, &r, 1, attrs, 2);
    xrun(bad[i][0], &f);
    char label[64];
    snprintf(label, sizeof label, "%s_failure", bad[i][0]);
    xfailure(label);
  }

  report("xh_close", callbox_close(other));
  xattr attrs[2] = {{"callback", 4, "bump", 0}, {"host", 4, attr, 0}};
  xframe f;
  xbuild(&f, 3, &a, 1, &r, 1, attrs, 2);
  count = -1;
  xrun("xh_closed", &f);
  val("xh_closed_count", "%d", count);
  xfailure("xh_closed_failure");
  report("xh_attr_closed", callbox_xla_host_attr(other, scratch, sizeof scratch));

  // The token, whatever surrounds it, as long as the library keeps it.
  static char around[(1 << 16) + 64];
  snprintf(around, sizeof around, "INTERNAL: %s\n(more text)", xla_last() != NULL ? xla_last() : "");
  xfailure_of("xh_failure_around", around);
  xfailure_of("xh_failure_again", around);
  xfailure_of("xh_failure_plain", "callbox GuestError: no token here");
  char foreign[128];
  const char *tag = strchr(attr, '@');
  snprintf(foreign, sizeof foreign, "[callbox error %s-1]", tag != NULL && tag[1] == '0' ? "10000000" : "00000000");
  xfailure_of("xh_failure_foreign", foreign);
  xfailure_of("xh_failure_unterminated", "[callbox error ");
  callbox_error *failure = NULL;
  report("xh_failure_null_message", callbox_xla_failure(NULL, &failure));
  CHECK(failure == NULL, "no failure for a NULL message");
  report("xh_failure_null_out", callbox_xla_failure("text", NULL));
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: harness CONFIG|- DIR GROUP...\n");
    return 2;
  }
  put64(fake_api, 0, sizeof fake_api);
  void *create = (void *)fake_error_create;
  memcpy(fake_api + 48, &create, 8);
  setvbuf(stdout, NULL, _IOLBF, 0);

  if (strcmp(argv[1], "-") != 0) {
    callbox_error *e = callbox_open(argv[1], &host);
    if (e != NULL) {
      report("open", e);
      return 1;
    }
    report("set_default", callbox_set_default_host(host));
  }
  for (int i = 3; i < argc; i++) {
    const char *g = argv[i];
    if (!strcmp(g, "version")) group_version();
    else if (!strcmp(g, "open")) group_open(argv[2]);
    else if (!strcmp(g, "list")) group_list();
    else if (!strcmp(g, "dtypes")) group_dtypes();
    else if (!strcmp(g, "shapes")) group_shapes();
    else if (!strcmp(g, "bad")) group_bad();
    else if (!strcmp(g, "chains")) group_chains();
    else if (!strcmp(g, "sigflags")) group_sigflags();
    else if (!strcmp(g, "batch")) group_batch();
    else if (!strcmp(g, "xla")) group_xla();
    else if (!strcmp(g, "threads")) group_threads();
    else if (!strcmp(g, "hostile")) group_hostile();
    else if (!strcmp(g, "smallstack")) group_smallstack(argv[1]);
    else if (!strcmp(g, "close")) group_close();
    else if (!strcmp(g, "lazy")) group_lazy();
    else if (!strcmp(g, "cuda")) group_cuda();
    else if (!strcmp(g, "both")) group_both(argv[2]);
    else if (!strncmp(g, "soak", 4)) group_soak(argv[1], atoi(g + 4));
    else if (!strcmp(g, "fork")) group_fork(argv[1]);
    else if (!strcmp(g, "cancel")) group_cancel();
    else if (!strcmp(g, "log")) group_log();
    else if (!strcmp(g, "async")) group_async(argv[1]);
    else if (!strcmp(g, "within")) group_within();
    else if (!strcmp(g, "request")) group_request();
    else if (!strcmp(g, "reload")) group_reload(argv[2]);
    else if (!strcmp(g, "doors")) group_doors(argv[1]);
    else if (!strcmp(g, "kinds")) group_kinds();
    else if (!strcmp(g, "params")) group_params();
    else if (!strcmp(g, "limits")) group_limits();
    else if (!strcmp(g, "xlahost")) group_xlahost(argv[1]);
    else {
      fprintf(stderr, "unknown group %s\n", g);
      return 2;
    }
  }
  printf("DONE\t%d\t%d\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
