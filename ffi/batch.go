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
	bh, name, chainName, err := callSetup(h, chain, callback)
	if err != nil {
		return err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(int(nIn), int(nOut))
	in, err := fromDLs("input", inputs, nIn, sc.in[:])
	if err != nil {
		return forCallback(err, name)
	}
	out, err := fromDLs("output", outputs, nOut, sc.out[:])
	if err != nil {
		return forCallback(err, name)
	}
	return bh.callBatch(ctx, chainName, name, in, out)
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
