//! `scale = (x: f32[n], factor: f32[]) -> f32[n]`: `y[i] = x[i] * factor`.

callbox::export!(scale = "(x: f32[n], factor: f32[]) -> f32[n]", |f| {
    let x = f.input::<f32>(0)?;
    let factor: f32 = f.scalar(1)?;
    let mut y = f.output::<f32>(0)?;
    for (y, x) in y.iter_mut().zip(x.iter()) {
        *y = x * factor;
    }
    Ok(())
});
