/* scale = (x: f32[n], factor: f32[]) -> f32[n]: y[i] = x[i] * factor. */
#include "callbox.h"

CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]")
{
    callbox_f32 x, y;
    float factor;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_scalar_f32(frame, 1, &factor));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    for (size_t i = 0; i < x.count; i++)
        y.data[i] = x.data[i] * factor;
    return CALLBOX_OK;
}
