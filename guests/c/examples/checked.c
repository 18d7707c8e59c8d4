/* checked = (x: f32[n]) -> f32[n]: y[i] = sqrt(x[i]), refusing NaN and
 * negative inputs with INVALID_ARGUMENT and a message naming the element. */
#include "callbox.h"

CALLBOX_EXPORT(checked, "(x: f32[n]) -> f32[n]")
{
    callbox_f32 x, y;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    /* Check everything first: a failed call writes nothing. */
    for (size_t i = 0; i < x.count; i++) {
        float v = x.data[i];
        if (callbox_isnan(v))
            return callbox_errorf(CALLBOX_INVALID_ARGUMENT, "x[%zu] is NaN", i);
        if (v < 0)
            return callbox_errorf(CALLBOX_INVALID_ARGUMENT,
                                  "x[%zu] = %g is negative; checked computes sqrt, which needs x >= 0", i, v);
    }
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    for (size_t i = 0; i < x.count; i++)
        y.data[i] = callbox_sqrtf(x.data[i]);
    return CALLBOX_OK;
}
