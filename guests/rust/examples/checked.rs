//! `checked = (x: f32[n]) -> f32[n]`: `y[i] = sqrt(x[i])`, refusing NaN and
//! negative inputs with INVALID_ARGUMENT and a message naming the element.

callbox::export!(checked = "(x: f32[n]) -> f32[n]", |f| {
    let x = f.input::<f32>(0)?;
    // Check everything first: a failed call writes nothing.
    for (i, &v) in x.iter().enumerate() {
        callbox::ensure!(!v.is_nan(), InvalidArgument, "x[{}] is NaN", i);
        callbox::ensure!(
            v >= 0.0,
            InvalidArgument,
            "x[{}] = {} is negative; checked computes sqrt, which needs x >= 0",
            i,
            v
        );
    }
    let mut y = f.output::<f32>(0)?;
    for (y, &x) in y.iter_mut().zip(x.iter()) {
        *y = x.sqrt();
    }
    Ok(())
});
