/*
 * callbox/format.h — the printf subset of callbox_format,
 * callbox_errorf and callbox_logf (callbox_vformat), the same in both
 * modes, with floats printed as the shortest text that reads back.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/format.h"
#endif

/* ---- Formatting --------------------------------------------------------- */

typedef struct callbox__out {
    char *p, *end; /* end leaves room for the NUL */
} callbox__out;

static inline void callbox__put(callbox__out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->p < o->end; i++)
        *o->p++ = s[i];
}

static inline void callbox__put_uint(callbox__out *o, uint64_t v, unsigned base)
{
    char tmp[20], *q = tmp + sizeof tmp;
    do {
        *--q = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    callbox__put(o, q, (size_t)(tmp + sizeof tmp - q));
}

/* Writes v as the fewest significant digits that read back as the same f32
 * (as Rust, Go and JavaScript print an f32): plain decimal for decimal
 * exponents -4..20, else d.ddde±x. */
CALLBOX__COLD static void callbox__put_float(callbox__out *o, double v)
{
    static const double p10[] = {1e1, 1e2, 1e4, 1e8, 1e16, 1e32, 1e64, 1e128, 1e256};
    if (v != v) {
        callbox__put(o, "NaN", 3);
        return;
    }
    if (v < 0 || (v == 0 && 1 / v < 0)) {
        callbox__put(o, "-", 1);
        v = -v;
    }
    if (v > 1.7976931348623157e308) {
        callbox__put(o, "inf", 3);
        return;
    }
    if (v == 0) {
        callbox__put(o, "0", 1);
        return;
    }
    /* v = m * 10^e with 1 <= m < 10. */
    int e = 0;
    double m = v;
    for (int i = 8; i >= 0; i--)
        if (m >= p10[i]) {
            m /= p10[i];
            e += 1 << i;
        }
    for (int i = 8; i >= 0; i--)
        if (m * p10[i] < 10) {
            m *= p10[i];
            e -= 1 << i;
        }
    /* The fewest significant digits (at most 9) that read back as the same
     * f32; 15 digits for a double that is not an f32. */
    int is_f32 = (double)(float)v == v;
    int max_digits = is_f32 ? 9 : 15;
    uint64_t digits = 0, scale = 1;
    int n = 1;
    for (;; n++, scale *= 10) {
        digits = (uint64_t)(m * (double)scale + 0.5);
        if (n == max_digits)
            break;
        double back = (double)digits / (double)scale; /* in [1, 10] */
        for (int i = 8, k = e < 0 ? -e : e; i >= 0; i--)
            if (k >= 1 << i) {
                back = e < 0 ? back / p10[i] : back * p10[i];
                k -= 1 << i;
            }
        if (is_f32 && (float)back == (float)v)
            break;
    }
    if (digits >= scale * 10) { /* 9.99.. rounded up to 10 */
        digits /= 10;
        e++;
    }
    char d[20];
    int len = 0;
    for (uint64_t s = scale; s; s /= 10)
        d[len++] = (char)('0' + digits / s % 10);
    while (len > 1 && d[len - 1] == '0')
        len--;
    if (e < -4 || e > 20) {
        callbox__put(o, d, 1);
        if (len > 1) {
            callbox__put(o, ".", 1);
            callbox__put(o, d + 1, (size_t)len - 1);
        }
        callbox__put(o, e < 0 ? "e-" : "e+", 2);
        callbox__put_uint(o, (uint64_t)(e < 0 ? -e : e), 10);
    } else if (e < 0) {
        callbox__put(o, "0.", 2);
        for (int i = -1; i > e; i--)
            callbox__put(o, "0", 1);
        callbox__put(o, d, (size_t)len);
    } else {
        for (int i = 0; i <= e; i++)
            callbox__put(o, i < len ? &d[i] : "0", 1);
        if (len > e + 1) {
            callbox__put(o, ".", 1);
            callbox__put(o, d + e + 1, (size_t)(len - e - 1));
        }
    }
}

CALLBOX__COLD static size_t callbox_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
    if (cap == 0)
        return 0;
    callbox__out o = {buf, buf + cap - 1};
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            callbox__put(&o, f, 1);
            continue;
        }
        f++;
        while (*f && (*f == '-' || *f == '+' || *f == ' ' || *f == '#' || *f == '.' ||
                      (*f >= '0' && *f <= '9')))
            f++; /* flags, width, precision: ignored */
        int size = 0; /* 0 int, 1 long, 2 long long, 3 size_t, 4 intmax_t, 5 ptrdiff_t */
        while (*f == 'h')
            f++;
        if (f[0] == 'l' && f[1] == 'l')
            size = 2, f += 2;
        else if (*f == 'l')
            size = 1, f++;
        else if (*f == 'z')
            size = 3, f++;
        else if (*f == 'j')
            size = 4, f++;
        else if (*f == 't')
            size = 5, f++;
        switch (*f) {
        case 'd':
        case 'i': {
            int64_t v = size == 0   ? va_arg(ap, int)
                        : size == 1 ? va_arg(ap, long)
                        : size == 2 ? va_arg(ap, long long)
                        : size == 3 ? (int64_t)va_arg(ap, size_t)
                        : size == 4 ? va_arg(ap, intmax_t)
                                    : va_arg(ap, ptrdiff_t);
            if (v < 0)
                callbox__put(&o, "-", 1);
            callbox__put_uint(&o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, 10);
            break;
        }
        case 'u':
        case 'x': {
            uint64_t v = size == 0   ? va_arg(ap, unsigned)
                         : size == 1 ? va_arg(ap, unsigned long)
                         : size == 2 ? va_arg(ap, unsigned long long)
                         : size == 3 ? va_arg(ap, size_t)
                         : size == 4 ? (uint64_t)va_arg(ap, intmax_t)
                                     : (uint64_t)va_arg(ap, ptrdiff_t);
            callbox__put_uint(&o, v, *f == 'x' ? 16 : 10);
            break;
        }
        case 'p':
            callbox__put(&o, "0x", 2);
            callbox__put_uint(&o, (uintptr_t)va_arg(ap, void *), 16);
            break;
        case 'c': {
            char c = (char)va_arg(ap, int);
            callbox__put(&o, &c, 1);
            break;
        }
        case 's': {
            const char *s = va_arg(ap, const char *);
            s = s ? s : "(null)";
            callbox__put(&o, s, callbox__strlen(s));
            break;
        }
        case 'f':
        case 'e':
        case 'g':
        case 'F':
        case 'E':
        case 'G':
            callbox__put_float(&o, va_arg(ap, double));
            break;
        case '%':
            callbox__put(&o, "%", 1);
            break;
        case '\0':
            f--; /* a lone % at the end */
            break;
        default:
            callbox__put(&o, f - 1, 2);
        }
    }
    *o.p = '\0';
    return (size_t)(o.p - buf);
}
