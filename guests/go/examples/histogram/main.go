//go:build wasip1

// Command histogram counts float32 values into the bins of ascending edges.
package main

import (
	"sort"

	"github.com/seed4b3e0ccb/callbox/guests/go/callbox"
)

func init() { callbox.Signature("histogram", "(values: f32[n], edges: f32[b]) -> s64[b]") }

//go:wasmexport histogram
func histogram(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		count(callbox.Input[float32](f, 0).Data, callbox.Input[float32](f, 1).Data, callbox.Output[int64](f, 0).Data)
		return nil
	})
}

// count sets counts[i] = #{v : edges[i] <= v < edges[i+1]}, the last bin
// open-ended; values below edges[0] and NaNs are not counted.
func count[T float32 | int32](values, edges []T, counts []int64) {
	clear(counts)
	for _, v := range values {
		if v != v { // NaN
			continue
		}
		// The first edge above v closes v's bin: edges[i-1] <= v < edges[i].
		if i := sort.Search(len(edges), func(i int) bool { return edges[i] > v }); i > 0 {
			counts[i-1]++
		}
	}
}

func main() {}
