/*
 * callbox/frame.h — the call frame (ABI.md §3): its header and
 * tensor descriptors as the host writes them, the dtypes' sizes and names,
 * and callbox__open, which validates a frame once, on entry.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/frame.h"
#endif

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

/* One call (callbox.h's callbox_frame), validated by callbox__open. */
struct callbox_frame {
    const callbox__desc *descs; /* n_inputs + n_outputs */
    uint32_t n_inputs, n_outputs;
    uint64_t call_id; /* the host's sequence number of this call */
};

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
