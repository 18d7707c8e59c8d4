// harness_calls.c: calls through the C API: every dtype (beside the XLA
// handler), shapes and strides, refused arguments, chains and batches.
#include "harness.h"

// ---- dtypes: the kit's copy_<name> callbacks, one a dtype ----

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

void group_dtypes(void) {
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

void group_shapes(void) {
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

void group_bad(void) {
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

void group_chains(void) {
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

void group_batch(void) {
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
