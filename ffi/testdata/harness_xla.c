// harness_xla.c: the XLA FFI side. Call frames built byte by byte at the
// offsets of shared/xla-ffi.md (with the fake api table whose
// Error_Create makes fake_errors), run through the CPU handler; the
// groups of XLA calls: xla, lazy (the default host) and xlahost (the
// host attribute).
#include "harness.h"

// ---- XLA call frames, byte by byte ----

// The fake XLA api table: 88 bytes, Error_Create in slot 0 (offset 48).
void *fake_error_create(void *args) {
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

uint8_t fake_api[88];

// xinit fills the fake XLA api table (Error_Create).
void xinit(void) {
  put64(fake_api, 0, sizeof fake_api);
  void *create = (void *)fake_error_create;
  memcpy(fake_api + 48, &create, 8);
}

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
void xbuild(xframe *f, int stage, const xbuf *args, int nargs, const xbuf *rets, int nrets, const xattr *attrs,
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
int xrun_with(const char *label, xframe *f, xhandler handler) {
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
void xfailure_of(const char *label, const char *text) {
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
void xfailure(const char *label) { xfailure_of(label, xla_last() != NULL ? xla_last() : ""); }

// xrun calls the CPU handler.
int xrun(const char *label, xframe *f) { return xrun_with(label, f, callbox_xla_ffi); }

int xcall(const char *label, const char *callback, const xbuf *args, int nargs, const xbuf *rets, int nrets) {
  xframe f;
  xattr a = {"callback", 4, callback, 0};
  xbuild(&f, 3, args, nargs, rets, nrets, &a, 1);
  return xrun(label, &f);
}

// ---- the groups ----

void group_xla(void) {
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

// group_lazy runs one XLA call on the default host, which comes from
// CALLBOX_CONFIG (or is missing).
void group_lazy(void) {
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

// group_xlahost runs XLA calls with the attribute host
// (callbox_xla_host_attr): on a second host, on the default host named
// explicitly, and refused (a malformed value, an unknown handle, another
// load's tag, a closed host), and looks failures up through
// callbox_xla_failure, whatever text surrounds their token.
void group_xlahost(const char *cfg) {
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
