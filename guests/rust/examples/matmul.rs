//! `matmul = (a: f32[m,k], b: f32[k,n]) -> f32[m,n]`: `c = a · b`,
//! accumulated in f32.

callbox::export!(matmul = "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]", |f| {
    let a = f.input::<f32>(0)?;
    let b = f.input::<f32>(1)?;
    let mut c = f.output::<f32>(0)?;
    // Row i of c is the sum over p of a[i,p] * (row p of b): every inner
    // loop walks memory in order.
    for (a, c) in a.rows().zip(c.rows_mut()) {
        c.fill(0.0);
        for (&a, b) in a.iter().zip(b.rows()) {
            for (c, &b) in c.iter_mut().zip(b) {
                *c += a * b;
            }
        }
    }
    Ok(())
});
