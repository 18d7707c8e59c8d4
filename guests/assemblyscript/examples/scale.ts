// scale: y[i] = x[i] * factor, the hello world of guests/EXAMPLES.md.
import { Frame, Status, run, signature } from "../assembly";
export * from "../assembly/exports"; // callbox_abi_version, callbox_alloc, callbox_free, callbox_signatures

signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]");
export function scale(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const factor = f.input<f32>(1)[0]; // a rank-0 tensor holds one element
    const y = f.output<f32>(0);
    for (let i = 0, n = x.length; i < n; i++) y[i] = x[i] * factor;
    return Status.OK;
  });
}
