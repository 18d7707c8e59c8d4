// clip_unchecked = (x: f32[n], t: f32[]) -> f32[n]: clip.ts with the
// lengths checked once and the loop indexing with unchecked(), as the
// SDK's README advises for a hot loop (the benchmark times both).
import { Frame, Status, run, signature, fail } from "../assembly";
export * from "../assembly/exports";

signature("clip_unchecked", "(x: f32[n], t: f32[]) -> f32[n]");
export function clip_unchecked(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const t = f.input<f32>(1)[0];
    const x = f.input<f32>(0), y = f.output<f32>(0);
    const n = x.length;
    if (y.length != n) return fail(Status.INVALID_ARGUMENT, "y must have x's length");
    for (let i = 0; i < n; i++) unchecked(y[i] = Mathf.min(Mathf.max(unchecked(x[i]), 0), t));
    return Status.OK;
  });
}
