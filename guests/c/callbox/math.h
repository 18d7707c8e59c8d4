/*
 * callbox/math.h — callbox_sqrtf, callbox_fabsf, callbox_isnan and
 * callbox_expf: libm's with wasi-libc, wasm instructions or a small
 * exact-enough one without.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/math.h"
#endif

/* ---- Math --------------------------------------------------------------- */

static inline float callbox_sqrtf(float x) { return __builtin_sqrtf(x); } /* f32.sqrt */
static inline float callbox_fabsf(float x) { return __builtin_fabsf(x); } /* f32.abs */
static inline int callbox_isnan(double x) { return x != x; }

/* e^x, within 2 ulp without a libc: x = k ln2 + r with |r| <= ln2/2, e^r
 * by its Taylor polynomial to r^7 (error < 1e-8), then scaled by 2^k in two
 * steps so that subnormal results come out right. */
static inline float callbox_expf(float x)
{
#if CALLBOX_HOSTED
    return expf(x);
#else
    if (x != x)
        return x;
    if (x > 88.7228394f)
        return __builtin_inff();
    if (x < -103.972084f)
        return 0.0f;
    int k = (int)(x * 1.44269504f + (x < 0 ? -0.5f : 0.5f));
    float r = (x - (float)k * 0.693145752f) - (float)k * 1.42860677e-6f;
    float p = 1 + r * (1 + r * (1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
                                                 r * (1.0f / 720 + r * (1.0f / 5040)))))));
    int k1 = k / 2, k2 = k - k1;
    union { uint32_t u; float f; } s1 = {(uint32_t)(k1 + 127) << 23}, s2 = {(uint32_t)(k2 + 127) << 23};
    return p * s1.f * s2.f;
#endif
}
