// The exports ABI v1 asks of every module besides the callbacks (ABI.md §1).
// A callback file re-exports them all with
//
//     export * from "callbox-guest/assembly/exports";   // or "../assembly/exports"
//
// and nothing else belongs in this file: everything it exports becomes a
// module export.
import { signatureTable } from "./signatures";

// @ts-ignore: decorator
@inline const ABI_VERSION: i32 = 1;
// @ts-ignore: decorator
@inline const MAX_ALIGN: u32 = 65536;
// heap.alloc's alignment (AL_SIZE in the runtime), and the size of its
// largest block (TLSF's BLOCK_MAXSIZE is 1 GiB less a 4-byte header).
// @ts-ignore: decorator
@inline const HEAP_ALIGN: u32 = 16;
// @ts-ignore: decorator
@inline const MAX_BLOCK: u64 = (1 << 30) - 16;

/** The ABI version this SDK implements. */
export function callbox_abi_version(): i32 {
  return ABI_VERSION;
}

/**
 * Returns `size` bytes aligned to `align` (a power of two up to 64 KiB), or
 * 0 for an invalid request or one above the heap's largest block. The heap
 * aligns to 16; for more the block is over-allocated, and the heap pointer
 * is kept in the 4 bytes below the aligned one for `callbox_free`. When
 * memory cannot grow (max_memory) the runtime traps, which the host reports
 * as MemoryLimit.
 */
export function callbox_alloc(size: u32, align: u32): usize {
  if (align == 0 || (align & (align - 1)) != 0 || align > MAX_ALIGN) return 0;
  if (align <= HEAP_ALIGN) return <u64>size > MAX_BLOCK ? 0 : heap.alloc(size);
  const total = <u64>size + <u64>align;
  if (total > MAX_BLOCK) return 0;
  const raw = heap.alloc(<usize>total);
  // raw is 16-aligned and align >= 32, so ptr - raw is in [16, align]:
  // room for the back pointer, and ptr + size <= raw + total.
  const ptr = (raw + align) & ~(<usize>align - 1);
  store<u32>(ptr - 4, <u32>raw);
  return ptr;
}

/** Frees a block `callbox_alloc(size, align)` returned; aborts on anything else. */
export function callbox_free(ptr: usize, size: u32, align: u32): void {
  if (ptr == 0) return;
  if (align == 0 || (align & (align - 1)) != 0 || align > MAX_ALIGN || (ptr & (max(<usize>align, HEAP_ALIGN) - 1)) != 0) {
    throw new Error("callbox_free: " + ptr.toString() + " was not allocated with align " + align.toString());
  }
  if (align > HEAP_ALIGN) {
    const raw = <usize>load<u32>(ptr - 4);
    if (raw >= ptr || ptr - raw > <usize>align) throw new Error("callbox_free: " + ptr.toString() + " was not allocated with align " + align.toString());
    ptr = raw;
  }
  heap.free(ptr);
}

/** The signature table; see `signature`. */
export function callbox_signatures(): usize {
  return signatureTable();
}
