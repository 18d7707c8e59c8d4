// matmul_simd: matmul with WebAssembly SIMD (v128, f32x4). Row i of c is
// the sum over p of a[i,p] * (row p of b), four columns of c at a time and
// the last n % 4 columns one by one. Each c[i,j] is still accumulated in
// f32 in the order p = 0..k-1 with a separate multiply and add (simd128 has
// no fused multiply-add), so the results are bit for bit matmul's. Built
// with `--enable simd` (build.sh does so for every *_simd example).
import { Frame, Status, fail, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("matmul_simd", "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]");
export function matmul_simd(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const a = f.input<f32>(0), b = f.input<f32>(1);
    const c = f.output<f32>(0);
    const m = a.dim(0), k = a.dim(1), n = b.dim(1);
    // The host checked this against the signature already; checking it
    // here too keeps every raw load and store below inside the tensors.
    if (b.dim(0) != k || c.dim(0) != m || c.dim(1) != n) return fail(Status.INTERNAL, "matmul_simd: shapes disagree with the signature");
    const vectors = n & ~3;
    for (let i = 0; i < m; i++) {
      const ci = c.dataStart + ((<usize>i * <usize>n) << 2);
      memory.fill(ci, 0, <usize>n << 2);
      for (let p = 0; p < k; p++) {
        const aip = unchecked(a[i * k + p]);
        const av = f32x4.splat(aip);
        const bp = b.dataStart + ((<usize>p * <usize>n) << 2);
        for (let j = 0; j < vectors; j += 4) {
          const at = <usize>j << 2;
          v128.store(ci + at, f32x4.add(v128.load(ci + at), f32x4.mul(av, v128.load(bp + at))));
        }
        for (let j = vectors; j < n; j++) {
          const at = <usize>j << 2;
          store<f32>(ci + at, load<f32>(ci + at) + aip * load<f32>(bp + at));
        }
      }
    }
    return Status.OK;
  });
}
