/*
 * callbox/module.h — what every module exports (ABI.md §1, §5):
 * callbox_abi_version, callbox_alloc, callbox_free, the signature table
 * (callbox_signatures) and, freestanding, _initialize; and callbox__run,
 * which CALLBOX_EXPORT's wrapper calls.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/module.h"
#endif

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
