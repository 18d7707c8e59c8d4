// matmul: c[i,j] = Σ_p a[i,p] * b[p,j], accumulated in f32 in the order
// p = 0..k-1 (k = 0 gives zeros).
import { Frame, Status, fail, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("matmul", "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]");
export function matmul(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const a = f.input<f32>(0), b = f.input<f32>(1);
    const c = f.output<f32>(0);
    const m = a.dim(0), k = a.dim(1), n = b.dim(1);
    // The host checked this against the signature already; checking it
    // here too makes every index below provably in range, so the inner
    // loop can skip the per-element bounds checks.
    if (b.dim(0) != k || c.dim(0) != m || c.dim(1) != n) return fail(Status.INTERNAL, "matmul: shapes disagree with the signature");
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s: f32 = 0;
        for (let p = 0; p < k; p++) s += unchecked(a[i * k + p]) * unchecked(b[p * n + j]);
        unchecked(c[i * n + j] = s);
      }
    }
    return Status.OK;
  });
}
