// checked: y = sqrt(x), refusing NaN and negative elements with
// INVALID_ARGUMENT and a message naming the first bad one.
import { Frame, Status, fail, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("checked", "(x: f32[n]) -> f32[n]");
export function checked(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const n = x.length;
    for (let i = 0; i < n; i++) {
      const v = x[i];
      if (isNaN(v)) return fail(Status.INVALID_ARGUMENT, "x[" + i.toString() + "] is NaN");
      if (v < 0) {
        return fail(Status.INVALID_ARGUMENT, "x[" + i.toString() + "] = " + v.toString() + " is negative; checked computes sqrt, which needs x >= 0");
      }
    }
    const y = f.output<f32>(0);
    for (let i = 0; i < n; i++) y[i] = Mathf.sqrt(x[i]);
    return Status.OK;
  });
}
