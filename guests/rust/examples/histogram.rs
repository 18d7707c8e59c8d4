//! `histogram = (values: f32[n], edges: f32[b]) -> s64[b]`: `counts[i]`
//! counts the values with `edges[i] <= v < edges[i+1]`, the last bin is
//! open-ended, and values below `edges[0]` or NaN are not counted. `edges`
//! is ascending.

callbox::export!(histogram = "(values: f32[n], edges: f32[b]) -> s64[b]", |f| {
    let values = f.input::<f32>(0)?;
    let edges = f.input::<f32>(1)?;
    let mut counts = f.output::<i64>(0)?;
    counts.fill(0);
    for &v in values.iter() {
        // The number of edges <= v is one past v's bin (0 for NaN).
        match edges.partition_point(|&e| e <= v) {
            0 => {}
            bin => counts[bin - 1] += 1,
        }
    }
    Ok(())
});
