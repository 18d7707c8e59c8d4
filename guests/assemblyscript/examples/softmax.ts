// softmax: row-wise softmax over the last axis, stable (the row max is
// subtracted before exp). The exponentials are summed in f64.
import { Frame, Status, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("softmax", "(x: f32[b,n]) -> f32[b,n]");
export function softmax(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const y = f.output<f32>(0);
    const rows = x.dim(0), n = x.dim(1);
    for (let r = 0; r < rows; r++) {
      const row = r * n;
      let m = -Infinity;
      for (let j = 0; j < n; j++) m = Math.max(m, x[row + j]);
      let sum = 0.0;
      for (let j = 0; j < n; j++) sum += Math.exp(x[row + j] - m);
      for (let j = 0; j < n; j++) y[row + j] = <f32>(Math.exp(x[row + j] - m) / sum);
    }
    return Status.OK;
  });
}
