//go:build cgo

package main

import (
	"encoding/binary"
	"math/big"
	"strings"
	"testing"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// FuzzFromDL feeds fromDL arbitrary DLPack descriptors and checks it
// against an independent oracle: every tensor it accepts has a known
// dtype, non-negative dimensions, and exactly the byte length the shape
// implies, within the ABI maximum; everything else is an error naming the
// argument. Nothing panics.
func FuzzFromDL(f *testing.F) {
	dims := func(ds ...int64) []byte {
		b := make([]byte, 8*len(ds))
		for i, d := range ds {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(d))
		}
		return b
	}
	f.Add(uint8(dlFloat), uint8(32), uint16(1), int32(2), dims(2, 3), true, int32(1), false)
	f.Add(uint8(dlBool), uint8(8), uint16(1), int32(0), dims(), true, int32(1), false)
	f.Add(uint8(dlInt), uint8(64), uint16(1), int32(1), dims(-1), true, int32(1), false)
	f.Add(uint8(dlComplex), uint8(128), uint16(1), int32(3), dims(0, 1<<62, 4), false, int32(1), false)
	f.Add(uint8(dlFloat), uint8(16), uint16(2), int32(33), dims(1), true, int32(2), true)
	f.Fuzz(func(t *testing.T, code, bits uint8, lanes uint16, ndim int32, dimBytes []byte, withData bool, device int32, withStrides bool) {
		shape := make([]int64, len(dimBytes)/8)
		for i := range shape {
			shape[i] = int64(binary.LittleEndian.Uint64(dimBytes[8*i:]))
		}
		buf := make([]byte, 4096)
		tensor := dlTensor{Device: dlDevice{device, 0}, NDim: ndim, DType: dlDType{code, bits, lanes}}
		if len(shape) > 0 {
			tensor.Shape = &shape[0]
		}
		// Strides describe the dims the descriptor has (ndim of them), not
		// every dim the fuzzer generated.
		sdims := shape
		if ndim >= 0 && int(ndim) < len(shape) {
			sdims = shape[:ndim]
		}
		strides := rowMajor(sdims)
		if withStrides && len(strides) > 0 {
			tensor.Strides = &strides[0]
		}

		// The oracle: the ABI's own rules (abi.Shape.ByteLen, which
		// refuses a product that overflows on the way, as the host does),
		// plus the device and the data pointer.
		d, known := dtypeFromDL(tensor.DType)
		valid := known && (device == deviceCPU || device == deviceCUDAHost) && ndim >= 0 && ndim <= abi.MaxRank &&
			int(ndim) <= len(shape)
		want := new(big.Int)
		if valid {
			n, err := abi.Shape(shape[:ndim]).ByteLen(d)
			valid = err == nil
			want.SetUint64(n)
		}
		if valid && want.Cmp(big.NewInt(abi.MaxTensorBytes)) > 0 {
			valid = false
		}
		if valid && want.Sign() > 0 {
			if withData && want.Cmp(big.NewInt(int64(len(buf)))) <= 0 {
				tensor.Data = unsafe.Pointer(&buf[0])
			} else {
				valid = false // NULL data for a non-empty tensor
			}
		}
		if int(ndim) > len(shape) && ndim > 0 && ndim <= abi.MaxRank && len(shape) > 0 {
			return // the descriptor claims more dims than exist: reading them is the caller's bug, as in C
		}

		got, err := fromDL(argName{"input", 3}, &tensor)
		if !valid {
			if err == nil {
				t.Fatalf("accepted an invalid tensor %+v shape %v", tensor, shape)
			}
			if !strings.HasPrefix(err.Error(), "input 3: ") {
				t.Fatalf("error does not name the argument: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused a valid tensor %+v shape %v: %v", tensor, shape, err)
		}
		if got.DType != d || len(got.Shape) != int(ndim) || uint64(len(got.Data)) != want.Uint64() {
			t.Fatalf("got %s with %d bytes, want %s%v with %s bytes", got.Type(), len(got.Data), d, shape[:ndim], want)
		}
	})
}
