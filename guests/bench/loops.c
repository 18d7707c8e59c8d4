/*
 * loops.c — the users' kernels' loops without any SDK or frame, for the
 * benchmark's "where the time goes" measurement (bench/userkernels.go):
 * each loop runs raw on a plain engine (wazero unmetered and metered,
 * wasmtime with and without epoch interruption) beside Go's, so the cost
 * of the engine's code, of metering and of epochs can be told apart from
 * the SDKs'. Plain pointers into guest memory; reserve(bytes) grows memory
 * and returns the new region's offset.
 */
#include <stddef.h>
#include <stdint.h>

#define EXPORT(name) __attribute__((export_name(#name)))

EXPORT(reserve) uint32_t reserve(uint32_t bytes)
{
    size_t pages = ((size_t)bytes + 65535) / 65536;
    size_t old = __builtin_wasm_memory_grow(0, pages);
    return old == (size_t)-1 ? 0 : (uint32_t)(old * 65536);
}

/* clip: y[i] = min(max(x[i], 0), t) with WebAssembly's f32.max / f32.min
 * (what AssemblyScript's Mathf.max / Mathf.min compile to). */
EXPORT(clip_raw) void clip_raw(const float *x, float *y, uint32_t n, float t)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = __builtin_wasm_min_f32(__builtin_wasm_max_f32(x[i], 0.0f), t);
}

/* digitize: guests/c/kernels/digitize.c's loop. */
EXPORT(digitize_raw) void digitize_raw(const float *x, uint32_t n, const float *edges, uint32_t k, int32_t *out)
{
    for (uint32_t i = 0; i < n; i++) {
        float v = x[i];
        uint32_t b = 0;
        if (v != v)
            b = k;
        else
            while (b < k && edges[b] <= v)
                b++;
        out[i] = (int32_t)b;
    }
}

/* normalize: guests/rust/kernels/normalize.rs's loops (f32 sums in index
 * order; sqrt is f32.sqrt). */
EXPORT(normalize_raw) void normalize_raw(const float *x, float *y, uint32_t rows, uint32_t n)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * n;
        float *out = y + (size_t)r * n;
        float sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += row[i];
        float mean = sum / (float)n;
        float ss = 0;
        for (uint32_t i = 0; i < n; i++)
            ss += (row[i] - mean) * (row[i] - mean);
        float inv = 1.0f / __builtin_sqrtf(ss / (float)n + 1e-5f);
        for (uint32_t i = 0; i < n; i++)
            out[i] = (row[i] - mean) * inv;
    }
}
