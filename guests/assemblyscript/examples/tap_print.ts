// tap_print: passes x through unchanged (the output aliases it) and logs
// one line about it, like jax.debug.print or an io_callback tap.
import { Frame, Status, log, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("tap_print", "(x: f32[n]) -> $x");
export function tap_print(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const n = x.length;
    if (n == 0) {
      log.info("tap_print: n=0");
      return Status.OK;
    }
    let lo = x[0], hi = x[0], sum = 0.0;
    for (let i = 0; i < n; i++) {
      const v = x[i];
      lo = Mathf.min(lo, v);
      hi = Mathf.max(hi, v);
      sum += v;
    }
    const mean = <f32>(sum / n);
    log.info("tap_print: n=" + n.toString() + " min=" + lo.toString() + " max=" + hi.toString() + " mean=" + mean.toString());
    return Status.OK;
  });
}
