package host

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

// Batched calls.
//
// A batched call is B calls of one callback in one: every input has one
// extra leading dimension of size B over the callback's per-element
// signature (f32[64, 16384] for a parameter f32[n] of a batch of 64), and
// so has every output. Element i is the call on each input's i-th slice,
// and its results are each output's i-th slice. There is no broadcast: an
// input that is the same for every element is given B times (a scalar
// factor becomes f32[B]); that keeps the rule one line, as JAX's vmap
// after broadcast_all.
//
// A callback whose batching rule is parallel (config.BatchingParallel)
// runs its elements concurrently, on up to BatchParallelism instances of
// its pool at once; every other callback runs them in order, element 0
// first, on the caller's goroutine, so the entry serves every callback.
// A batched call on a Chain always runs its elements in order: an ordered
// effect stays ordered.
//
// Every element is a whole call: its inputs are checked, its limits
// (timeout, fuel, memory, output) apply to it alone, and its instance is
// discarded when it breaks. The first failing element by index fails the
// batch: elements after it that have not started never start, those in
// flight with a higher index are canceled, those with a lower index run
// to their end (one of them may fail too, and then it is the one
// reported), so the element reported is the lowest failing index,
// whatever the timing. The *CallbackError names it (Element, BatchSize).
//
// Outputs: a failed batch leaves every output byte as it was (the one
// rule of every call). A batched call into given outputs (Request.Outputs)
// writes each element's results into them, having saved the bytes it
// overwrites: a failed batch copies them back once no element runs. So
// while a batch runs, its outputs may show elements already done; when it
// returns, they hold all the results or none. Where an output shares
// memory with an input, the elements write into a scratch buffer instead,
// copied into the outputs only when every element succeeded. One that
// allocates its outputs (Outputs nil) writes each element's results
// straight into them.

// BatchParallelism is the most elements of one batched call this
// callback runs at once: its pool's max_instances bounded by GOMAXPROCS
// for batching parallel, 1 for every other rule.
func (c *Callback) BatchParallelism() int {
	if c.spec.BatchingRule() != config.BatchingParallel {
		return 1
	}
	return max(1, min(cap(c.pool.slots), runtime.GOMAXPROCS(0)))
}

// batch is one batched call's shape: B elements, each input's and
// output's per-element byte size, and the per-element plan.
type batch struct {
	size    int
	p       *callPlan
	inBytes []uint64
	outLen  []uint64 // per-element output bytes
}

// bindBatch checks batched inputs and binds the per-element plan.
func (c *Callback) bindBatch(inputs []Tensor) (*batch, *CallbackError) {
	if len(inputs) == 0 {
		return nil, c.fail(InvalidArgument, "a batched call needs at least one input with a leading batch dimension", nil)
	}
	b := &batch{inBytes: make([]uint64, len(inputs))}
	metas := make([]abi.TensorMeta, len(inputs))
	for i, in := range inputs {
		if len(in.Shape) == 0 {
			ae := &abi.ArgumentError{Index: i, Reason: fmt.Sprintf("%s has no leading batch dimension", in.Type())}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		n := in.Shape[0]
		if i == 0 {
			if n < 0 || n > math.MaxInt32 {
				ae := &abi.ArgumentError{Index: i, Reason: fmt.Sprintf("batch size %d is out of range", n)}
				return nil, c.fail(InvalidArgument, ae.Error(), ae)
			}
			b.size = int(n)
		} else if n != int64(b.size) {
			ae := &abi.ArgumentError{Index: i, Reason: fmt.Sprintf("%s has batch size %d, input 0 has %d", in.Type(), n, b.size)}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		elem := in.Shape[1:]
		eb, err := elem.ByteLen(in.DType)
		if err != nil {
			ae := &abi.ArgumentError{Index: i, Reason: err.Error()}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		if eb != 0 && uint64(b.size) > math.MaxInt/eb || uint64(len(in.Data)) != eb*uint64(b.size) {
			ae := &abi.ArgumentError{Index: i, Reason: fmt.Sprintf("%s needs %d x %d bytes of data, has %d", in.Type(), b.size, eb, len(in.Data))}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		b.inBytes[i] = eb
		metas[i] = abi.TensorMeta{DType: in.DType, Shape: elem}
	}
	p, cerr := c.planMetas(metas)
	if cerr != nil {
		return nil, cerr
	}
	b.p = p
	b.outLen = make([]uint64, len(p.specs))
	for j, s := range p.specs {
		b.outLen[j], _ = s.Shape.ByteLen(s.DType)
	}
	return b, nil
}

// checkBatchOutputs checks caller-provided batched outputs.
func (c *Callback) checkBatchOutputs(b *batch, outs []Tensor) *CallbackError {
	if len(outs) != len(b.p.specs) {
		err := abi.OutputCountError(c.sig, len(outs), len(b.p.specs))
		return c.fail(InvalidArgument, err.Error(), nil)
	}
	for j, s := range b.p.specs {
		o := outs[j]
		// The per-element rule is abi's (OutputSpec.Fits), under a leading
		// batch dimension of the batch's size.
		if len(o.Shape) == 0 || o.Shape[0] != int64(b.size) || !s.Fits(o.DType, o.Shape[1:]) {
			want := abi.OutputSpec{DType: s.DType, Shape: append(abi.Shape{int64(b.size)}, s.Shape...), Alias: s.Alias}
			err := abi.OutputMismatchError(j, o.DType, o.Shape, want)
			return c.fail(InvalidArgument, err.Error(), nil)
		}
		if n := b.outLen[j] * uint64(b.size); uint64(len(o.Data)) != n {
			err := abi.OutputSizeError(j, o.Type(), n, len(o.Data))
			return c.fail(InvalidArgument, err.Error(), err)
		}
	}
	return nil
}

// invokeBatchAlloc is a batched call into newly allocated outputs: they
// are the caller's only after success, so elements write into them
// directly.
func (c *Callback) invokeBatchAlloc(ctx context.Context, inputs []Tensor, workers int) ([]Tensor, Stats, *CallbackError) {
	b, cerr := c.bindBatch(inputs)
	if cerr != nil {
		return nil, Stats{}, cerr
	}
	outs := make([]Tensor, len(b.p.specs))
	for j, s := range b.p.specs {
		t, err := abi.New(s.DType, append(abi.Shape{int64(b.size)}, s.Shape...)...)
		if err != nil {
			oe := &abi.OutputError{Index: j, Reason: err.Error()}
			return nil, Stats{}, c.fail(InvalidArgument, oe.Error(), err)
		}
		outs[j] = t
	}
	st, cerr := c.runBatch(ctx, b, inputs, outs, workers, nil)
	if cerr != nil {
		return nil, st, cerr
	}
	return outs, st, nil
}

// invokeBatch is a batched call into caller-provided outputs. With
// guarded set, a failed batch leaves every output byte as it was: the
// elements write into the outputs, each element's output bytes saved
// into scratch just before it runs and restored if the batch fails; or,
// where an output shares memory with an input, they write into scratch,
// copied into the outputs only when all succeeded.
func (c *Callback) invokeBatch(ctx context.Context, inputs, outputs []Tensor, workers int, guarded bool) (Stats, *CallbackError) {
	began := c.h.clock.now()
	b, cerr := c.bindBatch(inputs)
	if cerr != nil {
		return Stats{}, cerr
	}
	if cerr := c.checkBatchOutputs(b, outputs); cerr != nil {
		return Stats{}, cerr
	}
	if b.size == 0 {
		return Stats{Wall: c.sinceUnlessUntimed(began)}, nil
	}
	// One element's call already never writes partial output: it needs no
	// scratch.
	if !guarded || b.size == 1 {
		return c.runBatch(ctx, b, inputs, outputs, workers, nil)
	}
	total := uint64(0)
	for _, n := range b.outLen {
		total += n * uint64(b.size)
	}
	buf := c.batchScratch(total)
	defer c.scratch.Put(buf)
	scratch := make([]Tensor, len(outputs))
	off := uint64(0)
	for j, o := range outputs {
		n := uint64(len(o.Data))
		scratch[j] = Tensor{DType: o.DType, Shape: o.Shape, Data: (*buf)[off : off+n : off+n]}
		off += n
	}
	var st Stats
	if overlapping(inputs, outputs) {
		// Element i's output would overwrite bytes another element may
		// not have read yet.
		st, cerr = c.runBatch(ctx, b, inputs, scratch, workers, nil)
		if cerr == nil {
			publish(outputs, scratch, min(workers, b.size))
		}
	} else {
		st, cerr = c.runBatchUndo(ctx, b, inputs, outputs, scratch, workers)
	}
	if cerr != nil {
		return st, cerr
	}
	st.Wall = c.sinceUnlessUntimed(began)
	return st, nil
}

// batchScratch is a scratch buffer of n bytes from the callback's pool of
// them (its content is never read before it is written).
func (c *Callback) batchScratch(n uint64) *[]byte {
	if p, ok := c.scratch.Get().(*[]byte); ok && uint64(cap(*p)) >= n {
		*p = (*p)[:n]
		return p
	}
	buf := make([]byte, n)
	return &buf
}

// publishChunk is the least a publish copy is split to: below it a
// goroutine costs more than the copy it saves.
const publishChunk = 256 << 10

// publish copies staged results into the caller's outputs, split over up
// to workers goroutines.
func publish(dst, src []Tensor, workers int) {
	total := 0
	for _, t := range src {
		total += len(t.Data)
	}
	workers = max(1, min(workers, total/publishChunk))
	if workers == 1 {
		for j := range dst {
			copy(dst[j].Data, src[j].Data)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publishPart(dst, src, w, workers)
		}()
	}
	publishPart(dst, src, 0, workers)
	wg.Wait()
}

// publishPart copies part w of n of every output.
func publishPart(dst, src []Tensor, w, n int) {
	for j := range dst {
		l := len(src[j].Data)
		lo, hi := l*w/n, l*(w+1)/n
		copy(dst[j].Data[lo:hi], src[j].Data[lo:hi])
	}
}

// overlapping reports whether any output's bytes share memory with any
// input's (an in-place batch, or buffers that alias).
func overlapping(inputs, outputs []Tensor) bool {
	for _, o := range outputs {
		if len(o.Data) == 0 {
			continue
		}
		olo := uintptr(unsafe.Pointer(unsafe.SliceData(o.Data)))
		ohi := olo + uintptr(len(o.Data))
		for _, in := range inputs {
			if len(in.Data) == 0 {
				continue
			}
			ilo := uintptr(unsafe.Pointer(unsafe.SliceData(in.Data)))
			if ilo < ohi && olo < ilo+uintptr(len(in.Data)) {
				return true
			}
		}
	}
	return false
}

// runBatchUndo is runBatch into outputs with an undo log: just before
// element i runs, its worker copies element i's slices of the outputs into
// undo's (64 KiB of a 64 x 64 KiB batch: in the worker's cache when the
// element then writes them); if the batch fails, every element saved is
// copied back once all workers have stopped. Unlike writing into scratch
// and copying all of it into the outputs at the end, the extra copy is
// split over the workers as they go, not made after them.
func (c *Callback) runBatchUndo(ctx context.Context, b *batch, inputs, outputs, undo []Tensor, workers int) (Stats, *CallbackError) {
	saved := make([]bool, b.size)
	st, cerr := c.runBatch(ctx, b, inputs, outputs, workers, func(i int) {
		for j, n := range b.outLen {
			copy(elementBytes(undo[j].Data, i, n), elementBytes(outputs[j].Data, i, n))
		}
		saved[i] = true
	})
	if cerr != nil {
		for i, ok := range saved {
			if !ok {
				continue
			}
			for j, n := range b.outLen {
				copy(elementBytes(outputs[j].Data, i, n), elementBytes(undo[j].Data, i, n))
			}
		}
	}
	return st, cerr
}

// batchRun is the shared state of one batched call's workers.
type batchRun struct {
	c       *Callback
	b       *batch
	inputs  []Tensor
	outputs []Tensor
	before  func(i int)  // if not nil, called before element i runs
	next    atomic.Int64 // the next element to start

	mu       sync.Mutex
	failedAt int // lowest failing element; b.size while none failed
	err      *CallbackError
	running  []inflight // per worker: the element it runs and its cancel
	st       Stats
}

// inflight is what a worker runs now: element idx, canceled by cancel
// (nil: the worker runs nothing).
type inflight struct {
	idx    int
	cancel context.CancelFunc
}

// runBatch runs b's elements on up to workers goroutines (the caller's
// included), writing element i's results into outputs' i-th slices.
// before, when not nil, is called on the worker's goroutine just before
// each element runs.
func (c *Callback) runBatch(ctx context.Context, b *batch, inputs, outputs []Tensor, workers int, before func(i int)) (Stats, *CallbackError) {
	began := c.h.clock.now()
	workers = max(1, min(workers, b.size))
	r := &batchRun{c: c, b: b, inputs: inputs, outputs: outputs, before: before, failedAt: b.size}
	if workers == 1 {
		r.sequential(ctx)
	} else {
		r.running = make([]inflight, workers)
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.worker(ctx, w)
			}()
		}
		r.worker(ctx, 0)
		wg.Wait()
	}
	r.st.Wall = c.sinceUnlessUntimed(began)
	if r.err != nil {
		r.err.Element, r.err.BatchSize = r.failedAt, b.size
		return r.st, r.err
	}
	return r.st, nil
}

// element is element i's request: each input's and output's i-th slice,
// in the worker's reused slices.
func (r *batchRun) element(i int, ins, outs []Tensor) request {
	for j, in := range r.inputs {
		ins[j] = Tensor{DType: in.DType, Shape: in.Shape[1:], Data: elementBytes(in.Data, i, r.b.inBytes[j])}
	}
	for j, s := range r.b.p.specs {
		outs[j] = Tensor{DType: s.DType, Shape: s.Shape, Data: elementBytes(r.outputs[j].Data, i, r.b.outLen[j])}
	}
	return request{inputs: ins, outputs: outs, into: true, path: pathBatch}
}

// elementBytes is element i's n bytes of a batched tensor's data.
func elementBytes(data []byte, i int, n uint64) []byte {
	lo := uint64(i) * n
	return data[lo : lo+n : lo+n]
}

// sequential runs the elements in order on the caller's goroutine,
// stopping at the first failure.
func (r *batchRun) sequential(ctx context.Context) {
	ins, outs := make([]Tensor, len(r.inputs)), make([]Tensor, len(r.b.p.specs))
	for i := 0; i < r.b.size; i++ {
		if r.before != nil {
			r.before(i)
		}
		req := r.element(i, ins, outs)
		st, cerr := r.c.invoke(ctx, &req)
		addStats(&r.st, st)
		if cerr != nil {
			r.failedAt, r.err = i, cerr
			return
		}
	}
}

// worker takes elements in index order until none is left or one failed.
func (r *batchRun) worker(ctx context.Context, w int) {
	ins, outs := make([]Tensor, len(r.inputs)), make([]Tensor, len(r.b.p.specs))
	var st Stats
	defer func() {
		r.mu.Lock()
		addStats(&r.st, st)
		r.mu.Unlock()
	}()
	for {
		i := int(r.next.Add(1) - 1)
		if i >= r.b.size {
			return
		}
		ectx, cancel := context.WithCancel(ctx)
		r.mu.Lock()
		if i > r.failedAt {
			// An element before this one failed: the batch has failed.
			r.mu.Unlock()
			cancel()
			return
		}
		r.running[w] = inflight{idx: i, cancel: cancel}
		r.mu.Unlock()
		if r.before != nil {
			r.before(i)
		}

		req := r.element(i, ins, outs)
		est, cerr := r.c.invoke(ectx, &req)
		addStats(&st, est)

		r.mu.Lock()
		r.running[w] = inflight{}
		if cerr != nil && i < r.failedAt {
			r.failedAt, r.err = i, cerr
			// Elements after this one are not needed: cancel those in
			// flight (their failures, a higher index, are not reported).
			for _, f := range r.running {
				if f.cancel != nil && f.idx > i {
					f.cancel()
				}
			}
		}
		r.mu.Unlock()
		cancel()
	}
}

// addStats adds one element's stats to a batch's.
func addStats(to *Stats, st Stats) {
	to.Guest += st.Guest
	to.BytesIn += st.BytesIn
	to.BytesOut += st.BytesOut
	to.PeakMemory = max(to.PeakMemory, st.PeakMemory)
	to.Fuel += st.Fuel
	to.FuelKnown = to.FuelKnown || st.FuelKnown
	to.NewInstance = to.NewInstance || st.NewInstance
}
