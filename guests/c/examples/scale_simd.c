/* scale_simd = (x: f32[n], factor: f32[]) -> f32[n]: scale with WebAssembly
 * SIMD (wasm_simd128.h), four lanes at a time, the last n % 4 elements one
 * by one. Built with -msimd128 (build.sh does so for every *_simd example).
 * Each lane computes x[i] * factor as scale does: the results are bit for
 * bit the same. */
#include <wasm_simd128.h>

#include "callbox.h"

CALLBOX_EXPORT(scale_simd, "(x: f32[n], factor: f32[]) -> f32[n]")
{
    callbox_f32 x, y;
    float factor;
    CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
    CALLBOX_TRY(callbox_scalar_f32(frame, 1, &factor));
    CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
    v128_t factors = wasm_f32x4_splat(factor);
    size_t i = 0;
    /* wasm_v128_load and wasm_v128_store take any address: the ABI's
     * 16-byte buffer alignment makes them fast, not legal. */
    for (; i + 4 <= x.count; i += 4)
        wasm_v128_store(y.data + i, wasm_f32x4_mul(wasm_v128_load(x.data + i), factors));
    for (; i < x.count; i++)
        y.data[i] = x.data[i] * factor;
    return CALLBOX_OK;
}
