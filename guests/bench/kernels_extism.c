/*
 * kernels_extism.c — the benchmark kernels (kernels.h) as an Extism plugin,
 * for the comparison in cmd/callbox/internal/bench (`callbox bench`).
 *
 * No Extism PDK can be built here (none is packaged for a registry this
 * project uses), so this module imports Extism's kernel functions from
 * "extism:host/env" itself and moves data the way Extism's C PDK does
 * (extism-pdk.h: extism_load_input, extism_store): the input is read from
 * Extism's memory 8 bytes per input_load_u64 host call into a buffer in
 * this module's memory, and the output is written back 8 bytes per
 * store_u64 host call into a block from Extism's alloc, then published
 * with output_set. callbox.h is used only as the libc: its freestanding
 * allocator and callbox_expf. Nothing here calls callbox.error or
 * callbox.log, so the module imports only from extism:host/env.
 *
 * Encoding (little-endian). Every input starts with a 16-byte header, so
 * the tensor data that follows is 16-byte aligned in the loaded buffer:
 *
 *   scale    f32 factor, u32 n, 0, 0 | x: f32[n]         -> y: f32[n]
 *   matmul   u32 m, k, n, 0          | a: f32[m,k], b: f32[k,n] -> c: f32[m,n]
 *   softmax  u32 rows, n, 0, 0       | x: f32[rows,n]    -> y: f32[rows,n]
 *
 * Each export returns 0, or 1 when the input does not match its header.
 */
#include "callbox.h"
#include "kernels.h"

typedef uint64_t extism_ptr;

#define EXTISM_ENV(name) __attribute__((import_module("extism:host/env"), import_name(name)))

EXTISM_ENV("input_length") extern uint64_t extism_input_length(void);
EXTISM_ENV("input_load_u64") extern uint64_t extism_input_load_u64(extism_ptr offset);
EXTISM_ENV("input_load_u8") extern uint32_t extism_input_load_u8(extism_ptr offset);
EXTISM_ENV("alloc") extern extism_ptr extism_alloc(uint64_t length);
EXTISM_ENV("store_u64") extern void extism_store_u64(extism_ptr at, uint64_t value);
EXTISM_ENV("store_u8") extern void extism_store_u8(extism_ptr at, uint32_t value);
EXTISM_ENV("output_set") extern void extism_output_set(extism_ptr at, uint64_t length);

#define HEADER 16u

/* The whole input, copied into this module's memory as the PDK does. */
static uint8_t *load_input(uint64_t *length)
{
    uint64_t n = extism_input_length();
    uint8_t *buf = callbox_mem_alloc(n ? n : 1, 16);
    if (!buf)
        return 0;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        *(uint64_t *)(buf + i) = extism_input_load_u64(i);
    for (; i < n; i++)
        buf[i] = (uint8_t)extism_input_load_u8(i);
    *length = n;
    return buf;
}

/* Copies n bytes into a fresh block of Extism memory and makes it the
 * output. */
static void set_output(const uint8_t *src, uint64_t n)
{
    extism_ptr at = extism_alloc(n);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        extism_store_u64(at + i, *(const uint64_t *)(src + i));
    for (; i < n; i++)
        extism_store_u8(at + i, src[i]);
    extism_output_set(at, n);
}

/* Checks the input size, allocates out_floats of output, runs kernel on
 * (header, data, out), stores the output, frees both buffers. */
typedef void (*kernel_fn)(const uint8_t *header, const float *data, float *out);

static int32_t run(uint8_t *in, uint64_t len, uint64_t in_floats, uint64_t out_floats, kernel_fn kernel)
{
    uint64_t out_len = out_floats * 4;
    float *out = callbox_mem_alloc(out_len ? out_len : 1, 16);
    int32_t rc = 1;
    if (out && len == HEADER + in_floats * 4) {
        kernel(in, (const float *)(in + HEADER), out);
        set_output((const uint8_t *)out, out_len);
        rc = 0;
    }
    callbox_mem_free(out, out_len ? out_len : 1, 16);
    callbox_mem_free(in, len, 16);
    return rc;
}

static const uint32_t *header(const uint8_t *in) { return (const uint32_t *)in; }

static void do_scale(const uint8_t *h, const float *x, float *y)
{
    float factor = *(const float *)h;
    uint32_t n = header(h)[1];
    kernel_scale(x, y, n, factor);
}

static void do_matmul(const uint8_t *h, const float *a, float *c)
{
    uint32_t m = header(h)[0], k = header(h)[1], n = header(h)[2];
    kernel_matmul(a, a + (size_t)m * k, c, m, k, n);
}

static void do_softmax(const uint8_t *h, const float *x, float *y)
{
    kernel_softmax(x, y, header(h)[0], header(h)[1]);
}

__attribute__((export_name("scale"))) int32_t scale(void)
{
    uint64_t len = 0;
    uint8_t *in = load_input(&len);
    if (!in || len < HEADER)
        return 1;
    uint64_t n = header(in)[1];
    return run(in, len, n, n, do_scale);
}

__attribute__((export_name("matmul"))) int32_t matmul(void)
{
    uint64_t len = 0;
    uint8_t *in = load_input(&len);
    if (!in || len < HEADER)
        return 1;
    uint64_t m = header(in)[0], k = header(in)[1], n = header(in)[2];
    return run(in, len, m * k + k * n, m * n, do_matmul);
}

__attribute__((export_name("softmax"))) int32_t softmax(void)
{
    uint64_t len = 0;
    uint8_t *in = load_input(&len);
    if (!in || len < HEADER)
        return 1;
    uint64_t rows = header(in)[0], n = header(in)[1];
    return run(in, len, rows * n, rows * n, do_softmax);
}
