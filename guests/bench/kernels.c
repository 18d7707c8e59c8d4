/*
 * kernels.c — the callbox benchmark module (cmd/callbox/internal/bench, `callbox bench`).
 *
 * Each kernel is exported twice, both calling the same function of
 * kernels.h:
 *
 *   - as a callbox ABI v1 callback, written with the C SDK exactly like
 *     guests/c/examples (scale, matmul, softmax, with the signatures of
 *     guests/EXAMPLES.md);
 *   - as a raw entry point over plain guest pointers (scale_raw, matmul_raw,
 *     softmax_raw): what an embedder calls without callbox, writing inputs
 *     into guest memory (from callbox_alloc) itself.
 *
 * spin is a runaway guest for the timeout-accuracy measurement.
 */
#include "callbox.h"
#include "kernels.h"

CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]")
{
    callbox_f32 x, y;
    float factor;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_scalar_f32(frame, 1, &factor));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    kernel_scale(x.data, y.data, x.count, factor);
    return CALLBOX_OK;
}

CALLBOX_EXPORT(matmul, "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]")
{
    callbox_f32 a, b, c;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &a));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &b));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &c));
    kernel_matmul(a.data, b.data, c.data, callbox_dim(a, 0), callbox_dim(a, 1), callbox_dim(b, 1));
    return CALLBOX_OK;
}

CALLBOX_EXPORT(softmax, "(x: f32[b,n]) -> f32[b,n]")
{
    callbox_f32 x, y;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    kernel_softmax(x.data, y.data, callbox_rows(x), callbox_row_len(x));
    return CALLBOX_OK;
}

/* A runaway guest: loops until the host stops it. */
CALLBOX_EXPORT(spin, "(x: f32[n]) -> f32[n]")
{
    volatile uint32_t i = 0;
    (void)frame;
    for (;;)
        i++;
}

/* Raw entry points: plain pointers into guest memory, no frame. */
__attribute__((export_name("scale_raw"))) void scale_raw(uint32_t x, uint32_t y, uint32_t n, float factor)
{
    kernel_scale((const float *)(uintptr_t)x, (float *)(uintptr_t)y, n, factor);
}

__attribute__((export_name("matmul_raw"))) void matmul_raw(uint32_t a, uint32_t b, uint32_t c, uint32_t m, uint32_t k,
                                                          uint32_t n)
{
    kernel_matmul((const float *)(uintptr_t)a, (const float *)(uintptr_t)b, (float *)(uintptr_t)c, m, k, n);
}

__attribute__((export_name("softmax_raw"))) void softmax_raw(uint32_t x, uint32_t y, uint32_t rows, uint32_t n)
{
    kernel_softmax((const float *)(uintptr_t)x, (float *)(uintptr_t)y, rows, n);
}
