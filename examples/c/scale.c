/* examples/c/scale.c: call the callback "scale" of callbox.yaml. */
#include <stdio.h>
#include <callbox.h>

/* report prints a failure and frees it; it returns whether there was one. */
static int report(callbox_error *err) {
  if (err == NULL) return 0;
  fprintf(stderr, "%s (code %d)\n", err->text, err->code); /* callback "scale" failed: timeout after 1s (code 4) */
  callbox_error_free(err);
  return 1;
}

int main(void) {
  callbox_host host;
  if (report(callbox_open("callbox.yaml", &host))) return 2;
  float x[4] = {1, 2, 3, 4}, factor = 2, y[4];
  int64_t n = 4;
  callbox_tensor in[2] = {
      {.data = x, .device = {CALLBOX_DEVICE_CPU, 0}, .ndim = 1, .dtype = {CALLBOX_DL_FLOAT, 32, 1}, .shape = &n},
      {.data = &factor, .device = {CALLBOX_DEVICE_CPU, 0}, .ndim = 0, .dtype = {CALLBOX_DL_FLOAT, 32, 1}},
  };
  callbox_tensor out = {.data = y, .device = {CALLBOX_DEVICE_CPU, 0}, .ndim = 1, .dtype = {CALLBOX_DL_FLOAT, 32, 1}, .shape = &n};
  int failed = report(callbox_call(host, "scale", in, 2, &out, 1));
  if (!failed) printf("%g %g %g %g\n", y[0], y[1], y[2], y[3]);
  report(callbox_close(host));
  return failed ? 3 : 0;
}
