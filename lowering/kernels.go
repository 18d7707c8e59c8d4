package lowering

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// The evaluator's Go kernels for the IR's basic ops. They follow XLA's
// semantics where Go's differ: integer division by zero gives -1 (all
// bits set), MinInt / -1 gives MinInt, float max/min propagate NaN, and a
// float converted to an integer saturates (NaN gives 0).

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func isFloatT[T number]() bool {
	var x T = 1
	return x/2 != 0
}

func isSignedT[T number]() bool {
	var zero, one T = 0, 1
	return zero-one < zero
}

// kernel computes op on args into a fresh output tensor.
func kernel(op *Op, args []abi.Tensor) (abi.Tensor, error) {
	switch op.Kind {
	case OpConstant:
		return op.Value, nil
	case OpReshape:
		return abi.Tensor{DType: op.Out.DType, Shape: op.Out.Shape, Data: args[0].Data}, nil
	case OpSelect:
		return selectKernel(op, args)
	case OpBroadcast:
		return broadcastKernel(op, args[0])
	case OpConvert:
		return convertKernel(op, args[0])
	}
	switch args[0].DType {
	case abi.F32:
		return typed[float32](op, args)
	case abi.F64:
		return typed[float64](op, args)
	case abi.S8:
		return typed[int8](op, args)
	case abi.S16:
		return typed[int16](op, args)
	case abi.S32:
		return typed[int32](op, args)
	case abi.S64:
		return typed[int64](op, args)
	case abi.U8:
		return typed[uint8](op, args)
	case abi.U16:
		return typed[uint16](op, args)
	case abi.U32:
		return typed[uint32](op, args)
	case abi.U64:
		return typed[uint64](op, args)
	case abi.PRED:
		if op.Kind == OpCompare {
			return comparePred(op, args)
		}
	}
	return abi.Tensor{}, opError(op, "no kernel for %s", args[0].DType)
}

func newOut(op *Op) (abi.Tensor, error) {
	t := op.Results[0].Type
	return abi.New(t.DType, t.Shape...)
}

func view[T number](t abi.Tensor) []T {
	if len(t.Data) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/int(unsafe.Sizeof(*new(T))))
}

func typed[T number](op *Op, args []abi.Tensor) (abi.Tensor, error) {
	out, err := newOut(op)
	if err != nil {
		return out, err
	}
	a := view[T](args[0])
	switch op.Kind {
	case OpAdd, OpSub, OpMul, OpDiv, OpMax, OpMin:
		binaryKernel(op.Kind, a, view[T](args[1]), view[T](out))
	case OpNeg:
		o := view[T](out)
		for i, x := range a {
			o[i] = -x
		}
	case OpExp, OpLog:
		o := view[T](out)
		f := math.Exp
		if op.Kind == OpLog {
			f = math.Log
		}
		for i, x := range a {
			o[i] = T(f(float64(x)))
		}
	case OpCompare:
		compareKernel(op.Dir, a, view[T](args[1]), out.Data)
	case OpDot:
		b := view[T](args[1])
		o := view[T](out)
		m, k, n := op.Args[0].Type.Shape[0], op.Args[0].Type.Shape[1], op.Args[1].Type.Shape[1]
		for i := int64(0); i < m; i++ {
			for j := int64(0); j < n; j++ {
				var s T
				for l := int64(0); l < k; l++ {
					s += a[i*k+l] * b[l*n+j]
				}
				o[i*n+j] = s
			}
		}
	case OpReduceSum, OpReduceMax:
		reduceKernel(op, a, view[T](out))
	default:
		return abi.Tensor{}, opError(op, "no kernel")
	}
	return out, nil
}

func binaryKernel[T number](k Kind, a, b, o []T) {
	switch k {
	case OpAdd:
		for i := range o {
			o[i] = a[i] + b[i]
		}
	case OpSub:
		for i := range o {
			o[i] = a[i] - b[i]
		}
	case OpMul:
		for i := range o {
			o[i] = a[i] * b[i]
		}
	case OpDiv:
		if isFloatT[T]() {
			for i := range o {
				o[i] = a[i] / b[i]
			}
			return
		}
		var zero, one T = 0, 1
		allOnes := zero - one // -1, or the maximum of an unsigned type
		for i := range o {
			switch {
			case b[i] == 0:
				o[i] = allOnes
			case isSignedT[T]() && b[i] == allOnes && a[i] < 0 && -a[i] == a[i]:
				o[i] = a[i] // MinInt / -1
			default:
				o[i] = a[i] / b[i]
			}
		}
	case OpMax, OpMin:
		float := isFloatT[T]()
		for i := range o {
			x, y := a[i], b[i]
			switch {
			case float && x != x:
				o[i] = x
			case float && y != y:
				o[i] = y
			case (k == OpMax) == (x > y):
				o[i] = x
			default:
				o[i] = y
			}
		}
	}
}

func compareKernel[T number](dir string, a, b []T, o []byte) {
	for i := range a {
		var r bool
		switch dir {
		case CmpEQ:
			r = a[i] == b[i]
		case CmpNE:
			r = a[i] != b[i]
		case CmpLT:
			r = a[i] < b[i]
		case CmpLE:
			r = a[i] <= b[i]
		case CmpGT:
			r = a[i] > b[i]
		case CmpGE:
			r = a[i] >= b[i]
		}
		if r {
			o[i] = 1
		} else {
			o[i] = 0
		}
	}
}

func comparePred(op *Op, args []abi.Tensor) (abi.Tensor, error) {
	out, err := newOut(op)
	if err != nil {
		return out, err
	}
	a, b := args[0].Data, args[1].Data
	for i := range a {
		eq := a[i] == b[i]
		if eq == (op.Dir == CmpEQ) {
			out.Data[i] = 1
		}
	}
	return out, nil
}

// reduceKernel reduces a over op.Axes into o.
func reduceKernel[T number](op *Op, a, o []T) {
	shape := op.Args[0].Type.Shape
	reduced := make([]bool, len(shape))
	for _, ax := range op.Axes {
		reduced[ax] = true
	}
	// Output strides for the kept dimensions (0 for reduced ones).
	strides := make([]int64, len(shape))
	s := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		if !reduced[d] {
			strides[d] = s
			s *= shape[d]
		}
	}
	isMax := op.Kind == OpReduceMax
	float := isFloatT[T]()
	if isMax {
		var init T
		switch {
		case float:
			init = T(math.Inf(-1))
		case isSignedT[T]():
			bits := unsafe.Sizeof(init) * 8
			init = T(int64(-1) << (bits - 1))
		}
		for i := range o {
			o[i] = init
		}
	}
	idx := make([]int64, len(shape))
	oi := int64(0)
	for _, x := range a {
		if isMax {
			cur := o[oi]
			if float && x != x || cur == cur && x > cur {
				o[oi] = x
			}
		} else {
			o[oi] += x
		}
		// Advance the multi-index and the output offset.
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			oi += strides[d]
			if idx[d] < shape[d] {
				break
			}
			oi -= strides[d] * idx[d]
			idx[d] = 0
		}
	}
}

func selectKernel(op *Op, args []abi.Tensor) (abi.Tensor, error) {
	out, err := newOut(op)
	if err != nil {
		return out, err
	}
	sz := int(out.DType.Size())
	p, a, b := args[0].Data, args[1].Data, args[2].Data
	for i, c := range p {
		src := b
		if c != 0 {
			src = a
		}
		copy(out.Data[i*sz:(i+1)*sz], src[i*sz:(i+1)*sz])
	}
	return out, nil
}

func broadcastKernel(op *Op, a abi.Tensor) (abi.Tensor, error) {
	out, err := newOut(op)
	if err != nil {
		return out, err
	}
	sz := int64(out.DType.Size())
	oshape := op.Out.Shape
	// Operand stride of each result dimension (0 where broadcast).
	strides := make([]int64, len(oshape))
	s := int64(1)
	for i := len(a.Shape) - 1; i >= 0; i-- {
		if a.Shape[i] != 1 {
			strides[op.Axes[i]] = s
		}
		s *= a.Shape[i]
	}
	n := op.Out.NumElements()
	idx := make([]int64, len(oshape))
	src := int64(0)
	for i := int64(0); i < n; i++ {
		copy(out.Data[i*sz:(i+1)*sz], a.Data[src*sz:(src+1)*sz])
		for d := len(oshape) - 1; d >= 0; d-- {
			idx[d]++
			src += strides[d]
			if idx[d] < oshape[d] {
				break
			}
			src -= strides[d] * idx[d]
			idx[d] = 0
		}
	}
	return out, nil
}

func convertKernel(op *Op, a abi.Tensor) (abi.Tensor, error) {
	out, err := newOut(op)
	if err != nil {
		return out, err
	}
	if out.DType == abi.PRED {
		sz := int(a.DType.Size())
		for i := range out.Data {
			for _, b := range a.Data[i*sz : (i+1)*sz] {
				if b != 0 {
					out.Data[i] = 1
					break
				}
			}
		}
		// -0.0 is zero, so false.
		if isFloat(a.DType) {
			for i := range out.Data {
				if out.Data[i] == 1 && elementFloat(a, i) == 0 {
					out.Data[i] = 0
				}
			}
		}
		return out, nil
	}
	switch a.DType {
	case abi.PRED:
		return out, convertFrom(a.Data, out)
	case abi.F32:
		return out, convertFrom(view[float32](a), out)
	case abi.F64:
		return out, convertFrom(view[float64](a), out)
	case abi.S8:
		return out, convertFrom(view[int8](a), out)
	case abi.S16:
		return out, convertFrom(view[int16](a), out)
	case abi.S32:
		return out, convertFrom(view[int32](a), out)
	case abi.S64:
		return out, convertFrom(view[int64](a), out)
	case abi.U8:
		return out, convertFrom(view[uint8](a), out)
	case abi.U16:
		return out, convertFrom(view[uint16](a), out)
	case abi.U32:
		return out, convertFrom(view[uint32](a), out)
	case abi.U64:
		return out, convertFrom(view[uint64](a), out)
	}
	return out, fmt.Errorf("convert: no kernel for %s", a.DType)
}

func elementFloat(t abi.Tensor, i int) float64 {
	if t.DType == abi.F32 {
		return float64(view[float32](t)[i])
	}
	return view[float64](t)[i]
}

func convertFrom[S number](src []S, out abi.Tensor) error {
	switch out.DType {
	case abi.F32:
		convertSlice(src, view[float32](out))
	case abi.F64:
		convertSlice(src, view[float64](out))
	case abi.S8:
		convertSlice(src, view[int8](out))
	case abi.S16:
		convertSlice(src, view[int16](out))
	case abi.S32:
		convertSlice(src, view[int32](out))
	case abi.S64:
		convertSlice(src, view[int64](out))
	case abi.U8:
		convertSlice(src, view[uint8](out))
	case abi.U16:
		convertSlice(src, view[uint16](out))
	case abi.U32:
		convertSlice(src, view[uint32](out))
	case abi.U64:
		convertSlice(src, view[uint64](out))
	default:
		return fmt.Errorf("convert: no kernel for %s", out.DType)
	}
	return nil
}

func convertSlice[S, D number](src []S, dst []D) {
	if !isFloatT[S]() || isFloatT[D]() {
		for i, x := range src {
			dst[i] = D(x)
		}
		return
	}
	// Float to integer: saturate, NaN to 0.
	bits := unsafe.Sizeof(*new(D)) * 8
	var lo, hi float64
	if isSignedT[D]() {
		lo, hi = -math.Ldexp(1, int(bits)-1), math.Ldexp(1, int(bits)-1)
	} else {
		lo, hi = 0, math.Ldexp(1, int(bits))
	}
	var zero, one D = 0, 1
	maxD := zero - one
	if isSignedT[D]() {
		maxD = D(uint64(1)<<(bits-1) - 1)
	}
	minD := zero
	if isSignedT[D]() {
		minD = -maxD - 1
	}
	for i, x := range src {
		f := float64(x)
		switch {
		case f != f:
			dst[i] = 0
		case f >= hi:
			dst[i] = maxD
		case f <= lo:
			dst[i] = minD
		default:
			dst[i] = D(f)
		}
	}
}
