// bounds: reads x[at] and writes y[at] with the SDK's checked indexing
// (guests/bounds_test.go): an index past the end must abort the call.
import { Frame, Status, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("read", "(x: f32[n], at: s32[]) -> f32[]");
export function read(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const y = f.output<f32>(0);
    y[0] = x[f.input<i32>(1)[0]];
    return Status.OK;
  });
}

signature("write", "(x: f32[n], at: s32[]) -> f32[n]");
export function write(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const y = f.output<f32>(0);
    for (let i = 0, n = x.length; i < n; i++) y[i] = x[i];
    y[f.input<i32>(1)[0]] = 1;
    return Status.OK;
  });
}
