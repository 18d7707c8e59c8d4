// histogram_s32: counts s32 values into the bins of ascending edges.
import { Frame, Status, run, signature } from "../assembly";
import { histogram } from "./shared/histogram";
export * from "../assembly/exports";

signature("histogram_s32", "(values: s32[n], edges: s32[b]) -> s64[b]");
export function histogram_s32(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    histogram<i32>(f.input<i32>(0), f.input<i32>(1), f.output<i64>(0));
    return Status.OK;
  });
}
