/*
 * callbox/memory.h — the module's allocator (callbox_mem_alloc,
 * callbox_mem_free): wasi-libc's aligned_alloc and free, or freestanding a
 * first-fit free list over memory.grow, with the memset, memcpy and
 * memmove clang may call without a libc.
 *
 * Part of callbox.h, which includes it: include callbox.h, not this file.
 */
#ifndef CALLBOX_H
#error "include callbox.h, not callbox/memory.h"
#endif

/* ---- Memory ------------------------------------------------------------- */

/* The most alignment callbox_alloc must honour (ABI.md §1). */
#define CALLBOX__MAX_ALIGN 65536u

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
