/*
 * callbox.h — write callbox tensor callbacks in C. Header-only; guest ABI v1
 * (abi/ABI.md in the callbox repository).
 *
 *     #include "callbox.h"
 *
 *     CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]") {
 *         callbox_f32 x, y;
 *         float factor;
 *         CALLBOX_TRY(callbox_input_f32(frame, 0, &x));
 *         CALLBOX_TRY(callbox_scalar_f32(frame, 1, &factor));
 *         CALLBOX_TRY(callbox_output_f32(frame, 0, &y));
 *         for (size_t i = 0; i < x.count; i++)
 *             y.data[i] = x.data[i] * factor;
 *         return CALLBOX_OK;
 *     }
 *
 * Two ways to build (see README.md):
 *
 *   with wasi-libc (malloc, printf, math.h; the host must grant `wasi: minimal`):
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-all scale.c -o scale.wasm
 *   freestanding (no libc, no imports but callbox.*):
 *     clang --target=wasm32 -nostdlib -O2 -Wl,--no-entry -Wl,--strip-all scale.c -o scale.wasm
 *
 * The header picks its mode from the target (__wasi__); define
 * CALLBOX_FREESTANDING to use its own allocator and math on wasm32-wasi too.
 * It may be included by several translation units of one module: what a
 * module needs once (the ABI exports, the heap, the signature list) is
 * defined weak.
 *
 * What it provides:
 *   - CALLBOX_EXPORT(name, signature) { ... }: exports a callback and
 *     registers its signature line for the `callbox_signatures` export;
 *   - frame validation on entry (magic, version, counts, ranges, dtype,
 *     rank, byte_len, 16-byte alignment) in one place, callbox__open;
 *   - typed views per dtype: callbox_input_f32(frame, i, &view),
 *     callbox_output_f32, callbox_scalar_f32, ... and shape helpers;
 *   - callbox_error/callbox_errorf (status + message), callbox_log/logf,
 *     callbox_panic, CALLBOX_ASSERT;
 *   - callbox_abi_version, callbox_alloc, callbox_free,
 *     callbox_signatures, and (freestanding) _initialize.
 */
#ifndef CALLBOX_H
#define CALLBOX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__wasm32__)
#error "callbox.h targets wasm32 (clang --target=wasm32-wasi or --target=wasm32)"
#endif

#if defined(__wasi__) && !defined(CALLBOX_FREESTANDING)
#define CALLBOX_HOSTED 1
#include <math.h>
#include <stdlib.h>
#else
#define CALLBOX_HOSTED 0
#endif

/* Bytes of a formatted error or log message; longer text is cut. */
#ifndef CALLBOX_MESSAGE_MAX
#define CALLBOX_MESSAGE_MAX 1024
#endif

#define CALLBOX_ABI_VERSION 1

#define CALLBOX__WEAK __attribute__((weak))
/* For the SDK's cold code (formatting, validation, allocation): optimised
 * for size whatever -O the callback is built with. */
#define CALLBOX__COLD __attribute__((minsize))
#define CALLBOX__EXPORT(name) __attribute__((weak, export_name(name)))

/* ---- Status, dtypes, log levels (ABI.md §3, §4) ------------------------ */

/* A callback's result. Only these values are valid; the SDK turns any
 * other value a callback returns into CALLBOX_INTERNAL. */
enum callbox_status {
    CALLBOX_OK = 0,
    CALLBOX_UNKNOWN = 2,
    CALLBOX_INVALID_ARGUMENT = 3,
    CALLBOX_RESOURCE_EXHAUSTED = 8,
    CALLBOX_FAILED_PRECONDITION = 9,
    CALLBOX_UNIMPLEMENTED = 12,
    CALLBOX_INTERNAL = 13,
};

/* Element types: XLA's PrimitiveType codes. */
typedef enum callbox_dtype {
    CALLBOX_PRED = 1,
    CALLBOX_S8 = 2,
    CALLBOX_S16 = 3,
    CALLBOX_S32 = 4,
    CALLBOX_S64 = 5,
    CALLBOX_U8 = 6,
    CALLBOX_U16 = 7,
    CALLBOX_U32 = 8,
    CALLBOX_U64 = 9,
    CALLBOX_F16 = 10,
    CALLBOX_F32 = 11,
    CALLBOX_F64 = 12,
    CALLBOX_C64 = 15,
    CALLBOX_BF16 = 16,
    CALLBOX_C128 = 18,
} callbox_dtype;

enum callbox_level {
    CALLBOX_DEBUG = 0,
    CALLBOX_INFO = 1,
    CALLBOX_WARN = 2,
    CALLBOX_ERROR = 3,
};

/* ---- Host imports (ABI.md §1) ------------------------------------------ */

__attribute__((import_module("callbox"), import_name("error")))
void callbox__host_error(const char *ptr, size_t len);
__attribute__((import_module("callbox"), import_name("log")))
void callbox__host_log(int32_t level, const char *ptr, size_t len);

/* ---- Errors, logs, panics ---------------------------------------------- */

/* no_builtin: without a libc, clang must not turn this loop into a call
 * to strlen (nor the loops of memset and friends into calls to themselves). */
#define CALLBOX__NO_BUILTIN __attribute__((no_builtin))

CALLBOX__NO_BUILTIN static inline size_t callbox__strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

/* Formats like vsnprintf into buf (always NUL-terminated, cut at cap - 1
 * bytes) and returns the length written. A printf subset, the same in
 * both modes: %d %i %u %x %c %s %p %% with the h, hh, l, ll, z, j and t
 * modifiers; %f %e %g print the shortest text that reads back as the same
 * f32 (15 significant digits for a double no f32 equals). Flags, widths
 * and precisions are read and ignored. */
CALLBOX__COLD static size_t callbox_vformat(char *buf, size_t cap, const char *fmt, va_list ap);

static inline size_t callbox_format(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

/* Sets the call's error message and returns status, so a callback can
 *     return callbox_error(CALLBOX_INVALID_ARGUMENT, "x must be sorted"); */
static inline int callbox_error(int status, const char *message)
{
    callbox__host_error(message, callbox__strlen(message));
    return status;
}

/* callbox_error with a formatted message (see callbox_vformat). */
__attribute__((format(printf, 2, 3)))
static inline int callbox_errorf(int status, const char *fmt, ...)
{
    char buf[CALLBOX_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    callbox__host_error(buf, n);
    return status;
}

/* Logs one line at a level (CALLBOX_DEBUG .. CALLBOX_ERROR). */
static inline void callbox_log(int level, const char *message)
{
    callbox__host_log(level, message, callbox__strlen(message));
}

__attribute__((format(printf, 2, 3)))
static inline void callbox_logf(int level, const char *fmt, ...)
{
    char buf[CALLBOX_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = callbox_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    callbox__host_log(level, buf, n);
}

/* Aborts the call: the host reports GuestError "guest aborted: <message>"
 * and discards the instance (ABI.md §4, "Panics"). For bugs, not for bad
 * inputs: those return a status. */
_Noreturn static inline void callbox_panic(const char *message)
{
    callbox_error(CALLBOX_INTERNAL, message);
    __builtin_trap();
}

#ifdef __FILE_NAME__
#define CALLBOX__FILE __FILE_NAME__ /* no directories in the module */
#else
#define CALLBOX__FILE "?"
#endif
#define CALLBOX__STR2(x) #x
#define CALLBOX__STR(x) CALLBOX__STR2(x)

/* Panics with "file.c:12: assertion failed: cond" unless cond holds. */
#define CALLBOX_ASSERT(cond)                                                              \
    ((cond) ? (void)0                                                                     \
            : callbox_panic(CALLBOX__FILE ":" CALLBOX__STR(__LINE__) ": assertion failed: " #cond))

/* Returns from the enclosing callback unless expr is CALLBOX_OK. */
#define CALLBOX_TRY(expr)                                                                 \
    do {                                                                                  \
        int callbox__status = (expr);                                                     \
        if (callbox__status != CALLBOX_OK)                                                \
            return callbox__status;                                                       \
    } while (0)

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

/* ---- Memory ------------------------------------------------------------- */

/* The most alignment callbox_alloc must honour (ABI.md §1). */
#define CALLBOX__MAX_ALIGN 65536u

/* Allocates size bytes aligned to align (a power of two, at most 64 KiB);
 * NULL when it cannot. Free with callbox_mem_free and the same size and
 * align. The ABI's callbox_alloc and callbox_free are these. */
static inline void *callbox_mem_alloc(size_t size, size_t align);
static inline void callbox_mem_free(void *ptr, size_t size, size_t align);

static inline int callbox__valid_align(size_t align)
{
    return align != 0 && (align & (align - 1)) == 0 && align <= CALLBOX__MAX_ALIGN;
}

#if CALLBOX_HOSTED

static inline void *callbox_mem_alloc(size_t size, size_t align)
{
    if (!callbox__valid_align(align))
        return NULL;
    return aligned_alloc(align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1);
}

static inline void callbox_mem_free(void *ptr, size_t size, size_t align)
{
    (void)size, (void)align;
    free(ptr);
}

#else /* freestanding: a first-fit free list over memory.grow */

/* A free block, stored in the block itself. Every block address and size
 * is a multiple of 8; the list is sorted by address and coalesced. */
typedef struct callbox__block {
    size_t size;
    struct callbox__block *next;
} callbox__block;

CALLBOX__WEAK callbox__block *callbox__free_list;
CALLBOX__WEAK uintptr_t callbox__heap_top; /* 0 until the first allocation */
extern unsigned char __heap_base;           /* defined by wasm-ld */

/* Returns [at, at+size) to the heap. A block that ends at the heap top
 * lowers the top (and so does a free block that then ends there), so no
 * free block ever ends at the top; any other block joins the free list,
 * merged with its neighbours. */
CALLBOX__COLD static void callbox__release(uintptr_t at, size_t size)
{
    if (size == 0)
        return;
    callbox__block **pp = &callbox__free_list, *prev = NULL;
    while (*pp && (uintptr_t)*pp < at) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (at + size == callbox__heap_top) {
        callbox__heap_top = at;
        if (prev && (uintptr_t)prev + prev->size == at) { /* prev is the last block */
            callbox__heap_top = (uintptr_t)prev;
            callbox__block **q = &callbox__free_list;
            while (*q != prev)
                q = &(*q)->next;
            *q = NULL;
        }
        return;
    }
    callbox__block *b = (callbox__block *)at, *next = *pp;
    b->size = size;
    b->next = next;
    if (next && at + size == (uintptr_t)next) {
        b->size += next->size;
        b->next = next->next;
    }
    if (prev && (uintptr_t)prev + prev->size == at) {
        prev->size += b->size;
        prev->next = b->next;
    } else {
        *pp = b;
    }
}

CALLBOX__COLD static inline void *callbox_mem_alloc(size_t size, size_t align)
{
    if (!callbox__valid_align(align) || size > 0x7ffffff0u)
        return NULL;
    size = size ? (size + 7) & ~(size_t)7 : 8;
    align = align < 8 ? 8 : align;
    for (callbox__block **pp = &callbox__free_list; *pp; pp = &(*pp)->next) {
        callbox__block *b = *pp;
        uintptr_t lo = (uintptr_t)b, hi = lo + b->size;
        uintptr_t at = (lo + align - 1) & ~(uintptr_t)(align - 1);
        if (at < lo || at > hi || hi - at < size)
            continue;
        *pp = b->next;
        callbox__release(lo, at - lo);
        callbox__release(at + size, hi - at - size);
        return (void *)at;
    }
    uintptr_t top = callbox__heap_top ? callbox__heap_top : (uintptr_t)&__heap_base;
    uint64_t at = ((uint64_t)top + align - 1) & ~(uint64_t)(align - 1), end = at + size;
    uint64_t have = (uint64_t)__builtin_wasm_memory_size(0) * 65536;
    if (end > have && __builtin_wasm_memory_grow(0, (size_t)((end - have + 65535) / 65536)) == (size_t)-1)
        return NULL;
    callbox__heap_top = (uintptr_t)end;
    callbox__release(top, (size_t)(at - top)); /* the alignment gap */
    return (void *)(uintptr_t)at;
}

static inline void callbox_mem_free(void *ptr, size_t size, size_t align)
{
    (void)align;
    if (ptr)
        callbox__release((uintptr_t)ptr, size ? (size + 7) & ~(size_t)7 : 8);
}

/* What clang may call for struct copies and zeroing loops without a libc.
 * Weak: a real libc's definitions win. */
CALLBOX__WEAK CALLBOX__NO_BUILTIN void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    while (n--)
        *d++ = (unsigned char)c;
    return dst;
}

CALLBOX__WEAK CALLBOX__NO_BUILTIN void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    while (n--)
        *d++ = *s++;
    return dst;
}

CALLBOX__WEAK CALLBOX__NO_BUILTIN void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (d < s)
        while (n--)
            *d++ = *s++;
    else
        while (n--)
            d[n] = s[n];
    return dst;
}

#endif /* CALLBOX_HOSTED */

/* ---- Math --------------------------------------------------------------- */

/* The few math functions callbacks need, in both modes: libm's with
 * wasi-libc, small exact-enough ones (or wasm instructions) without. */
static inline float callbox_sqrtf(float x) { return __builtin_sqrtf(x); } /* f32.sqrt */
static inline float callbox_fabsf(float x) { return __builtin_fabsf(x); } /* f32.abs */
static inline int callbox_isnan(double x) { return x != x; }

/* e^x, within 2 ulp: x = k ln2 + r with |r| <= ln2/2, e^r by its Taylor
 * polynomial to r^7 (error < 1e-8), then scaled by 2^k in two steps so that
 * subnormal results come out right. */
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

/* ---- The call frame (ABI.md §3) ---------------------------------------- */

#define CALLBOX__MAGIC 0x31584243u /* "CBX1" */
#define CALLBOX__MAX_RANK 32u
#define CALLBOX__FLAG_OUTPUT 1u
#define CALLBOX__FLAG_ALIAS 2u
#define CALLBOX_MIN_DATA_ALIGN 16u

typedef struct callbox__header {
    uint32_t magic, version, n_inputs, n_outputs, tensors, frame_size;
    uint64_t call_id;
} callbox__header;

typedef struct callbox__desc {
    uint32_t dtype, rank, dims, flags, data, byte_len, alias, reserved;
} callbox__desc;

_Static_assert(sizeof(callbox__header) == 32 && sizeof(callbox__desc) == 32, "ABI v1 layout");

/* One call, validated by callbox__open. Callbacks read it through the
 * accessors below. */
typedef struct callbox_frame {
    const callbox__desc *descs; /* n_inputs + n_outputs */
    uint32_t n_inputs, n_outputs;
    uint64_t call_id; /* the host's sequence number of this call */
} callbox_frame;

/* A tensor of any dtype. */
typedef struct callbox_tensor {
    void *data;
    size_t count; /* elements: the product of shape */
    const int64_t *shape;
    uint32_t rank;
    callbox_dtype dtype;
    size_t byte_len;
} callbox_tensor;

/* Bytes per element; 0 for a code ABI v1 does not define. */
static inline size_t callbox_dtype_size(uint32_t dtype)
{
    switch (dtype) {
    case CALLBOX_PRED: case CALLBOX_S8: case CALLBOX_U8: return 1;
    case CALLBOX_S16: case CALLBOX_U16: case CALLBOX_F16: case CALLBOX_BF16: return 2;
    case CALLBOX_S32: case CALLBOX_U32: case CALLBOX_F32: return 4;
    case CALLBOX_S64: case CALLBOX_U64: case CALLBOX_F64: case CALLBOX_C64: return 8;
    case CALLBOX_C128: return 16;
    }
    return 0;
}

/* The dtype's name in signatures ("f32"), or "?". */
static inline const char *callbox_dtype_name(uint32_t dtype)
{
    static const char names[][5] = {"?", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                                    "f16", "f32", "f64", "?", "?", "c64", "bf16", "?", "c128"};
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

/* "input 1" / "output 0" for descriptor k. */
static inline const char *callbox__kind(const callbox_frame *f, uint32_t k, uint32_t *index)
{
    *index = k < f->n_inputs ? k : k - f->n_inputs;
    return k < f->n_inputs ? "input" : "output";
}

#define CALLBOX__MALFORMED(...) callbox_errorf(CALLBOX_INTERNAL, "callbox: malformed call frame: " __VA_ARGS__)

/* Validates the frame at guest address `at` and fills *f. Every number the
 * host wrote is checked here, once; the accessors rely on it. Afterwards,
 * for every descriptor: the dtype is known, the rank is at most 32, the
 * dims are non-negative and 8-aligned inside the frame, byte_len is exactly
 * the shape's size, the data is 16-aligned (an output's inside the frame
 * after the metadata, an input's anywhere in memory but over the
 * metadata), and an output's buffer overlaps no other buffer. */
CALLBOX__COLD __attribute__((noinline)) static int callbox__open(callbox_frame *f, uint32_t at)
{
    uint64_t mem = (uint64_t)__builtin_wasm_memory_size(0) * 65536;
    if (at == 0 || at % 8 || at + 32ull > mem)
        return CALLBOX__MALFORMED("header at %u is not 8-aligned inside the %llu-byte memory", at,
                                  (unsigned long long)mem);
    const callbox__header *h = (const callbox__header *)(uintptr_t)at;
    if (h->magic != CALLBOX__MAGIC || h->version != CALLBOX_ABI_VERSION)
        return CALLBOX__MALFORMED("magic 0x%x version %u, want 0x%x version %u", h->magic, h->version,
                                  CALLBOX__MAGIC, CALLBOX_ABI_VERSION);
    uint64_t lo = at + 32ull, end = (uint64_t)at + h->frame_size;
    if (h->frame_size < 32 || end > mem)
        return CALLBOX__MALFORMED("frame of %u bytes at %u does not fit the %llu-byte memory",
                                  h->frame_size, at, (unsigned long long)mem);
#define CALLBOX__INSIDE(p, len) ((uint64_t)(p) >= lo && (uint64_t)(p) + (uint64_t)(len) <= end)
    uint64_t n = (uint64_t)h->n_inputs + h->n_outputs;
    if (h->tensors % 8 || !CALLBOX__INSIDE(h->tensors, n * 32))
        return CALLBOX__MALFORMED("%llu descriptors at %u are not 8-aligned inside the frame",
                                  (unsigned long long)n, h->tensors);
    f->descs = (const callbox__desc *)(uintptr_t)h->tensors;
    f->n_inputs = h->n_inputs;
    f->n_outputs = h->n_outputs;
    f->call_id = h->call_id;

    /* Metadata first: it ends where the data may begin. */
    uint64_t meta_end = h->tensors + n * 32;
    for (uint32_t k = 0; k < n; k++) {
        const callbox__desc *d = &f->descs[k];
        uint32_t i;
        const char *kind = callbox__kind(f, k, &i);
        if (d->rank > CALLBOX__MAX_RANK || (d->rank && (d->dims % 8 || !CALLBOX__INSIDE(d->dims, d->rank * 8ull))))
            return CALLBOX__MALFORMED("%s %u: rank %u dims at %u are not 8-aligned inside the frame", kind, i,
                                      d->rank, d->dims);
        if (d->rank && d->dims + d->rank * 8ull > meta_end)
            meta_end = d->dims + d->rank * 8ull;
    }
    for (uint32_t k = 0; k < n; k++) {
        const callbox__desc *d = &f->descs[k];
        uint32_t i;
        const char *kind = callbox__kind(f, k, &i);
        size_t elem = callbox_dtype_size(d->dtype);
        if (!elem)
            return CALLBOX__MALFORMED("%s %u: unknown dtype code %u", kind, i, d->dtype);
        int output = k >= f->n_inputs, alias = output && (d->flags & CALLBOX__FLAG_ALIAS);
        if ((d->flags & ~CALLBOX__FLAG_ALIAS) != (output ? CALLBOX__FLAG_OUTPUT : 0u) ||
            (!output && d->flags) || (alias && d->alias >= f->n_inputs))
            return CALLBOX__MALFORMED("%s %u: flags 0x%x, alias %u", kind, i, d->flags, d->alias);
        /* byte_len must be the shape's size. The product of the non-zero
         * dimensions must fit in u32 even for an empty tensor, so every
         * dimension and stride fits in a size_t. */
        const int64_t *dims = (const int64_t *)(uintptr_t)d->dims;
        uint64_t size = elem;
        int empty = 0;
        for (uint32_t j = 0; j < d->rank; j++) {
            if (dims[j] == 0)
                empty = 1;
            else if (dims[j] < 0 || dims[j] > 0xffffffffll || (size *= (uint64_t)dims[j]) > 0xffffffffull)
                size = UINT64_MAX; /* sticks: UINT64_MAX times anything >= 1 overflows */
        }
        if (size > 0xffffffffull || d->byte_len != (empty ? 0 : size))
            return CALLBOX__MALFORMED("%s %u: byte_len %u does not match its %s shape", kind, i, d->byte_len,
                                      callbox_dtype_name(d->dtype));
        /* Outputs live in the frame's data area. An input (and so an output
         * passing one through) may also lie elsewhere in memory (the host's
         * zero-copy API places caller buffers there), but never over the
         * frame's metadata. */
        uint64_t data_end = (uint64_t)d->data + d->byte_len;
        int placed = output && !alias ? d->data >= meta_end && CALLBOX__INSIDE(d->data, d->byte_len)
                            : data_end <= mem && (data_end <= at || d->data >= meta_end);
        if (d->data % CALLBOX_MIN_DATA_ALIGN || !placed)
            return CALLBOX__MALFORMED("%s %u: %u bytes at %u are not %u-aligned in memory outside the frame's metadata",
                                      kind, i, d->byte_len, d->data, CALLBOX_MIN_DATA_ALIGN);
    }
#undef CALLBOX__INSIDE
    /* An output is written through a plain pointer: no other buffer may
     * share a byte with it. (An aliased output is its input's buffer and
     * is never handed out for writing.) */
    for (uint32_t k = f->n_inputs; k < n; k++) {
        const callbox__desc *d = &f->descs[k];
        if ((d->flags & CALLBOX__FLAG_ALIAS) || !d->byte_len)
            continue;
        for (uint32_t j = 0; j < n; j++) {
            const callbox__desc *e = &f->descs[j];
            if (j == k || (e->flags & CALLBOX__FLAG_ALIAS) || !e->byte_len)
                continue;
            if ((uint64_t)e->data < (uint64_t)d->data + d->byte_len &&
                (uint64_t)d->data < (uint64_t)e->data + e->byte_len) {
                uint32_t i;
                const char *kind = callbox__kind(f, j, &i);
                return CALLBOX__MALFORMED("output %u overlaps %s %u", k - f->n_inputs, kind, i);
            }
        }
    }
    return CALLBOX_OK;
}

/* ---- Views -------------------------------------------------------------- */

/* Descriptor k as a tensor, if its dtype is `want` (0: any). */
static inline int callbox__view(const callbox_frame *f, uint32_t k, uint32_t want, callbox_tensor *t)
{
    const callbox__desc *d = &f->descs[k];
    uint32_t i;
    const char *kind = callbox__kind(f, k, &i);
    *t = (callbox_tensor){0};
    if (want && d->dtype != want)
        return callbox_errorf(CALLBOX_INVALID_ARGUMENT, "%s %u is %s, not %s", kind, i,
                              callbox_dtype_name(d->dtype), callbox_dtype_name(want));
    t->data = (void *)(uintptr_t)d->data;
    t->byte_len = d->byte_len;
    t->count = d->byte_len / callbox_dtype_size(d->dtype);
    t->shape = (const int64_t *)(uintptr_t)d->dims;
    t->rank = d->rank;
    t->dtype = (callbox_dtype)d->dtype;
    return CALLBOX_OK;
}

/* Input i, of any dtype. Fails (INVALID_ARGUMENT) when there is none. */
static inline int callbox__input(const callbox_frame *f, uint32_t i, uint32_t want, callbox_tensor *t)
{
    if (i >= f->n_inputs) {
        *t = (callbox_tensor){0};
        return callbox_errorf(CALLBOX_INVALID_ARGUMENT, "input %u does not exist: the call has %u inputs", i,
                              f->n_inputs);
    }
    return callbox__view(f, i, want, t);
}

/* Output i. Fails when there is none, and (INTERNAL) when it passes an
 * input through (`-> $x`): there is nothing to write. Its initial content
 * is unspecified: write every element. */
static inline int callbox__output(const callbox_frame *f, uint32_t i, uint32_t want, callbox_tensor *t)
{
    *t = (callbox_tensor){0};
    if (i >= f->n_outputs)
        return callbox_errorf(CALLBOX_INVALID_ARGUMENT, "output %u does not exist: the call has %u outputs", i,
                              f->n_outputs);
    const callbox__desc *d = &f->descs[f->n_inputs + i];
    if (d->flags & CALLBOX__FLAG_ALIAS)
        return callbox_errorf(CALLBOX_INTERNAL, "output %u passes input %u through; it has no buffer to write",
                              i, d->alias);
    return callbox__view(f, f->n_inputs + i, want, t);
}

static inline int callbox_input(const callbox_frame *f, uint32_t i, callbox_tensor *t)
{
    return callbox__input(f, i, 0, t);
}

static inline int callbox_output(const callbox_frame *f, uint32_t i, callbox_tensor *t)
{
    return callbox__output(f, i, 0, t);
}

/* Complex elements: (real, imaginary). */
typedef struct callbox_complex64 { float re, im; } callbox_complex64;
typedef struct callbox_complex128 { double re, im; } callbox_complex128;

/* Typed views, one per dtype: callbox_f32 has `float *data`, and
 *   callbox_input_f32(frame, i, &view)    input i, which must be f32
 *   callbox_output_f32(frame, i, &view)   output i, which must be f32
 *   callbox_scalar_f32(frame, i, &value)  input i, which must hold one f32
 * return CALLBOX_OK or, having set the message, an error status (use
 * CALLBOX_TRY). On error the view is empty: data NULL, count 0. */
#define CALLBOX__TYPED(name, ctype, code)                                                              \
    typedef struct callbox_##name {                                                                    \
        ctype *data;                                                                                   \
        size_t count;                                                                                  \
        const int64_t *shape;                                                                          \
        uint32_t rank;                                                                                 \
    } callbox_##name;                                                                                  \
    static inline int callbox_input_##name(const callbox_frame *f, uint32_t i, callbox_##name *v)     \
    {                                                                                                  \
        callbox_tensor t;                                                                              \
        int status = callbox__input(f, i, code, &t);                                                   \
        *v = (callbox_##name){(ctype *)t.data, t.count, t.shape, t.rank};                              \
        return status;                                                                                 \
    }                                                                                                  \
    static inline int callbox_output_##name(const callbox_frame *f, uint32_t i, callbox_##name *v)    \
    {                                                                                                  \
        callbox_tensor t;                                                                              \
        int status = callbox__output(f, i, code, &t);                                                  \
        *v = (callbox_##name){(ctype *)t.data, t.count, t.shape, t.rank};                              \
        return status;                                                                                 \
    }                                                                                                  \
    static inline int callbox_scalar_##name(const callbox_frame *f, uint32_t i, ctype *value)         \
    {                                                                                                  \
        callbox_tensor t;                                                                              \
        CALLBOX_TRY(callbox__input(f, i, code, &t));                                                   \
        if (t.count != 1)                                                                              \
            return callbox_errorf(CALLBOX_INVALID_ARGUMENT, "input %u has %zu elements, not one", i,   \
                                  t.count);                                                            \
        *value = *(ctype *)t.data;                                                                     \
        return CALLBOX_OK;                                                                             \
    }

CALLBOX__TYPED(pred, uint8_t, CALLBOX_PRED)
CALLBOX__TYPED(s8, int8_t, CALLBOX_S8)
CALLBOX__TYPED(s16, int16_t, CALLBOX_S16)
CALLBOX__TYPED(s32, int32_t, CALLBOX_S32)
CALLBOX__TYPED(s64, int64_t, CALLBOX_S64)
CALLBOX__TYPED(u8, uint8_t, CALLBOX_U8)
CALLBOX__TYPED(u16, uint16_t, CALLBOX_U16)
CALLBOX__TYPED(u32, uint32_t, CALLBOX_U32)
CALLBOX__TYPED(u64, uint64_t, CALLBOX_U64)
CALLBOX__TYPED(f16, uint16_t, CALLBOX_F16) /* raw IEEE binary16 bits */
CALLBOX__TYPED(bf16, uint16_t, CALLBOX_BF16) /* raw bfloat16 bits */
CALLBOX__TYPED(f32, float, CALLBOX_F32)
CALLBOX__TYPED(f64, double, CALLBOX_F64)
CALLBOX__TYPED(c64, callbox_complex64, CALLBOX_C64)
CALLBOX__TYPED(c128, callbox_complex128, CALLBOX_C128)

/* ---- Shapes (row-major) ------------------------------------------------- */

/* Elements between consecutive indices along axis. */
static inline size_t callbox_shape_stride(const int64_t *shape, uint32_t rank, uint32_t axis)
{
    size_t s = 1;
    for (uint32_t j = axis + 1; j < rank; j++)
        s *= (size_t)shape[j];
    return s;
}

/* The product of all but the last dimension (1 for rank 0 and 1). */
static inline size_t callbox_shape_rows(const int64_t *shape, uint32_t rank)
{
    size_t rows = 1;
    for (uint32_t j = 0; j + 1 < rank; j++)
        rows *= (size_t)shape[j];
    return rows;
}

/* The position of a multi-index in the data; panics when it is out of
 * bounds or has the wrong number of indices. */
static inline size_t callbox_shape_offset(const int64_t *shape, uint32_t rank, const size_t *index, size_t n)
{
    size_t at = 0;
    if (n != rank)
        callbox_panic("callbox_offset: wrong number of indices");
    for (uint32_t j = 0; j < rank; j++) {
        if (index[j] >= (size_t)shape[j])
            callbox_panic("callbox_offset: index out of bounds");
        at = at * (size_t)shape[j] + index[j];
    }
    return at;
}

/* On any view v (callbox_f32, callbox_tensor, ...): */
#define callbox_dim(v, axis) ((size_t)(v).shape[axis])               /* dimension axis */
#define callbox_row_len(v) ((v).rank ? (size_t)(v).shape[(v).rank - 1] : (size_t)1) /* last dimension */
#define callbox_rows(v) callbox_shape_rows((v).shape, (v).rank)    /* rows of row_len elements */
#define callbox_stride(v, axis) callbox_shape_stride((v).shape, (v).rank, (axis))
#define callbox_offset(v, ...)                                                                     \
    callbox_shape_offset((v).shape, (v).rank, (const size_t[]){__VA_ARGS__},                       \
                         sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))
#define callbox_at(v, ...) ((v).data[callbox_offset(v, __VA_ARGS__)]) /* v.data at a multi-index */

/* ---- Module exports (ABI.md §1, §5) ------------------------------------- */

CALLBOX__EXPORT("callbox_abi_version") int32_t callbox_abi_version(void) { return CALLBOX_ABI_VERSION; }

CALLBOX__EXPORT("callbox_alloc") uint32_t callbox_alloc(uint32_t size, uint32_t align)
{
    return (uint32_t)(uintptr_t)callbox_mem_alloc(size, align);
}

CALLBOX__EXPORT("callbox_free") void callbox_free(uint32_t ptr, uint32_t size, uint32_t align)
{
    if (callbox__valid_align(align))
        callbox_mem_free((void *)(uintptr_t)ptr, size, align);
}

/* A signature-table line, linked into a list by a constructor per callback. */
typedef struct callbox__signature {
    const char *line; /* "name = signature\n" */
    struct callbox__signature *next;
} callbox__signature;

CALLBOX__WEAK callbox__signature *callbox__signatures;

static inline void callbox__register(callbox__signature *s)
{
    s->next = callbox__signatures;
    callbox__signatures = s;
}

/* The signature table (ABI.md §5): a u32 length, then every registered
 * line. Built once; the host reads it once, at load. */
CALLBOX__COLD CALLBOX__EXPORT("callbox_signatures") uint32_t callbox_signatures(void)
{
    static uint8_t *table;
    if (table)
        return (uint32_t)(uintptr_t)table;
    size_t n = 0;
    for (callbox__signature *s = callbox__signatures; s; s = s->next)
        n += callbox__strlen(s->line);
    table = (uint8_t *)callbox_mem_alloc(4 + n, 4);
    if (!table)
        return 0;
    uint8_t *p = table + 4;
    for (int i = 0; i < 4; i++)
        table[i] = (uint8_t)(n >> (8 * i));
    for (callbox__signature *s = callbox__signatures; s; s = s->next)
        for (const char *c = s->line; *c; c++)
            *p++ = (uint8_t)*c;
    return (uint32_t)(uintptr_t)table;
}

#if !CALLBOX_HOSTED
/* Runs constructors (the signature registrations among them) once, as
 * wasi-libc's reactor _initialize does; the host calls it after
 * instantiation. */
extern void __wasm_call_ctors(void);
CALLBOX__EXPORT("_initialize") void callbox__initialize(void) { __wasm_call_ctors(); }
#endif

typedef int (*callbox__callback)(const callbox_frame *frame);

/* Validates the frame, runs the callback, and keeps its status inside the
 * ABI's set. */
static inline int32_t callbox__run(uint32_t at, callbox__callback callback)
{
    callbox_frame frame;
    int status = callbox__open(&frame, at);
    if (status != CALLBOX_OK)
        return status;
    switch (status = callback(&frame)) {
    case CALLBOX_OK:
    case CALLBOX_UNKNOWN:
    case CALLBOX_INVALID_ARGUMENT:
    case CALLBOX_RESOURCE_EXHAUSTED:
    case CALLBOX_FAILED_PRECONDITION:
    case CALLBOX_UNIMPLEMENTED:
    case CALLBOX_INTERNAL:
        return status;
    }
    return callbox_errorf(CALLBOX_INTERNAL, "the callback returned %d, which is not an ABI v1 status", status);
}

/* Exports a callback and registers its signature (ABI.md §5):
 *
 *     CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]") {
 *         ... read inputs and write outputs of `frame` ...
 *         return CALLBOX_OK;
 *     }
 *
 * The body is a function of `const callbox_frame *frame` returning a
 * status. The host checks every call against the signature before the
 * callback runs, so the body may rely on its dtypes, ranks and dimension
 * equalities. */
#define CALLBOX_EXPORT(name, signature)                                                            \
    static int callbox__body_##name(const callbox_frame *frame);                                   \
    static callbox__signature callbox__signature_##name = {#name " = " signature "\n", 0};         \
    __attribute__((constructor)) static void callbox__register_##name(void)                        \
    {                                                                                              \
        callbox__register(&callbox__signature_##name);                                             \
    }                                                                                              \
    __attribute__((export_name(#name))) int32_t callbox__export_##name(uint32_t frame)            \
    {                                                                                              \
        return callbox__run(frame, callbox__body_##name);                                          \
    }                                                                                              \
    static int callbox__body_##name(const callbox_frame *frame)

#endif /* CALLBOX_H */
