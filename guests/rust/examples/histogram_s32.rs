//! `histogram_s32 = (values: s32[n], edges: s32[b]) -> s64[b]`: the
//! `histogram` example on s32 values.

callbox::export!(histogram_s32 = "(values: s32[n], edges: s32[b]) -> s64[b]", |f| {
    let values = f.input::<i32>(0)?;
    let edges = f.input::<i32>(1)?;
    let mut counts = f.output::<i64>(0)?;
    counts.fill(0);
    for &v in values.iter() {
        // The number of edges <= v is one past v's bin.
        match edges.partition_point(|&e| e <= v) {
            0 => {}
            bin => counts[bin - 1] += 1,
        }
    }
    Ok(())
});
