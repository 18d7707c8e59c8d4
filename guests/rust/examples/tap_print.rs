//! `tap_print = (x: f32[n]) -> $x`: passes `x` through untouched (the host
//! returns the caller's own input) and logs one line about it.

callbox::export!(tap_print = "(x: f32[n]) -> $x", |f| {
    let x = f.input::<f32>(0)?;
    if x.is_empty() {
        callbox::info!("tap_print: n=0");
        return Ok(());
    }
    let (mut min, mut max, mut sum) = (f32::INFINITY, f32::NEG_INFINITY, 0f64);
    for &v in x.iter() {
        min = min.min(v);
        max = max.max(v);
        sum += f64::from(v);
    }
    let mean = (sum / x.len() as f64) as f32;
    callbox::info!("tap_print: n={} min={} max={} mean={}", x.len(), min, max, mean);
    Ok(())
});
