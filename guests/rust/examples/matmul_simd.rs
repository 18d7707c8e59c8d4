//! `matmul_simd = (a: f32[m,k], b: f32[k,n]) -> f32[m,n]`: `matmul` with
//! wasm simd128 intrinsics (`core::arch::wasm32`). The loop order is
//! `matmul`'s (row i of c is the sum over p of a[i,p] * row p of b), with
//! the innermost loop over four columns of c at a time and the last
//! `n % 4` columns one by one. Every element is still accumulated in f32
//! in the order p = 0..k-1, with a separate multiply and add (wasm has no
//! fused multiply-add in simd128), so the results are bit for bit
//! `matmul`'s.

use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};

callbox::export!(matmul_simd = "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]", |f| {
    let a = f.input::<f32>(0)?;
    let b = f.input::<f32>(1)?;
    let mut c = f.output::<f32>(0)?;
    for (a, c) in a.rows().zip(c.rows_mut()) {
        c.fill(0.0);
        for (&a, b) in a.iter().zip(b.rows()) {
            let av = f32x4_splat(a);
            let mut cs = c.chunks_exact_mut(4);
            let mut bs = b.chunks_exact(4);
            for (c4, b4) in (&mut cs).zip(&mut bs) {
                // SAFETY: each chunk is exactly four f32s (16 bytes) of a
                // live slice; v128_load and v128_store accept any alignment.
                unsafe {
                    let p = c4.as_mut_ptr() as *mut v128;
                    let prod = f32x4_mul(av, v128_load(b4.as_ptr() as *const v128));
                    v128_store(p, f32x4_add(v128_load(p), prod));
                }
            }
            for (c, &b) in cs.into_remainder().iter_mut().zip(bs.remainder()) {
                *c += a * b;
            }
        }
    }
    Ok(())
});
