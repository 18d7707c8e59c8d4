/* matmul = (a: f32[m,k], b: f32[k,n]) -> f32[m,n]: c = a . b, accumulated
 * in f32. */
#include "callbox.h"

CALLBOX_EXPORT(matmul, "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]")
{
    callbox_f32 a, b, c;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &a));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &b));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &c));
    size_t m = callbox_dim(a, 0), k = callbox_dim(a, 1), n = callbox_dim(b, 1);
    /* Row i of c is the sum over p of a[i,p] * (row p of b): every inner
     * loop walks memory in order. */
    for (size_t i = 0; i < m; i++) {
        float *ci = c.data + i * n;
        for (size_t j = 0; j < n; j++)
            ci[j] = 0;
        for (size_t p = 0; p < k; p++) {
            float aip = a.data[i * k + p];
            const float *bp = b.data + p * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
    return CALLBOX_OK;
}
