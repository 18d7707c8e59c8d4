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
 * This file is the API: the types, the macros and the functions a callback
 * calls, each declared here with what it does. Their code is in the
 * headers of callbox/ beside it, which this one includes (include only
 * callbox.h; copy callbox/ with it):
 *   callbox/log.h     errors, logs and panics over the host's imports
 *   callbox/format.h  the printf subset of callbox_format and the *f calls
 *   callbox/memory.h  the allocator (and memset/memcpy/memmove without a libc)
 *   callbox/math.h    sqrtf, fabsf, isnan, expf in both modes
 *   callbox/frame.h   the call frame's layout and its validation on entry
 *                     (magic, version, counts, ranges, dtype, rank,
 *                     byte_len, 16-byte alignment, in one place: callbox__open)
 *   callbox/tensor.h  the views, any dtype and typed, and shape arithmetic
 *   callbox/module.h  the module's exports: callbox_abi_version,
 *                     callbox_alloc, callbox_free, callbox_signatures and
 *                     (freestanding) _initialize
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
/* no_builtin: without a libc, clang must not turn the SDK's loops into
 * calls to strlen, nor those of memset and friends into calls to
 * themselves. */
#define CALLBOX__NO_BUILTIN __attribute__((no_builtin))

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

/* ---- Errors, logs, panics (callbox/log.h, callbox/format.h) ------------ */

/* Formats like vsnprintf into buf (always NUL-terminated, cut at cap - 1
 * bytes) and returns the length written. A printf subset, the same in
 * both modes: %d %i %u %x %c %s %p %% with the h, hh, l, ll, z, j and t
 * modifiers; %f %e %g print the shortest text that reads back as the same
 * f32 (15 significant digits for a double no f32 equals). Flags, widths
 * and precisions are read and ignored. */
CALLBOX__COLD static size_t callbox_vformat(char *buf, size_t cap, const char *fmt, va_list ap);
/* callbox_vformat with its arguments. */
static inline size_t callbox_format(char *buf, size_t cap, const char *fmt, ...);

/* Sets the call's error message and returns status, so a callback can
 *     return callbox_error(CALLBOX_INVALID_ARGUMENT, "x must be sorted"); */
static inline int callbox_error(int status, const char *message);
/* callbox_error with a formatted message (see callbox_vformat). */
__attribute__((format(printf, 2, 3))) static inline int callbox_errorf(int status, const char *fmt, ...);

/* Logs one line at a level (CALLBOX_DEBUG .. CALLBOX_ERROR). */
static inline void callbox_log(int level, const char *message);
/* callbox_log with a formatted message. */
__attribute__((format(printf, 2, 3))) static inline void callbox_logf(int level, const char *fmt, ...);

/* Aborts the call: the host reports GuestError "guest aborted: <message>"
 * and discards the instance (ABI.md §4, "Panics"). For bugs, not for bad
 * inputs: those return a status. */
_Noreturn static inline void callbox_panic(const char *message);

#include "callbox/log.h"

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

#include "callbox/format.h"

/* ---- Memory (callbox/memory.h) ----------------------------------------- */

/* Allocates size bytes aligned to align (a power of two, at most 64 KiB);
 * NULL when it cannot. Free with callbox_mem_free and the same size and
 * align. The ABI's callbox_alloc and callbox_free are these. */
static inline void *callbox_mem_alloc(size_t size, size_t align);
static inline void callbox_mem_free(void *ptr, size_t size, size_t align);

#include "callbox/memory.h"

/* ---- Math (callbox/math.h) --------------------------------------------- */

/* The few math functions callbacks need, in both modes: libm's with
 * wasi-libc, small exact-enough ones (or wasm instructions) without. */
static inline float callbox_sqrtf(float x); /* f32.sqrt */
static inline float callbox_fabsf(float x); /* f32.abs */
static inline int callbox_isnan(double x);
static inline float callbox_expf(float x); /* e^x, within 2 ulp */

#include "callbox/math.h"

/* ---- Tensors (callbox/frame.h, callbox/tensor.h) ----------------------- */

/* One call: what CALLBOX_EXPORT's body gets as `frame`. Read it through
 * the views below. */
typedef struct callbox_frame callbox_frame;

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
static inline size_t callbox_dtype_size(uint32_t dtype);
/* The dtype's name in signatures ("f32"), or "?". */
static inline const char *callbox_dtype_name(uint32_t dtype);

#include "callbox/frame.h"

/* Input i, or output i, of any dtype, as a tensor. They fail
 * (INVALID_ARGUMENT) when there is none; an output also fails (INTERNAL)
 * when it passes an input through (`-> $x`): there is nothing to write.
 * An output's initial content is unspecified: write every element. */
static inline int callbox_input(const callbox_frame *f, uint32_t i, callbox_tensor *t);
static inline int callbox_output(const callbox_frame *f, uint32_t i, callbox_tensor *t);

/* Complex elements: (real, imaginary). */
typedef struct callbox_complex64 { float re, im; } callbox_complex64;
typedef struct callbox_complex128 { double re, im; } callbox_complex128;

/* The dtypes, by name in signatures, with their C element types. */
#define CALLBOX__DTYPES(X)                                                                             \
    X(pred, uint8_t, CALLBOX_PRED)                                                                     \
    X(s8, int8_t, CALLBOX_S8)                                                                          \
    X(s16, int16_t, CALLBOX_S16)                                                                       \
    X(s32, int32_t, CALLBOX_S32)                                                                       \
    X(s64, int64_t, CALLBOX_S64)                                                                       \
    X(u8, uint8_t, CALLBOX_U8)                                                                         \
    X(u16, uint16_t, CALLBOX_U16)                                                                      \
    X(u32, uint32_t, CALLBOX_U32)                                                                      \
    X(u64, uint64_t, CALLBOX_U64)                                                                      \
    X(f16, uint16_t, CALLBOX_F16) /* raw IEEE binary16 bits */                                         \
    X(bf16, uint16_t, CALLBOX_BF16) /* raw bfloat16 bits */                                            \
    X(f32, float, CALLBOX_F32)                                                                         \
    X(f64, double, CALLBOX_F64)                                                                        \
    X(c64, callbox_complex64, CALLBOX_C64)                                                             \
    X(c128, callbox_complex128, CALLBOX_C128)

/* Typed views, one per dtype: callbox_f32 has `float *data`, and
 *   callbox_input_f32(frame, i, &view)    input i, which must be f32
 *   callbox_output_f32(frame, i, &view)   output i, which must be f32
 *   callbox_scalar_f32(frame, i, &value)  input i, which must hold one f32
 * return CALLBOX_OK or, having set the message, an error status (use
 * CALLBOX_TRY). On error the view is empty: data NULL, count 0. */
#define CALLBOX__VIEW(name, ctype, code)                                                               \
    typedef struct callbox_##name {                                                                    \
        ctype *data;                                                                                   \
        size_t count;                                                                                  \
        const int64_t *shape;                                                                          \
        uint32_t rank;                                                                                 \
    } callbox_##name;
CALLBOX__DTYPES(CALLBOX__VIEW)
#undef CALLBOX__VIEW

/* Row-major shapes: the elements between consecutive indices along axis;
 * the product of all but the last dimension (1 for rank 0 and 1); the
 * position of a multi-index in the data, which panics when it is out of
 * bounds or has the wrong number of indices. */
static inline size_t callbox_shape_stride(const int64_t *shape, uint32_t rank, uint32_t axis);
static inline size_t callbox_shape_rows(const int64_t *shape, uint32_t rank);
static inline size_t callbox_shape_offset(const int64_t *shape, uint32_t rank, const size_t *index, size_t n);

#include "callbox/tensor.h"

/* On any view v (callbox_f32, callbox_tensor, ...): */
#define callbox_dim(v, axis) ((size_t)(v).shape[axis])               /* dimension axis */
#define callbox_row_len(v) ((v).rank ? (size_t)(v).shape[(v).rank - 1] : (size_t)1) /* last dimension */
#define callbox_rows(v) callbox_shape_rows((v).shape, (v).rank)    /* rows of row_len elements */
#define callbox_stride(v, axis) callbox_shape_stride((v).shape, (v).rank, (axis))
#define callbox_offset(v, ...)                                                                     \
    callbox_shape_offset((v).shape, (v).rank, (const size_t[]){__VA_ARGS__},                       \
                         sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))
#define callbox_at(v, ...) ((v).data[callbox_offset(v, __VA_ARGS__)]) /* v.data at a multi-index */

/* ---- Callbacks (callbox/module.h) -------------------------------------- */

#include "callbox/module.h"

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
