/*
 * callbox/tensor.h — views of a frame's tensors: any dtype
 * (callbox_input, callbox_output), typed per dtype (callbox_input_f32, ...),
 * and the row-major shape arithmetic behind callbox_offset and friends.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/tensor.h"
#endif

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

/* The typed views' functions (callbox.h), per dtype: an input, an output
 * or a scalar input, of that dtype only. */
#define CALLBOX__TYPED(name, ctype, code)                                                              \
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

CALLBOX__DTYPES(CALLBOX__TYPED)
#undef CALLBOX__TYPED

/* ---- Shapes (row-major) ------------------------------------------------- */

static inline size_t callbox_shape_stride(const int64_t *shape, uint32_t rank, uint32_t axis)
{
    size_t s = 1;
    for (uint32_t j = axis + 1; j < rank; j++)
        s *= (size_t)shape[j];
    return s;
}

static inline size_t callbox_shape_rows(const int64_t *shape, uint32_t rank)
{
    size_t rows = 1;
    for (uint32_t j = 0; j + 1 < rank; j++)
        rows *= (size_t)shape[j];
    return rows;
}

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
