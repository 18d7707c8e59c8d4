/* histogram = (values: f32[n], edges: f32[b]) -> s64[b]: counts[i] counts
 * the values with edges[i] <= v < edges[i+1], the last bin is open-ended,
 * and values below edges[0] or NaN are not counted. edges is ascending. */
#include "callbox.h"

CALLBOX_EXPORT(histogram, "(values: f32[n], edges: f32[b]) -> s64[b]")
{
    callbox_f32 values, edges;
    callbox_s64 counts;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &values));
    CALLBOX_TRY(callbox_input_f32(frame, 1, &edges));
    CALLBOX_TRY(callbox_output_s64(frame, 0, &counts));
    for (size_t i = 0; i < counts.count; i++)
        counts.data[i] = 0;
    for (size_t i = 0; i < values.count; i++) {
        float v = values.data[i];
        /* Binary search for the number of edges <= v: one past v's bin
         * (0 for NaN, which compares false). */
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
