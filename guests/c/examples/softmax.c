/* softmax = (x: f32[b,n]) -> f32[b,n]: softmax over the last axis,
 * numerically stable (the row maximum is subtracted before exp). */
#include "callbox.h"

CALLBOX_EXPORT(softmax, "(x: f32[b,n]) -> f32[b,n]")
{
    callbox_f32 x, y;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    size_t rows = callbox_rows(x), n = callbox_row_len(x);
    for (size_t r = 0; r < rows; r++) {
        const float *in = x.data + r * n;
        float *out = y.data + r * n;
        float max = -__builtin_inff(), sum = 0;
        for (size_t i = 0; i < n; i++)
            max = in[i] > max ? in[i] : max;
        for (size_t i = 0; i < n; i++)
            sum += out[i] = callbox_expf(in[i] - max);
        for (size_t i = 0; i < n; i++)
            out[i] /= sum;
    }
    return CALLBOX_OK;
}
