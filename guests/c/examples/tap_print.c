/* tap_print = (x: f32[n]) -> $x: passes x through untouched (the host
 * returns the caller's own input) and logs one line about it. */
#include "callbox.h"

CALLBOX_EXPORT(tap_print, "(x: f32[n]) -> $x")
{
    callbox_f32 x;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    if (x.count == 0) {
        callbox_log(CALLBOX_INFO, "tap_print: n=0");
        return CALLBOX_OK;
    }
    float min = x.data[0], max = x.data[0];
    double sum = 0;
    for (size_t i = 0; i < x.count; i++) {
        float v = x.data[i];
        min = v < min ? v : min;
        max = v > max ? v : max;
        sum += v;
    }
    callbox_logf(CALLBOX_INFO, "tap_print: n=%zu min=%g max=%g mean=%g", x.count, min, max,
                 (float)(sum / (double)x.count));
    return CALLBOX_OK;
}
