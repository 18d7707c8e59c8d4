package cuda

import (
	"context"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/dlpack"
)

// BufferFromDLPack checks that t is a dense row-major tensor in CUDA
// device (or managed) memory and describes it as a Buffer. The checks are
// the C API's (package dlpack holds the one set); only the memory they
// accept differs.
func BufferFromDLPack(t *dlpack.Tensor) (Buffer, error) {
	if t == nil {
		return Buffer{}, fmt.Errorf("NULL tensor")
	}
	v, err := dlpack.Check(t, dlpack.OnDevice)
	if err != nil {
		return Buffer{}, err
	}
	return Buffer{Ptr: DevicePtr(uintptr(v.Addr)), DType: v.DType, Shape: append([]int64(nil), v.Shape...)}, nil
}

// CallDLPack is Call on DLPack tensors in CUDA memory (PyTorch and CuPy
// tensors on a GPU), all on one device, with s a stream on that device.
// A tensor that is not dense, not on a CUDA device, or of a type the ABI
// lacks is refused, naming it ("input 0", "output 1", as the C API names
// its arguments).
func (g *GPU) CallDLPack(ctx context.Context, cb *host.Callback, s Stream, inputs, outputs []*dlpack.Tensor) (Stats, error) {
	ins, outs := make([]Buffer, len(inputs)), make([]Buffer, len(outputs))
	device := int32(-1)
	conv := func(what string, ts []*dlpack.Tensor, bs []Buffer) error {
		for i, t := range ts {
			b, err := BufferFromDLPack(t)
			if err != nil {
				return g.refuse(cb, fmt.Sprintf("%s %d: %v", what, i, err))
			}
			if device >= 0 && t.Device.ID != device {
				return g.refuse(cb, fmt.Sprintf("%s %d is on CUDA device %d, another tensor on device %d", what, i, t.Device.ID, device))
			}
			device = t.Device.ID
			bs[i] = b
		}
		return nil
	}
	if err := conv("input", inputs, ins); err != nil {
		return Stats{}, err
	}
	if err := conv("output", outputs, outs); err != nil {
		return Stats{}, err
	}
	return g.Call(ctx, cb, s, ins, outs)
}
