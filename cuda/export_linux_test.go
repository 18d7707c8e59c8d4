//go:build linux

package cuda

import "unsafe"

// PointerAttributesSizeForTest is the size of the struct
// cudaPointerGetAttributes writes into.
const PointerAttributesSizeForTest = unsafe.Sizeof(pointerAttributes{})

// PointerAttributesReservedForTest calls cudaPointerGetAttributes for p
// and returns its code and the reserved fields it wrote.
func PointerAttributesReservedForTest(r *Runtime, p uintptr) (int32, [8]int64) {
	var a pointerAttributes
	code := r.pointerAttrs(&a, p)
	return code, a.Reserved
}
