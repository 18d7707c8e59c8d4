// harness_host.c: a host and its callbacks through the C API: the
// version, the kinds table, opening (refusals, JSON), reloading, listing
// and finding callbacks, their parameters and limits, guest logs to a C
// callback, and closing.
#include "harness.h"

void group_version(void) {
  val("version", "%s %u", callbox_version(), callbox_version_number());
  CHECK(callbox_version_number() == CALLBOX_VERSION_MAJOR * 10000u + CALLBOX_VERSION_MINOR * 100u + CALLBOX_VERSION_PATCH,
        "version number %u", callbox_version_number());
}

// group_kinds prints callbox_kinds' table, one value per kind.
void group_kinds(void) {
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

// group_params reads callbox_callback_params: a callback's parameters
// (names, XLA dtype numbers, ranks), counted first; refusals.
void group_params(void) {
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

// group_limits reads callbox_callback_limits: the configured limits of a
// wazero and a wasmtime callback and the native stack a caller needs; a
// struct of a later, bigger version (the 1.5 fields filled, the rest left
// alone); refusals.
void group_limits(void) {
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

void group_open(const char *dir) {
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

// group_reload drives callbox_reload_config (1.7) on a host of its own:
// a changed callback takes its new limits, a new one appears, a removed
// one is unknown, an unchanged one serves throughout; infos read before a
// reload stay readable; a configuration that fails to load is refused and
// the old one keeps serving; a closed host refuses.
void group_reload(const char *dir) {
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

void group_list(void) {
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
void group_log(void) {
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

void group_close(void) {
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
