//! `normalize = (x: f32[b,n]) -> f32[b,n]`: each row to zero mean and unit
//! variance, `y = (x - mean) / sqrt(var + 1e-5)`, the mean and the
//! (population) variance summed in f32 in index order, written as a Rust
//! user writes a reduction: iterators over the SDK's rows.

callbox::export!(normalize = "(x: f32[b,n]) -> f32[b,n]", |f| {
    let x = f.input::<f32>(0)?;
    let mut y = f.output::<f32>(0)?;
    for (x, y) in x.rows().zip(y.rows_mut()) {
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let var = x.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var + 1e-5).sqrt();
        for (y, &x) in y.iter_mut().zip(x) {
            *y = (x - mean) * inv;
        }
    }
    Ok(())
});
