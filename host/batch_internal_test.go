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

// BenchmarkPublish4MiB is the copy a guarded batch of 64 x 64 KiB adds
// (compare with BenchmarkBatch64x64KiB).
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
