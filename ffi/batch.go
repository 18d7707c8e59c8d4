//go:build cgo

package main

import (
	"context"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/dlpack"
)

// callBatchDL is callbox_call_batch: a batched call (host.InvokeBatchInto,
// or Chain.InvokeBatchInto when chain is not nil) on DLPack tensors with a
// leading batch dimension, viewed in place.
func callBatchDL(ctx context.Context, h uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) error {
	return dlCall(ctx, h, chain, callback, inputs, nIn, outputs, nOut, true, 0)
}

// callBatch runs a batched call of a callback (name or content id), as
// the next step of chain when chain is not "".
func (bh *bridgeHost) callBatch(ctx context.Context, chain, callback string, in, out []abi.Tensor) error {
	ci, err := bh.resolve(callback)
	if err != nil {
		return err
	}
	if chain == "" {
		_, err = ci.cb.InvokeBatchInto(ctx, in, out)
	} else {
		_, err = bh.h.Chain(chain).InvokeBatchInto(ctx, ci.name, in, out)
	}
	return err
}
