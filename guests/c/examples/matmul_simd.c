/* matmul_simd = (a: f32[m,k], b: f32[k,n]) -> f32[m,n]: matmul with
 * WebAssembly SIMD (wasm_simd128.h). Row i of c is the sum over p of
 * a[i,p] * (row p of b), four columns of c at a time and the last n % 4
 * columns one by one. Each c[i,j] is still accumulated in f32 in the order
 * p = 0..k-1 with a separate multiply and add (simd128 has no fused
 * multiply-add), so the results are bit for bit matmul's. Built with
 * -msimd128 (build.sh does so for every *_simd example). */
#include <wasm_simd128.h>

#include "callbox.h"

CALLBOX_EXPORT(matmul_simd, "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]")
{
    callbox_f32 a, b, c;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &a));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &b));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &c));
    size_t m = callbox_dim(a, 0), k = callbox_dim(a, 1), n = callbox_dim(b, 1);
    for (size_t i = 0; i < m; i++) {
        float *ci = c.data + i * n;
        for (size_t j = 0; j < n; j++)
            ci[j] = 0;
        for (size_t p = 0; p < k; p++) {
            float aip = a.data[i * k + p];
            v128_t av = wasm_f32x4_splat(aip);
            const float *bp = b.data + p * n;
            size_t j = 0;
            for (; j + 4 <= n; j += 4)
                wasm_v128_store(ci + j, wasm_f32x4_add(wasm_v128_load(ci + j), wasm_f32x4_mul(av, wasm_v128_load(bp + j))));
            for (; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
    return CALLBOX_OK;
}
