package host

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// publish copies every byte, whatever the split.
func TestPublishSplits(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 7} {
		src := []Tensor{abi.From(make([]byte, 1<<20+3)), abi.From(make([]byte, 5))}
		for i := range src[0].Data {
			src[0].Data[i] = byte(i * 7)
		}
		copy(src[1].Data, "hello")
		dst := []Tensor{abi.From(make([]byte, 1<<20+3)), abi.From(make([]byte, 5))}
		publish(dst, src, workers)
		assert.Equal(t, src[0].Data, dst[0].Data, "workers %d", workers)
		assert.Equal(t, src[1].Data, dst[1].Data, "workers %d", workers)
	}
}

// BenchmarkPublish4MiB is the copy a guarded batch of 64 x 64 KiB whose
// outputs overlap its inputs adds after its elements (compare with
// BenchmarkBatch64x64KiB; other batches keep an undo log instead).
func BenchmarkPublish4MiB(b *testing.B) {
	src := []Tensor{abi.From(make([]byte, 4<<20))}
	dst := []Tensor{abi.From(make([]byte, 4<<20))}
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprint(w), func(b *testing.B) {
			b.SetBytes(4 << 20)
			for i := 0; i < b.N; i++ {
				publish(dst, src, w)
			}
		})
	}
}

// overlapping finds any shared byte between an output and an input, and
// nothing where buffers only touch or are empty.
func TestOverlapping(t *testing.T) {
	buf := make([]byte, 64)
	in := func(lo, hi int) Tensor { return abi.From(buf[lo:hi]) }
	for _, c := range []struct {
		name    string
		ins     []Tensor
		outs    []Tensor
		overlap bool
	}{
		{"separate buffers", []Tensor{abi.From(make([]byte, 8))}, []Tensor{abi.From(make([]byte, 8))}, false},
		{"the same bytes", []Tensor{in(0, 16)}, []Tensor{in(0, 16)}, true},
		{"output inside input", []Tensor{in(0, 32)}, []Tensor{in(8, 16)}, true},
		{"one byte shared", []Tensor{in(0, 9)}, []Tensor{in(8, 16)}, true},
		{"adjacent", []Tensor{in(0, 8)}, []Tensor{in(8, 16)}, false},
		{"adjacent, output first", []Tensor{in(8, 16)}, []Tensor{in(0, 8)}, false},
		{"second input overlaps second output", []Tensor{in(0, 8), in(32, 40)}, []Tensor{in(16, 24), in(36, 48)}, true},
		{"empty output inside input", []Tensor{in(0, 32)}, []Tensor{in(8, 8)}, false},
	} {
		assert.Equal(t, c.overlap, overlapping(c.ins, c.outs), c.name)
	}
}
