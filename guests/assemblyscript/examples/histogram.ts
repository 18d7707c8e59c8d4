// histogram: counts f32 values into the bins of ascending edges.
import { Frame, Status, run, signature } from "../assembly";
import { histogram as count } from "./shared/histogram";
export * from "../assembly/exports";

signature("histogram", "(values: f32[n], edges: f32[b]) -> s64[b]");
export function histogram(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    count<f32>(f.input<f32>(0), f.input<f32>(1), f.output<i64>(0));
    return Status.OK;
  });
}
