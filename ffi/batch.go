//go:build cgo

package main

import (
	"context"

	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
)

// callBatchDL is callbox_call_batch: a batched call (host.Request.Batch,
// the chain's next step when chain is not nil) on DLPack tensors with a
// leading batch dimension, viewed in place.
func callBatchDL(ctx context.Context, h uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) error {
	return dlCall(ctx, h, chain, callback, inputs, nIn, outputs, nOut, true, 0)
}
