//! `softmax = (x: f32[b,n]) -> f32[b,n]`: softmax over the last axis,
//! numerically stable (the row maximum is subtracted before `exp`).

callbox::export!(softmax = "(x: f32[b,n]) -> f32[b,n]", |f| {
    let x = f.input::<f32>(0)?;
    let mut y = f.output::<f32>(0)?;
    for (x, y) in x.rows().zip(y.rows_mut()) {
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for (y, &x) in y.iter_mut().zip(x) {
            *y = (x - max).exp();
            sum += *y;
        }
        for y in y.iter_mut() {
            *y /= sum;
        }
    }
    Ok(())
});
