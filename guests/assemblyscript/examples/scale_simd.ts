// scale_simd: scale (y[i] = x[i] * factor) with WebAssembly SIMD (v128,
// f32x4), four lanes at a time, the last n % 4 elements one by one. Built
// with `--enable simd` (build.sh does so for every *_simd example). Each
// lane computes x[i] * factor as scale does: the results are bit for bit
// the same.
import { Frame, Status, fail, run, signature } from "../assembly";
export * from "../assembly/exports";

signature("scale_simd", "(x: f32[n], factor: f32[]) -> f32[n]");
export function scale_simd(frame: usize): Status {
  return run(frame, (f: Frame): Status => {
    const x = f.input<f32>(0);
    const factor = f.input<f32>(1)[0]; // a rank-0 tensor holds one element
    const y = f.output<f32>(0);
    const n = x.length;
    // The host checked this against the signature; checking it here too
    // keeps every raw load and store below inside the two tensors.
    if (y.length != n) return fail(Status.INTERNAL, "scale_simd: x and y lengths differ");
    const src = x.dataStart, dst = y.dataStart;
    const factors = f32x4.splat(factor);
    const vectors = n & ~3;
    // v128.load and v128.store take any address: the ABI's 16-byte buffer
    // alignment makes them fast, not legal.
    for (let i = 0; i < vectors; i += 4) {
      const at = <usize>i << 2;
      v128.store(dst + at, f32x4.mul(v128.load(src + at), factors));
    }
    for (let i = vectors; i < n; i++) unchecked(y[i] = unchecked(x[i]) * factor);
    return Status.OK;
  });
}
