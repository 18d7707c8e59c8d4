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

/* y[i] = x[i] * factor: 64 floats per iteration (sixteen vectors, each
 * loaded, multiplied and stored before the next, so no engine needs more
 * than a few vector registers), then four at a time, then the last n % 4
 * one by one. Loads and stores take any alignment. The long body pays the
 * loop's own cost, which on wazero includes the metering check at every
 * loop header (sandbox/internal/meter), once per 256 bytes: measured with
 * `callbox bench` on the 64 KiB and 4 MiB scale workloads, SIMD zero-copy
 * over native Go went from 1.5x and 1.45x (16 floats per iteration) to 1.3x
 * and 1.15x (32) and 1.15x and 1.0x (64) on wazero; wasmtime was 0.6-0.8x
 * with each. */
BENCH_KERNEL static void kernel_scale_simd(const float *x, float *y, size_t n, float factor)
{
    v128_t f = wasm_f32x4_splat(factor);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        wasm_v128_store(y + i + 0, wasm_f32x4_mul(wasm_v128_load(x + i + 0), f));
        wasm_v128_store(y + i + 4, wasm_f32x4_mul(wasm_v128_load(x + i + 4), f));
        wasm_v128_store(y + i + 8, wasm_f32x4_mul(wasm_v128_load(x + i + 8), f));
        wasm_v128_store(y + i + 12, wasm_f32x4_mul(wasm_v128_load(x + i + 12), f));
        wasm_v128_store(y + i + 16, wasm_f32x4_mul(wasm_v128_load(x + i + 16), f));
        wasm_v128_store(y + i + 20, wasm_f32x4_mul(wasm_v128_load(x + i + 20), f));
        wasm_v128_store(y + i + 24, wasm_f32x4_mul(wasm_v128_load(x + i + 24), f));
        wasm_v128_store(y + i + 28, wasm_f32x4_mul(wasm_v128_load(x + i + 28), f));
        wasm_v128_store(y + i + 32, wasm_f32x4_mul(wasm_v128_load(x + i + 32), f));
        wasm_v128_store(y + i + 36, wasm_f32x4_mul(wasm_v128_load(x + i + 36), f));
        wasm_v128_store(y + i + 40, wasm_f32x4_mul(wasm_v128_load(x + i + 40), f));
        wasm_v128_store(y + i + 44, wasm_f32x4_mul(wasm_v128_load(x + i + 44), f));
        wasm_v128_store(y + i + 48, wasm_f32x4_mul(wasm_v128_load(x + i + 48), f));
        wasm_v128_store(y + i + 52, wasm_f32x4_mul(wasm_v128_load(x + i + 52), f));
        wasm_v128_store(y + i + 56, wasm_f32x4_mul(wasm_v128_load(x + i + 56), f));
        wasm_v128_store(y + i + 60, wasm_f32x4_mul(wasm_v128_load(x + i + 60), f));
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
