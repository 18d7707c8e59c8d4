/* deep = (x: f32[n]) -> f32[n], failing three calls deep: level1 calls
 * level2 calls level3, which hits __builtin_trap (an author's unchecked
 * invariant). The backtrace test checks that the failure names the three
 * functions, with DWARF's file and line. */
#include "callbox.h"

__attribute__((noinline)) static size_t level3(volatile size_t n)
{
    if (n < 1000000)
        __builtin_trap();
    return n;
}

__attribute__((noinline)) static size_t level2(size_t n) { return level3(n + 1) * 2; }

__attribute__((noinline)) static size_t level1(size_t n) { return level2(n + 1) * 3; }

CALLBOX_EXPORT(deep, "(x: f32[n]) -> f32[n]")
{
    callbox_f32 x, y;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    size_t n = level1(x.count);
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    for (size_t i = 0; i < x.count; i++)
        y.data[i] = x.data[i] * (float)n;
    return CALLBOX_OK;
}
