//! `deep = (x: f32[n]) -> f32[n]`, failing three calls deep: level1 calls
//! level2 calls level3, which panics. The backtrace test checks that the
//! failure names the three functions (demangled), with DWARF's file and
//! line in a debug build.

#[inline(never)]
fn level3(n: usize) -> usize {
    if n < 1_000_000 {
        panic!("level3: n = {} is too small", n);
    }
    n
}

#[inline(never)]
fn level2(n: usize) -> usize {
    level3(n + 1) * 2
}

#[inline(never)]
fn level1(n: usize) -> usize {
    level2(n + 1) * 3
}

callbox::export!(deep = "(x: f32[n]) -> f32[n]", |f| {
    let x = f.input::<f32>(0)?;
    let n = level1(x.len());
    let mut y = f.output::<f32>(0)?;
    for (y, &x) in y.iter_mut().zip(x.iter()) {
        *y = x * n as f32;
    }
    Ok(())
});
