//! `scale_simd = (x: f32[n], factor: f32[]) -> f32[n]`: `scale` with wasm
//! simd128 intrinsics (`core::arch::wasm32`), four lanes at a time, the
//! last `n % 4` elements one by one. Built with `-C target-feature=+simd128`
//! (guests/rust/build.sh does so for every `*_simd` example). Each lane
//! computes `x[i] * factor` as `scale` does: the results are bit for bit
//! the same.

use core::arch::wasm32::{f32x4_mul, f32x4_splat, v128, v128_load, v128_store};

callbox::export!(scale_simd = "(x: f32[n], factor: f32[]) -> f32[n]", |f| {
    let x = f.input::<f32>(0)?;
    let factor: f32 = f.scalar(1)?;
    let mut y = f.output::<f32>(0)?;
    let factors = f32x4_splat(factor);
    let mut xs = x.chunks_exact(4);
    let mut ys = y.chunks_exact_mut(4);
    for (y4, x4) in (&mut ys).zip(&mut xs) {
        // SAFETY: each chunk is exactly four f32s (16 bytes) of a live
        // slice; v128_load and v128_store accept any alignment.
        unsafe {
            let v = v128_load(x4.as_ptr() as *const v128);
            v128_store(y4.as_mut_ptr() as *mut v128, f32x4_mul(v, factors));
        }
    }
    for (y, x) in ys.into_remainder().iter_mut().zip(xs.remainder()) {
        *y = x * factor;
    }
    Ok(())
});
