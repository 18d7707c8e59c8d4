/*
 * kernels_simd.c — the simd128 kernels of callbox's benchmark suite
 * (cmd/callbox/internal/bench, `callbox bench`): scale and matmul as callbox
 * ABI v1 callbacks, with the signatures of guests/EXAMPLES.md, written
 * with wasm_simd128.h and compiled with -msimd128 into their own module
 * (guests/build/bench/kernels_simd.wasm), so kernels.wasm stays the MVP
 * build every other variant runs.
 *
 * They compute what kernels.h's kernel_scale and kernel_matmul compute, bit
 * for bit: each lane does the scalar multiply (and add), in the same order
 * (guests/examples' scale_simd and matmul_simd are the SDK versions).
 */
#include <wasm_simd128.h>

#include "callbox.h"

#define BENCH_KERNEL __attribute__((noinline))

/* y[i] = x[i] * factor: sixteen floats per iteration (four independent
 * vectors, so the loop's own overhead is paid once per 64 bytes), then
 * four at a time, then the last n % 4 one by one. Loads and stores take any
 * alignment. */
BENCH_KERNEL static void kernel_scale_simd(const float *x, float *y, size_t n, float factor)
{
    v128_t f = wasm_f32x4_splat(factor);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v128_t a = wasm_v128_load(x + i), b = wasm_v128_load(x + i + 4);
        v128_t c = wasm_v128_load(x + i + 8), d = wasm_v128_load(x + i + 12);
        wasm_v128_store(y + i, wasm_f32x4_mul(a, f));
        wasm_v128_store(y + i + 4, wasm_f32x4_mul(b, f));
        wasm_v128_store(y + i + 8, wasm_f32x4_mul(c, f));
        wasm_v128_store(y + i + 12, wasm_f32x4_mul(d, f));
    }
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(y + i, wasm_f32x4_mul(wasm_v128_load(x + i), f));
    for (; i < n; i++)
        y[i] = x[i] * factor;
}

/* c[m,n] = a[m,k] . b[k,n] in kernel_matmul's loop order (row i of c is the
 * sum over p of a[i,p] * row p of b), four columns at a time. */
BENCH_KERNEL static void kernel_matmul_simd(const float *a, const float *b, float *c, size_t m, size_t k, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        float *ci = c + i * n;
        for (size_t j = 0; j < n; j++)
            ci[j] = 0;
        for (size_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            v128_t av = wasm_f32x4_splat(aip);
            const float *bp = b + p * n;
            size_t j = 0;
            for (; j + 4 <= n; j += 4)
                wasm_v128_store(ci + j, wasm_f32x4_add(wasm_v128_load(ci + j), wasm_f32x4_mul(av, wasm_v128_load(bp + j))));
            for (; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]")
{
    callbox_f32 x, y;
    float factor;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_scalar_f32(frame, 1, &factor));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    kernel_scale_simd(x.data, y.data, x.count, factor);
    return CALLBOX_OK;
}

CALLBOX_EXPORT(matmul, "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]")
{
    callbox_f32 a, b, c;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &a));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &b));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &c));
    kernel_matmul_simd(a.data, b.data, c.data, callbox_dim(a, 0), callbox_dim(a, 1), callbox_dim(b, 1));
    return CALLBOX_OK;
}
