/* digitize = (x: f32[n], edges: f32[k]) -> s32[n]: the bucket of each
 * value, like numpy.digitize with ascending edges: out[i] is the number of
 * edges <= x[i] (0 below the first edge, k at or above the last; NaN goes
 * to k). A linear scan that stops at the first edge above the value: a
 * data-dependent inner loop and branch per element, the shape of users'
 * bucketing, thresholding and lookup code. */
#include "callbox.h"

CALLBOX_EXPORT(digitize, "(x: f32[n], edges: f32[k]) -> s32[n]")
{
    callbox_f32 x, edges;
    callbox_s32 out;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &edges));
    CALLBOX_TRY(callbox_output_s32(frame, 0, &out));
    for (size_t i = 0; i < x.count; i++) {
        float v = x.data[i];
        size_t b = 0;
        if (v != v) {
            b = edges.count;
        } else {
            while (b < edges.count && edges.data[b] <= v)
                b++;
        }
        out.data[i] = (int32_t)b;
    }
    return CALLBOX_OK;
}
