// harness_cuda.c: the CUDA XLA handler, on any machine: its fake api
// table (a made-up stream), the GPU entries failing cleanly (cuda), and
// the same failing frames through both handlers (both).
#include "harness.h"

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
void group_cuda(void) {
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
void group_both(const char *dir) {
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
