/* smooth = (x: f32[n]) -> f32[n]: scales x to [0, 1], then replaces each
 * value by the median of the 9 around it. A real slow callback: the
 * median sorts every window again (insertion sort, ~40 comparisons per
 * value) where normalize passes over x twice. The guide for callback
 * authors (docs/AUTHORS.md) profiles it; the guests' tests check that the
 * profile says where its time goes. */
#include "callbox.h"

#define WINDOW 9

__attribute__((noinline)) static void normalize(const float *x, float *y, size_t n)
{
    float lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float scale = hi > lo ? 1.0f / (hi - lo) : 0.0f;
    for (size_t i = 0; i < n; i++)
        y[i] = (x[i] - lo) * scale;
}

__attribute__((noinline)) static float median(const float *y, size_t n, size_t at)
{
    float w[WINDOW];
    size_t k = 0;
    for (size_t j = at >= WINDOW / 2 ? at - WINDOW / 2 : 0; j < n && j <= at + WINDOW / 2; j++) {
        size_t m = k++;
        while (m > 0 && w[m - 1] > y[j]) {
            w[m] = w[m - 1];
            m--;
        }
        w[m] = y[j];
    }
    return w[k / 2];
}

CALLBOX_EXPORT(smooth, "(x: f32[n]) -> f32[n]")
{
    callbox_f32 x, y;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    if (x.count == 0)
        return CALLBOX_OK;
    normalize(x.data, y.data, x.count);
    float tmp[WINDOW];
    for (size_t i = 0; i < x.count; i++) {
        float v = median(y.data, x.count, i);
        tmp[i % WINDOW] = v;
        if (i >= WINDOW / 2)
            y.data[i - WINDOW / 2] = tmp[(i - WINDOW / 2) % WINDOW];
    }
    for (size_t i = x.count > WINDOW / 2 ? x.count - WINDOW / 2 : 0; i < x.count; i++)
        y.data[i] = tmp[i % WINDOW];
    return CALLBOX_OK;
}
