// clip = (x: f32[n], t: f32[]) -> f32[n]: a clipped ReLU,
// y[i] = min(max(x[i], 0), t), written as an AssemblyScript user writes an
// elementwise kernel: checked indexing and Mathf.min / Mathf.max.
import { Frame, Status, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("clip", "(x: f32[n], t: f32[]) -> f32[n]");
export function clip(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const t = f.input<f32>(1)[0];
    const y = f.output<f32>(0);
    for (let i = 0, n = x.length; i < n; i++) y[i] = Mathf.min(Mathf.max(x[i], 0), t);
    return Status.OK;
  });
}
