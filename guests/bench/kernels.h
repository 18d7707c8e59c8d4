/*
 * kernels.h — the compute kernels of callbox's benchmark suite
 * (cmd/callbox/internal/bench, `callbox bench`), shared by both benchmark modules:
 *
 *   kernels.c         callbox ABI callbacks and raw entry points over plain
 *                     pointers, calling these very functions (noinline, so
 *                     both paths run the same machine code);
 *   kernels_extism.c  the same kernels as an Extism plugin.
 *
 * They are the algorithms of guests/c/examples (scale, matmul, softmax), in
 * plain C over pointers and lengths. Include callbox.h first: softmax uses
 * the SDK's callbox_expf.
 */
#ifndef CALLBOX_BENCH_KERNELS_H
#define CALLBOX_BENCH_KERNELS_H

#include <stddef.h>

#define BENCH_KERNEL __attribute__((noinline))

/* y[i] = x[i] * factor. */
BENCH_KERNEL static void kernel_scale(const float *x, float *y, size_t n, float factor)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * factor;
}

/* c[m,n] = a[m,k] . b[k,n], accumulated in f32; row i of c is the sum over
 * p of a[i,p] * (row p of b), so every inner loop walks memory in order. */
BENCH_KERNEL static void kernel_matmul(const float *a, const float *b, float *c, size_t m, size_t k, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        float *ci = c + i * n;
        for (size_t j = 0; j < n; j++)
            ci[j] = 0;
        for (size_t p = 0; p < k; p++) {
            float aip = a[i * k + p];
            const float *bp = b + p * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

/* Softmax over the last axis of x[rows,n], numerically stable. */
BENCH_KERNEL static void kernel_softmax(const float *x, float *y, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        const float *in = x + r * n;
        float *out = y + r * n;
        float max = -__builtin_inff(), sum = 0;
        for (size_t i = 0; i < n; i++)
            max = in[i] > max ? in[i] : max;
        for (size_t i = 0; i < n; i++)
            sum += out[i] = callbox_expf(in[i] - max);
        for (size_t i = 0; i < n; i++)
            out[i] /= sum;
    }
}

#endif /* CALLBOX_BENCH_KERNELS_H */
