// deep = (x: f32[n]) -> f32[n], failing three calls deep: level1 calls
// level2 calls level3, which aborts (an author's assertion). The backtrace
// test checks that the failure names the three functions (a debug build:
// nothing is inlined).
import { Frame, Status, run, signature } from "../assembly";
export * from "../assembly/exports";

function level3(n: i32): i32 {
  assert(n >= 1000000, "level3: n is too small");
  return n;
}

function level2(n: i32): i32 {
  return level3(n + 1) * 2;
}

function level1(n: i32): i32 {
  return level2(n + 1) * 3;
}

signature("deep", "(x: f32[n]) -> f32[n]");
export function deep(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const n = level1(x.length);
    const y = f.output<f32>(0);
    for (let i = 0; i < x.length; i++) y[i] = x[i] * <f32>n;
    return Status.OK;
  });
}
