/* histogram_s32 = (values: s32[n], edges: s32[b]) -> s64[b]: the
 * histogram example on s32 values. */
#include "callbox.h"

CALLBOX_EXPORT(histogram_s32, "(values: s32[n], edges: s32[b]) -> s64[b]")
{
    callbox_s32 values, edges;
    callbox_s64 counts;
    CALLBOX_TRY(callbox_input_s32(frame, 0, &values));
    CALLBOX_TRY(callbox_input_s32(frame, 1, &edges));
    CALLBOX_TRY(callbox_output_s64(frame, 0, &counts));
    for (size_t i = 0; i < counts.count; i++)
        counts.data[i] = 0;
    for (size_t i = 0; i < values.count; i++) {
        int32_t v = values.data[i];
        /* Binary search for the number of edges <= v: one past v's bin. */
        size_t lo = 0, hi = edges.count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (edges.data[mid] <= v)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0)
            counts.data[lo - 1]++;
    }
    return CALLBOX_OK;
}
